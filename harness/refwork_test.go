package harness

import (
	"math"
	"testing"

	"github.com/longca/longca/dataset"
	"github.com/longca/longca/kernels"
	"github.com/longca/longca/mask"
)

// visitsByRows is blockVisits the long way: every row's spans listed (mask.RowSpans, not
// merged), each block's extent and span count from them.
func visitsByRows(rows [][]mask.Range) float64 {
	var v float64
	for b := 0; b < len(rows); b += refTileRows {
		lo, hi, n := 1<<62, 0, 0
		for _, r := range rows[b:min(b+refTileRows, len(rows))] {
			for _, sp := range r {
				lo, hi, n = min(lo, sp.Start), max(hi, sp.End), n+1
			}
		}
		if n > 0 {
			v += float64((hi-lo+refTileCols-1)/refTileCols) * float64(n)
		}
	}
	return v
}

// transpose is the mask with queries and keys swapped, slice by slice: its rows are the
// original's columns.
func transpose(m mask.Mask) [][]mask.Range {
	cols := make([][]mask.Range, m.SeqK)
	for _, s := range m.Slices {
		lo, hi := s.Band()
		for k := max(s.K.Start, 0); k < min(s.K.End, m.SeqK); k++ {
			a, b := max(s.Q.Start, k-hi), min(s.Q.End-1, k-lo)
			if a <= b {
				cols[k] = append(cols[k], mask.Range{Start: a, End: b + 1})
			}
		}
	}
	return cols
}

// NewRefShape counts, from the slices alone, the spans kernels/ref visits at its tiles as
// listing every row's spans does, for every registered mask and for documents of a few
// tokens (the masks whose rows see a far question or prefix are where it matters).
func TestRefShapeCountsTheReferencesTileVisits(t *testing.T) {
	for _, name := range mask.Names() {
		for _, doc := range []int{1, 3, 40} {
			for _, s := range []int{97, 1000} {
				spec, err := mask.Build(name, s, mask.Options{Seed: 3, Source: &dataset.Empirical{Name: "t", Counts: []int{doc}}})
				if err != nil {
					continue // a length the mask does not take (block_causal_document's blocks)
				}
				m := spec.Mask
				rs := NewRefShape(m)
				if want := visitsByRows(m.RowSpans()); rs.RowVisits != want {
					t.Errorf("%s S=%d documents of %d: row visits %v, listing the rows gives %v", name, s, doc, rs.RowVisits, want)
				}
				if want := visitsByRows(transpose(m)); rs.ColVisits != want {
					t.Errorf("%s S=%d documents of %d: column visits %v, listing the columns gives %v", name, s, doc, rs.ColVisits, want)
				}
			}
		}
	}
}

// The reference's work besides its FLOPs is what makes a mask of 1-token documents slow
// on it: at 16K tokens, 8:2 heads of dim 32, 0.11 s forward where its FLOPs are 0.02 s,
// and share_question's rows walking the tiles back to the question 3 times that (0.36 s;
// measured on one core of the build machine). The work, in FLOPs at 1 GFLOP/s, is several
// times the FLOPs, and the estimate lies between 1x and 3x those measurements.
func TestRefWorkOfShortDocuments(t *testing.T) {
	ones := &dataset.Empirical{Name: "ones", Counts: []int{1}}
	for _, c := range []struct {
		mask        string
		fwd, bwd    float64 // seconds measured on one core
		wantAtLeast float64 // the work over the mask's FLOPs, at least
	}{
		{"causal_document", 0.111, 0.211, 4},
		{"share_question", 0.358, 0.565, 10},
		{"causal_blockwise", 0.140, 0.689, 4},
	} {
		spec, err := mask.Build(c.mask, 16384, mask.Options{Seed: 1, Source: ones})
		if err != nil {
			t.Fatal(err)
		}
		p := kernels.Problem{HeadsQ: 8, HeadsKV: 2, HeadDim: 32, Mask: spec.Mask}
		for _, pc := range []struct {
			pass     kernels.Pass
			measured float64
		}{{kernels.Fwd, c.fwd}, {kernels.Bwd, c.bwd}} {
			work := RefWork(spec.Mask, 8, 2, 32, pc.pass)
			flops := p.FLOPs(pc.pass)
			sec := (work + flops) / DefaultRefFLOPs
			t.Logf("%s %s: %.3f s estimated, %.3f s measured", c.mask, pc.pass, sec, pc.measured)
			if work < c.wantAtLeast*flops {
				t.Errorf("%s %s: work %.3g is not %vx its FLOPs %.3g", c.mask, pc.pass, work, c.wantAtLeast, flops)
			}
			if sec < pc.measured || sec > 3*pc.measured {
				t.Errorf("%s %s: %.3f s estimated, %.3f s measured", c.mask, pc.pass, sec, pc.measured)
			}
		}
	}
	if s := RefWorkScale(DefaultRefFLOPs, 2); s != 1 {
		t.Errorf("RefWorkScale at the assumed rate: %v, want 1", s)
	}
	if s := RefWorkScale(8e9, 2); s != 4 {
		t.Errorf("RefWorkScale of 8 GFLOP/s on 2 cores: %v, want 4 (the work shared by the workers spread over the cores)", s)
	}
}

// The reference converts its elements in and out on one core (kernels/ref's headMajor and
// storeTokenMajor, outside its workers): at a rate measured on every core they count at
// one core's assumed rate, the rows and tile visits spread over the cores. Spread as
// well, the kernel sweep of 256K's backward of 1-token documents was estimated at 68 s
// for 102 s.
func TestRefWorkAtCountsConversionsOnOneCore(t *testing.T) {
	if s := RefSerialScale(DefaultRefFLOPs); s != 1 {
		t.Errorf("RefSerialScale at the assumed rate: %v, want 1", s)
	}
	if s := RefSerialScale(8e9); s != 8 {
		t.Errorf("RefSerialScale of 8 GFLOP/s: %v, want 8 (one core's rate)", s)
	}
	spec, err := Docs{Source: &dataset.Empirical{Name: "ones", Counts: []int{1}}}.KernelBuilder()("causal_document", 16<<10, 42)
	if err != nil {
		t.Fatal(err)
	}
	rs := NewRefShape(spec.Mask)
	for _, pass := range []kernels.Pass{kernels.Fwd, kernels.Bwd, kernels.FwdBwd} {
		w, el := rs.Work(8, 2, 64, pass), rs.Elements(8, 2, 64, pass)
		if el <= 0 || el >= w {
			t.Errorf("%s: elements %.3g of work %.3g", pass, el, w)
		}
		if got := rs.WorkAt(8, 2, 64, pass, DefaultRefFLOPs, 2); got != w {
			t.Errorf("%s at the assumed rate: %.4g, want the work %.4g", pass, got, w)
		}
		// at 8 GFLOP/s on 2 cores: the elements at 1 GFLOP/s, the rest at 2
		want := el/DefaultRefFLOPs + (w-el)/(2*DefaultRefFLOPs)
		if got := rs.WorkAt(8, 2, 64, pass, 8e9, 2) / 8e9; math.Abs(got-want) > 1e-9*want {
			t.Errorf("%s at 8 GFLOP/s on 2 cores: %.4g s, want %.4g s", pass, got, want)
		}
	}
}
