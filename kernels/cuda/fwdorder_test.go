package cuda

import (
	"math"
	"strings"
	"testing"

	"github.com/longca/longca/mask"
)

// fwdWalkSpan on a list small enough to walk by hand: two row tiles of 3 and 1 key tiles, two
// heads on two blocks. Heads fastest, block 0 takes (h0, row 0) and (h0, row 1), block 1 the
// same rows of h1: 3 + 1 + 2 x 1.5 = 7 each, span 1. KV-major at a group of one (two KV
// heads) walks a head's rows together: block 0 takes row 0 of both heads (3 + 3 + 3 = 9),
// block 1 row 1 of both (1 + 1 + 3 = 5), span 9 / 7. An empty row costs nothing.
func TestFwdWalkSpanByHand(t *testing.T) {
	w := &WorkList{RowTile: 128, ColTile: 128, Rows: 256, Cols: 512, RowTiles: 2, ColTiles: 4, Lists: 1,
		Order: []int32{0, 1}, Start: []int32{0, 3, 4}, Entries: []int32{0, -1, 1, -1, 2, -1, 3, -1}}
	for _, c := range []struct {
		heads, kv int
		kvMajor   bool
		want      float64
	}{
		{2, 2, false, 1}, {2, 2, true, 9.0 / 7}, {2, 1, true, 1}, {2, 1, false, 1},
	} {
		if got := fwdWalkSpan(w, c.heads, c.kv, 2, c.kvMajor); math.Abs(got-c.want) > 1e-12 {
			t.Errorf("%d:%d kvMajor %v: span %.6f, want %.6f", c.heads, c.kv, c.kvMajor, got, c.want)
		}
	}
	// row 1 empty: only row 0's items cost, and the blocks that get them
	w.Start, w.Entries = []int32{0, 3, 3}, w.Entries[:6]
	if got := fwdWalkSpan(w, 2, 2, 2, true); math.Abs(got-2) > 1e-12 { // block 0 both items (9), block 1 none
		t.Errorf("an empty row: span %.6f, want 2", got)
	}
	if got := fwdWalkSpan(w, 2, 2, 0, true); got != 1 {
		t.Errorf("no blocks: span %v, want 1", got)
	}
}

// The order rule on the standard masks at 64:8 on 132 blocks (the H100's and H200's SMs):
// heads fastest where the model says KV-major is 2% or more less even: causal_blockwise 16K,
// whose forward calls 74 and 77 measured 7.7-7.9% faster without the KV-major order (the
// other masks at 8K-16K within 3%, mostly KV-major's side); KV-major elsewhere.
func TestFwdOrderPaysOnTheSuite(t *testing.T) {
	for _, c := range []struct {
		name string
		s    int
		want bool
	}{
		{"causal_blockwise", 16384, false},
		{"causal_document", 32768, false},
		{"prefix_lm_document", 32768, false},
		{"causal_blockwise", 8192, true},
		{"causal_document", 16384, true},
		{"prefix_lm_document", 16384, true},
		{"share_question", 16384, true},
		{"sliding_window_causal", 16384, true},
		{"block_causal_document", 32768, true},
		{"full", 16384, true},
	} {
		w := forwardListOf(t, c.name, c.s)
		if got := fwdOrderPays(w, 64, 8, 132); got != c.want {
			t.Errorf("%s %d: KV-major %v, want %v (spans %.3f KV-major, %.3f heads fastest)", c.name, c.s, got, c.want,
				fwdWalkSpan(w, 64, 8, 132, true), fwdWalkSpan(w, 64, 8, 132, false))
		}
	}
}

// forwardListOf is sm90's forward list of the named mask at length s (seed 42, 128 x 128
// tiles, ragged where that pays).
func forwardListOf(t *testing.T, name string, s int) *WorkList {
	t.Helper()
	spec, err := mask.Build(name, s, mask.Options{Seed: 42})
	if err != nil {
		t.Fatal(err)
	}
	return raggedOr(listOf(t, []mask.Mask{spec.Mask}, 128, 128, false), spec.Mask, 128, 128)
}

// forwardHeadsFast asks the rule only for an order-rule variant's persistent d128 forward,
// keeps its answer in the list for the head shape and grid, and asks again for another;
// sm90ko defines LONGCA_FWD_ORDER_RULE (the kernel reads the argument only then) and sm90
// neither.
func TestForwardHeadsFast(t *testing.T) {
	ko, sm := variantNamed(t, "sm90ko"), variantNamed(t, "sm90")
	if !ko.fwdOrder || !strings.Contains(strings.Join(ko.defines, " "), "LONGCA_FWD_ORDER_RULE") {
		t.Fatalf("sm90ko: fwdOrder %v, defines %v", ko.fwdOrder, ko.defines)
	}
	if sm.fwdOrder || strings.Contains(strings.Join(sm.defines, " "), "LONGCA_FWD_ORDER_RULE") {
		t.Fatalf("sm90 has the order rule: fwdOrder %v, defines %v", sm.fwdOrder, sm.defines)
	}
	cb := forwardListOf(t, "causal_blockwise", 16384)
	k := &Kernel{arch: ko}
	fv := ko.fwd.at(128)
	dl := &deviceList{w: cb}
	if !k.forwardHeadsFast(fv, dl, 64, 8, 128, true, 132) || dl.fwdOrder != -1 || dl.fwdOrderFor != [3]int{64, 8, 132} {
		t.Fatalf("causal_blockwise 16K: heads fastest not taken or not kept (%d for %v)", dl.fwdOrder, dl.fwdOrderFor)
	}
	dl.fwdOrder = 1 // what the list kept is what it answers for the same shape
	if k.forwardHeadsFast(fv, dl, 64, 8, 128, true, 132) {
		t.Errorf("the same shape did not answer what the list kept")
	}
	if want := !fwdOrderPays(cb, 64, 64, 132); k.forwardHeadsFast(fv, dl, 64, 64, 128, true, 132) != want || dl.fwdOrderFor != [3]int{64, 64, 132} {
		t.Errorf("64:64: not decided again by the model (want heads fastest %v, kept for %v)", want, dl.fwdOrderFor)
	}
	for _, c := range []struct {
		what       string
		k          *Kernel
		d          int
		persistent bool
	}{
		{"sm90", &Kernel{arch: sm}, 128, true},
		{"head dim 64", k, 64, true},
		{"not persistent", k, 128, false},
	} {
		if c.k.forwardHeadsFast(c.k.arch.fwd.at(c.d), &deviceList{w: cb}, 64, 8, c.d, c.persistent, 132) {
			t.Errorf("%s: heads fastest taken", c.what)
		}
	}
}
