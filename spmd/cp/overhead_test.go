package cp

import (
	"context"
	"fmt"
	"maps"
	"sync"
	"testing"

	"github.com/longca/longca/comm"
	"github.com/longca/longca/comm/local"
	"github.com/longca/longca/kernels"
	"github.com/longca/longca/kernels/check"
	"github.com/longca/longca/kernels/ref"
	"github.com/longca/longca/mask"
	"github.com/longca/longca/tensor"
)

// passCalls runs m's Forward and then its Backward twice on the emulated device (eager)
// on every rank of pl, as the harness times them: the inputs uploaded once, a warm-up
// pass, then the counted one. It returns each rank's device calls (fakePrims.calls) of
// the counted forward and of the counted backward.
func passCalls(t *testing.T, m Method, pl *Plan, q, k, v, dout *tensor.Host) (fwd, bwd []map[string]int) {
	t.Helper()
	n := pl.Config.Ranks
	fwd, bwd = make([]map[string]int, n), make([]map[string]int, n)
	var mu sync.Mutex
	err := local.Run(n, func(c comm.Comm) error {
		f := newFakePrims(nil)
		r, err := NewRun(pl, queuedKernel{ref.New(ref.Options{}), f}, c)
		if err != nil {
			return err
		}
		defer r.Close()
		r.ops = deviceOps{p: f}
		rank := c.Rank()
		hs := []*tensor.Host{pl.Shard(q, rank), pl.Shard(k, rank), pl.Shard(v, rank), pl.Shard(dout, rank)}
		qs := hs[0].Shape()
		hs = append(hs, tensor.NewHost(pl.Problem.DType, qs...), tensor.NewHost(tensor.FP32, pl.Problem.HeadsQ, pl.Tokens),
			tensor.NewHost(pl.Problem.DType, qs...), tensor.NewHost(pl.Problem.DType, hs[1].Shape()...), tensor.NewHost(pl.Problem.DType, hs[1].Shape()...))
		ts := make([]tensor.Tensor, len(hs))
		for i, h := range hs {
			if ts[i], err = r.Upload(h); err != nil {
				return err
			}
		}
		defer r.Free(ts...)
		ctx := context.Background()
		var fc, bc map[string]int
		for range 2 {
			f.takeCalls()
			if err := m.Forward(ctx, r, ts[0], ts[1], ts[2], ts[4], ts[5]); err != nil {
				return err
			}
			fc = f.takeCalls()
			if err := m.Backward(ctx, r, ts[0], ts[1], ts[2], ts[4], ts[5], ts[3], ts[6], ts[7], ts[8]); err != nil {
				return err
			}
			bc = f.takeCalls()
		}
		mu.Lock()
		fwd[rank], bwd[rank] = fc, bc
		mu.Unlock()
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return fwd, bwd
}

// TestOneRankIsTheKernel is the regression guard of the engine's fixed overhead (the
// one-rank NCCL runs reached 0.60-0.85 of the kernel alone in the forward: partial
// buffers, accumulators and their zero fills, a merge and two conversions around the one
// kernel call; docs/cp-gpu.md "Engine overhead at one rank"). On one rank every method,
// on every CP mask, must ask the device for exactly what the kernel alone does: one
// forward call in a forward, one backward call in a backward, and nothing else (no
// allocation, fill, merge, conversion, accumulation, copy, sync or event), and still
// give the reference's results.
func TestOneRankIsTheKernel(t *testing.T) {
	var cache refCache
	for mi, maskName := range mask.CPMasks() {
		spec, err := mask.Build(maskName, testSeq, testMaskOptions(uint64(7+mi)))
		if err != nil {
			t.Fatal(err)
		}
		docs, err := spec.Docs()
		if err != nil {
			t.Fatal(err)
		}
		p := kernels.Problem{HeadsQ: 8, HeadsKV: 2, HeadDim: 16, DType: tensor.BF16, Mask: spec.Mask}
		q, k, v, dout := inputs(p, uint64(9000+mi))
		for _, name := range Names() {
			m, _ := New(name)
			for _, cfg := range m.Meshes(Config{Ranks: 1, Docs: docs}) {
				t.Run(fmt.Sprintf("%s/%s", maskName, name), func(t *testing.T) {
					pl, err := m.Plan(cfg, p)
					if err != nil {
						t.Fatal(err)
					}
					fwd, bwd := passCalls(t, m, pl, q, k, v, dout)
					if want := map[string]int{"forward": 1}; !maps.Equal(fwd[0], want) {
						t.Errorf("forward asked the device for %v; the kernel alone asks %v", fwd[0], want)
					}
					if want := map[string]int{"backward": 1}; !maps.Equal(bwd[0], want) {
						t.Errorf("backward asked the device for %v; the kernel alone asks %v", bwd[0], want)
					}
					exact, naive := cache.get(t, fmt.Sprint(mi), p, q, k, v, dout)
					got, _, leaked, _ := runFakeDevice(t, m, pl, tensor.BF16, eager, q, k, v, dout)
					if rep := check.CompareOutputs(got, exact, naive, kernels.FwdBwd); !rep.Pass {
						t.Errorf("one rank on the device path: %s", rep)
					}
					if leaked[0] != 0 {
						t.Errorf("%d device bytes still allocated after the run", leaked[0])
					}
				})
			}
		}
	}
}

// TestRingCallCounts pins what ring-p2p asks of the device per pass on 4 ranks with a
// contiguous causal mask, where rank r has r+1 steps with keys: a rank with one such
// step (rank 0) lets the kernel write out, lse and dq itself (no merge); the others
// have the kernel write their first partial straight into out (and dq), merge (add) the
// rest, the last straight into out and lse (dq): live-1 merges and live-1 adds, no
// conversion of out, lse or dq, no zero fill anywhere. On the full mask every rank has 4
// steps. The bytes the helpers move (fakePrims.moved) are pinned too: per element of out
// (E = tokens x heads x dim, bf16 out and partials, fp32 accumulator) 6E for live = 2
// (one merge in place in out) and 8E + 10E(live-3) + 8E for more, where the fp32
// accumulator and conversions moved 6E + 10E(live-1) + 6E; plus 12 bytes a row per merge
// for the lse (two read, one written). Ulysses (a ring of one) calls the kernel once per
// pass, with no merge, no accumulation and no fill around it.
func TestRingCallCounts(t *testing.T) {
	for _, maskName := range []string{"causal", "full"} {
		spec, err := mask.Build(maskName, testSeq, testMaskOptions(3))
		if err != nil {
			t.Fatal(err)
		}
		p := kernels.Problem{HeadsQ: 8, HeadsKV: 4, HeadDim: 16, DType: tensor.BF16, Mask: spec.Mask}
		q, k, v, dout := inputs(p, 77)
		t.Run(maskName+"/ring-p2p", func(t *testing.T) {
			m, _ := New("ring-p2p")
			pl, err := m.Plan(Config{Ranks: 4, Sharding: Contiguous}, p)
			if err != nil {
				t.Fatal(err)
			}
			fwd, bwd := passCalls(t, m, pl, q, k, v, dout)
			rows := pl.Layout.Local * p.HeadsQ
			e := rows * p.HeadDim
			kv := pl.Layout.Local * p.HeadsKV * p.HeadDim
			for r := range 4 {
				live := 4
				if maskName == "causal" {
					live = r + 1
				}
				wantF := map[string]int{"forward": live}
				// dk, dv: the first partial copied in (bf16 to fp32), live-1 added, converted
				// at the end (fp32 to bf16): 2 x (6 + 10(live-1) + 6) bytes an element.
				wantB := map[string]int{"backward": live, "convert": 4, "accumulate": 2 * (live - 1)}
				bytesF, bytesB := 0, 2*kv*(12+10*(live-1))
				if live > 1 {
					wantF["merge"] = live - 1
					wantB["add"] = live - 1
					perE := 6
					if live > 2 {
						perE = 16 + 10*(live-3)
					}
					bytesF = perE*e + 12*rows*(live-1)
					bytesB += perE * e
				}
				wantF["helper-bytes"], wantB["helper-bytes"] = bytesF, bytesB
				for name, want := range wantF {
					if got := fwd[r][name]; got != want {
						t.Errorf("rank %d forward: %d %s, want %d (all: %v)", r, got, name, want, fwd[r])
					}
				}
				for name, want := range wantB {
					if got := bwd[r][name]; got != want {
						t.Errorf("rank %d backward: %d %s, want %d (all: %v)", r, got, name, want, bwd[r])
					}
				}
				for _, c := range []map[string]int{fwd[r], bwd[r]} {
					if c["fill"] != 0 || c["sync"] != 0 {
						t.Errorf("rank %d: %d fills and %d syncs in a pass, want none (all: %v)", r, c["fill"], c["sync"], c)
					}
				}
				if fwd[r]["convert"] != 0 {
					t.Errorf("rank %d converted in the forward: %v", r, fwd[r])
				}
			}
		})
		t.Run(maskName+"/ulysses", func(t *testing.T) {
			m, _ := New("ulysses")
			pl, err := m.Plan(Config{Ranks: 4}, p)
			if err != nil {
				t.Fatal(err)
			}
			fwd, bwd := passCalls(t, m, pl, q, k, v, dout)
			for r := range 4 {
				if fwd[r]["forward"] != 1 || fwd[r]["merge"] != 0 || fwd[r]["fill"] != 0 {
					t.Errorf("rank %d forward: %v; want one kernel call, no merge, no fill", r, fwd[r])
				}
				if bwd[r]["backward"] != 1 || bwd[r]["accumulate"] != 0 || bwd[r]["fill"] != 0 {
					t.Errorf("rank %d backward: %v; want one kernel call, no accumulation, no fill", r, bwd[r])
				}
			}
		})
	}
}
