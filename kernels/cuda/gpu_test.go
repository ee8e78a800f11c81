//go:build gpu

package cuda

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/longca/longca/kernels"
	"github.com/longca/longca/kernels/check"
	"github.com/longca/longca/mask"
	"github.com/longca/longca/tensor"
)

// -variant picks the kernel variant the tests check (sm90, sm80; default: the device's best).
var variantFlag = flag.String("variant", "", "kernel variant to test (sm90, sm80; default: the best for the device)")

var (
	kernOnce sync.Once
	kern     *Kernel
	kernErr  error
)

// gpuKernel is the registered "cuda" kernel, made once for all tests.
func gpuKernel(t *testing.T) *Kernel {
	t.Helper()
	kernOnce.Do(func() {
		var k kernels.Kernel
		k, kernErr = kernels.New("cuda", kernels.Options{Variant: *variantFlag})
		if kernErr == nil {
			kern = k.(*Kernel)
		}
	})
	if kernErr != nil {
		t.Fatalf("the cuda kernel does not start (this test needs a GPU): %v", kernErr)
	}
	return kern
}

// TestCompile runs first: NVRTC's log and each kernel's registers, stack and occupancy.
func TestCompile(t *testing.T) {
	k := gpuKernel(t)
	t.Logf("device %s, NVRTC options %v, variant %s", k.dev.Props, Options(k.dev), k.arch.name)
	if k.Log != "" {
		t.Logf("NVRTC log:\n%s", k.Log)
	}
	r, err := k.Resources()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("resources:\n%s", r)
}

// smallMask builds one of the 12 masks at a size the CPU reference does quickly, with
// a window and block size scaled down so every shape appears.
func smallMask(t *testing.T, name string, s int) mask.Mask {
	t.Helper()
	spec, err := mask.Build(name, s, mask.Options{Seed: 42, Window: min(150, s), BlockSize: 128})
	if err != nil {
		t.Fatal(err)
	}
	return spec.Mask
}

func runCheck(t *testing.T, k *Kernel, p kernels.Problem, seed uint64, what string) {
	t.Helper()
	ctx := context.Background()
	for _, bwd := range []bool{false, true} {
		var r check.Report
		var err error
		if bwd {
			r, err = check.Backward(ctx, k, p, seed)
		} else {
			r, err = check.Forward(ctx, k, p, seed)
		}
		if err != nil {
			t.Fatalf("%s bwd=%v: %v", what, bwd, err)
		}
		t.Logf("%s bwd=%v: %s", what, bwd, r)
		if !r.Pass {
			t.Errorf("%s bwd=%v: %s", what, bwd, r)
		}
	}
}

// Every kernel mask, GQA and MHA, head dim 64 and 128, forward and backward, against the
// CPU reference by MASKS.md's rule (poisoned outputs, 3x the naive bf16 error).
func TestMasks(t *testing.T) {
	k := gpuKernel(t)
	const s = 1024 // block_causal_document needs a multiple of its block
	for i, name := range mask.KernelMasks() {
		m := smallMask(t, name, s)
		for j, hs := range []struct{ hq, hkv, d int }{{4, 2, 128}, {2, 2, 64}} {
			p := kernels.Problem{HeadsQ: hs.hq, HeadsKV: hs.hkv, HeadDim: hs.d, DType: tensor.BF16, Mask: m}
			runCheck(t, k, p, uint64(100+10*i+j), fmt.Sprintf("%s %d:%d d%d", name, hs.hq, hs.hkv, hs.d))
		}
	}
}

// Scores that climb key tile by key tile (climbingInputs: each 128-key tile's maximum passes
// the row's running one by 15 log2 units or more), forward and backward against the CPU
// reference: the forward's rescale of O runs at every tile, and the d128 forward's lazy
// subtraction point moves at every tile, which random scores reach about never after a row's
// first tile.
func TestClimbingScores(t *testing.T) {
	k := gpuKernel(t)
	ctx := context.Background()
	for i, c := range climbProblems(t) {
		q, kk, v, dout := climbingInputs(c.p, uint64(300+i))
		exact, naive, err := check.References(ctx, c.p, q, kk, v, dout, true)
		if err != nil {
			t.Fatal(err)
		}
		got, err := check.RunDevice(ctx, k, c.p, q, kk, v, dout, true)
		if err != nil {
			t.Fatalf("%s: %v", c.what, err)
		}
		r := check.CompareOutputs(got, exact, naive, kernels.FwdBwd)
		t.Logf("%s bwd=true: %s", c.what, r)
		if !r.Pass {
			t.Errorf("%s bwd=true: %s", c.what, r)
		}
	}
}

// Lengths that are no multiple of the tiles, and fp16.
func TestOddLengthsAndFP16(t *testing.T) {
	k := gpuKernel(t)
	for i, c := range []struct {
		name string
		s    int
		dt   tensor.DType
	}{{"causal", 777, tensor.BF16}, {"causal_document", 1100, tensor.BF16}, {"sliding_window", 300, tensor.FP16}, {"full", 65, tensor.FP16}} {
		m := smallMask(t, c.name, c.s)
		p := kernels.Problem{HeadsQ: 4, HeadsKV: 1, HeadDim: 128, DType: c.dt, Mask: m, Scale: 0.1}
		runCheck(t, k, p, uint64(500+i), fmt.Sprintf("%s S=%d %s", c.name, c.s, c.dt))
	}
}

// Head dim 64 with GQA groups at lengths that are no multiple of the tiles, and fp16: a
// group's walk is then often odd, so that a backward taking two query tiles a step
// (sm90's since call 55) pairs one head's last query tile with the next head's first and masks the
// second half of its last step whole.
func TestHeadDim64Groups(t *testing.T) {
	k := gpuKernel(t)
	for i, c := range []struct {
		name    string
		s       int
		hq, hkv int
		dt      tensor.DType
	}{{"causal", 777, 8, 2, tensor.BF16}, {"causal_document", 1100, 4, 1, tensor.FP16}, {"sliding_window_causal", 1024, 8, 1, tensor.BF16},
		{"share_question", 1000, 6, 2, tensor.BF16}, {"full", 65, 4, 1, tensor.FP16}} {
		m := smallMask(t, c.name, c.s)
		p := kernels.Problem{HeadsQ: c.hq, HeadsKV: c.hkv, HeadDim: 64, DType: c.dt, Mask: m}
		runCheck(t, k, p, uint64(1500+i), fmt.Sprintf("%s S=%d %d:%d d64 %s", c.name, c.s, c.hq, c.hkv, c.dt))
	}
}

// The head-dim-128 backward split over a KV head's query heads (split128) at groups of 8 and
// 4, the parts 2, 4 or 8 (sm90 by its rule, sm90g2/g8 always): each part's fp32 partials of
// dK and dV summed by bwd90_dkv_reduce, a block down to one query head. Where the variant
// always splits, the row must say it did (Describe's gsplit-N), so that the check is of the
// split and not of a plan that fell back to one part.
func TestSplit128Groups(t *testing.T) {
	k := gpuKernel(t)
	for i, c := range []struct {
		name    string
		s       int
		hq, hkv int
	}{{"full", 1024, 16, 2}, {"causal_document", 1100, 16, 2}, {"causal", 777, 8, 2}, {"share_question", 1000, 8, 1}} {
		p := kernels.Problem{HeadsQ: c.hq, HeadsKV: c.hkv, HeadDim: 128, DType: tensor.BF16, Mask: smallMask(t, c.name, c.s)}
		what := fmt.Sprintf("%s S=%d %d:%d d128", c.name, c.s, c.hq, c.hkv)
		checkSplitLabel(t, k, p, what)
		runCheck(t, k, p, uint64(1700+i), what)
	}
	for i, ratio := range []float64{0.2, 0.5} {
		sp, err := mask.BlockSparse(2048, mask.SparseOptions{Seed: uint64(17 + i), Block: 128, Ratio: ratio, HeadsKV: 2}, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		p := kernels.Problem{HeadsQ: 16, HeadsKV: 2, HeadDim: 128, DType: tensor.BF16, Mask: mask.Mask{SeqQ: 2048, SeqK: 2048}, HeadMasks: sp.Heads}
		what := fmt.Sprintf("block-sparse b128 r%.1f 16:2 d128", ratio)
		checkSplitLabel(t, k, p, what)
		runCheck(t, k, p, uint64(1720+i), what)
	}
	// pairs within documents with the split (sched 0x1000b at the variant's parts, the
	// bwd90esp entry walking endAlignedPairs's order): docPairsPay takes them only past 6,400
	// tokens at a group of 8, too long for the CPU reference, so here the variant's document
	// pairs are forced on a short pack (sm90dp's docPairsAlways; a length no other case
	// uses, so that no plan made before is reused)
	if k.arch.pairs && k.arch.docPairs != docPairsNever && k.arch.split128 > 1 {
		saved := k.arch.docPairs
		k.arch.docPairs = docPairsAlways
		defer func() { k.arch.docPairs = saved }()
		p := kernels.Problem{HeadsQ: 16, HeadsKV: 2, HeadDim: 128, DType: tensor.BF16, Mask: smallMask(t, "causal_document", 1900)}
		what := "causal_document S=1900 16:2 d128, pairs within documents forced"
		if v := k.Describe(p, kernels.Bwd).Variant; !strings.Contains(v, "doc-pairs-bwd") {
			t.Errorf("%s: the backward's row says %q, not doc-pairs-bwd", what, v)
		}
		checkSplitLabel(t, k, p, what)
		runCheck(t, k, p, 1730, what)
	}
}

// checkSplitLabel fails t where k's variant always splits the head-dim-128 backward
// (split128 > 1 without the rule), p's group divides by it, and p's backward row does not
// say gsplit-N.
func checkSplitLabel(t *testing.T, k *Kernel, p kernels.Problem, what string) {
	t.Helper()
	s := k.arch.split128
	if s <= 1 || k.arch.split128Rule || k.det || (p.HeadsQ/p.HeadsKV)%s != 0 {
		return
	}
	if v := k.Describe(p, kernels.Bwd).Variant; !strings.Contains(v, fmt.Sprintf("gsplit-%d", s)) {
		t.Errorf("%s: %s always splits in %d, but the backward's row says %q", what, k.arch.name, s, v)
	}
}

// sm90's last wave split (LONGCA_BWD_TAIL, since calls 85-86): full at head dim 128 at the
// shortest lengths whose blocks fill a wave and leave a partial one that tailParts splits on
// this device (2, 4 and 8 parts on 132 SMs), the row saying tail-N, checked, and
// (LONGCA_BWD_TAIL_PAIRS) causal's pairs the same; the variants that do not compile the tail
// (sm90nt, sm90-c75) have nothing of it to test.
func TestTailWave(t *testing.T) {
	k := gpuKernel(t)
	if !k.arch.compiles("LONGCA_BWD_TAIL") {
		t.Skipf("%s does not split the backward's last wave", k.arch.name)
	}
	// runCheck, and the tail launched (a row's tail-N comes from the plan, not the launch)
	checkTailOf := func(k *Kernel, p kernels.Problem, seed uint64, what string) {
		t.Helper()
		before := k.tailLaunches.Load()
		runCheck(t, k, p, seed, what)
		if k.tailLaunches.Load() == before {
			t.Errorf("%s: the backward ran without its tail launch", what)
		}
	}
	checkTail := func(p kernels.Problem, seed uint64, what string) { t.Helper(); checkTailOf(k, p, seed, what) }
	nk := 0 // 16:8's length, the windows' keys below
	for i, h := range [][2]int{{16, 8}, {64, 16}, {64, 8}} {
		s := 0
		for r := 2; r <= 64 && s == 0; r++ {
			if tailParts(h[1]*r, h[0]/h[1], k.blockSlots()) > 1 {
				s = 128 * r
			}
		}
		if s == 0 {
			t.Fatalf("%d:%d: no length up to 8K whose backward tailParts splits on %d SMs", h[0], h[1], k.blockSlots())
		}
		p := kernels.Problem{HeadsQ: h[0], HeadsKV: h[1], HeadDim: 128, DType: tensor.BF16, Mask: smallMask(t, "full", s)}
		what := fmt.Sprintf("full S=%d %d:%d d128", s, h[0], h[1])
		want := fmt.Sprintf("tail-%d", tailParts(h[1]*s/128, h[0]/h[1], k.blockSlots()))
		if v := k.Describe(p, kernels.Bwd).Variant; !strings.Contains(v, want) {
			t.Errorf("%s: the backward's row says %q, not %s", what, v, want)
		}
		checkTail(p, uint64(1740+i), what)
		if i == 0 { // a partial last key tile weighs less: full's rule (evenRows) splits no tail there
			nk = s
			p.Mask = smallMask(t, "full", s-64)
			what = fmt.Sprintf("full S=%d %d:%d d128", s-64, h[0], h[1])
			if v := k.Describe(p, kernels.Bwd).Variant; strings.Contains(v, "tail-") {
				t.Errorf("%s: the backward's row says %q: full's tail with a partial last key tile", what, v)
			}
			runCheck(t, k, p, 1743, what)
		}
	}
	// context-parallel windows of full (SeqQ != SeqK, at offsets, as a ring's steps): every
	// row tile full, so the tail splits there too; at 16:8, keys of its length above
	whole := smallMask(t, "full", nk+2048)
	for i, c := range [][4]int{{0, 1024, 0, nk}, {1024, 2048, 128, 128 + nk}} {
		p := kernels.Problem{HeadsQ: 16, HeadsKV: 8, HeadDim: 128, DType: tensor.BF16,
			Mask: whole.Window(mask.Range{Start: c[0], End: c[1]}, mask.Range{Start: c[2], End: c[3]})}
		v := k.Describe(p, kernels.Bwd).Variant
		what := fmt.Sprintf("full window q[%d,%d) k[%d,%d) 16:8 d128 (%s)", c[0], c[1], c[2], c[3], v)
		if !strings.Contains(v, "tail-") {
			t.Errorf("%s: the window's backward does not split its last wave", what)
			continue
		}
		checkTail(p, uint64(1760+i), what)
	}
	if !k.arch.compiles("LONGCA_BWD_TAIL_PAIRS") {
		return
	}
	// causal's pairs. The default's plan walks them a head's key tiles together only from about
	// 16K (below, its order rule takes heaviest first over all heads, an order the tail keeps
	// unsplit: tailPlan), too long for the CPU reference; so a second kernel of this variant, its
	// order fixed to key tiles together (the same entries), runs the pairs' tail at the shortest
	// length whose plan pairs and splits the last wave, and the default must leave that length's
	// other order unsplit
	kk, err := kernels.New("cuda", kernels.Options{Variant: *variantFlag})
	if err != nil {
		t.Fatalf("the cuda kernel does not start: %v", err)
	}
	kt := kk.(*Kernel)
	kt.arch.sched = schedKTFast
	for i, h := range [][2]int{{64, 16}, {16, 8}} {
		var p kernels.Problem
		v := ""
		for r := 4; r <= 64 && !strings.Contains(v, "tail-"); r++ {
			p = kernels.Problem{HeadsQ: h[0], HeadsKV: h[1], HeadDim: 128, DType: tensor.BF16, Mask: smallMask(t, "causal", 128*r)}
			v = kt.Describe(p, kernels.Bwd).Variant
		}
		what := fmt.Sprintf("causal S=%d %d:%d d128 (%s, key tiles together)", p.Mask.SeqQ, h[0], h[1], v)
		if !strings.Contains(v, "tail-") || !strings.Contains(v, "pairs-bwd") {
			t.Fatalf("%s: no length up to 8K whose paired backward splits its last wave", what)
		}
		checkTailOf(kt, p, uint64(1750+i), what)
		bv := k.bwd.at(128)
		dl, err := k.list(p, bv.qTile, bv.kTile, true)
		if err != nil {
			t.Fatal(err)
		}
		if sched, _ := k.backwardPlan(dl, h[1], h[0]/h[1], 128); sched&schedKTFast != schedKTFast {
			if v := k.Describe(p, kernels.Bwd).Variant; strings.Contains(v, "tail-") {
				t.Errorf("causal S=%d %d:%d d128: the default's plan (order %#x) is not key tiles together, but its row says %q", p.Mask.SeqQ, h[0], h[1], sched, v)
			}
		}
		if i == 0 { // the same pairs with a partial last key tile (keys past the length neither written nor summed)
			p.Mask = smallMask(t, "causal", p.Mask.SeqQ-64)
			v = kt.Describe(p, kernels.Bwd).Variant
			what = fmt.Sprintf("causal S=%d %d:%d d128 (%s, key tiles together)", p.Mask.SeqQ, h[0], h[1], v)
			if !strings.Contains(v, "tail-") {
				t.Fatalf("%s: the pairs' tail not split with a partial last key tile", what)
			}
			checkTailOf(kt, p, 1753, what)
		}
	}
}

// Context-parallel sub-steps: SeqQ != SeqK windows of a global mask, some with rows that
// have no allowed key (out 0, lse -inf).
func TestWindows(t *testing.T) {
	k := gpuKernel(t)
	for i, c := range []struct {
		name   string
		q0, q1 int
		k0, k1 int
	}{{"causal_document", 256, 768, 0, 1024}, {"causal", 512, 1024, 0, 512}, {"causal", 0, 300, 500, 1000},
		{"share_question", 100, 900, 50, 450}, {"sliding_window_causal", 700, 1000, 0, 900}} {
		m := smallMask(t, c.name, 1024).Window(mask.Range{Start: c.q0, End: c.q1}, mask.Range{Start: c.k0, End: c.k1})
		p := kernels.Problem{HeadsQ: 4, HeadsKV: 2, HeadDim: 128, DType: tensor.BF16, Mask: m}
		runCheck(t, k, p, uint64(700+i), fmt.Sprintf("%s window q[%d,%d) k[%d,%d)", c.name, c.q0, c.q1, c.k0, c.k1))
	}
}

// Per-KV-head masks (block-sparse attention): each KV head's query heads use its mask.
func TestHeadMasks(t *testing.T) {
	k := gpuKernel(t)
	ms := []mask.Mask{smallMask(t, "causal_document", 512), smallMask(t, "sliding_window", 512), smallMask(t, "full", 512)}
	p := kernels.Problem{HeadsQ: 6, HeadsKV: 3, HeadDim: 64, DType: tensor.BF16, Mask: mask.Mask{SeqQ: 512, SeqK: 512}, HeadMasks: ms}
	runCheck(t, k, p, 900, "head masks")
}

// Block-sparse maps, one per KV head (the sparse command's masks): 64-token blocks at kept
// 0.2 and 0.5, where sm90's tile rule runs the forward over 128 x 64 tiles (asserted for the
// variants with the rule), and 128-token blocks, where it keeps 128 x 128; head dim 64 and
// 128, forward and backward, the key tiles' order by sm90's rule (key tiles together).
func TestBlockSparse(t *testing.T) {
	k := gpuKernel(t)
	for i, c := range []struct {
		block int
		ratio float64
		d     int
		k64   bool
	}{{64, 0.2, 128, true}, {64, 0.5, 64, true}, {128, 0.2, 128, false}} {
		sp, err := mask.BlockSparse(2048, mask.SparseOptions{Seed: uint64(5 + i), Block: c.block, Ratio: c.ratio, HeadsKV: 2}, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		p := kernels.Problem{HeadsQ: 4, HeadsKV: 2, HeadDim: c.d, DType: tensor.BF16, Mask: mask.Mask{SeqQ: 2048, SeqK: 2048}, HeadMasks: sp.Heads}
		what := fmt.Sprintf("block-sparse b%d r%.1f 4:2 d%d", c.block, c.ratio, c.d)
		if k.arch.k64 {
			if got := k.forwardFor(p).kTile == 64; got != c.k64 {
				t.Errorf("%s: forward over 64-key tiles %v, want %v", what, got, c.k64)
			}
		}
		runCheck(t, k, p, uint64(960+i), what)
	}
}

func TestSupports(t *testing.T) {
	k := gpuKernel(t)
	m := mask.Mask{SeqQ: 8, SeqK: 8, Slices: []mask.Slice{{Q: mask.Range{End: 8}, K: mask.Range{End: 8}}}}
	if err := k.Supports(kernels.Problem{HeadsQ: 1, HeadsKV: 1, HeadDim: 96, DType: tensor.BF16, Mask: m}); err == nil {
		t.Fatal("head dim 96 accepted")
	}
	if err := k.Supports(kernels.Problem{HeadsQ: 1, HeadsKV: 1, HeadDim: 64, DType: tensor.FP32, Mask: m}); err == nil {
		t.Fatal("fp32 accepted")
	}
}

// Long rows: at 8K full and causal have 64 and 32.5 key tiles per query tile, so the sm90
// forward runs its non-persistent schedule (the short masks above run persistent), and the
// wider tiles' rule takes the wide forward's 176-key tiles at head dim 128 where a variant has
// them (the forward each row names is logged; a forward forwardLabel names, the wide one,
// must say so).
func TestLongRows(t *testing.T) {
	k := gpuKernel(t)
	for i, name := range []string{"full", "causal"} {
		for _, d := range []int{64, 128} {
			m := smallMask(t, name, 8192)
			p := kernels.Problem{HeadsQ: 2, HeadsKV: 1, HeadDim: d, DType: tensor.BF16, Mask: m}
			desc := k.Describe(p, kernels.Fwd).Variant
			t.Logf("%s S=8192 d%d: %s", name, d, desc)
			if l := forwardLabel(k.forwardFor(p)); l != "" && !strings.Contains(desc, l) {
				t.Errorf("%s S=8192 d%d: the forward is %s's, the row says %q", name, d, l, desc)
			}
			runCheck(t, k, p, uint64(950+10*d+i), fmt.Sprintf("%s S=8192 2:1 d%d", name, d))
		}
	}
}

// The deterministic backward (--deterministic): checked against the reference on masks
// with many key tiles per query tile, GQA and MHA, d64 and d128, per-head masks; and its
// dq, dk, dv bitwise the same over repeated runs (a wide GQA group, so several blocks add
// into every dQ tile).
func TestDeterministic(t *testing.T) {
	kk, err := kernels.New("cuda", kernels.Options{Variant: *variantFlag, Deterministic: true})
	if err != nil {
		t.Fatalf("the cuda kernel does not start: %v", err)
	}
	k := kk.(*Kernel)
	if !k.DeterministicBackward() {
		t.Skipf("variant %s has no deterministic backward", k.arch.name)
	}
	for i, c := range []struct {
		name          string
		s, hq, hkv, d int
	}{{"full", 2048, 8, 2, 128}, {"causal_document", 1100, 4, 4, 64}, {"sliding_window", 1024, 4, 1, 128}, {"share_question", 1024, 2, 2, 64}} {
		p := kernels.Problem{HeadsQ: c.hq, HeadsKV: c.hkv, HeadDim: c.d, DType: tensor.BF16, Mask: smallMask(t, c.name, c.s)}
		runCheck(t, k, p, uint64(1200+i), fmt.Sprintf("deterministic %s S=%d %d:%d d%d", c.name, c.s, c.hq, c.hkv, c.d))
	}
	ms := []mask.Mask{smallMask(t, "causal_document", 512), smallMask(t, "full", 512)}
	runCheck(t, k, kernels.Problem{HeadsQ: 4, HeadsKV: 2, HeadDim: 128, DType: tensor.BF16, Mask: mask.Mask{SeqQ: 512, SeqK: 512}, HeadMasks: ms}, 1300, "deterministic head masks")

	// bitwise the same over repeated runs, at both head dims (each its own entry: bwd90ed at
	// d128, bwd90fd or an experiment's at d64)
	for _, d := range []int{128, 64} {
		p := kernels.Problem{HeadsQ: 16, HeadsKV: 1, HeadDim: d, DType: tensor.BF16, Mask: smallMask(t, "full", 4096)}
		q, kv, v, dout := check.Inputs(p, 1400)
		var first check.Outputs
		for run := 0; run < 4; run++ {
			o, err := check.RunDevice(context.Background(), k, p, q, kv, v, dout, true)
			if err != nil {
				t.Fatal(err)
			}
			if run == 0 {
				first = o
				continue
			}
			for _, x := range []struct {
				name string
				a, b *tensor.Host
			}{{"dq", first.DQ, o.DQ}, {"dk", first.DK, o.DK}, {"dv", first.DV, o.DV}} {
				if !bytes.Equal(x.a.Data, x.b.Data) {
					t.Errorf("d%d run %d: %s differs from run 0's", d, run, x.name)
				}
			}
		}
		t.Logf("deterministic: dq, dk, dv bitwise equal over 4 runs (full S=4096 16:1 d%d): PASS", d)
	}
}

// The sm90 forward at head dim 64 on every mask through both of its entries, the persistent
// one and the plain one (the kernel's rule set aside: at the tests' short lengths every mask
// runs persistent), against the CPU reference: a variant's new head-dim-64 forward is checked
// whole by -variant alone, and beyond the masks on the cases its tiles' edges meet: lengths
// no multiple of them, fp16, context-parallel windows (SeqQ != SeqK, rows without keys),
// per-KV-head block-sparse maps.
func TestForwardEntries64(t *testing.T) { forwardEntries(t, 64) }

// The same at head dim 128, sm90's own included since the twenty-eighth session's sm90dw: its
// persistent entry walks by the work counter there, and only a grid of fewer blocks than
// items (3 here) runs a block through several items (the other tests' problems have fewer
// items than the GPU has SMs).
func TestForwardEntries128(t *testing.T) {
	k := gpuKernel(t)
	if fv := k.fwd.at(128); !inSM90(fv.fn) {
		t.Skipf("variant %s runs %s at head dim 128: no sm90 forward", k.arch.name, fv.fn)
	}
	forwardEntries(t, 128)
}

// forwardEntries checks the variant's sm90 forward at head dim d through its persistent and
// its plain entry (TestForwardEntries64, TestForwardEntries128).
func forwardEntries(t *testing.T, d int) {
	ctx := context.Background()
	// persistent on a full grid, persistent on 3 blocks (each walks several items: the Q tiles'
	// parities, the K/V ring's phases across items, items without entries), and plain
	modes := []struct{ persist, blocks int }{{1, 0}, {1, 3}, {-1, 0}}
	if v, _ := pickVariant(*variantFlag, 9, 0); v.fwdDyn {
		modes = append(modes, struct{ persist, blocks int }{-1, 3}) // the counter's walk on 3 blocks (sm90dy's plain side)
	}
	for _, mode := range modes {
		persist := mode.persist
		kk, err := kernels.New("cuda", kernels.Options{Variant: *variantFlag})
		if err != nil {
			t.Fatalf("the cuda kernel does not start: %v", err)
		}
		k := kk.(*Kernel)
		if !inSM90(k.fwd.at(d).fn) {
			t.Skipf("variant %s has no sm90 forward", k.arch.name)
		}
		k.arch.persist = persist
		k.fwdBlocks = mode.blocks
		// the variant's own forward at head dim 128, not the wide one
		k.arch.wide = false
		type problem struct {
			what string
			p    kernels.Problem
		}
		var ps []problem
		for _, name := range mask.KernelMasks() {
			ps = append(ps, problem{name + " 4:2", kernels.Problem{HeadsQ: 4, HeadsKV: 2, HeadDim: d, DType: tensor.BF16, Mask: smallMask(t, name, 1024)}})
		}
		for _, c := range []struct {
			name    string
			s       int
			hq, hkv int
			dt      tensor.DType
		}{{"causal", 777, 8, 2, tensor.BF16}, {"full", 65, 4, 1, tensor.FP16}, {"sliding_window", 300, 4, 1, tensor.FP16}, {"causal_document", 1100, 4, 1, tensor.FP16}, {"full", 1300, 2, 1, tensor.BF16},
			// (sm90rg) where the tiles start at the documents at both head dims: full_document
			// 2048 at 128 x 128 and 192 x 128, causal_document 1024 at 192 x 128
			{"full_document", 2048, 4, 2, tensor.BF16}, {"causal_document", 1024, 4, 1, tensor.BF16}} {
			ps = append(ps, problem{fmt.Sprintf("%s S=%d %d:%d %s", c.name, c.s, c.hq, c.hkv, c.dt), kernels.Problem{HeadsQ: c.hq, HeadsKV: c.hkv, HeadDim: d, DType: c.dt, Mask: smallMask(t, c.name, c.s), Scale: 0.1}})
		}
		for _, c := range []struct {
			name           string
			q0, q1, k0, k1 int
		}{{"causal_document", 256, 768, 0, 1024}, {"causal", 512, 1024, 0, 512}, {"causal", 0, 300, 500, 1000}, {"share_question", 100, 900, 50, 450}, {"sliding_window_causal", 700, 1000, 0, 900}} {
			m := smallMask(t, c.name, 1024).Window(mask.Range{Start: c.q0, End: c.q1}, mask.Range{Start: c.k0, End: c.k1})
			ps = append(ps, problem{fmt.Sprintf("%s window q[%d,%d) k[%d,%d)", c.name, c.q0, c.q1, c.k0, c.k1), kernels.Problem{HeadsQ: 4, HeadsKV: 2, HeadDim: d, DType: tensor.BF16, Mask: m}})
		}
		for i, ratio := range []float64{0.2, 0.5} {
			sp, err := mask.BlockSparse(2048, mask.SparseOptions{Seed: uint64(7 + i), Block: 128, Ratio: ratio, HeadsKV: 2}, nil, nil)
			if err != nil {
				t.Fatal(err)
			}
			ps = append(ps, problem{fmt.Sprintf("block-sparse b128 r%.1f 4:2", ratio), kernels.Problem{HeadsQ: 4, HeadsKV: 2, HeadDim: d, DType: tensor.BF16, Mask: mask.Mask{SeqQ: 2048, SeqK: 2048}, HeadMasks: sp.Heads}})
		}
		for i, c := range ps {
			p := c.p
			desc := k.Describe(p, kernels.Fwd).Variant
			fv := k.forwardFor(p)
			// forced persistent: the row names a walk, the static one (persistent-fwd) or the
			// counter's (dyn-fwd: fwdDynP's, sm90's since sm90dw, in place of the static one on
			// its overlapped forwards); never the static walk where it is not forced
			walks := strings.Contains(desc, "persistent-fwd") || strings.Contains(desc, "dyn-fwd")
			if persist == 1 && !fv.oneItem && !walks || persist != 1 && strings.Contains(desc, "persistent-fwd") {
				t.Errorf("%s d%d persist %d: the row says %q", c.what, d, persist, desc)
			}
			if persist == 1 && k.arch.counterWalks(fv.fn, true) && !strings.Contains(desc, "dyn-fwd") {
				t.Errorf("%s d%d persist 1: the row says %q; with fwdDynP %s walks by the counter", c.what, d, desc, fv.fn)
			}
			if own := k.fwd.at(d); fv.fn != own.fn && fv.kTile != 64 { // only the 64-key tiles' rule may take another
				t.Errorf("%s d%d: the forward is %s, not the variant's %s", c.what, d, fv.fn, own.fn)
			}
			if k.arch.ragged && len(p.HeadMasks) == 0 { // the ragged tiles where they pay, as the rows say
				// (the 64-key tiles' lists are built packed where they pay: never ragged)
				want := false
				if fv.kTile != 64 {
					pk, err := BuildWorkList([]mask.Mask{p.Mask}, fv.qTile, fv.kTile, false)
					want = err == nil && raggedOr(pk, p.Mask, fv.qTile, fv.kTile).Ragged
				}
				if strings.Contains(desc, "ragged-fwd") != want {
					t.Errorf("%s d%d: the row says %q, ragged tiles pay: %v", c.what, d, desc, want)
				}
			}
			what := fmt.Sprintf("%s d%d %s (%s, %d blocks)", c.what, d, desc, fv.fn, mode.blocks)
			seed := uint64(1600 + 10*i + persist)
			if d == 128 {
				seed += 400
			}
			r, err := check.Forward(ctx, k, p, seed)
			if err != nil {
				t.Fatalf("%s bwd=false: %v", what, err)
			}
			t.Logf("%s bwd=false: %s", what, r)
			if !r.Pass {
				t.Errorf("%s bwd=false: %s", what, r)
			}
		}
	}
}

// Each sm90 forward entry the variant runs fits a block an SM, as the host's persistent grid
// counts on, by the driver's occupancy calculator: registers at launch (__launch_bounds__) and
// shared memory.
func TestForwardOccupancy(t *testing.T) {
	k := gpuKernel(t)
	for _, dt := range []string{"bf16", "fp16"} {
		for _, d := range []int{64, 128} {
			fv := k.fwd.at(d)
			if !inSM90(fv.fn) {
				continue
			}
			names := []string{fv.fn}
			if !fv.oneItem {
				names = append(names, fv.fn+"p")
			}
			if k.arch.counterWalks(fv.fn, true) || k.arch.counterWalks(fv.fn, false) {
				names = append(names, fv.fn+"pd") // the counter's entry (fwdDyn, fwdDynP): the same budget
			}
			for _, n := range names {
				name := fmt.Sprintf("%s_%s_d%d", n, dt, d)
				f, err := k.function(name, fv.shared(d))
				if err != nil {
					t.Fatal(err)
				}
				var occ, regs int
				if err := k.dev.Do(func() error {
					var err error
					if regs, _, err = f.Registers(); err != nil {
						return err
					}
					occ, err = f.Occupancy(fv.threads, fv.shared(d))
					return err
				}); err != nil {
					t.Fatal(err)
				}
				// FwdRegs's setmaxnreg budget fills the block's launch registers exactly (40 + 2 x 232
				// = 3 x 168, 32 + 3 x 160 = 4 x 128): fewer at launch and the consumers'
				// setmaxnreg.inc never returns
				if want := 65536 / fv.threads / 8 * 8; regs != want {
					t.Errorf("%s: %d registers a thread at launch, FwdRegs counts on %d", name, regs, want)
				}
				t.Logf("%s: %d threads, %d bytes of shared memory, %d blocks an SM (the host counts on 1)", name, fv.threads, fv.shared(d), occ)
				if occ < 1 {
					t.Errorf("%s: no block fits an SM, the persistent grid counts on 1", name)
				}
			}
		}
	}
}
