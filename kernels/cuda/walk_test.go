package cuda

import (
	"slices"
	"testing"

	"github.com/longca/longca/harness"
	"github.com/longca/longca/kernels"
	"github.com/longca/longca/mask"
	"github.com/longca/longca/spmd/cp"
	"github.com/longca/longca/tensor"
)

// walkBalance models a persistent forward's walk of list w's heads x row tiles items on
// slots blocks: each item costs its entries plus fixed (its Q load, first tile and epilogue,
// in tiles) where it has entries; items are numbered as fwd_item numbers them (KV-major:
// a KV head's query heads and row tiles together; else heads fastest) over the list's row
// order. static: item i on block i % slots (the kernel's blockIdx.x, + gridDim.x walk);
// else each next item to the block that is free first (the counter's walk). The result is
// the mean block's load over the heaviest's: 1 is even.
func walkBalance(w *WorkList, hq, hkv, slots int, kvMajor, static bool, fixed float64) float64 {
	gq, n := hq/hkv, hq*w.RowTiles
	load := make([]float64, slots)
	total := 0.0
	for item := 0; item < n; item++ {
		kvh, row := (item%hq)/gq, item/hq
		if kvMajor {
			kvh = item / (gq * w.RowTiles)
			row = (item - kvh*gq*w.RowTiles) / gq
		}
		l := 0
		if w.Lists > 1 {
			l = kvh
		}
		qt := int(w.Order[l*w.RowTiles+row])
		c := float64(w.Start[l*(w.RowTiles+1)+qt+1] - w.Start[l*(w.RowTiles+1)+qt])
		if c > 0 {
			c += fixed
		}
		total += c
		b := item % slots
		if !static && item >= slots {
			b = 0
			for i := range load {
				if load[i] < load[b] {
					b = i
				}
			}
		}
		load[b] += c
	}
	return total / float64(slots) / slices.Max(load)
}

// The model behind sm90dw (sm90's since the twenty-eighth session), on the case it was written
// for: call 98a's one-rank ring-allgather and loongtrain rows read 0.89-0.90 of the kernel alone on the documents' forward (d128, 64:8
// heads, 8K tokens), their rows zigzag-padded to 8,196 (65 row tiles for 64), the rest of the
// plan the same (entries +0.4%). The static walk of 65 x 64 items on 132 blocks is about 10%
// less even than of 64 x 64; the counter's walk is even either way. (Measured, call 101: sm90-static
// 0.88-0.90 on those rows, the counter 0.99.)
func TestStaticWalkBalanceOnPaddedRows(t *testing.T) {
	for _, c := range []struct {
		mask       string
		padded     float64 // the static walk's balance on the padded rows, at most
		contiguous float64 // and on the mask's own rows, at least
	}{{"full_document_long", 0.92, 0.97}, {"causal_document_long", 0.88, 0.95}} {
		spec, err := harness.BuildCPMask(c.mask, 8192, 42)
		if err != nil {
			t.Fatal(err)
		}
		docs, err := spec.Docs()
		if err != nil {
			t.Fatal(err)
		}
		p := kernels.Problem{HeadsQ: 64, HeadsKV: 8, HeadDim: 128, DType: tensor.BF16, Mask: spec.Mask}
		for _, sh := range []cp.Sharding{cp.Contiguous, cp.Zigzag} {
			m, err := cp.New("ring-allgather")
			if err != nil {
				t.Fatal(err)
			}
			pl, err := m.Plan(cp.Config{Ranks: 1, Docs: docs, Sharding: sh}, p)
			if err != nil {
				t.Fatal(err)
			}
			g := pl.GatherMask(0)
			w, err := BuildWorkList([]mask.Mask{g}, 128, 128, false)
			if err != nil {
				t.Fatal(err)
			}
			if !persistentForward(w) {
				t.Fatalf("%s %v: the d128 forward is not persistent by the rule; the model's premise is gone", c.mask, sh)
			}
			static := walkBalance(w, 64, 8, 132, true, true, 1.5)
			counter := walkBalance(w, 64, 8, 132, true, false, 1.5)
			t.Logf("%s %v: %d rows, %d row tiles: static walk %.3f, counter %.3f", c.mask, sh, g.SeqQ, w.RowTiles, static, counter)
			if sh == cp.Zigzag && (w.RowTiles != 65 || static > c.padded) {
				t.Errorf("%s zigzag: %d row tiles, static walk %.3f; want 65 and at most %.2f", c.mask, w.RowTiles, static, c.padded)
			}
			if sh == cp.Contiguous && (w.RowTiles != 64 || static < c.contiguous) {
				t.Errorf("%s contiguous: %d row tiles, static walk %.3f; want 64 and at least %.2f", c.mask, w.RowTiles, static, c.contiguous)
			}
			if counter < 0.99 {
				t.Errorf("%s %v: the counter's walk %.3f, want 0.99 or more", c.mask, sh, counter)
			}
		}
	}
}

// sm90 (since the twenty-eighth session's sm90dw) draws its items by the counter wherever the
// forward runs persistent: by the rule at both head dims (fwd90opd, fwd90mopd), and where the
// rule does not at head dim 64 (sm90dy's); never the wide or the 64-key forward, nor the plain
// one. sm90-static keeps the static walk where the rule is persistent.
func TestDynPersistRule(t *testing.T) {
	dp, static := &Kernel{arch: variantNamed(t, "sm90")}, &Kernel{arch: variantNamed(t, "sm90-static")}
	if !slices.Contains(dp.arch.defines, "LONGCA_FWD_DYN_P") {
		t.Fatal("sm90 compiles no fwd90opd (LONGCA_FWD_DYN_P)")
	}
	if static.arch.fwdDynP || slices.Contains(static.arch.defines, "LONGCA_FWD_DYN_P") || !static.arch.fwdDyn {
		t.Fatal("sm90-static takes or compiles the persistent counter, or lost the d64 one")
	}
	for _, v := range archVariants {
		if v.fwdDynP && (!v.fwdDyn || !slices.Contains(v.defines, "LONGCA_FWD_DYN_P")) {
			t.Errorf("%s takes the rule's persistent forwards by the counter without fwdDyn or LONGCA_FWD_DYN_P", v.name)
		}
		// fwd90opd is compiled at head dim 128 only: a variant running fwd90o at 64 would look
		// up fwd90opd_*_d64, which no module has (TestVariantsDefineTheirEntries's map is by name)
		if v.fwdDynP && v.fwd.at(64).fn == fwdSM90O.fn {
			t.Errorf("%s takes the counter with fwd90o at head dim 64: fwd90opd exists at 128 only", v.name)
		}
	}
	for _, c := range []struct {
		mask    string
		s, d    int
		persist bool // by the rule
	}{
		{"causal_document", 8192, 128, true}, {"causal_blockwise", 16384, 128, true}, {"sliding_window_causal", 16384, 64, true},
		{"prefix_lm_document", 16384, 64, true}, {"full", 8192, 128, false}, {"causal", 16384, 64, false},
	} {
		spec, err := mask.Build(c.mask, c.s, mask.Options{Seed: 42})
		if err != nil {
			t.Fatal(err)
		}
		fv := dp.arch.fwd.at(c.d)
		w, err := BuildWorkList([]mask.Mask{spec.Mask}, fv.qTile, fv.kTile, false)
		if err != nil {
			t.Fatal(err)
		}
		if got := dp.forwardPersistent(fv, w); got != c.persist {
			t.Fatalf("%s %d d%d: persistent by the rule %v, want %v (the cases' premise)", c.mask, c.s, c.d, got, c.persist)
		}
		if got, want := dp.dynForward(fv, w), c.persist || c.d == 64; got != want {
			t.Errorf("sm90 %s %d d%d: counter %v, want %v", c.mask, c.s, c.d, got, want)
		}
		if got, want := static.dynForward(fv, w), !c.persist && c.d == 64; got != want {
			t.Errorf("sm90-static %s %d d%d: counter %v, want %v", c.mask, c.s, c.d, got, want)
		}
		for _, other := range []variant{fwdSM90N, fwdSM90S, fwdSM90} {
			if dp.dynForward(other, w) {
				t.Errorf("sm90 %s %d: the counter taken by %s", c.mask, c.s, other.fn)
			}
		}
	}
}
