package cuda

import (
	"math/rand/v2"
)

// l2Traffic models the DRAM bytes that sm90's backward of w moves (docs/perf.md "Calls
// 48-51"): its blocks, a key tile of a KV head walking the group's query heads (sched as
// the kernel reads it: bit 0 no rotation, bit 1 the key tiles the grid's fast index, bit 3
// two key tiles a block, the heaviest with the lightest, down then up, the heads inner;
// bits 4-7 the group split: a KV head's group query heads over that many blocks a key
// tile, the grid's head index kvh x split + part, each block reading its key tile's K and V),
// started in grid order on slots SMs, each step reading its query tile's Q and dO and
// adding into its fp32 dQ, each block reading its K and V, all through an LRU cache of
// capacity bytes (the H200's L2: 50 MB). Each block runs at a speed drawn within +-noise
// (0.02 fits full 16K: modelled 2.0 GB read, measured 2.1; causal 16K 21 against 17.4 and
// 32K 76 against 73 unpaired, 1.9 and 5.6 against 2.0 and 5.2 paired). read is the bytes
// missed (and a split's fp32 partials of dK and dV, read back by their reduction), write the
// dirty dQ evicted or left at the end (and those partials), span the modelled pass's length in
// steps (its last step's end). A design tool for the block order
// and the pairs, not timed: full 48K's backward (19 million steps) in 1.8 s on the CPU
// machine (5.5 s before the cache's dense arrays and the typed heap of 2026-12-05, which gave
// the same bytes and spans on 224 cases of 7 masks, 8 orders and both head dims).
func l2Traffic(w *WorkList, heads, group, slots, d int, sched int32, capacity int64, noise float64) (read, write int64, span float64) {
	if w.RowTiles == 0 || heads <= 0 || group <= 0 || slots <= 0 {
		return 0, 0, 0
	}
	rows := w.RowTiles
	paired := sched&8 != 0
	split := max(1, int(sched>>4)&15)
	if group%split != 0 {
		split = 1
	}
	gpart := group / split
	perHead := headBlocks(w, paired)
	type block struct{ kvh, part, x int }
	var blocks []block
	if sched&2 != 0 {
		for hb := 0; hb < heads*split; hb++ {
			for x := 0; x < perHead; x++ {
				blocks = append(blocks, block{hb / split, hb % split, x})
			}
		}
	} else {
		for x := 0; x < perHead; x++ {
			for hb := 0; hb < heads*split; hb++ {
				blocks = append(blocks, block{hb / split, hb % split, x})
			}
		}
	}
	qBytes, dqBytes, kvBytes := int64(64*d*2), int64(64*d*4), int64(w.RowTile*d*2)
	// tiles by kind (0 Q, 1 dO, 2 dQ of a query head's query tile; 3 K and V of a KV head's
	// key tile), head and tile: a dense index
	nA, nB := heads*group, max(w.ColTiles, rows)
	lru := newTileLRU(capacity, 4*nA*nB)
	touch := func(kind, a, b int, bytes int64, dirty bool) {
		r, wr := lru.touch((kind*nA+a)*nB+b, bytes, dirty)
		read += r
		write += wr
	}
	// a block's walk as segments of one key tile each, with the tile's work-list entries
	type seg struct {
		kt   int
		desc bool
		row  []int32
	}
	segsOf := func(b block) []seg {
		l := 0
		if w.Lists > 1 {
			l = b.kvh % w.Lists
		}
		o := w.Order[l*rows:]
		at := func(x int, desc bool) seg { return seg{int(o[x]), desc, w.Row(l, int(o[x]))} }
		if !paired {
			return []seg{at(b.x, false)}
		}
		s := []seg{at(b.x, true)}
		if y := rows - 1 - b.x; y > b.x {
			s = append(s, at(y, false))
		}
		return s
	}
	type walker struct {
		b     block
		segs  []seg
		si, i int // segment, step within it
		speed float64
	}
	rng := rand.New(rand.NewPCG(1, 2))
	next := 0
	start := func() *walker {
		if next >= len(blocks) {
			return nil
		}
		b := blocks[next]
		next++
		return &walker{b: b, segs: segsOf(b), speed: 1 + noise*(2*rng.Float64()-1)}
	}
	// step performs one step of wk (its K and V first at a segment's start); false when done
	step := func(wk *walker) bool {
		for wk.si < len(wk.segs) {
			sg := wk.segs[wk.si]
			ne := len(sg.row) / 2
			if wk.i >= ne*gpart {
				wk.si, wk.i = wk.si+1, 0
				continue
			}
			if wk.i == 0 {
				touch(3, wk.b.kvh, sg.kt, 2*kvBytes, false)
			}
			var g, idx int
			if paired {
				idx, g = wk.i/gpart, wk.i%gpart
				if sg.desc {
					idx = ne - 1 - idx
				}
			} else {
				g, idx = wk.i/ne, wk.i%ne
				if sched&1 == 0 {
					idx = (idx + sg.kt*7%ne) % ne
				}
			}
			q := int(sg.row[2*idx])
			h := wk.b.kvh*group + wk.b.part*gpart + g
			touch(0, h, q, qBytes, false)
			touch(1, h, q, qBytes, false)
			touch(2, h, q, dqBytes, true)
			wk.i++
			return true
		}
		return false
	}
	ws := make([]*walker, slots)
	var ev stepQueue
	for s := range ws {
		if ws[s] = start(); ws[s] != nil {
			ev.push(stepEvent{2 * ws[s].speed, s})
		}
	}
	for len(ev) > 0 {
		e := ev[0] // the earliest next step (ties: the lower slot)
		span = e.t
		wk := ws[e.slot]
		if step(wk) {
			ev.replaceTop(stepEvent{e.t + wk.speed*(1+0.2*(2*rng.Float64()-1)), e.slot})
			continue
		}
		if ws[e.slot] = start(); ws[e.slot] != nil {
			ev.replaceTop(stepEvent{e.t + 2*ws[e.slot].speed, e.slot})
		} else {
			ev.pop()
		}
	}
	if split > 1 { // the split's fp32 partials of dK and dV: written, and read back by the reduction
		partials := int64(split) * int64(heads) * int64(rows) * 4 * kvBytes // fp32: twice the bf16 tile, dK and dV
		read, write = read+partials, write+partials
	}
	return read, write + lru.dirtyBytes(), span
}

// stepEvent is a slot's next step at time t (in steps).
type stepEvent struct {
	t    float64
	slot int
}

// stepQueue is a min-heap of the slots' next steps, by time and then slot (a total order,
// so that the pops' sequence is the same whatever the heap's shape).
type stepQueue []stepEvent

func (e stepEvent) before(f stepEvent) bool { return e.t < f.t || e.t == f.t && e.slot < f.slot }

func (q *stepQueue) push(e stepEvent) {
	*q = append(*q, e)
	h := *q
	for i := len(h) - 1; i > 0; {
		p := (i - 1) / 2
		if !h[i].before(h[p]) {
			break
		}
		h[i], h[p] = h[p], h[i]
		i = p
	}
}

// replaceTop puts e in the earliest event's place and restores the order.
func (q stepQueue) replaceTop(e stepEvent) {
	q[0] = e
	for i := 0; ; {
		l, r, m := 2*i+1, 2*i+2, i
		if l < len(q) && q[l].before(q[m]) {
			m = l
		}
		if r < len(q) && q[r].before(q[m]) {
			m = r
		}
		if m == i {
			return
		}
		q[i], q[m] = q[m], q[i]
		i = m
	}
}

// pop removes the earliest event.
func (q *stepQueue) pop() {
	h := *q
	n := len(h) - 1
	h[0] = h[n]
	*q = h[:n]
	if n > 0 {
		q.replaceTop(h[0])
	}
}

// tileLRU is a least-recently-used cache of tiles of given sizes, the tiles numbered 0..n-1:
// a doubly linked list through arrays (node n the list's head: next the most recent, prev
// the least).
type tileLRU struct {
	capacity, used int64
	prev, next     []int32
	bytes          []int64
	in, dirty      []bool
}

func newTileLRU(capacity int64, n int) *tileLRU {
	c := &tileLRU{capacity: capacity, prev: make([]int32, n+1), next: make([]int32, n+1), bytes: make([]int64, n),
		in: make([]bool, n), dirty: make([]bool, n)}
	c.prev[n], c.next[n] = int32(n), int32(n)
	return c
}

// touch uses tile i: the bytes read on a miss and the dirty bytes evicted to make room.
func (c *tileLRU) touch(i int, bytes int64, dirty bool) (read, write int64) {
	head := int32(len(c.in))
	n := int32(i)
	if c.in[i] {
		c.next[c.prev[n]], c.prev[c.next[n]] = c.next[n], c.prev[n]
		c.dirty[i] = c.dirty[i] || dirty
		c.front(n, head)
		return 0, 0
	}
	c.in[i], c.bytes[i], c.dirty[i] = true, bytes, dirty
	c.front(n, head)
	c.used += bytes
	for c.used > c.capacity && c.prev[head] != n {
		old := c.prev[head]
		c.next[c.prev[old]], c.prev[head] = head, c.prev[old]
		c.in[old] = false
		c.used -= c.bytes[old]
		if c.dirty[old] {
			write += c.bytes[old]
		}
	}
	return bytes, write
}

func (c *tileLRU) front(n, head int32) {
	c.prev[n], c.next[n] = head, c.next[head]
	c.prev[c.next[head]] = n
	c.next[head] = n
}

// dirtyBytes is what is still to be written back.
func (c *tileLRU) dirtyBytes() (b int64) {
	for i, in := range c.in {
		if in && c.dirty[i] {
			b += c.bytes[i]
		}
	}
	return b
}
