package cp

import (
	"fmt"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/longca/longca/kernels"
	"github.com/longca/longca/kernels/check"
	"github.com/longca/longca/mask"
	"github.com/longca/longca/tensor"
)

// TestBalancedMeshesMatchReference: balanced on every U x B split the user can name
// (--cp-ulysses), on every mask, at 2, 4 and 8 ranks, with the KV heads split (8:8) and
// replicated (8:2 past U = 2), one stage and, at 8 ranks, staged; forward and backward
// against the single-device reference on the host and on the emulated device (the GPU
// path: conversions, returns, all-to-alls); each rank's bytes as RankCommBytesOf says,
// no device memory left behind, and the plan records the mesh it ran.
func TestBalancedMeshesMatchReference(t *testing.T) {
	m, _ := New("balanced")
	var cache refCache
	type split struct{ n, u, stages int }
	splits := []split{{2, 2, 0}, {4, 1, 0}, {4, 2, 0}, {4, 4, 0}, {8, 1, 0}, {8, 2, 0}, {8, 4, 0}, {8, 8, 0}, {8, 2, 2}}
	for mi, name := range mask.Names() {
		spec, err := mask.Build(name, testSeq, testMaskOptions(uint64(1+mi)))
		if err != nil {
			t.Fatal(err)
		}
		for hi, h := range [][2]int{{8, 2}, {8, 8}} {
			p := kernels.Problem{HeadsQ: h[0], HeadsKV: h[1], HeadDim: 16, DType: tensor.BF16, Mask: spec.Mask}
			for _, s := range splits {
				if hi == 1 && s.n != 8 { // MHA on the 8-rank splits only, to keep the table fast
					continue
				}
				t.Run(fmt.Sprintf("%s/%d:%d/n%d-u%d-s%d", name, h[0], h[1], s.n, s.u, s.stages), func(t *testing.T) {
					pl, err := m.Plan(Config{Ranks: s.n, Ulysses: s.u, Stages: s.stages}, p)
					if err != nil {
						t.Fatal(err)
					}
					if c := pl.Config; c.Ulysses != s.u || c.Ring != s.n/s.u || pl.HeadsQ != h[0]/s.u {
						t.Fatalf("plan mesh %dx%d, %d query heads a rank; asked for %dx%d", c.Ulysses, c.Ring, pl.HeadsQ, s.u, s.n/s.u)
					}
					q, k, v, dout := inputs(p, uint64(500*mi+10*hi)) // one reference per (mask, heads)
					exact, naive := cache.get(t, fmt.Sprint(mi, hi), p, q, k, v, dout)
					got, counted := runCase(t, m, pl, q, k, v, dout)
					if rep := check.CompareOutputs(got, exact, naive, kernels.FwdBwd); !rep.Pass {
						t.Fatalf("host: %s", rep)
					}
					for r, c := range counted {
						if fwd, bwd := RankCommBytesOf(pl, r, kernels.Fwd), RankCommBytesOf(pl, r, kernels.Bwd); c != [2]int64{fwd, bwd} {
							t.Fatalf("rank %d sent %v; RankCommBytesOf says %d, %d", r, c, fwd, bwd)
						}
					}
					// The device path: fp32 partials by the rule; bf16 partials (kernels/cuda's)
					// on the CP masks within 1.1x the tolerance, as TestDeviceOpsBF16Partials
					// bounds them (each rounding of a rank's dK/dV partial costs precision).
					parts := []tensor.DType{tensor.FP32}
					if slices.Contains(mask.CPMasks(), name) {
						parts = append(parts, tensor.BF16)
					}
					for _, part := range parts {
						dgot, dcounted, leaked, _ := runFakeDevice(t, m, pl, part, eager, q, k, v, dout)
						limit := map[tensor.DType]float64{tensor.FP32: 1, tensor.BF16: 1.1}[part]
						rep := check.CompareOutputs(dgot, exact, naive, kernels.FwdBwd)
						for _, f := range rep.Figures {
							if f.NaNs > 0 || !(f.Err <= limit*f.Tol) {
								t.Fatalf("emulated device, %s partials: %s error %.3g is %.3fx its tolerance (limit %.1fx); %s", part, f.Name, f.Err, f.Err/f.Tol, limit, rep)
							}
						}
						for r := range dcounted {
							if want := RankCommBytesOf(pl, r, kernels.FwdBwd); dcounted[r] != want {
								t.Fatalf("device rank %d sent %d; RankCommBytesOf says %d", r, dcounted[r], want)
							}
							if leaked[r] != 0 {
								t.Fatalf("device rank %d left %d bytes allocated", r, leaked[r])
							}
						}
					}
				})
			}
		}
	}
}

// TestBalancedMeshes: --cp-ulysses gives one mesh per named degree (repeats dropped),
// none gives one the plan chooses; the 2-D methods' --ulysses does not reach balanced;
// a degree that does not divide the ranks or the heads is refused naming the flag.
func TestBalancedMeshes(t *testing.T) {
	m := Balanced{}
	cs := m.Meshes(Config{Ranks: 8, Ulysses: 2, Ring: 4, Splits: []int{1, 8, 1, 0}})
	var us []int
	for _, c := range cs {
		if c.Ring != 0 || c.Splits != nil {
			t.Fatalf("mesh %+v: ring and splits must be left to the plan", c)
		}
		us = append(us, c.Ulysses)
	}
	if fmt.Sprint(us) != "[1 8 0]" {
		t.Fatalf("--cp-ulysses 1,8,1,0 gave meshes with U %v, want [1 8 0]", us)
	}
	if cs := m.Meshes(Config{Ranks: 8, Ulysses: 2, Ring: 4}); len(cs) != 1 || cs[0].Ulysses != 0 {
		t.Fatalf("no --cp-ulysses (usp's --ulysses 2 given): %+v, want one mesh chosen by the plan", cs)
	}
	p := kernels.Problem{HeadsQ: 12, HeadsKV: 4, HeadDim: 16, DType: tensor.BF16, Mask: cpMask(t, "causal", 1024, 1)}
	for _, c := range []struct {
		n, u int
		want string
	}{{8, 3, "does not divide 8 ranks"}, {8, 8, "does not split 12 query heads"}, {6, 3, "neither splits 4 KV heads"}, {4, -1, "--cp-ulysses -1"}} {
		_, err := m.Plan(Config{Ranks: c.n, Ulysses: c.u}, p)
		if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "--cp-ulysses") {
			t.Fatalf("%d ranks, U %d: %v; want an error saying %q and naming the flag", c.n, c.u, err, c.want)
		}
	}
}

// TestBalancedMeshChoice: with no degree named, up to 8 ranks the plan takes the split
// of least predicted time (DefaultMeshModel), U = 1 unless another gains more than Gain,
// and records it; every candidate is a split of the heads. At the published setting (8
// ranks, 8K tokens, 64:8, d 128) the model's choice is the measured best of the 16:31
// round within 1% (TestMeshModelMeasured): Ulysses inside (8x1) on full,
// full_document_long (where the kernel pays for 8 KV-head groups a call on full area)
// and causal (where the dispatch alone fetches most), the dispatch alone (1x8) on
// causal_document_long (where it fetches least). Past 8 ranks it is BalancedUlysses.
func TestBalancedMeshChoice(t *testing.T) {
	want := map[string]int{"full": 8, "causal": 8, "full_document_long": 8, "causal_document_long": 1}
	for _, name := range mask.CPMasks() {
		p := kernels.Problem{HeadsQ: 64, HeadsKV: 8, HeadDim: 128, DType: tensor.BF16, Mask: cpMask(t, name, 8*8192, 42)}
		u, d, costs, err := BalancedMeshChoice(p, 8, 0, 0)
		if err != nil {
			t.Fatal(err)
		}
		if len(costs) != 4 || d.Ranks != 8/u {
			t.Fatalf("%s: %d candidates (want 1, 2, 4, 8), dispatch over %d ranks for U %d", name, len(costs), d.Ranks, u)
		}
		best := costs[0]
		for _, c := range costs {
			if c.Total() < best.Total() {
				best = c
			}
			if c.Kernel <= 0 || c.Fwd <= 0 || c.Bwd <= c.Fwd {
				t.Fatalf("%s: cost %s", name, c)
			}
		}
		gains := best.Total() < (1-DefaultMeshModel.Gain)*costs[0].Total()
		if (gains && u != best.U) || (!gains && u != 1) {
			t.Fatalf("%s: chose U %d; costs %v", name, u, costs)
		}
		if u != want[name] {
			t.Errorf("%s: chose %dx%d, docs/cp-gpu.md's fit chooses U %d; costs %v", name, u, 8/u, want[name], costs)
		}
		pl, err := Balanced{}.Plan(Config{Ranks: 8}, p)
		if err != nil {
			t.Fatal(err)
		}
		// the default block: 512 tokens on the dispatch alone, 512·U where U ranks split the heads
		if wantBlock := map[int]int{1: 512, 8: 4096}[u]; pl.Config.Ulysses != u || pl.Config.Ring != 8/u || pl.Config.Block != wantBlock || pl.HeadsQ != 64/u {
			t.Fatalf("%s: plan mesh %q with %d query heads a rank, chosen U %d", name, pl.Config.Mesh(), pl.HeadsQ, u)
		}
	}
	p := kernels.Problem{HeadsQ: 64, HeadsKV: 8, HeadDim: 128, DType: tensor.BF16, Mask: cpMask(t, "causal", 16*1024, 1)}
	if u, _, costs, err := BalancedMeshChoice(p, 16, 0, 0); err != nil || u != BalancedUlysses(16, p) || costs != nil {
		t.Fatalf("16 ranks: U %d (%v), costs %v; want BalancedUlysses's %d", u, err, costs, BalancedUlysses(16, p))
	}
}

// TestBalancedAllHeadsIsUlysses: balanced on the mesh N x 1 (--cp-ulysses N: the dispatch
// over one rank) asks the device for exactly what ulysses asks, pass by pass and rank by
// rank (the same all-to-alls, one kernel call on the whole sequence, nothing fetched or
// returned), and sends the same bytes: docs/cp-gpu.md predicts its GPU rows equal to
// ulysses's within noise.
func TestBalancedAllHeadsIsUlysses(t *testing.T) {
	for _, name := range mask.CPMasks() {
		spec, err := mask.Build(name, testSeq, testMaskOptions(9))
		if err != nil {
			t.Fatal(err)
		}
		p := kernels.Problem{HeadsQ: 16, HeadsKV: 8, HeadDim: 16, DType: tensor.BF16, Mask: spec.Mask}
		q, k, v, dout := inputs(p, 21)
		bal, _ := New("balanced")
		uly, _ := New("ulysses")
		bp, err := bal.Plan(Config{Ranks: 8, Ulysses: 8}, p)
		if err != nil {
			t.Fatal(err)
		}
		up, err := uly.Plan(Config{Ranks: 8}, p)
		if err != nil {
			t.Fatal(err)
		}
		bf, bb := passCalls(t, bal, bp, q, k, v, dout)
		uf, ub := passCalls(t, uly, up, q, k, v, dout)
		for r := range 8 {
			if bf[r]["forward"] != 1 || bb[r]["backward"] != 1 {
				t.Fatalf("%s rank %d: balanced 8x1 made %d forward and %d backward kernel calls, want 1 each", name, r, bf[r]["forward"], bb[r]["backward"])
			}
			if fmt.Sprint(bf[r]) != fmt.Sprint(uf[r]) || fmt.Sprint(bb[r]) != fmt.Sprint(ub[r]) {
				t.Fatalf("%s rank %d: balanced 8x1 asks fwd %v, bwd %v; ulysses fwd %v, bwd %v", name, r, bf[r], bb[r], uf[r], ub[r])
			}
			for _, pass := range []kernels.Pass{kernels.Fwd, kernels.Bwd} {
				if b, u := RankCommBytesOf(bp, r, pass), RankCommBytesOf(up, r, pass); b != u {
					t.Fatalf("%s rank %d %s: balanced 8x1 sends %d bytes, ulysses %d", name, r, pass, b, u)
				}
			}
		}
	}
}

// meshReport is docs/results' text report of the 8-rank mesh round on one H200 (call of
// 2026-12-03 16:31 UTC, --kernel cuda, 8K tokens a rank, 64:8, d 128, seed 42).
const meshReport = "../../docs/results/h200-cp-ranks8-cuda-mesh-20261203.txt"

// measuredMeshes reads a longca cp text report's rows of one method: mask -> U -> the
// forward and backward times (ms, the whole GPU's), from rows "method UxB mask heads
// pass samples time ...".
func measuredMeshes(t *testing.T, path, method string) map[string]map[int][2]float64 {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]map[int][2]float64{}
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) < 7 || f[0] != method || (f[4] != "fwd" && f[4] != "bwd") {
			continue
		}
		var u, ring int
		if _, err := fmt.Sscanf(f[1], "%dx%d", &u, &ring); err != nil {
			t.Fatalf("%s: mesh %q: %v", path, f[1], err)
		}
		ms, err := strconv.ParseFloat(f[6], 64)
		if err != nil {
			t.Fatalf("%s: time %q: %v", path, f[6], err)
		}
		if out[f[2]] == nil {
			out[f[2]] = map[int][2]float64{}
		}
		row := out[f[2]][u]
		row[map[string]int{"fwd": 0, "bwd": 1}[f[4]]] = ms
		out[f[2]][u] = row
	}
	return out
}

// TestMeshModelMeasured: on each CP mask at the measured setting, the mesh the plan
// chooses (BalancedMeshChoice) was measured, and its forward plus backward time is
// within 1% of the fastest measured mesh (8x1, 2x4, 1x8 of the 16:31 round); and the
// model's per-mesh times, times the 8 ranks sharing the GPU, are within 6% of the
// measured ones (docs/cp-gpu.md's table of predicted against measured).
func TestMeshModelMeasured(t *testing.T) {
	meas := measuredMeshes(t, meshReport, "balanced")
	for _, name := range mask.CPMasks() {
		ms := meas[name]
		if len(ms) != 3 {
			t.Fatalf("%s: %d meshes measured in %s, want 3 (8x1, 2x4, 1x8): %v", name, len(ms), meshReport, ms)
		}
		best := math.Inf(1)
		for u, m := range ms {
			if m[0] <= 0 || m[1] <= 0 {
				t.Fatalf("%s %dx%d: fwd %.3f, bwd %.3f ms: a pass missing from %s", name, u, 8/u, m[0], m[1], meshReport)
			}
			best = min(best, m[0]+m[1])
		}
		p := kernels.Problem{HeadsQ: 64, HeadsKV: 8, HeadDim: 128, DType: tensor.BF16, Mask: cpMask(t, name, 8*8192, 42)}
		u, _, costs, err := BalancedMeshChoice(p, 8, 0, 0)
		if err != nil {
			t.Fatal(err)
		}
		chosen, ok := ms[u]
		if !ok {
			t.Fatalf("%s: the model chose %dx%d, which the round did not measure; costs %v", name, u, 8/u, costs)
		}
		if got := chosen[0] + chosen[1]; got > 1.01*best {
			t.Errorf("%s: the model chose %dx%d, measured %.1f ms fwd+bwd, %.1f%% slower than the best measured %.1f; costs %v", name, u, 8/u, got, 100*(got/best-1), best, costs)
		}
		for _, c := range costs {
			m, ok := ms[c.U]
			if !ok {
				continue
			}
			if pred, got := 8e3*c.Total(), m[0]+m[1]; math.Abs(pred/got-1) > 0.06 {
				t.Errorf("%s %dx%d: predicted %.1f ms fwd+bwd for the 8 ranks, measured %.1f (%+.1f%%)", name, c.U, c.B, pred, got, 100*(pred/got-1))
			}
		}
	}
}
