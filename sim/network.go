package sim

import (
	"fmt"
	"io"
	"math"
	"math/bits"
	"strings"
)

// network prices communication on a machine for the groups of one traced run. Every
// rank runs the same program, so when a rank moves data on a group every sibling group
// (made by the same split) moves the same at the same time: a shared port (a node's NIC,
// a GPU's copy engine) is divided among the ranks of its scope that use it in that same
// operation.
type network struct {
	m Machine
	// ranks is the world's size: a port's scope past it holds no rank.
	ranks int
	// byPath finds, for a split path, every world rank's group and its rank in it.
	byPath map[string][]memberOf
	cache  map[collKey]collCost
}

type memberOf struct {
	g     *traceGroup
	index int
}

type collKey struct {
	g     *traceGroup
	kind  collKind
	bytes int64
}

// collCost is a collective's time and the link class that limits it.
type collCost struct {
	seconds float64
	class   LinkClass
}

func newNetwork(m Machine, w *traceWorld) *network {
	nw := &network{m: m, ranks: w.n, byPath: map[string][]memberOf{}, cache: map[collKey]collCost{}}
	all := append([]*traceGroup{w.root}, mapValues(w.groups)...)
	for _, g := range all {
		ms := nw.byPath[g.path]
		if ms == nil {
			ms = make([]memberOf, w.n)
			nw.byPath[g.path] = ms
		}
		for i, r := range g.members {
			ms[r] = memberOf{g, i}
		}
	}
	return nw
}

func mapValues[K comparable, V any](m map[K]V) []V {
	out := make([]V, 0, len(m))
	for _, v := range m {
		out = append(out, v)
	}
	return out
}

// scope is the port scope of rank's class-c port (Machine.portScope) cut to the world's
// ranks: a shared port's nominal scope (a node of a billion GPUs, --gpus-per-node) was
// walked rank by rank, and 64 GPUs never finished.
func (nw *network) scope(rank int, c LinkClass) (first, n int) {
	first, n = nw.m.portScope(rank, c)
	return first, max(min(n, nw.ranks-first), 0)
}

// gpuRanks is how many ranks of the world share rank's GPU: RanksPerGPU, or fewer on the
// last GPU of a world that does not fill it (ranks_per_gpu past the world's size).
func (nw *network) gpuRanks(rank int) int {
	first := nw.m.GPU(rank) * nw.m.RanksPerGPU
	return max(min(nw.m.RanksPerGPU, nw.ranks-first), 1)
}

// port is where a message from world rank a to b waits its turn: its link class and the
// port's owner (the first rank of the port's scope), with the port's bandwidth.
func (nw *network) port(a, b int) (portKey, float64) {
	c := nw.m.Class(a, b)
	first, _ := nw.m.portScope(a, c)
	return portKey{owner: first, class: c}, nw.m.Link(c).BandwidthGBs * 1e9
}

// p2pBandwidth is the bytes per second a message from world rank a to b on group g gets
// when the other ranks of its port's scope are not simulated: the port's bandwidth
// divided among the ranks of the scope that send on the same class in the same
// operation (each to the peer at the same offset in its group).
func (nw *network) p2pBandwidth(g *traceGroup, a, b int) (float64, LinkClass) {
	c := nw.m.Class(a, b)
	l := nw.m.Link(c)
	first, n := nw.scope(a, c)
	users := 1
	if n > 1 {
		ia, ib := g.index[a], g.index[b]
		off := ib - ia
		users = 0
		ms := nw.byPath[g.path]
		for x := first; x < first+n && x < len(ms); x++ {
			mo := ms[x]
			if mo.g == nil {
				continue
			}
			size := len(mo.g.members)
			peer := mo.g.members[((mo.index+off)%size+size)%size]
			if nw.m.Class(x, peer) == c {
				users++
			}
		}
		users = max(users, 1)
	}
	return l.BandwidthGBs * 1e9 / float64(users), c
}

// collective prices a collective of kind on group g with a send buffer of the given
// bytes per rank (the same on every member).
func (nw *network) collective(g *traceGroup, kind collKind, bytes int64) collCost {
	k := collKey{g, kind, bytes}
	if c, ok := nw.cache[k]; ok {
		return c
	}
	var c collCost
	n := len(g.members)
	switch {
	case n == 1:
	case kind == collBarrier:
		c = collCost{2 * float64(log2ceil(n)) * nw.maxLatency(g), nw.widestClass(g)}
	case nw.m.Collectives == CollDirect || kind == collAllToAll:
		c = nw.direct(g, kind, bytes)
	case kind == collAllReduce && nw.m.AllReduce == "tree":
		bw, cl := nw.ringBandwidth(g)
		c = collCost{2*float64(log2ceil(n))*nw.maxLatency(g) + 2*float64(bytes)/bw, cl}
	default:
		c = nw.ring(g, kind, bytes)
	}
	nw.cache[k] = c
	return c
}

// block is the bytes one rank sends to each other rank in a direct collective, and the
// chunk of one ring step.
func block(kind collKind, bytes int64, n int) float64 {
	switch kind {
	case collAllToAll, collReduceScatter:
		return float64(bytes) / float64(n)
	}
	return float64(bytes) // all-gather and direct all-reduce send the whole buffer
}

// direct is every member sending its block to every other (comm/local's collectives and
// NCCL's all-to-all): each port carries its scope's blocks of its class one after
// another, the classes in parallel; the last block lands a latency later. Each port's
// blocks are counted once (members of one scope share them), over the ranks of the world.
func (nw *network) direct(g *traceGroup, kind collKind, bytes int64) collCost {
	n := len(g.members)
	bs := block(kind, bytes, n)
	var worst collCost
	counted := map[portKey]bool{}
	for _, x := range g.members {
		for c := ClassLocal; c < numClasses; c++ {
			first, sn := nw.scope(x, c)
			if counted[portKey{owner: first, class: c}] {
				continue
			}
			counted[portKey{owner: first, class: c}] = true
			var blocks int
			for y := first; y < first+sn; y++ {
				blocks += nw.blocksOn(g.path, y, c)
			}
			if blocks == 0 {
				continue
			}
			l := nw.m.Link(c)
			t := float64(blocks)*bs/(l.BandwidthGBs*1e9) + l.LatencyUs*1e-6
			if t > worst.seconds {
				worst = collCost{t, c}
			}
		}
	}
	return worst
}

// blocksOn counts the blocks world rank y sends on class c in a direct collective on its
// group of the given path.
func (nw *network) blocksOn(path string, y int, c LinkClass) int {
	ms := nw.byPath[path]
	if y >= len(ms) || ms[y].g == nil {
		return 0
	}
	var k int
	for _, z := range ms[y].g.members {
		if nw.m.Class(y, z) == c {
			k++
		}
	}
	return k
}

// ring is NCCL's ring all-gather, reduce-scatter and all-reduce: n-1 steps (2(n-1) for
// all-reduce) each moving one chunk over every hop of the ring at once, so a step takes
// the slowest hop's time.
func (nw *network) ring(g *traceGroup, kind collKind, bytes int64) collCost {
	n := len(g.members)
	steps, chunk := n-1, block(kind, bytes, n)
	if kind == collAllReduce {
		steps, chunk = 2*(n-1), float64(bytes)/float64(n)
	}
	bw, c := nw.ringBandwidth(g)
	return collCost{float64(steps) * (nw.maxLatency(g) + chunk/bw), c}
}

// ringBandwidth is the bandwidth of a ring over g's members in group order, and the
// class of its slowest hop. NCCL runs one channel per NIC a node's members bring
// (rail-optimised: each member has its own), so the hops that leave a node share k x
// the NIC bandwidth when k members sit on it; a shared NIC is divided among the sibling
// groups that cross nodes through it. An intra-node hop has the member's NVLink port;
// a local hop the GPU's copy engine, divided among its ranks.
func (nw *network) ringBandwidth(g *traceGroup) (float64, LinkClass) {
	n := len(g.members)
	perNode := map[int]int{}
	for _, x := range g.members {
		perNode[nw.m.Node(x)]++
	}
	best, class := math.Inf(1), ClassSelf
	for i, x := range g.members {
		y := g.members[(i+1)%n]
		c := nw.m.Class(x, y)
		if c == ClassSelf {
			continue
		}
		l := nw.m.Link(c)
		bw := l.BandwidthGBs * 1e9
		switch {
		case c == ClassInter && !l.Shared:
			bw *= float64(min(perNode[nw.m.Node(x)], nw.m.GPUsPerNode))
			bw /= float64(nw.m.RanksPerGPU)
		case c == ClassInter:
			bw /= float64(nw.siblingsCrossing(g.path, nw.m.Node(x)))
		default:
			first, sn := nw.scope(x, c)
			bw /= float64(nw.usersOf(g.path, first, sn, c))
		}
		if bw < best {
			best, class = bw, c
		}
	}
	if math.IsInf(best, 1) {
		return 1, ClassSelf
	}
	return best, class
}

// usersOf counts the ranks of a port scope whose ring hop (to the next member of their
// group of path) is of class c.
func (nw *network) usersOf(path string, first, n int, c LinkClass) int {
	ms := nw.byPath[path]
	users := 0
	for x := first; x < first+n && x < len(ms); x++ {
		mo := ms[x]
		if mo.g == nil {
			continue
		}
		next := mo.g.members[(mo.index+1)%len(mo.g.members)]
		if nw.m.Class(x, next) == c {
			users++
		}
	}
	return max(users, 1)
}

// siblingsCrossing counts the groups of path with a member on node that span nodes.
func (nw *network) siblingsCrossing(path string, node int) int {
	ms := nw.byPath[path]
	per := nw.m.GPUsPerNode * nw.m.RanksPerGPU
	seen := map[*traceGroup]bool{}
	for x := node * per; x < (node+1)*per && x < len(ms); x++ {
		g := ms[x].g
		if g == nil || seen[g] {
			continue
		}
		for _, y := range g.members {
			if nw.m.Node(y) != node {
				seen[g] = true
				break
			}
		}
	}
	return max(len(seen), 1)
}

// maxLatency is the largest latency among the links g's members use.
func (nw *network) maxLatency(g *traceGroup) float64 {
	return nw.m.Link(nw.widestClass(g)).LatencyUs * 1e-6
}

// widestClass is the slowest class of link between g's members (inter > intra > local).
func (nw *network) widestClass(g *traceGroup) LinkClass {
	c := ClassSelf
	for _, x := range g.members[1:] {
		c = max(c, nw.m.Class(g.members[0], x))
	}
	return c
}

func log2ceil(n int) int {
	if n <= 1 {
		return 0
	}
	return bits.Len(uint(n - 1))
}

// maxCollectivesSeconds bounds the CPU time of one GPU count's NCCL table.
const maxCollectivesSeconds = 600

// CollectivesSeconds estimates the CPU time of WriteCollectives: four collectives at each
// doubling size from minBytes to maxBytes, each predicted over every pair of GPUs
// (measured: 2048 GPUs, 8:8G, 22 s on the 2-core build machine; 512 GPUs 1.4 s).
func CollectivesSeconds(gpus int, minBytes, maxBytes int64) float64 {
	sizes := 1
	for s := max(minBytes, 1); s < maxBytes; s *= 2 {
		sizes++
	}
	n := float64(gpus)
	return 4 * float64(sizes) * 5e-8 * n * n
}

// CheckCollectives refuses a table WriteCollectives cannot print: fewer than 2 GPUs, or
// more than maxCollectivesSeconds of work (CollectivesSeconds: 100000 GPUs ran for
// hours with nothing said).
func CheckCollectives(gpus int, minBytes, maxBytes int64) error {
	if gpus < 2 {
		return fmt.Errorf("collectives need at least 2 GPUs (--gpus)")
	}
	if t := CollectivesSeconds(gpus, minBytes, maxBytes); t > maxCollectivesSeconds {
		return fmt.Errorf("predicting the collectives on %d GPUs would take about %.1f minutes (the limit is %d; the time grows as the square of the GPUs): use fewer --gpus or --nccl-sizes",
			gpus, t/60, maxCollectivesSeconds/60)
	}
	return nil
}

// WriteCollectives prints what the model predicts for NCCL's collectives on the first
// gpus GPUs of m, in the columns of nccl-tests (all_gather_perf, reduce_scatter_perf,
// alltoall_perf, all_reduce_perf with -g 1 per process), so a run of those tests on the
// machine checks the network model: at large sizes busbw should approach the measured
// bus bandwidth, at small ones time is the latency terms.
func WriteCollectives(w io.Writer, m Machine, gpus int, minBytes, maxBytes int64) error {
	if err := CheckCollectives(gpus, minBytes, maxBytes); err != nil {
		return err
	}
	m.RanksPerGPU = 1
	tw := newTraceWorld(gpus)
	nw := newNetwork(m, tw)
	var b strings.Builder
	fmt.Fprintf(&b, "# longca simulate: predicted NCCL collectives on %d GPUs of %s (%d per node)\n", gpus, m.Name, m.GPUsPerNode)
	fmt.Fprintf(&b, "# intra %.0f GB/s %.1f us%s, inter %.0f GB/s %.1f us%s; all-reduce %s\n", m.Intra.BandwidthGBs, m.Intra.LatencyUs, sharedWord(m.Intra),
		m.Inter.BandwidthGBs, m.Inter.LatencyUs, sharedWord(m.Inter), orDefault(m.AllReduce, "ring"))
	ops := []struct {
		name string
		kind collKind
		bus  float64 // busbw = algbw x bus
	}{
		{"all_gather", collAllGather, float64(gpus-1) / float64(gpus)},
		{"reduce_scatter", collReduceScatter, float64(gpus-1) / float64(gpus)},
		{"alltoall", collAllToAll, float64(gpus-1) / float64(gpus)},
		{"all_reduce", collAllReduce, 2 * float64(gpus-1) / float64(gpus)},
	}
	for _, op := range ops {
		fmt.Fprintf(&b, "#\n# %s_perf\n#%12s %12s %6s %10s %9s %9s\n#%12s %12s %6s %10s %9s %9s\n", op.name,
			"size", "count", "type", "time", "algbw", "busbw", "(B)", "(elements)", "", "(us)", "(GB/s)", "(GB/s)")
		for size := minBytes; size <= maxBytes; size *= 2 {
			// nccl-tests' size: all-gather the output (gpus x the send), the others the
			// send buffer (all-reduce: the buffer).
			send := size
			if op.kind == collAllGather {
				send = size / int64(gpus)
			}
			if send < 4 {
				continue
			}
			t := nw.collective(tw.root, op.kind, send).seconds
			alg := float64(size) / t / 1e9
			fmt.Fprintf(&b, " %12d %12d %6s %10.2f %9.2f %9.2f\n", size, size/4, "float", t*1e6, alg, alg*op.bus)
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func sharedWord(l Link) string {
	if l.Shared {
		return " shared"
	}
	return ""
}

func orDefault(s, d string) string {
	if s == "" {
		return d
	}
	return s
}
