package cuda

import (
	"math"
	"slices"
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

// walkSpan is the busiest block's work over the mean in a walk fwdWalkLPT returned, checking
// that every item of heads x row tiles is in it exactly once.
func walkSpan(t *testing.T, w *WorkList, heads, headsKV, grid int, walk []int32) float64 {
	t.Helper()
	if len(walk) != grid+1+heads*w.RowTiles || walk[0] != 0 || int(walk[grid]) != heads*w.RowTiles {
		t.Fatalf("walk of %d values, starts %d .. %d; want %d values over %d items", len(walk), walk[0], walk[grid], grid+1+heads*w.RowTiles, heads*w.RowTiles)
	}
	seen := make([]bool, heads*w.RowTiles)
	group := heads / headsKV
	most, sum := 0.0, 0.0
	for b := 0; b < grid; b++ {
		busy, prev := 0.0, math.Inf(1)
		for _, it := range walk[grid+1+int(walk[b]) : grid+1+int(walk[b+1])] {
			if it < 0 || int(it) >= len(seen) || seen[it] {
				t.Fatalf("block %d: item %d out of range or seen twice", b, it)
			}
			seen[it] = true
			h, row := int(it)%heads, int(it)/heads
			l := 0
			if w.Lists > 1 {
				l = h / group
			}
			c := 0.0
			if n := len(w.Row(l, int(w.Order[l*w.RowTiles+row]))) / 2; n > 0 {
				c = float64(n) + fwdItemSteps
			}
			if c > prev {
				t.Fatalf("block %d: an item of %.1f after one of %.1f (heaviest first)", b, c, prev)
			}
			prev = c
			busy += c
		}
		sum += busy
		most = max(most, busy)
	}
	for i, s := range seen {
		if !s {
			t.Fatalf("item %d in no block", i)
		}
	}
	return most * float64(grid) / sum
}

// fwdWalkLPT by hand: rows of 3 and 1 key tiles, two heads, two blocks: the two heavy items
// (4.5 each) go to blocks 0 and 1, the light ones (2.5) after them, block 0 first among
// equals: block 0 walks items 0 (row 0, head 0) and 2 (row 1, head 0), block 1 items 1 and 3.
func TestFwdWalkLPTByHand(t *testing.T) {
	w := &WorkList{RowTile: 128, ColTile: 128, Rows: 256, Cols: 512, RowTiles: 2, ColTiles: 4, Lists: 1,
		Order: []int32{0, 1}, Start: []int32{0, 3, 4}, Entries: []int32{0, -1, 1, -1, 2, -1, 3, -1}}
	if got, want := fwdWalkLPT(w, 2, 2, 2), []int32{0, 2, 4, 0, 2, 1, 3}; !slices.Equal(got, want) {
		t.Errorf("walk %v, want %v", got, want)
	}
	// three blocks for four items: the third block takes the first light item
	if got, want := fwdWalkLPT(w, 2, 2, 3), []int32{0, 1, 2, 4, 0, 1, 2, 3}; !slices.Equal(got, want) {
		t.Errorf("three blocks: walk %v, want %v", got, want)
	}
	if got := fwdWalkLPT(w, 2, 2, 0); !slices.Equal(got, []int32{0}) {
		t.Errorf("no blocks: walk %v, want [0]", got)
	}
}

// On the persistent masks of the suite (64:8, 132 blocks, d128's 128 x 128 tiles and d64's
// 192 x 128) the LPT walk visits every item once, each block heaviest first, and leaves the
// busiest block at most 2% above the mean and never above the static walk's; a list per KV
// head (block-sparse maps) too.
func TestFwdWalkLPTOnTheSuite(t *testing.T) {
	for _, name := range []string{"causal_blockwise", "causal_document", "prefix_lm_document", "share_question", "block_causal_document", "sliding_window_causal", "sliding_window", "full_document"} {
		for _, s := range []int{8192, 16384, 32768} {
			for _, qt := range []int{128, 192} {
				spec, err := mask.Build(name, s, mask.Options{Seed: 42})
				if err != nil {
					t.Fatal(err)
				}
				w := raggedOr(listOf(t, []mask.Mask{spec.Mask}, qt, 128, false), spec.Mask, qt, 128)
				if !persistentForward(w) {
					continue
				}
				lpt := walkSpan(t, w, 64, 8, 132, fwdWalkLPT(w, 64, 8, 132))
				static := min(fwdWalkSpan(w, 64, 8, 132, true), fwdWalkSpan(w, 64, 8, 132, false))
				if lpt > 1.02 || lpt > static+1e-9 {
					t.Errorf("%s %d, %d-row tiles: LPT span %.4f, static %.4f", name, s, qt, lpt, static)
				}
			}
		}
	}
	sp := sparseForwardList(t)
	walkSpan(t, sp, 64, 8, 132, fwdWalkLPT(sp, 64, 8, 132))
}

// sparseForwardList is the forward list (128 x 128 tiles) of a block-sparse map at 16K with a
// mask per KV head: eight lists.
func sparseForwardList(t *testing.T) *WorkList {
	t.Helper()
	sp, err := mask.BlockSparse(16384, mask.SparseOptions{Seed: 3, Block: 128, Ratio: 0.3, HeadsKV: 8}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	w := listOf(t, sp.Heads, 128, 128, false)
	if w.Lists != 8 {
		t.Fatalf("%d lists, want 8", w.Lists)
	}
	return w
}
