package sim

import (
	"container/heap"
	"fmt"
	"math"
)

// simulator replays rank traces in simulated time. An event starts when the events it
// depends on (its stream's previous event, its transfer's mark, the writers of what it
// reads, the previous operation on its communicator) have ended, and, for communication,
// when its peers allow: a collective starts when every member has reached it (all then
// finish together after the collective's modelled time); a message leaves when its
// sender has posted it (and, with rendezvous, its receiver too), waits for its sender's
// port of its link class (one message after another), takes bytes over bandwidth on the
// wire and arrives a latency later.
//
// With mirror set, each traced rank is simulated alone and its peers are taken to do
// what it does at the same moment (every rank runs the same program): a message it
// receives left its sender when it posted its own receive, through a port of the
// sender's that carries only such messages; a collective starts when it reaches it.
// That is how large worlds are simulated from a sample of ranks.
type simulator struct {
	m      Machine
	nw     *network
	mirror bool
	traces []rankTrace
	byRank map[int]int // world rank -> index into traces

	ranks []rankState
	pq    itemQueue
	seq   int

	gpuFree  map[int]float64
	portFree map[portKey]float64
	colls    map[collArrival]*collGather
	msgs     map[msgKey]*msgState // keyed by (group, src, dst) with the seq below
}

// portKey is a port: its class and owner (the first rank of the port's scope, or the
// sending rank when the scope's other ranks are not simulated), and whether it is a
// mirrored sender's, as seen by a rank simulated alone.
type portKey struct {
	owner  int
	class  LinkClass
	mirror bool
}

type collArrival struct {
	g   *traceGroup
	seq int
}

type collGather struct {
	arrived int
	latest  float64
	who     [][2]int // (trace index, event)
}

// msgState matches the seq-th message from src to dst on a group.
type msgState struct {
	queue []*msgPair
}

type msgPair struct {
	bytes            int64
	sendT, recvT     float64
	sendOK, recvOK   bool
	sender, receiver [2]int // (trace index, event); -1 when not simulated
	arrive           float64
	arrived          bool
	scheduled        bool
	class            LinkClass
	wire             float64 // time on the wire
}

type rankState struct {
	start, end []float64
	ready      []float64
	cause      []int32 // the dependency that ended last (-1: none)
	pending    []int
	msgsLeft   []int
	endCand    []float64
	class      []LinkClass // a communication event's limiting class
	classWire  []float64
	dependents [][]int32
	gpuWait    float64
	open       []int32 // point-to-point events started, maybe not ended (Machine.Contention)
	wire       [numClasses]float64
}

// transferAt says whether a point-to-point event of the rank is in flight at t (started,
// and not known to have ended by t); it forgets the ones that ended.
func (st *rankState) transferAt(t float64) bool {
	keep := st.open[:0]
	for _, e := range st.open {
		if math.IsNaN(st.end[e]) || st.end[e] > t {
			keep = append(keep, e)
		}
	}
	st.open = keep
	return len(keep) > 0
}

type item struct {
	t    float64
	seq  int
	tr   int
	ev   int32
	wire *msgPair
	c    LinkClass
	port portKey
	bw   float64
	lat  float64
}

type itemQueue []item

func (q itemQueue) Len() int { return len(q) }
func (q itemQueue) Less(i, j int) bool {
	if q[i].t != q[j].t {
		return q[i].t < q[j].t
	}
	return q[i].seq < q[j].seq
}
func (q itemQueue) Swap(i, j int) { q[i], q[j] = q[j], q[i] }
func (q *itemQueue) Push(x any)   { *q = append(*q, x.(item)) }
func (q *itemQueue) Pop() any {
	old := *q
	it := old[len(old)-1]
	*q = old[:len(old)-1]
	return it
}

// RankResult is one simulated rank's pass.
type RankResult struct {
	Rank    int
	Seconds float64
	// Compute is its kernels' and helpers' time; GPUWait the time its compute waited for
	// a GPU other ranks were using (ranks sharing a GPU).
	Compute, GPUWait float64
	// Exposed is the time its compute stream waited on communication (or did a blocking
	// collective); ExposedBy splits it by the link class that limited each wait.
	Exposed   float64
	ExposedBy [numClasses]float64
	// Wire is the time its messages spent on each class of link.
	Wire  [numClasses]float64
	FLOPs float64
}

func newSimulator(m Machine, nw *network, traces []rankTrace, mirror bool) *simulator {
	s := &simulator{m: m, nw: nw, mirror: mirror, traces: traces, byRank: map[int]int{},
		gpuFree: map[int]float64{}, portFree: map[portKey]float64{}, colls: map[collArrival]*collGather{}, msgs: map[msgKey]*msgState{}}
	for i, t := range traces {
		s.byRank[t.rank] = i
	}
	return s
}

func (s *simulator) push(it item) {
	it.seq = s.seq
	s.seq++
	heap.Push(&s.pq, it)
}

// run simulates the traces and returns each rank's result.
func (s *simulator) run() ([]RankResult, error) {
	s.ranks = make([]rankState, len(s.traces))
	for i, t := range s.traces {
		n := len(t.events)
		st := rankState{start: fill(n, math.NaN()), end: fill(n, math.NaN()), ready: make([]float64, n), cause: make([]int32, n),
			pending: make([]int, n), msgsLeft: make([]int, n), endCand: make([]float64, n), class: make([]LinkClass, n),
			classWire: make([]float64, n), dependents: make([][]int32, n)}
		for e, ev := range t.events {
			st.cause[e] = -1
			st.pending[e] = len(ev.deps)
			for _, d := range ev.deps {
				st.dependents[d] = append(st.dependents[d], int32(e))
			}
		}
		s.ranks[i] = st
		for e := range t.events {
			if st.pending[e] == 0 {
				s.push(item{t: 0, tr: i, ev: int32(e)})
			}
		}
	}
	for s.pq.Len() > 0 {
		it := heap.Pop(&s.pq).(item)
		if it.wire != nil {
			s.onWire(it)
			continue
		}
		if err := s.onStart(it.tr, it.ev, it.t); err != nil {
			return nil, err
		}
	}
	out := make([]RankResult, len(s.traces))
	for i, t := range s.traces {
		st := &s.ranks[i]
		for e, ev := range t.events {
			if math.IsNaN(st.end[e]) {
				return nil, fmt.Errorf("sim: rank %d never finished event %d (%s): an operation no peer matched", t.rank, e, describe(ev))
			}
		}
		out[i] = s.result(i)
	}
	return out, nil
}

func fill(n int, v float64) []float64 {
	out := make([]float64, n)
	for i := range out {
		out[i] = v
	}
	return out
}

func describe(e event) string {
	switch e.kind {
	case evKernel, evHelper:
		return e.name
	case evColl:
		return e.coll.String()
	}
	return fmt.Sprintf("%d point-to-point messages", len(e.msgs))
}

// onStart begins event e of trace tr at time t.
func (s *simulator) onStart(tr int, e int32, t float64) error {
	ev := &s.traces[tr].events[e]
	st := &s.ranks[tr]
	switch ev.kind {
	case evKernel, evHelper:
		dur := ev.dur
		if ev.kind == evKernel && s.m.Contention > 0 && st.transferAt(t) {
			dur *= 1 + s.m.Contention // a transfer of this rank runs alongside
		}
		begin := t
		if s.m.RanksPerGPU > 1 {
			if s.mirror {
				dur *= float64(s.nw.gpuRanks(s.traces[tr].rank)) // its GPU's other ranks compute alongside
			} else {
				gpu := s.m.GPU(s.traces[tr].rank)
				begin = max(t, s.gpuFree[gpu])
				s.gpuFree[gpu] = begin + dur
				st.gpuWait += begin - t
			}
		}
		st.start[e] = begin
		s.finish(tr, e, begin+dur)
	case evColl:
		st.start[e] = t
		if s.expands(ev) {
			return s.startMessages(tr, e, t, ev.grp, s.collMessages(s.traces[tr].rank, ev), true)
		}
		cost := s.nw.collective(ev.grp, ev.coll, ev.bytes)
		st.class[e] = cost.class
		if s.mirror {
			s.finish(tr, e, t+cost.seconds)
			return nil
		}
		k := collArrival{ev.grp, ev.seq}
		g := s.colls[k]
		if g == nil {
			g = &collGather{}
			s.colls[k] = g
		}
		g.arrived++
		g.latest = max(g.latest, t)
		g.who = append(g.who, [2]int{tr, int(e)})
		if g.arrived == len(ev.grp.members) {
			for _, w := range g.who {
				s.ranks[w[0]].class[w[1]] = cost.class
				s.finish(w[0], int32(w[1]), g.latest+cost.seconds)
			}
			delete(s.colls, k)
		}
	case evP2P:
		st.start[e] = t
		if s.m.Contention > 0 {
			st.open = append(st.open, e)
		}
		return s.startMessages(tr, e, t, ev.grp, ev.msgs, false)
	}
	return nil
}

// expands says whether a collective is simulated as its messages: a direct collective
// (comm/local's, and NCCL's all-to-all, grouped sends and receives) when every rank is
// simulated. Otherwise its modelled time is used (network.collective).
func (s *simulator) expands(ev *event) bool {
	return !s.mirror && (s.m.Collectives == CollDirect || ev.coll == collAllToAll)
}

// collMessages are a direct collective's messages from rank me: its block to every other
// member, in comm/local's order (the next rank first), and one from each.
func (s *simulator) collMessages(me int, ev *event) []message {
	g := ev.grp
	n := len(g.members)
	bs := int64(block(ev.coll, ev.bytes, n))
	idx := g.index[me]
	var ms []message
	for i := 1; i < n; i++ {
		ms = append(ms, message{send: true, peer: g.members[(idx+i)%n], bytes: bs, seq: ev.seq})
	}
	for i := 1; i < n; i++ {
		ms = append(ms, message{peer: g.members[(idx+n-i)%n], bytes: bs, seq: ev.seq})
	}
	return ms
}

// startMessages posts an event's messages at t. A send completes when it left its port
// (rendezvous, as NCCL) or at once (eager, as comm/local); a receive when its message
// arrived; the event when all have.
func (s *simulator) startMessages(tr int, e int32, t float64, g *traceGroup, msgs []message, coll bool) error {
	st := &s.ranks[tr]
	st.msgsLeft[e] = len(msgs)
	st.endCand[e] = t
	if len(msgs) == 0 {
		s.finish(tr, e, t)
		return nil
	}
	me := s.traces[tr].rank
	for _, m := range msgs {
		if m.peer == me { // to itself: a local copy
			s.msgDone(tr, e, t, ClassSelf, 0)
			continue
		}
		if s.mirror {
			s.mirrored(tr, e, g, m, t)
			continue
		}
		src, dst := me, m.peer
		if !m.send {
			src, dst = dst, src
		}
		p := s.pair(msgKey{g: g, src: src, dst: dst, coll: coll}, m.seq)
		p.bytes = m.bytes
		if m.send {
			p.sendT, p.sendOK, p.sender = t, true, [2]int{tr, int(e)}
			if _, ok := s.byRank[dst]; !ok {
				return fmt.Errorf("sim: rank %d sends to rank %d, which is not simulated", me, dst)
			}
			if !s.m.Rendezvous {
				s.msgDone(tr, e, t, ClassSelf, 0) // eager: the send is done once posted
			}
		} else {
			p.recvT, p.recvOK, p.receiver = t, true, [2]int{tr, int(e)}
			if p.arrived { // an eager message that landed before its receive was posted
				s.msgDone(tr, e, max(t, p.arrive), p.class, p.wire)
			}
		}
		s.maybeSend(src, dst, p)
	}
	return nil
}

// pair finds message seq of a (group, source, destination).
func (s *simulator) pair(k msgKey, seq int) *msgPair {
	ms := s.msgs[k]
	if ms == nil {
		ms = &msgState{}
		s.msgs[k] = ms
	}
	for len(ms.queue) <= seq {
		ms.queue = append(ms.queue, &msgPair{sender: [2]int{-1, -1}, receiver: [2]int{-1, -1}})
	}
	return ms.queue[seq]
}

// maybeSend puts a message on the wire once it may leave: at its send (eager) or once
// both sides posted it (rendezvous). Every rank is simulated, so it waits for the real
// port (shared with the other ranks of the port's scope).
func (s *simulator) maybeSend(src, dst int, p *msgPair) {
	if p.scheduled || !p.sendOK || (s.m.Rendezvous && !p.recvOK) {
		return
	}
	p.scheduled = true
	leave := p.sendT
	if s.m.Rendezvous {
		leave = max(leave, p.recvT)
	}
	port, bw := s.nw.port(src, dst)
	s.push(item{t: leave, wire: p, c: port.class, port: port, bw: bw, lat: s.m.Link(port.class).LatencyUs * 1e-6, tr: p.sender[0], ev: int32(p.sender[1])})
}

// mirrored handles a message of a rank simulated alone: its peer does the same now, and
// a shared port's bandwidth is divided among the ranks that use it in this operation.
func (s *simulator) mirrored(tr int, e int32, g *traceGroup, m message, t float64) {
	me := s.traces[tr].rank
	src, dst := me, m.peer
	if !m.send {
		src, dst = m.peer, me
	}
	bw, c := s.nw.p2pBandwidth(g, src, dst)
	p := &msgPair{bytes: m.bytes, sender: [2]int{-1, -1}, receiver: [2]int{-1, -1}}
	port := portKey{owner: src, class: c, mirror: !m.send}
	if m.send {
		p.sender = [2]int{tr, int(e)}
		if !s.m.Rendezvous {
			s.msgDone(tr, e, t, ClassSelf, 0) // eager: the send is done once posted
		}
	} else {
		p.receiver = [2]int{tr, int(e)}
		p.recvT, p.recvOK = t, true
	}
	s.push(item{t: t, wire: p, c: c, port: port, bw: bw, lat: s.m.Link(c).LatencyUs * 1e-6, tr: tr, ev: e})
}

// onWire sends a message through its sender's port.
func (s *simulator) onWire(it item) {
	p := it.wire
	depart := max(it.t, s.portFree[it.port])
	onWire := float64(p.bytes) / it.bw
	done := depart + onWire
	s.portFree[it.port] = done
	p.arrive, p.arrived, p.class, p.wire = done+it.lat, true, it.c, onWire+it.lat
	if p.sender[0] >= 0 {
		s.ranks[p.sender[0]].wire[it.c] += onWire
		if s.m.Rendezvous {
			s.msgDone(p.sender[0], int32(p.sender[1]), done, it.c, onWire)
		}
	}
	if p.receiver[0] >= 0 && p.recvOK {
		s.msgDone(p.receiver[0], int32(p.receiver[1]), max(p.arrive, p.recvT), it.c, onWire+it.lat)
	}
}

// msgDone completes one message of a point-to-point event at time t (its wire time w on
// class c).
func (s *simulator) msgDone(tr int, e int32, t float64, c LinkClass, w float64) {
	st := &s.ranks[tr]
	st.endCand[e] = max(st.endCand[e], t)
	if w > st.classWire[e] {
		st.classWire[e], st.class[e] = w, c
	}
	st.msgsLeft[e]--
	if st.msgsLeft[e] == 0 {
		s.finish(tr, e, st.endCand[e])
	}
}

// finish ends event e at t and releases what waited for it.
func (s *simulator) finish(tr int, e int32, t float64) {
	st := &s.ranks[tr]
	st.end[e] = t
	for _, d := range st.dependents[e] {
		if t >= st.ready[d] {
			st.ready[d], st.cause[d] = t, e
		}
		st.pending[d]--
		if st.pending[d] == 0 {
			s.push(item{t: st.ready[d], tr: tr, ev: d})
		}
	}
}

// result sums one rank's pass: its time, compute, and where its compute stream waited.
func (s *simulator) result(tr int) RankResult {
	t := s.traces[tr]
	st := &s.ranks[tr]
	r := RankResult{Rank: t.rank, GPUWait: st.gpuWait, Wire: st.wire}
	prevEnd := 0.0
	for e, ev := range t.events {
		r.Seconds = max(r.Seconds, st.end[e])
		switch ev.kind {
		case evKernel, evHelper:
			r.Compute += ev.dur
			r.FLOPs += ev.flops
		}
		if ev.stream != 0 {
			continue
		}
		if gap := st.ready[e] - prevEnd; gap > 0 && st.cause[e] >= 0 {
			r.Exposed += gap
			r.ExposedBy[s.commClass(tr, st.cause[e])] += gap
		}
		if ev.kind == evP2P || ev.kind == evColl {
			d := st.end[e] - st.start[e]
			r.Exposed += d
			r.ExposedBy[st.class[e]] += d
		}
		prevEnd = st.end[e]
	}
	if tail := r.Seconds - prevEnd; tail > 0 {
		// Transfers still running after the compute stream's last event.
		last := int32(-1)
		for e := range t.events {
			if st.end[e] == r.Seconds {
				last = int32(e)
			}
		}
		r.Exposed += tail
		if last >= 0 {
			r.ExposedBy[s.commClass(tr, last)] += tail
		}
	}
	return r
}

// commClass is the link class that limited a communication event (self for compute).
func (s *simulator) commClass(tr int, e int32) LinkClass {
	switch s.traces[tr].events[e].kind {
	case evP2P, evColl:
		return s.ranks[tr].class[e]
	}
	return ClassSelf
}
