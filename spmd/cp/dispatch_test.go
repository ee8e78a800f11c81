package cp

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/longca/longca/comm"
	"github.com/longca/longca/comm/local"
	"github.com/longca/longca/kernels"
	"github.com/longca/longca/kernels/check"
	"github.com/longca/longca/kernels/ref"
	"github.com/longca/longca/mask"
	"github.com/longca/longca/tensor"
)

// cpMask builds a CP benchmark mask of seq tokens as longca cp does.
func cpMask(t testing.TB, name string, seq int, seed uint64) mask.Mask {
	t.Helper()
	spec, err := mask.Build(name, seq, mask.Options{Seed: seed, Purpose: mask.PurposeCP})
	if err != nil {
		t.Fatal(err)
	}
	return spec.Mask
}

// TestDispatchBalancesArea: on the CP masks at 8 and 64 ranks (8K tokens each, blocks of
// 512) every rank holds the same number of blocks, every block exactly one rank, and no
// rank's area exceeds the mean by more than DispatchTolerance; the areas add up to the
// mask's.
func TestDispatchBalancesArea(t *testing.T) {
	for _, n := range []int{8, 64} {
		for _, name := range mask.CPMasks() {
			m := cpMask(t, name, n*8192, 3)
			d, err := Balance(m, n, 512, 0)
			if err != nil {
				t.Fatal(err)
			}
			seen := make([]int, len(d.Owner))
			var sum int64
			for r, bs := range d.Blocks {
				if len(bs) != d.PerRank {
					t.Fatalf("%s n%d: rank %d holds %d blocks, want %d", name, n, r, len(bs), d.PerRank)
				}
				for _, b := range bs {
					seen[b]++
				}
				sum += d.Area[r]
			}
			for b, c := range seen {
				if c != 1 {
					t.Fatalf("%s n%d: block %d held %d times", name, n, b, c)
				}
			}
			if sum != m.Area() {
				t.Fatalf("%s n%d: ranks' areas add to %d, the mask's is %d", name, n, sum, m.Area())
			}
			// The areas are the mask's in each rank's rows, recomputed here.
			for r, bs := range d.Blocks {
				var a int64
				for _, b := range bs {
					a += m.Window(d.blockRange(int(b)), mask.Range{Start: 0, End: m.SeqK}).Area()
				}
				if a != d.Area[r] {
					t.Fatalf("%s n%d: rank %d's area is %d, the dispatch says %d", name, n, r, a, d.Area[r])
				}
			}
			if im := d.Imbalance(); im > DispatchTolerance {
				t.Fatalf("%s n%d: imbalance %.4f over the tolerance %.2f", name, n, im, DispatchTolerance)
			}
			fetched := 0
			for _, f := range d.Fetched {
				fetched += f
			}
			t.Logf("%-22s n%-3d imbalance %.4f  stages %d window %d  fetched blocks per rank %.1f of %d", name, n, d.Imbalance(), d.NumStages(), d.Window, float64(fetched)/float64(n), len(d.Owner))
		}
	}
}

// TestDispatchFetchesExactlyWhatIsNeeded: on small masks of every kind, a rank receives a
// block exactly when some row of its blocks attends to some key of it (brute force over
// the pairs), once, and every receive has its send.
func TestDispatchFetchesExactlyWhatIsNeeded(t *testing.T) {
	const seq = 256
	for mi, name := range mask.Names() {
		spec, err := mask.Build(name, seq, testMaskOptions(uint64(1+mi)))
		if err != nil {
			t.Fatal(err)
		}
		m := spec.Mask
		for _, c := range [][2]int{{2, 16}, {4, 8}, {8, 4}, {3, 7}} {
			n, blk := c[0], c[1]
			d, err := Balance(m, n, blk, 0)
			if err != nil {
				t.Fatal(err)
			}
			for r := range n {
				want := map[int]bool{}
				for _, qb := range d.Blocks[r] {
					rows := d.blockRange(int(qb))
					for q := rows.Start; q < rows.End; q++ {
						for k := range seq {
							if kb := k / blk; int(d.Owner[kb]) != r && m.Allowed(q, k) {
								want[kb] = true
							}
						}
					}
				}
				got := map[int]bool{}
				for s := range d.NumStages() {
					st := d.RecvStage(r, s)
					at := 0
					for _, x := range st.Recv {
						if int(x.At) != at {
							t.Fatalf("%s n%d b%d rank %d stage %d: a receive at block %d, want %d (packed)", name, n, blk, r, s, x.At, at)
						}
						at += int(x.N)
						for i := range int(x.N) {
							kb := int(d.Blocks[x.Peer][int(x.Slot)+i])
							if got[kb] {
								t.Fatalf("%s n%d b%d rank %d: block %d received twice", name, n, blk, r, kb)
							}
							got[kb] = true
						}
						if !slices.Contains(d.Sends(int(x.Peer), s), Xfer{Peer: int32(r), Slot: x.Slot, N: x.N, At: x.At}) {
							t.Fatalf("%s n%d b%d: rank %d receives %v in stage %d that rank %d never sends", name, n, blk, r, x, s, x.Peer)
						}
					}
					if at != st.Slots {
						t.Fatalf("%s n%d b%d rank %d stage %d: %d blocks received into %d", name, n, blk, r, s, at, st.Slots)
					}
				}
				if fmt.Sprint(sortedKeys(got)) != fmt.Sprint(sortedKeys(want)) {
					t.Fatalf("%s n%d b%d rank %d: fetches blocks %v, attends to %v", name, n, blk, r, sortedKeys(got), sortedKeys(want))
				}
				if d.Fetched[r] != len(got) {
					t.Fatalf("%s n%d b%d rank %d: Fetched %d, received %d", name, n, blk, r, d.Fetched[r], len(got))
				}
			}
		}
	}
}

func sortedKeys(m map[int]bool) []int {
	out := make([]int, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// TestDispatchCausalIsZigzagLike: on one causal document the dispatch gives every rank
// blocks from both ends (as zigzag sharding does), so the areas balance.
func TestDispatchCausalIsZigzagLike(t *testing.T) {
	m := cpMask(t, "causal", 8*8192, 1)
	d, err := Balance(m, 8, 512, 0)
	if err != nil {
		t.Fatal(err)
	}
	half := len(d.Owner) / 2
	for r, bs := range d.Blocks {
		if int(bs[0]) >= half || int(bs[len(bs)-1]) < half {
			t.Fatalf("rank %d holds blocks %v: not from both halves", r, bs)
		}
	}
	if im := d.Imbalance(); im > DispatchTolerance {
		t.Fatalf("imbalance %.4f", im)
	}
}

// TestDispatchSolverTime prints the dispatch's time at 1M tokens on 1024 ranks (the
// figures in docs/cp-gpu.md): the blocks' areas and keys from the slices, the placement,
// and the transfer plan (which blocks every rank fetches from whom, in which stage). It
// fails past ten seconds in all: a bound for a loaded machine that still catches a
// quadratic turn (the figures are in the log).
func TestDispatchSolverTime(t *testing.T) {
	if testing.Short() {
		t.Skip("builds 1M-token masks")
	}
	// 1024 ranks of the dispatch alone, and the 128 nodes of 8 it places blocks on at 1024
	// GPUs past one node (BalancedUlysses).
	for _, c := range []struct {
		name  string
		ranks int
	}{{"full", 1024}, {"causal", 1024}, {"full_document_long", 1024}, {"causal_document_long", 1024}, {"full_document_long", 128}, {"causal_document_long", 128}} {
		name := c.name
		m := cpMask(t, name, 1<<20, 5)
		t0 := time.Now()
		d, needs := newDispatch(m, c.ranks, DefaultBlock(1<<20, c.ranks, 1))
		d.stages = DefaultStages(1024, 0)
		t1 := time.Now()
		d.assign(needs)
		t2 := time.Now()
		d.plan(needs)
		t3 := time.Now()
		xfers := 0
		for r := range d.Ranks {
			for s := range d.NumStages() {
				xfers += len(d.RecvStage(r, s).Recv)
			}
		}
		t.Logf("%-22s 1M tokens, %4d ranks, block %d: needs %v, placement %v, transfer plan %v (%d transfers); imbalance %.4f, %d stages",
			name, c.ranks, d.Block, t1.Sub(t0).Round(time.Millisecond), t2.Sub(t1).Round(time.Millisecond), t3.Sub(t2).Round(time.Millisecond), xfers, d.Imbalance(), d.NumStages())
		if el := t3.Sub(t0); el > 10*time.Second {
			t.Fatalf("%s: the dispatch took %v", name, el)
		}
	}
}

// BenchmarkDispatch1M1024 is the dispatch of causal_document_long at 1M tokens on 1024
// ranks (go test -bench Dispatch ./spmd/cp/).
func BenchmarkDispatch1M1024(b *testing.B) {
	m := cpMask(b, "causal_document_long", 1<<20, 5)
	blk := DefaultBlock(1<<20, 1024, 1)
	b.ResetTimer()
	for range b.N {
		if _, err := Balance(m, 1024, blk, 0); err != nil {
			b.Fatal(err)
		}
	}
}

// TestBalancedBufferBytes: the device memory balanced's buffers take on the emulated
// device (its peak, less the pass's inputs and outputs) is what BufferBytes estimates
// before the run, within a fifth, never more, on the dispatch alone and on U x B meshes
// (--cp-ulysses); and the bound for the memory guard is at least that.
func TestBalancedBufferBytes(t *testing.T) {
	m, _ := New("balanced")
	for _, name := range mask.CPMasks() {
		for _, c := range [][3]int{{4, 0, 1}, {8, 0, 1}, {8, 3, 1}, {4, 2, 1}, {4, 0, 2}, {8, 0, 2}, {8, 0, 4}, {8, 0, 8}, {8, 2, 2}, {8, 0, 0}} {
			n, stages, u := c[0], c[1], c[2]
			spec, err := mask.Build(name, n*64, testMaskOptions(3))
			if err != nil {
				t.Fatal(err)
			}
			p := kernels.Problem{HeadsQ: 8, HeadsKV: 2, HeadDim: 16, DType: tensor.BF16, Mask: spec.Mask}
			pl, err := m.Plan(Config{Ranks: n, Stages: stages, Ulysses: u}, p)
			if err != nil {
				t.Fatal(err)
			}
			got := balancedBufferPeak(t, m, pl, p, 11, false)
			want := Balanced{}.BufferBytes(pl, kernels.FwdBwd)
			if got > want || float64(got) < 0.8*float64(want) {
				t.Fatalf("%s n%d %s (%d stages): buffers took %d bytes at the peak, BufferBytes says %d", name, n, pl.Config.Mesh(), pl.Config.Stages, got, want)
			}
			passes := []kernels.Pass{kernels.Fwd, kernels.Bwd}
			if bound := MethodBufferBound(nil, pl.Tokens, n, 8, 2, 16, tensor.BF16, passes, stages, false); bound < float64(want) {
				t.Fatalf("%s n%d: the guard's bound %g is below the plan's %d", name, n, bound, want)
			}
			if b := MethodBufferBound([]string{"ring-p2p", "ulysses"}, pl.Tokens, n, 8, 2, 16, tensor.BF16, passes, 0, false); b != 0 {
				t.Fatalf("the guard's bound without balanced is %g, want 0 (the generic estimate)", b)
			}
		}
	}
}

// balancedBufferPeak runs balanced's forward and backward on the emulated device on the
// plan's ranks and returns the largest rank's device peak less the pass's inputs and
// outputs, which hold all the heads (a Ulysses group splits them inside the method):
// what balanced's own buffers took. keep keeps the runs tables for the run, as on a GPU.
func balancedBufferPeak(t *testing.T, m Method, pl *Plan, p kernels.Problem, seed uint64, keep bool) int64 {
	t.Helper()
	q, k, v, dout := inputs(p, seed)
	peaks := make([]int64, pl.Config.Ranks)
	err := local.Run(pl.Config.Ranks, func(c comm.Comm) error {
		f := newFakePrims(newEmulator())
		r, err := NewRun(pl, queuedKernel{ref.New(ref.Options{}), f}, c)
		if err != nil {
			return err
		}
		defer r.Close()
		ops := deviceOps{p: f, part: tensor.FP32}
		if keep {
			ops.tables = &runTables{}
		}
		r.ops = ops
		if _, err := Execute(context.Background(), m, r, q, k, v, dout, true); err != nil {
			return err
		}
		peaks[c.Rank()] = f.peak
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	qb := int64(pl.Tokens * p.HeadsQ * p.HeadDim * p.DType.Size())
	kvb := int64(pl.Tokens * p.HeadsKV * p.HeadDim * p.DType.Size())
	io := 4*qb + 4*kvb + int64(p.HeadsQ*pl.Tokens*4) // q, out, dout, dq; k, v, dk, dv; lse
	return slices.Max(peaks) - io
}

// TestBalancedStagesMatchReference: balanced's staged path (fetches in flight in a
// window, partials merged, gradients returned a stage behind) on every mask, with 2 and 3
// stages and the pyramid at 16 ranks, forward and backward against the single-device
// reference, each rank's bytes as RankCommBytesOf says. (The table of
// TestMethodsMatchReference runs the default, one stage, up to 8 ranks.)
func TestBalancedStagesMatchReference(t *testing.T) {
	m, _ := New("balanced")
	var cache refCache
	staged, cases := 0, 0
	defer func() {
		// Most cases must really be staged (a small fetch may take one stage).
		if !t.Failed() && 2*staged < cases {
			t.Fatalf("only %d of %d cases ran more than one stage", staged, cases)
		}
	}()
	for mi, name := range mask.Names() {
		spec, err := mask.Build(name, testSeq, testMaskOptions(uint64(1+mi)))
		if err != nil {
			t.Fatal(err)
		}
		p := kernels.Problem{HeadsQ: 4, HeadsKV: 2, HeadDim: 16, DType: tensor.BF16, Mask: spec.Mask}
		for ci, c := range [][2]int{{4, 2}, {8, 3}, {16, 0}} {
			t.Run(fmt.Sprintf("%s/n%d-s%d", name, c[0], c[1]), func(t *testing.T) {
				cfg := Config{Ranks: c[0], Stages: c[1]}
				if c[0] <= 8 { // the dispatch alone (U = 1), as --cp-ulysses 1: the staged path at every rank
					cfg.Ulysses = 1
				}
				pl, err := m.Plan(cfg, p)
				if err != nil {
					t.Fatal(err)
				}
				cases++
				if pl.Config.Stages > 1 {
					staged++
				}
				q, k, v, dout := inputs(p, uint64(100*mi+ci))
				exact, naive := cache.get(t, fmt.Sprint(mi, ci), p, q, k, v, dout)
				got, counted := runCase(t, m, pl, q, k, v, dout)
				if rep := check.CompareOutputs(got, exact, naive, kernels.FwdBwd); !rep.Pass {
					t.Fatalf("%d stages: %s", pl.Config.Stages, rep)
				}
				for r, cb := range counted {
					if fwd, bwd := RankCommBytesOf(pl, r, kernels.Fwd), RankCommBytesOf(pl, r, kernels.Bwd); cb != [2]int64{fwd, bwd} {
						t.Fatalf("rank %d sent %v; RankCommBytesOf says %d, %d", r, cb, fwd, bwd)
					}
				}
			})
		}
	}
}

// TestDefaultBlock: the largest power of two giving every dispatch unit 8 blocks, capped at
// 512 tokens times the ranks that split the heads (the mesh's U).
func TestDefaultBlock(t *testing.T) {
	for _, c := range []struct{ seq, units, u, want int }{
		{64 << 10, 8, 1, 512},     // 8 ranks, the dispatch alone (8K tokens a rank)
		{64 << 10, 1, 8, 4096},    // 8 ranks, all heads split: one unit of 64K tokens
		{64 << 10, 4, 2, 1024},    // the mesh 2x4
		{512 << 10, 8, 8, 4096},   // 64 GPUs, 8x8
		{4096 << 10, 64, 8, 4096}, // 512 GPUs, 8x64
		{2048, 8, 1, 32},          // short sequences: 8 blocks a unit
		{6000, 8, 1, 64},          // not a power of two: 750 tokens a unit, 93 -> 64
		{5, 8, 1, 1},              // fewer tokens than units
		{6 * 65536, 2, 3, 1024},   // U = 3 (24 KV heads on 6 ranks): 512·2, a power of two
		{6 * 65536, 1, 6, 2048},   // U = 6: 512·4
	} {
		if got := DefaultBlock(c.seq, c.units, c.u); got != c.want {
			t.Errorf("DefaultBlock(%d, %d, %d) = %d, want %d", c.seq, c.units, c.u, got, c.want)
		}
	}
}
