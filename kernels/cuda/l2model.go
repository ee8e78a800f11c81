package cuda

import (
	"container/heap"
	"math/rand/v2"
)

// l2Traffic models the DRAM bytes that sm90's backward of w moves (docs/perf.md "Calls
// 48-51"): its blocks, a key tile of a KV head walking the group's query heads (sched as
// the kernel reads it: bit 0 no rotation, bit 1 the key tiles the grid's fast index, bit 3
// two key tiles a block, the heaviest with the lightest, down then up, the heads inner;
// bit 2 the front: an unpaired block walks its heads' rows end to end from where the last
// block on the same row, by its first query tile, of its KV head stepped; bits 4-7 the
// group split: a KV head's group query heads over that many blocks a key tile, the grid's
// head index kvh x split + part, each block reading its key tile's K and V),
// started in grid order on slots SMs, each step reading its query tile's Q and dO and
// adding into its fp32 dQ, each block reading its K and V, all through an LRU cache of
// capacity bytes (the H200's L2: 50 MB). Each block runs at a speed drawn within +-noise
// (0.02 fits full 16K: modelled 2.0 GB read, measured 2.1; causal 16K 21 against 17.4 and
// 32K 76 against 73 unpaired, 1.9 and 5.6 against 2.0 and 5.2 paired). read is the bytes
// missed (and a split's fp32 partials of dK and dV, read back by their reduction), write the
// dirty dQ evicted or left at the end (and those partials), span the modelled pass's length in
// steps (its last step's end). A design tool for the block order
// and the pairs, not timed: about a second per 10 million steps.
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
	perHead := rows
	if paired {
		perHead = (rows + 1) / 2
	}
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
	lru := newTileLRU(capacity)
	touch := func(kind, a, b int, bytes int64, dirty bool) {
		r, wr := lru.touch(uint64(kind)<<60|uint64(a)<<32|uint64(b), bytes, dirty)
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
		off   int // bit 2: where its walk starts (a position over its heads' rows)
		speed float64
	}
	front := map[[2]int]int{} // bit 2: the position last stepped on each KV head's row (by its first query tile)
	frontOf := func(b block, sg []seg) [2]int {
		if len(sg) == 0 || len(sg[0].row) == 0 {
			return [2]int{b.kvh, -1}
		}
		return [2]int{b.kvh, int(sg[0].row[0])}
	}
	rng := rand.New(rand.NewPCG(1, 2))
	next := 0
	start := func() *walker {
		if next >= len(blocks) {
			return nil
		}
		b := blocks[next]
		next++
		sg := segsOf(b)
		return &walker{b: b, segs: sg, off: front[frontOf(b, sg)], speed: 1 + noise*(2*rng.Float64()-1)}
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
			} else if sched&4 != 0 && split == 1 { // (the kernel's front: unsplit blocks only)
				pos := (wk.i + wk.off) % (ne * group)
				g, idx = pos/ne, pos%ne
				front[frontOf(wk.b, wk.segs)] = pos
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
	ev := &stepQueue{}
	for s := range ws {
		if ws[s] = start(); ws[s] != nil {
			heap.Push(ev, stepEvent{2 * ws[s].speed, s})
		}
	}
	for ev.Len() > 0 {
		e := heap.Pop(ev).(stepEvent)
		span = e.t
		wk := ws[e.slot]
		if step(wk) {
			heap.Push(ev, stepEvent{e.t + wk.speed*(1+0.2*(2*rng.Float64()-1)), e.slot})
			continue
		}
		if ws[e.slot] = start(); ws[e.slot] != nil {
			heap.Push(ev, stepEvent{e.t + 2*ws[e.slot].speed, e.slot})
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

type stepQueue []stepEvent

func (q stepQueue) Len() int { return len(q) }
func (q stepQueue) Less(i, j int) bool {
	return q[i].t < q[j].t || q[i].t == q[j].t && q[i].slot < q[j].slot
}
func (q stepQueue) Swap(i, j int) { q[i], q[j] = q[j], q[i] }
func (q *stepQueue) Push(x any)   { *q = append(*q, x.(stepEvent)) }
func (q *stepQueue) Pop() any {
	old := *q
	x := old[len(old)-1]
	*q = old[:len(old)-1]
	return x
}

// tileLRU is a least-recently-used cache of tiles of given sizes.
type tileLRU struct {
	capacity, used int64
	nodes          map[uint64]*lruNode
	head           lruNode // head.next most recent, head.prev least
}

type lruNode struct {
	key        uint64
	bytes      int64
	dirty      bool
	prev, next *lruNode
}

func newTileLRU(capacity int64) *tileLRU {
	c := &tileLRU{capacity: capacity, nodes: map[uint64]*lruNode{}}
	c.head.prev, c.head.next = &c.head, &c.head
	return c
}

// touch uses a tile: the bytes read on a miss and the dirty bytes evicted to make room.
func (c *tileLRU) touch(key uint64, bytes int64, dirty bool) (read, write int64) {
	if n, ok := c.nodes[key]; ok {
		n.prev.next, n.next.prev = n.next, n.prev
		n.dirty = n.dirty || dirty
		c.front(n)
		return 0, 0
	}
	n := &lruNode{key: key, bytes: bytes, dirty: dirty}
	c.nodes[key] = n
	c.front(n)
	c.used += bytes
	for c.used > c.capacity && c.head.prev != n {
		old := c.head.prev
		old.prev.next, c.head.prev = &c.head, old.prev
		delete(c.nodes, old.key)
		c.used -= old.bytes
		if old.dirty {
			write += old.bytes
		}
	}
	return bytes, write
}

func (c *tileLRU) front(n *lruNode) {
	n.prev, n.next = &c.head, c.head.next
	c.head.next.prev = n
	c.head.next = n
}

// dirtyBytes is what is still to be written back.
func (c *tileLRU) dirtyBytes() (b int64) {
	for _, n := range c.nodes {
		if n.dirty {
			b += n.bytes
		}
	}
	return b
}
