package cuda

import (
	"math"
	"testing"

	"github.com/longca/longca/mask"
)

// The L2 model against what ncu measured on the H200 (one d128 backward launch, 64:8, its
// DRAM bytes read; docs/perf.md "Calls 48-51"): full 16K 2.10 GB; causal 16K 17.4 unpaired
// and 2.03 paired; causal 32K 73.2 unpaired and 5.15 paired. The model must land each within
// a factor of 1.5 and keep their order: a model that cannot tell thrashing from streaming
// here cannot design the next order.
func TestL2ModelMatchesMeasured(t *testing.T) {
	const gb = 1e9
	for _, c := range []struct {
		mask  string
		s     int
		sched int32
		want  float64 // GB read, measured
	}{
		{"full", 16384, schedKTFast, 2.10},
		{"causal", 16384, schedKTFast, 17.4},
		{"causal", 16384, schedKTFast | 8, 2.03},
		{"causal", 32768, schedKTFast, 73.2},
		{"causal", 32768, schedKTFast | 8, 5.15},
	} {
		w := backwardList(t, 42, c.s, c.mask)
		r, _, _ := l2Traffic(w, 8, 8, 132, 128, c.sched, 50<<20, 0.02)
		got := float64(r) / gb
		t.Logf("%s %d sched %d: modelled %.2f GB read, measured %.2f", c.mask, c.s, c.sched, got, c.want)
		if got < c.want/1.5 || got > c.want*1.5 {
			t.Errorf("%s %d sched %d: modelled %.2f GB read, measured %.2f", c.mask, c.s, c.sched, got, c.want)
		}
	}
}

// sm90's split rule at head dim 128 (split128Parts) on call 54's cells (sm90g2, always split,
// against sm90 unsplit; docs/perf.md "Call 54"): it splits where the split won 3-6%
// (causal_blockwise 32K, causal_document 32K, share_question 48K) and not where it lost 1-12%
// (share_question 16K: the tail; full and causal 32K, full_document 48K: no bytes saved;
// prefix_lm_causal 32K: more bytes split). causal_blockwise 16K, unsplit then (the tail),
// is paired within blocks since call 69 and its pairs split in 2. Slow (the L2 model twice on
// the cells the tail lets through: about 15 s).
func TestSplit128Rule(t *testing.T) {
	k := &Kernel{arch: variantNamed(t, "sm90")}
	for _, c := range []struct {
		mask string
		s    int
		want int
	}{
		{"causal_blockwise", 32768, 2}, {"causal_document", 32768, 2}, {"share_question", 49152, 2},
		{"share_question", 16384, 1}, {"full", 32768, 1}, {"causal", 32768, 1},
		{"causal_blockwise", 16384, 2}, // paired within blocks since call 69 (docPairsBytesPay), the pairs split
		{"full_document", 49152, 1}, {"prefix_lm_causal", 32768, 1},
	} {
		sched, g := k.backwardPlan(&deviceList{w: backwardList(t, 42, c.s, c.mask)}, 8, 8, 128)
		if g != c.want || g > 1 && sched&schedKTFast != schedKTFast {
			t.Errorf("sm90 %s %d at head dim 128: sched %#x, split %d, want %d", c.mask, c.s, sched, g, c.want)
		}
	}
	// block-sparse maps (the benchmark's layouts, 32K; through the gate since call 67): split
	// in 8 where the L2 model has 8 parts halve the bytes twice over (kept 0.5: call 67's
	// sm90g8 +0.5% at 128-token r0.5 32K, +32 to +51% at 64K), else unsplit (64-token maps at
	// kept 0.1, variable 256-token ones at 0.2)
	for _, c := range []struct {
		block, avg int
		ratio      float64
		want       int
	}{{64, 0, 0.1, 1}, {128, 0, 0.5, 8}, {0, 256, 0.2, 1}, {0, 512, 0.5, 8}} {
		ws := sparseBackwardList(t, 32768, mask.SparseOptions{Seed: 11, Block: c.block, AvgBlock: c.avg, Ratio: c.ratio, HeadsKV: 8})
		if _, g := k.backwardPlan(&deviceList{w: ws}, 8, 8, 128); g != c.want {
			t.Errorf("block-sparse 32K block %d avg %d kept %v: split %d, want %d", c.block, c.avg, c.ratio, g, c.want)
		}
	}
	// past split128MaxSteps the model is not run and the list stays unsplit: causal_blockwise
	// 32K (split above at 64 query heads) at 1,024 query heads (128 KV heads of 8)
	w := backwardList(t, 42, 32768, "causal_blockwise")
	if n := int64(len(w.Entries) / 2); n*64 > split128MaxSteps || n*1024 <= split128MaxSteps {
		t.Fatalf("causal_blockwise 32K: %d steps a query head, the bound %d: the check needs 64 heads within and 1,024 over", n, split128MaxSteps)
	}
	if split128Pays(w, 128, 8, 132, 50<<20, schedNoRot, 2) {
		t.Error("causal_blockwise 32K at 1,024 query heads (past split128MaxSteps): split, want no model run and no split")
	}
	if _, g := (&Kernel{arch: variantNamed(t, "sm90"), det: true}).backwardPlan(&deviceList{w: w}, 8, 8, 128); g != 1 {
		t.Errorf("sm90 deterministic causal_blockwise 32K at head dim 128: split %d, want 1", g)
	}
}

// The group split at head dim 128 (sched bits 4-7, sm90g2 always, sm90 by split128Parts) in the L2 model: on
// causal_blockwise 32K the rule's order (heaviest key tiles first over all heads) reads
// about 44 GB from DRAM at 2% speed spread; a head's key tiles together still over 20; split
// in two with a head's key tiles together, a block walks four query heads and the blocks
// running together keep a KV head's tiles in L2: under a fifth of the unsplit reading. And
// the plan: sm90g2 splits every d128 backward in two (not the deterministic one, not at 64,
// where sm90's own rule stays), with a head's key tiles together; sm90 splits neither full
// nor causal at 16K (TestSplit128Rule has its rule's cells).
func TestL2ModelSplit(t *testing.T) {
	w := backwardList(t, 42, 32768, "causal_blockwise")
	rule, _, _ := l2Traffic(w, 8, 8, 132, 128, schedNoRot, 50<<20, 0.02)
	together, _, _ := l2Traffic(w, 8, 8, 132, 128, schedKTFast, 50<<20, 0.02)
	split, _, _ := l2Traffic(w, 8, 8, 132, 128, schedKTFast|2<<4, 50<<20, 0.02)
	t.Logf("causal_blockwise 32K: modelled %.1f GB read heaviest first, %.1f a head's key tiles together, %.1f split in two", float64(rule)/1e9, float64(together)/1e9, float64(split)/1e9)
	if rule < 30e9 || together < 15e9 || split*5 > together {
		t.Errorf("causal_blockwise 32K: modelled %.1f GB read heaviest first, %.1f a head's key tiles together, %.1f split in two", float64(rule)/1e9, float64(together)/1e9, float64(split)/1e9)
	}
	for _, c := range []struct {
		variant, mask string
		d             int
		det           bool
		want          int
	}{
		{"sm90g2", "causal_blockwise", 128, false, 2}, {"sm90g2", "causal", 128, false, 2}, {"sm90g2", "full", 128, true, 1},
		{"sm90", "causal", 128, false, 1}, {"sm90", "full", 128, false, 1},
	} {
		k := &Kernel{arch: variantNamed(t, c.variant), det: c.det}
		sched, g := k.backwardPlan(&deviceList{w: backwardList(t, 42, 16384, c.mask)}, 8, 8, c.d)
		if g != c.want || g > 1 && sched&schedKTFast != schedKTFast {
			t.Errorf("%s %s 16K at head dim %d (deterministic %v): sched %#x, split %d, want %d with a head's key tiles together", c.variant, c.mask, c.d, c.det, sched, g, c.want)
		}
	}
	k := &Kernel{arch: variantNamed(t, "sm90g2")}
	w64 := backwardListKeys(t, 42, 16384, 192, "causal_blockwise")
	k0 := &Kernel{arch: variantNamed(t, "sm90")}
	s1, g1 := k.backwardPlan(&deviceList{w: w64}, 8, 8, 64)
	s0, g0 := k0.backwardPlan(&deviceList{w: w64}, 8, 8, 64)
	if s1 != s0 || g1 != g0 {
		t.Errorf("causal_blockwise 16K at head dim 64: sm90g2's plan %#x / %d, sm90's %#x / %d", s1, g1, s0, g0)
	}
}

// The head-dim-64 backward's blocks in the L2 model (sm90's plan at each key tile: the order
// rule and the group split): 128-key blocks (sm90's bwd90qq since call 55) read far less
// from DRAM than sm90's 192-key blocks on causal and full_document at 32K (the model, 2%
// speed spread: causal 18.2 -> 3.2 GB, full_document 7.0 -> 1.7; at 48K 31 -> 5.7 and 85 ->
// 5.1), and about as much on full (2.8 -> 3.2), whose equal rows keep together either way.
func TestL2ModelD64Blocks(t *testing.T) {
	k := &Kernel{arch: variantNamed(t, "sm90")}
	read := func(m string, kt int) float64 {
		w := backwardListKeys(t, 42, 32768, kt, m)
		sched, g := k.backwardPlan(&deviceList{w: w}, 8, 8, 64)
		r, _, _ := l2Traffic(w, 8, 8, 132, 64, sched|int32(g)<<4, 50<<20, 0.02)
		return float64(r) / 1e9
	}
	for _, c := range []struct {
		mask   string
		lo, hi float64 // the bounds of 192-key blocks' bytes over 128-key blocks'
	}{{"causal", 3, math.Inf(1)}, {"full_document", 2.5, math.Inf(1)}, {"full", 0.7, 1 / 0.7}} {
		a, b := read(c.mask, 192), read(c.mask, 128)
		t.Logf("%s 32K d64: modelled %.1f GB read over 192-key blocks, %.1f over 128-key blocks", c.mask, a, b)
		if a < c.lo*b || a > c.hi*b {
			t.Errorf("%s 32K d64: modelled %.1f GB read over 192-key blocks, %.1f over 128-key ones (want a ratio from %.2f to %.2f)", c.mask, a, b, c.lo, c.hi)
		}
	}
}

// The L2 order rule (orderThrashes, MHA only; sm90's since call 61, call 61's sm90mo): at
// 64:64 (a group of one) the short uneven rows where heaviest first spreads the running
// blocks over many heads take the key tiles of a KV head together (the L2 model: 5-20 GB read
// against under 2.5), and the plan then differs from the one without the rule only in the
// order; GQA plans (8 KV heads of 8) are the same with and without it on every mask at
// 8K-32K, for two seeds of the document masks.
func TestOrderL2Rule(t *testing.T) {
	// sm90's plan without and with the rule (orderL2)
	without, with := variantNamed(t, "sm90"), variantNamed(t, "sm90")
	without.orderL2, with.orderL2 = false, true
	k, mo := &Kernel{arch: without}, &Kernel{arch: with}
	carried := false
	for _, av := range archVariants {
		carried = carried || av.orderL2
	}
	if !carried {
		t.Error("no variant weighs L2 in its order (sm90 has since call 61)")
	}
	for _, c := range []struct {
		mask string
		s    int
	}{{"causal", 8192}, {"causal_document", 8192}, {"share_question", 16384}, {"prefix_lm_causal", 8192}} {
		w := backwardList(t, 42, c.s, c.mask)
		if o := backwardOrder(w, 64, 1, 132); o != schedNoRot {
			t.Fatalf("%s %d at 64:64: the order rule picks %#x, not heaviest first: nothing to test", c.mask, c.s, o)
		}
		if !orderThrashes(w, 64, 1, 132, 50<<20) {
			t.Errorf("%s %d at 64:64: heaviest first kept", c.mask, c.s)
		}
		o0, _ := k.backwardPlan(&deviceList{w: w}, 64, 1, 128)
		o1, _ := mo.backwardPlan(&deviceList{w: w}, 64, 1, 128)
		if o0&schedKTFast == schedKTFast || o1&schedKTFast != schedKTFast {
			t.Errorf("%s %d at 64:64: without the rule %#x, with it %#x (want heaviest first, then the key tiles together)", c.mask, c.s, o0, o1)
		}
		if o1&^schedKTFast != o0&^schedNoRot {
			t.Errorf("%s %d at 64:64: the plan with the rule %#x differs from the one without %#x beyond the order", c.mask, c.s, o1, o0)
		}
		// head dim 64 keeps the plan without the rule (the L2 model is calibrated at 128)
		p0, g0 := k.backwardPlan(&deviceList{w: w}, 64, 1, 64)
		p1, g1 := mo.backwardPlan(&deviceList{w: w}, 64, 1, 64)
		if p0 != p1 || g0 != g1 {
			t.Errorf("%s %d at head dim 64: without the rule %#x/%d, with it %#x/%d", c.mask, c.s, p0, g0, p1, g1)
		}
	}
	noRot := 0
	for _, seed := range []uint64{7, 42} {
		for _, m := range []string{"causal", "causal_document", "share_question", "causal_blockwise", "prefix_lm_causal", "prefix_lm_document", "block_causal_document", "full_document"} {
			for _, s := range []int{8192, 16384, 32768} {
				w := backwardList(t, seed, s, m)
				if backwardOrder(w, 8, 8, 132) == schedNoRot {
					noRot++
				}
				o0, g0 := k.backwardPlan(&deviceList{w: w}, 8, 8, 128)
				o1, g1 := mo.backwardPlan(&deviceList{w: w}, 8, 8, 128)
				if o0 != o1 || g0 != g1 {
					t.Errorf("%s %d seed %d at 64:8: without the rule %#x/%d, with it %#x/%d", m, s, seed, o0, g0, o1, g1)
				}
			}
		}
	}
	if noRot < 10 {
		t.Errorf("%d GQA cells ordered heaviest first: the check above checked little", noRot)
	}
}

// The L2 model's step count (l2Steps, which bounds the lists the plan models): each KV head
// walks its own list where a block-sparse map gives one a KV head, so the count is a list's
// entries times the group, not every list's entries times every head (8x too many at 64:8,
// which left 64K block-sparse maps unmodelled); a shared list is walked by every head.
func TestL2Steps(t *testing.T) {
	sp := sparseBackwardList(t, 65536, mask.SparseOptions{Seed: 11, Block: 128, Ratio: 0.2, HeadsKV: 8})
	if sp.Lists != 8 {
		t.Fatalf("the 64K block-sparse list has %d lists, want one a KV head (8)", sp.Lists)
	}
	perHead := int64(len(sp.Entries)/2) / 8
	if got := l2Steps(sp, 8, 8); got != perHead*64 {
		t.Errorf("64K b128 r0.2 at 64:8: %d steps, want a list's %d entries times 64 query heads (%d)", got, perHead, perHead*64)
	}
	if !l2Modelled(sp, 8, 8) {
		t.Errorf("64K b128 r0.2 at 64:8 (%d steps) is not modelled", l2Steps(sp, 8, 8))
	}
	full := backwardList(t, 42, 65536, "full")
	if got, want := l2Steps(full, 8, 8), int64(len(full.Entries)/2)*64; full.Lists != 1 || got != want {
		t.Errorf("full 64K at 64:8: %d lists, %d steps, want one list and %d", full.Lists, got, want)
	}
	if big := backwardList(t, 42, 98304, "full"); l2Modelled(big, 8, 8) {
		t.Errorf("full 96K at 64:8 (%d steps) is modelled: past split128MaxSteps", l2Steps(big, 8, 8))
	}
}

// The widened split rule (split128Parts, sm90's since call 67): at most 2 parts it is
// split128Pays; to 8 it splits 64K block-sparse maps in 8 (the L2 model: 157 -> 55 GB at
// b128 r0.2) and leaves 32K r0.2 unsplit (8 parts' tail 1.046x), while on the dense masks
// its plans are those of the rule before it (at most 2 parts, block-sparse maps kept out).
func TestSplit128Parts(t *testing.T) {
	for _, m := range []string{"prefix_lm_causal", "causal_blockwise"} {
		for _, s := range []int{16384, 32768} {
			w := backwardList(t, 42, s, m)
			o := backwardOrder(w, 8, 8, 132)
			pays := split128Pays(w, 8, 8, 132, 50<<20, o, 2)
			if got, _ := split128Parts(w, 8, 8, 132, 50<<20, o, 2, false, unsplitRead(w, 8, 8, 132, 50<<20, o)); (got == 2) != pays {
				t.Errorf("%s %d at most 2 parts: %d, split128Pays %v", m, s, got, pays)
			}
		}
	}
	narrow := variantNamed(t, "sm90")
	narrow.split128, narrow.split128Maps = 2, false
	sr, base := &Kernel{arch: variantNamed(t, "sm90")}, &Kernel{arch: narrow}
	for _, c := range []struct {
		s     int
		ratio float64
		want  int
	}{{65536, 0.2, 8}, {65536, 0.5, 8}, {32768, 0.2, 1}} {
		w := sparseBackwardList(t, c.s, mask.SparseOptions{Seed: 11, Block: 128, Ratio: c.ratio, HeadsKV: 8})
		if _, g := sr.backwardPlan(&deviceList{w: w}, 8, 8, 128); g != c.want {
			t.Errorf("b128 r%.1f %d at 64:8: sm90 splits in %d, want %d", c.ratio, c.s, g, c.want)
		}
		if _, g := base.backwardPlan(&deviceList{w: w}, 8, 8, 128); g != 1 {
			t.Errorf("b128 r%.1f %d at 64:8: the narrow rule splits in %d, want none", c.ratio, c.s, g)
		}
	}
	// the cells where the narrow rule splits in 2 (call 57's: causal_blockwise 32K, share_question
	// and prefix_lm_causal 48K, causal_document 32K) and beside them: the same plans (since call
	// 71 causal_blockwise 48K's too: its pairs split in 4, which lost 2.1% there, read more than
	// the unpaired plan split 2 that the bytes rule now weighs them against)
	for _, m := range []string{"causal_document", "prefix_lm_causal", "causal_blockwise", "share_question"} {
		for _, s := range []int{32768, 49152} {
			w := backwardList(t, 42, s, m)
			o0, g0 := base.backwardPlan(&deviceList{w: w}, 8, 8, 128)
			o1, g1 := sr.backwardPlan(&deviceList{w: w}, 8, 8, 128)
			if o0 != o1 || g0 != g1 {
				t.Errorf("%s %d at 64:8: the narrow rule plans %#x/%d, sm90 %#x/%d", m, s, o0, g0, o1, g1)
			}
		}
	}
}

// sm90's pairs within documents by bytes (docPairsBytesPay, call 69's sm90dq) on call 67's cells
// (an H100; sm90dp's pairs split in 2 against sm90): it takes every cell that won by 6% or
// more (causal_document 8K / 16K, prefix_lm_document 16K, causal_blockwise 16K; the split in
// 2 with them) and leaves prefix_lm_document 8K (-0.6%) unpaired, as it leaves share_question
// 16K (call 53: -46% paired) and full_document 16K (even rows: more bytes paired).
func TestDocPairsBytes(t *testing.T) {
	k := &Kernel{arch: variantNamed(t, "sm90")}
	for _, c := range []struct {
		mask   string
		s      int
		paired bool
	}{
		{"causal_document", 8192, true}, {"causal_document", 16384, true}, {"prefix_lm_document", 16384, true},
		{"causal_blockwise", 16384, true}, {"prefix_lm_document", 8192, false}, {"share_question", 16384, false},
		{"full_document", 16384, false},
	} {
		o, g := k.backwardPlan(&deviceList{w: backwardList(t, 42, c.s, c.mask)}, 8, 8, 128)
		if got := o&schedDocPairs != 0; got != c.paired || got && g != 2 {
			t.Errorf("sm90 %s %d at 64:8: plan %#x, split %d; want paired %v (split 2)", c.mask, c.s, o, g, c.paired)
		}
	}
	// causal_document_long 16K (call 69: +12%): the pairs split in 4, the parts the rule
	// weighs being the plan's (split128Parts on the paired order)
	if o, g := k.backwardPlan(&deviceList{w: backwardList(t, 42, 16384, "causal_document_long")}, 8, 8, 128); o&schedDocPairs == 0 || g != 4 {
		t.Errorf("sm90 causal_document_long 16K at 64:8: plan %#x, split %d; want paired, split 4", o, g)
	}
	// the tail bound 1.25 since call 71 (sm90dt +9.9%): share_question 32K (tail 1.143x,
	// 40 -> 6 GB modelled) paired and split, 16K (1.55x) not; causal_blockwise 48K not paired:
	// its pairs split 4 (18 GB modelled) save against its unsplit bytes (40 GB) but not against
	// the unpaired plan that runs instead, split 2 (7 GB; call 71: that plan 2.1% faster)
	for _, c := range []struct {
		mask   string
		s      int
		paired bool
		split  int
	}{{"share_question", 32768, true, 2}, {"share_question", 16384, false, 1}, {"causal_blockwise", 49152, false, 2}} {
		o, g := k.backwardPlan(&deviceList{w: backwardList(t, 42, c.s, c.mask)}, 8, 8, 128)
		if got := o&schedDocPairs != 0; got != c.paired || g != c.split {
			t.Errorf("sm90 %s %d at 64:8: plan %#x, split %d; want paired %v, split %d", c.mask, c.s, o, g, c.paired, c.split)
		}
	}
	// pairs the plan does not split keep the bound of before call 71 (1.13): sm90ns (never
	// split) leaves causal_document and prefix_lm_document 16K and causal_blockwise 8K
	// unpaired (unsplit tails 1.15-1.18x; call 53 saw unsplit pairs lose from 1.15x)
	ns := &Kernel{arch: variantNamed(t, "sm90ns")}
	for _, c := range []struct {
		mask string
		s    int
	}{{"causal_document", 16384}, {"prefix_lm_document", 16384}, {"causal_blockwise", 8192}} {
		if o, _ := ns.backwardPlan(&deviceList{w: backwardList(t, 42, c.s, c.mask)}, 8, 8, 128); o&schedDocPairs != 0 {
			t.Errorf("sm90ns %s %d at 64:8: paired unsplit (plan %#x) past the unsplit bound", c.mask, c.s, o)
		}
	}
}

// split128Pays says whether split128Score takes s parts on w in order o (the rule at most 2
// parts: sm90's from call 56 to call 67, split128Parts with most 2), the unsplit bytes
// modelled for the question alone.
func split128Pays(w *WorkList, heads, group, slots, l2 int, o int32, s int) bool {
	ok, _ := split128Score(w, heads, group, slots, l2, o, s, false, unsplitRead(w, heads, group, slots, l2, o))
	return ok
}
