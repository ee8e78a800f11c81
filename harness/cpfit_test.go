package harness

import (
	"runtime"
	"testing"
	"weak"

	"github.com/longca/longca/dataset"
	"github.com/longca/longca/kernels"
	"github.com/longca/longca/mask"
	"github.com/longca/longca/spmd/cp"
	"github.com/longca/longca/tensor"
)

// docsSweep is a CP sweep of one method over causal_document on documents of the given
// token counts.
func docsSweep(method string, seqlen int, counts []int, sh cp.Sharding) CPSweep {
	docs := Docs{Source: &dataset.Empirical{Name: "t", Counts: counts}}
	return CPSweep{Methods: []string{method}, Masks: []string{"causal_document"}, SeqLen: seqlen, Heads: []Heads{{Q: 8, KV: 2}},
		HeadDim: 32, DType: tensor.BF16, Passes: []kernels.Pass{kernels.Fwd}, Samples: 1, Seed: 42, Kernel: "ref",
		Build: docs.CPBuilder(), Docs: docs, Mesh: cp.Config{HeadFirst: true, Sharding: sh}}
}

// Zigzag sharding pads every document to a multiple of 2 x ranks: 1-token documents on
// 8 ranks make each rank hold 16 times its tokens (cp --tokens-per-rank 4K of a counts
// file of ones held 65,536 tokens a rank, where FitCP counted 4,608, and peaked at 8 GB).
// DocsFit reads it from the documents' source before any mask is built, at least what the
// plan then holds and not far over; contiguous sharding and balanced pad nothing.
func TestDocsFitCountsZigzagPadding(t *testing.T) {
	for _, c := range []struct {
		method string
		n      int
		counts []int
		sh     cp.Sharding
	}{
		{"ring-p2p", 8, []int{1}, cp.DefaultSharding},
		{"ring-p2p", 8, []int{16}, cp.DefaultSharding},
		{"ring-p2p", 8, []int{1, 2, 3, 5, 40, 100}, cp.DefaultSharding},
		{"ring-p2p", 4, []int{7, 9, 300}, cp.Zigzag},
		{"usp", 8, []int{3}, cp.DefaultSharding},
		{"ring-allgather", 16, []int{1, 30}, cp.DefaultSharding},
		{"ring-p2p", 8, []int{1}, cp.Contiguous},
		{"ulysses", 8, []int{1}, cp.DefaultSharding},
		{"balanced", 8, []int{1}, cp.DefaultSharding},
	} {
		s := docsSweep(c.method, c.n*512, c.counts, c.sh)
		fit := s.DocsFit(c.n)
		cases, err := s.Cases(c.n)
		if err != nil {
			t.Fatal(err)
		}
		for sample := range 4 {
			_, pl, _, err := s.PlanSample(cases[0], sample)
			if err != nil {
				t.Fatalf("%s on %d ranks: %v", c.method, c.n, err)
			}
			got := float64(pl.Tokens)
			if c.method == "balanced" {
				got = float64(pl.Layout.Local) // its dispatch units' tokens, no document padded
			}
			if fit.Tokens < got || fit.Tokens > 1.25*got+float64(2*c.n) {
				t.Errorf("%s on %d ranks, counts %v, %v, sample %d: estimated %v tokens a rank, the plan holds %v", c.method, c.n, c.counts, c.sh, sample, fit.Tokens, got)
			}
		}
	}
	if f := docsSweep("ring-p2p", 8*4096, []int{1}, cp.DefaultSharding).DocsFit(8); f.Tokens != 65538 || f.PaddedBy != "ring-p2p causal_document" {
		t.Errorf("8 ranks of 4K 1-token documents: %v tokens a rank (padded by %q), want 65,536 and the last document's 2", f.Tokens, f.PaddedBy)
	}
}

// What DocsFit counts of a rank's mask, its plan and its step sub-masks holds what they
// take: the live heap of the mask and its plan, and a rank's share of every rank's
// sub-masks, is within RankBytes and more than a fifth of it (1- to 40-token documents on
// 8 ranks, zigzag and contiguous).
func TestDocsFitMaskBytesHoldWhatThePlanTakes(t *testing.T) {
	live := func() uint64 {
		runtime.GC()
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		return m.HeapAlloc
	}
	for _, c := range []struct {
		counts []int
		sh     cp.Sharding
	}{{[]int{1}, cp.DefaultSharding}, {[]int{16}, cp.DefaultSharding}, {[]int{40}, cp.DefaultSharding}, {[]int{1}, cp.Contiguous}, {[]int{16}, cp.Contiguous}} {
		const n = 8
		s := docsSweep("ring-p2p", n*16384, c.counts, c.sh)
		fit := s.DocsFit(n)
		cases, err := s.Configs(n)
		if err != nil {
			t.Fatal(err)
		}
		before := live()
		_, pl, spec, err := s.PlanSample(cases[0], 0)
		if err != nil {
			t.Fatal(err)
		}
		planned := live()
		for q := range pl.Layout.Ring {
			for k := range pl.Layout.Ring {
				pl.StepMask(q, k)
			}
		}
		// every rank builds the mask and plans it; the sub-masks are shared out
		held := float64(planned-before) + float64(live()-planned)/n
		runtime.KeepAlive(spec)
		runtime.KeepAlive(pl)
		t.Logf("counts %v, %v: %.3g bytes held a rank, %.3g estimated", c.counts, c.sh, held, fit.MaskBytes)
		if held > fit.MaskBytes || held < fit.MaskBytes/5 {
			t.Errorf("counts %v, %v: a rank holds about %.3g bytes of its mask and plan, DocsFit says %.3g", c.counts, c.sh, held, fit.MaskBytes)
		}
	}
}

// A sweep's masks are built one at a time by Cases, each let go before the next: at a
// long length a mask of short documents is gigabytes, and FitCP counts one (the first
// sample's masks of every --masks entry were all held at once).
func TestCasesBuildsOneMaskAtATime(t *testing.T) {
	var prev weak.Pointer[mask.Slice]
	built, heldBack := 0, 0
	s := docsSweep("ring-p2p", 8*1024, []int{1}, cp.DefaultSharding)
	s.Methods = []string{"ring-p2p", "ring-allgather"}
	s.Masks = []string{"causal_document", "full_document", "share_question"}
	docs := s.Docs
	s.Build = func(name string, seqlen int, seed uint64) (mask.Spec, error) {
		runtime.GC()
		if built > 0 && prev.Value() != nil {
			heldBack++
		}
		spec, err := docs.CPBuilder()(name, seqlen, seed)
		if err == nil && len(spec.Mask.Slices) > 0 {
			prev = weak.Make(&spec.Mask.Slices[0])
		}
		built++
		return spec, err
	}
	cases, err := s.Cases(8)
	if err != nil {
		t.Fatal(err)
	}
	if len(cases) != 6 || built != 3 {
		t.Fatalf("%d cases, %d masks built: want 6 and 3", len(cases), built)
	}
	if heldBack > 0 {
		t.Errorf("%d of the %d masks were still held when the next was built", heldBack, built)
	}
}

// The check of a mask of short documents runs at its full length (its area is small),
// and every rank gathers every rank's padded outputs: CPCheckFootprint sees it from the
// documents' expected lengths before any mask is built, where a mask of long documents
// is checked at a few thousand tokens.
func TestCPCheckFootprintOfShortDocuments(t *testing.T) {
	short := docsSweep("ring-p2p", 8*65536, []int{1}, cp.DefaultSharding)
	long := docsSweep("ring-p2p", 8*65536, []int{65536}, cp.DefaultSharding)
	fs, ls := short.CPCheckFootprint(8, 8, 0, false, true)
	fl, ll := long.CPCheckFootprint(8, 8, 0, false, true)
	if ls != 8*65536 || ll > 4096 {
		t.Errorf("checked at %d tokens (1-token documents) and %d (64K-token ones): want the full 512K and at most 4K", ls, ll)
	}
	if fs.Host < 10*fl.Host {
		t.Errorf("the check of 1-token documents at 512K: %.3g bytes, not well over the 4K check's %.3g", fs.Host, fl.Host)
	}
}
