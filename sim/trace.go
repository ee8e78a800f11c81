package sim

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/longca/longca/comm"
	"github.com/longca/longca/kernels"
	"github.com/longca/longca/spmd/cp"
	"github.com/longca/longca/tensor"
)

// placeholder is a tensor without data: a traced run's buffers. Its id is unique within
// one rank's recorder, so the trace can say which operation wrote what another reads.
type placeholder struct {
	id    int
	dt    tensor.DType
	shape []int
}

func (p *placeholder) DType() tensor.DType { return p.dt }
func (p *placeholder) Shape() []int        { return p.shape }
func (p *placeholder) Numel() int          { return tensor.Numel(p.shape) }
func (p *placeholder) Bytes() int64        { return int64(p.Numel()) * int64(p.dt.Size()) }

// View is a placeholder for part of p (cp.RowViewer): it has p's id, so what writes or
// reads the part is ordered as a write or read of p.
func (p *placeholder) View(off int, shape ...int) (tensor.Tensor, error) {
	if off < 0 || off+tensor.Numel(shape) > p.Numel() {
		return nil, fmt.Errorf("sim: view of %v at %d of a placeholder of %v", shape, off, p.shape)
	}
	return &placeholder{id: p.id, dt: p.dt, shape: append([]int(nil), shape...)}, nil
}

var _ cp.RowViewer = (*placeholder)(nil)

// eventKind is what an event of a trace does.
type eventKind uint8

const (
	evKernel eventKind = iota // an attention kernel call
	evHelper                  // a helper kernel (memory-bound)
	evP2P                     // a group of sends and receives (comm.Group, or one Send/Recv)
	evColl                    // a collective
)

// collKind is a collective operation.
type collKind uint8

const (
	collAllToAll collKind = iota
	collAllGather
	collReduceScatter
	collAllReduce
	collBarrier
)

var collNames = [...]string{"all-to-all", "all-gather", "reduce-scatter", "all-reduce", "barrier"}

func (c collKind) String() string { return collNames[c] }

// message is one send or receive of a point-to-point event.
type message struct {
	send  bool
	peer  int // world rank
	bytes int64
	seq   int // the seq-th message between this pair, this direction, on this group
}

// event is one operation of one rank's trace.
type event struct {
	kind   eventKind
	stream int     // 0: the compute stream; k > 0: the k-th transfer overlapped with it
	deps   []int32 // events of the same rank that must end before this one starts
	// Compute (evKernel, evHelper): the duration on a GPU of its own, and the FLOPs (kernel).
	dur   float64
	flops float64
	name  string
	// Communication (evP2P, evColl).
	grp   *traceGroup
	coll  collKind
	bytes int64 // a collective's send buffer
	seq   int   // the seq-th collective of this rank on grp
	msgs  []message
}

// rankTrace is what one rank did in one pass, in program order.
type rankTrace struct {
	rank   int
	events []event
}

// costs prices compute events as they are recorded.
type costs interface {
	// kernelTime is a kernel call's seconds and FLOPs (last remembers a large mask).
	kernelTime(pass kernels.Pass, p kernels.Problem, last *lastTiles) (seconds, flops float64)
	helperTime(launches int, bytes int64) float64
}

// recorder is one rank's Tracer: the kernel handed to cp.NewRun in a traced run.
type recorder struct {
	rank   int
	costs  costs
	partDT tensor.DType // 0: the problem's dtype

	nextID  int
	stream  int // the stream events are recorded on now
	streams int // transfers started so far
	// lastCompute is the last event of the compute stream (-1: none); a transfer's first
	// event waits for it (the mark of spmd/cp's transfer).
	lastCompute int32
	lastOn      map[int]int32         // per stream, its last event
	lastComm    map[*traceGroup]int32 // per group, this rank's last event on it (a communicator is serial)
	writer      map[int]int32         // per placeholder, the event that last wrote it
	collSeq     map[*traceGroup]int
	msgSeq      map[msgKey]int
	events      []event
	group       *p2pGroup // open comm.Group
	last        lastTiles
}

type msgKey struct {
	g        *traceGroup
	src, dst int
	coll     bool // a block of a direct collective (comm/local keeps them apart by tag)
}

func newRecorder(rank int, c costs, partDT tensor.DType) *recorder {
	r := &recorder{rank: rank, costs: c, partDT: partDT}
	r.reset()
	return r
}

// reset starts a new trace (a pass); placeholders keep their ids, and what they hold is
// taken as ready at the start.
func (r *recorder) reset() {
	r.stream, r.streams, r.lastCompute = 0, 0, -1
	r.lastOn = map[int]int32{}
	r.lastComm = map[*traceGroup]int32{}
	r.writer = map[int]int32{}
	r.collSeq = map[*traceGroup]int{}
	r.msgSeq = map[msgKey]int{}
	r.events = nil
}

func (r *recorder) take() rankTrace {
	t := rankTrace{rank: r.rank, events: r.events}
	r.events = nil
	return t
}

// add appends e (on the current stream) with its dependencies: the stream's previous
// event, the transfer's mark, the writers of what it reads, the communicator's previous
// event; then it becomes the writer of what it writes.
func (r *recorder) add(e event, reads, writes []tensor.Tensor) {
	e.stream = r.stream
	idx := int32(len(r.events))
	seen := map[int32]bool{}
	dep := func(d int32) {
		if d >= 0 && !seen[d] {
			seen[d] = true
			e.deps = append(e.deps, d)
		}
	}
	if prev, ok := r.lastOn[r.stream]; ok {
		dep(prev)
	} else if r.stream != 0 {
		dep(r.lastCompute)
	}
	for _, t := range reads {
		if p, ok := t.(*placeholder); ok {
			if w, ok := r.writer[p.id]; ok {
				dep(w)
			}
		}
	}
	if e.grp != nil {
		if prev, ok := r.lastComm[e.grp]; ok {
			dep(prev)
		}
		r.lastComm[e.grp] = idx
	}
	for _, t := range writes {
		if p, ok := t.(*placeholder); ok {
			r.writer[p.id] = idx
		}
	}
	r.lastOn[r.stream] = idx
	if r.stream == 0 {
		r.lastCompute = idx
	}
	r.events = append(r.events, e)
}

// The Tracer (and kernels.Kernel) methods.

func (r *recorder) Name() string                   { return "trace" }
func (r *recorder) Device() tensor.Device          { return traceDevice{} }
func (r *recorder) Supports(kernels.Problem) error { return nil }

func (r *recorder) Forward(_ context.Context, p kernels.Problem, q, k, v, out, lse tensor.Tensor) error {
	dur, flops := r.costs.kernelTime(kernels.Fwd, p, &r.last)
	r.add(event{kind: evKernel, name: "attention fwd", dur: dur, flops: flops}, []tensor.Tensor{q, k, v}, []tensor.Tensor{out, lse})
	return nil
}

func (r *recorder) Backward(_ context.Context, p kernels.Problem, q, k, v, out, lse, dout, dq, dk, dv tensor.Tensor) error {
	dur, flops := r.costs.kernelTime(kernels.Bwd, p, &r.last)
	r.add(event{kind: evKernel, name: "attention bwd", dur: dur, flops: flops}, []tensor.Tensor{q, k, v, out, lse, dout}, []tensor.Tensor{dq, dk, dv})
	return nil
}

func (r *recorder) Alloc(dt tensor.DType, shape ...int) (tensor.Tensor, error) {
	r.nextID++
	return &placeholder{id: r.nextID, dt: dt, shape: append([]int(nil), shape...)}, nil
}

func (r *recorder) Helper(name string, launches int, reads, writes []tensor.Tensor) error {
	var b int64
	for _, t := range reads {
		b += t.Bytes()
	}
	for _, t := range writes {
		b += t.Bytes()
	}
	r.add(event{kind: evHelper, name: name, dur: r.costs.helperTime(launches, b)}, reads, writes)
	return nil
}

func (r *recorder) Transfer(fn func() error) error {
	saved := r.stream
	r.streams++
	r.stream = r.streams
	err := fn()
	r.stream = saved
	return err
}

func (r *recorder) PartialDType(dt tensor.DType) tensor.DType {
	if r.partDT != 0 {
		return r.partDT
	}
	return dt
}

var _ cp.Tracer = (*recorder)(nil)

// traceDevice is the device a traced run reports: it holds nothing.
type traceDevice struct{}

func (traceDevice) Name() string { return "simulated" }
func (traceDevice) Alloc(tensor.DType, ...int) (tensor.Tensor, error) {
	return nil, fmt.Errorf("sim: the simulated device holds no data")
}
func (traceDevice) Free(tensor.Tensor) {}
func (traceDevice) CopyIn(tensor.Tensor, *tensor.Host) error {
	return fmt.Errorf("sim: the simulated device holds no data")
}
func (traceDevice) CopyOut(*tensor.Host, tensor.Tensor) error {
	return fmt.Errorf("sim: the simulated device holds no data")
}
func (traceDevice) Poison(tensor.Tensor) error                  { return nil }
func (traceDevice) Time(fn func() error) (time.Duration, error) { return 0, fn() }
func (traceDevice) FlushCache() error                           { return nil }
func (traceDevice) PeakMemory() int64                           { return 0 }
func (traceDevice) ResetPeak()                                  {}

// traceWorld is what the traced ranks of one run share: the groups Split made.
type traceWorld struct {
	n      int
	mu     sync.Mutex
	groups map[groupKey]*traceGroup
	root   *traceGroup
	nextID int
}

type groupKey struct {
	parent *traceGroup
	seq    int
	color  int
}

// traceGroup is a communicator's group: its members (world ranks, in group order) and
// the path of splits that made it (groups made by the same path are siblings: they run
// the same operations at the same time).
type traceGroup struct {
	id      int
	members []int
	path    string
	index   map[int]int // world rank -> group rank

	mu     sync.Mutex
	cond   *sync.Cond
	splits map[int]*splitTable
}

// splitTable collects the (color, key) of every member for one Split.
type splitTable struct {
	entries [][2]int
	arrived int
}

func newTraceWorld(n int) *traceWorld {
	w := &traceWorld{n: n, groups: map[groupKey]*traceGroup{}}
	members := make([]int, n)
	for i := range members {
		members[i] = i
	}
	w.root = w.newGroup(members, "world")
	return w
}

func (w *traceWorld) newGroup(members []int, path string) *traceGroup {
	g := &traceGroup{id: w.nextID, members: members, path: path, index: map[int]int{}, splits: map[int]*splitTable{}}
	w.nextID++
	g.cond = sync.NewCond(&g.mu)
	for i, m := range members {
		g.index[m] = i
	}
	return g
}

// comms returns the world communicator of every rank, recording into recs[rank] (a nil
// recorder traces nothing: a rank that only takes part in the splits).
func (w *traceWorld) comms(recs []*recorder) []*traceComm {
	out := make([]*traceComm, w.n)
	for r := range out {
		out[r] = &traceComm{w: w, g: w.root, rank: r, rec: recs[r]}
	}
	return out
}

// traceComm is one rank's view of a group in a traced run: it records what the method
// asks of it and moves nothing, so it never waits (except in Split, which is collective
// because the groups depend on every member's color).
type traceComm struct {
	w        *traceWorld
	g        *traceGroup
	rank     int // in g
	rec      *recorder
	splitSeq int
	sent     int64
	msgs     int64
}

// p2pGroup collects the sends and receives of one comm.Group.
type p2pGroup struct {
	c      *traceComm
	depth  int
	msgs   []message
	reads  []tensor.Tensor
	writes []tensor.Tensor
}

var _ comm.Comm = (*traceComm)(nil)

func (c *traceComm) Rank() int { return c.rank }
func (c *traceComm) Size() int { return len(c.g.members) }

// world is this rank's world rank.
func (c *traceComm) world() int { return c.g.members[c.rank] }

func (c *traceComm) Counters() comm.Counters {
	return comm.Counters{BytesSent: c.sent, Messages: c.msgs}
}
func (c *traceComm) Close() error { return nil }

func (c *traceComm) Split(color, key int) (comm.Comm, error) {
	g := c.g
	seq := c.splitSeq
	c.splitSeq++
	g.mu.Lock()
	t := g.splits[seq]
	if t == nil {
		t = &splitTable{entries: make([][2]int, len(g.members))}
		g.splits[seq] = t
	}
	t.entries[c.rank] = [2]int{color, key}
	t.arrived++
	if t.arrived == len(g.members) {
		g.cond.Broadcast()
	}
	for t.arrived < len(g.members) {
		g.cond.Wait()
	}
	g.mu.Unlock()
	var ranks []int
	for r, ck := range t.entries {
		if ck[0] == color {
			ranks = append(ranks, r)
		}
	}
	// Stable by key, ties by rank, as comm/local orders them.
	for i := 1; i < len(ranks); i++ {
		for j := i; j > 0 && t.entries[ranks[j]][1] < t.entries[ranks[j-1]][1]; j-- {
			ranks[j], ranks[j-1] = ranks[j-1], ranks[j]
		}
	}
	members := make([]int, len(ranks))
	me := -1
	for i, r := range ranks {
		members[i] = g.members[r]
		if r == c.rank {
			me = i
		}
	}
	k := groupKey{g, seq, color}
	c.w.mu.Lock()
	sub, ok := c.w.groups[k]
	if !ok {
		sub = c.w.newGroup(members, fmt.Sprintf("%s/%d", g.path, seq))
		c.w.groups[k] = sub
	}
	c.w.mu.Unlock()
	return &traceComm{w: c.w, g: sub, rank: me, rec: c.rec}, nil
}

func (c *traceComm) checkPeer(peer int) error {
	if peer < 0 || peer >= c.Size() {
		return fmt.Errorf("sim: peer %d of a group of %d", peer, c.Size())
	}
	return nil
}

func (c *traceComm) Group(fn func() error) error {
	if c.rec == nil {
		return fn()
	}
	outer := c.rec.group == nil
	if outer {
		c.rec.group = &p2pGroup{c: c}
	}
	c.rec.group.depth++
	err := fn()
	pg := c.rec.group
	pg.depth--
	if pg.depth > 0 {
		return err
	}
	c.rec.group = nil
	if err != nil {
		return err
	}
	if len(pg.msgs) > 0 {
		c.rec.add(event{kind: evP2P, grp: c.g, msgs: pg.msgs}, pg.reads, pg.writes)
	}
	return nil
}

// p2p adds one message to the open group, or records it alone.
func (c *traceComm) p2p(send bool, buf tensor.Tensor, peer int) error {
	if err := c.checkPeer(peer); err != nil {
		return err
	}
	if send && peer != c.rank {
		c.sent += buf.Bytes()
		c.msgs++
	}
	if c.rec == nil {
		return nil
	}
	if pg := c.rec.group; pg != nil && pg.c.g != c.g {
		return fmt.Errorf("sim: a group on one communicator holds a send on another")
	}
	src, dst := c.world(), c.g.members[peer]
	if !send {
		src, dst = dst, src
	}
	key := msgKey{g: c.g, src: src, dst: dst}
	m := message{send: send, peer: c.g.members[peer], bytes: buf.Bytes(), seq: c.rec.msgSeq[key]}
	c.rec.msgSeq[key]++
	return c.Group(func() error {
		pg := c.rec.group
		pg.msgs = append(pg.msgs, m)
		if send {
			pg.reads = append(pg.reads, buf)
		} else {
			pg.writes = append(pg.writes, buf)
		}
		return nil
	})
}

func (c *traceComm) Send(buf tensor.Tensor, peer int) error { return c.p2p(true, buf, peer) }
func (c *traceComm) Recv(buf tensor.Tensor, peer int) error { return c.p2p(false, buf, peer) }

// collective records one collective; sent is what comm/local counts as sent.
func (c *traceComm) collective(k collKind, send, recv tensor.Tensor, sent int64) error {
	n := int64(c.Size())
	if n > 1 {
		c.sent += sent
		c.msgs += n - 1
	}
	if c.rec == nil {
		return nil
	}
	seq := c.rec.collSeq[c.g]
	c.rec.collSeq[c.g]++
	var reads, writes []tensor.Tensor
	var b int64
	if send != nil {
		reads, b = []tensor.Tensor{send}, send.Bytes()
	}
	if recv != nil {
		writes = []tensor.Tensor{recv}
	}
	c.rec.add(event{kind: evColl, grp: c.g, coll: k, bytes: b, seq: seq}, reads, writes)
	return nil
}

func (c *traceComm) AllToAll(send, recv tensor.Tensor) error {
	if send.Bytes() != recv.Bytes() || send.Shape()[0]%c.Size() != 0 {
		return fmt.Errorf("sim: all-to-all of %v into %v over %d ranks", send.Shape(), recv.Shape(), c.Size())
	}
	n := int64(c.Size())
	return c.collective(collAllToAll, send, recv, send.Bytes()/n*(n-1))
}

func (c *traceComm) AllGather(send, recv tensor.Tensor) error {
	if send.Bytes()*int64(c.Size()) != recv.Bytes() {
		return fmt.Errorf("sim: all-gather of %d bytes from %d ranks into %d", send.Bytes(), c.Size(), recv.Bytes())
	}
	return c.collective(collAllGather, send, recv, send.Bytes()*int64(c.Size()-1))
}

func (c *traceComm) ReduceScatter(send, recv tensor.Tensor) error {
	n := int64(c.Size())
	if send.Bytes() != recv.Bytes()*n {
		return fmt.Errorf("sim: reduce-scatter of %d bytes into %d over %d ranks", send.Bytes(), recv.Bytes(), n)
	}
	return c.collective(collReduceScatter, send, recv, send.Bytes()/n*(n-1))
}

func (c *traceComm) AllReduce(buf tensor.Tensor, _ comm.Op) error {
	return c.collective(collAllReduce, buf, buf, buf.Bytes()*int64(c.Size()-1))
}

func (c *traceComm) Barrier() error { return c.collective(collBarrier, nil, nil, 0) }
