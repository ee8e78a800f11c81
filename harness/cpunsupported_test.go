package harness

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/longca/longca/comm"
	"github.com/longca/longca/comm/local"
	"github.com/longca/longca/kernels"
	"github.com/longca/longca/kernels/ref"
	"github.com/longca/longca/mask"
	"github.com/longca/longca/results"
	"github.com/longca/longca/tensor"
)

// TestCPUnsupportedRowsCarryTheMask: cp's unsupported rows carry their case's mask_area,
// flops, mask_params and document columns, as its ok rows of the same mask and seed do
// (and simulate's unsupported rows do), whichever path refused the case: a method without
// a mesh on the rank count (usp on 3 ranks, refused before any plan), a plan that refused
// the heads (ulysses: 4 query heads over 3 ranks), and a kernel that refused the rank's
// problem (the fault kernel's 2 query heads). The first two had mask_area and flops 0 and
// mask_params "{}".
func TestCPUnsupportedRowsCarryTheMask(t *testing.T) {
	const n = 3
	var mu sync.Mutex
	builds := 0
	counted := func(name string, seqlen int, seed uint64) (mask.Spec, error) {
		mu.Lock()
		builds++
		mu.Unlock()
		return cpTestMasks(name, seqlen, seed)
	}
	sw := CPSweep{Methods: []string{"usp", "ulysses", "ring-p2p"}, Masks: []string{"causal_document", "causal"}, SeqLen: 96,
		Heads: []Heads{{headsOK, 2}, {headsUnsupported, 2}}, HeadDim: 8, DType: tensor.BF16,
		Passes: []kernels.Pass{kernels.Fwd, kernels.Bwd}, Samples: 2, Seed: 3, Kernel: "fault", Build: counted}
	cases, err := sw.Cases(n)
	if err != nil {
		t.Fatal(err)
	}
	skipped := 0
	for _, cs := range cases {
		if cs.Skip != nil {
			skipped++
		}
	}
	if skipped < 4 {
		t.Fatalf("%d cases refused up front, want usp's and ulysses' (4 or more)", skipped)
	}
	builds = 0
	rows := make([][]results.Row, n)
	err = local.Run(n, func(c comm.Comm) error {
		r := &CPRunner{Sweep: sw, Comm: c, Kernel: faultKernel{ref.New(ref.Options{}), true}, Warmup: 0, Iters: 1,
			Base: results.Row{Host: "test"}}
		return RunCP(context.Background(), r, cases, func(_ int, row results.Row) error {
			rows[c.Rank()] = append(rows[c.Rank()], row)
			return nil
		})
	}, local.WithTimeout(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	// ring-p2p's samples of 2 masks and 2 heads on each rank (those the kernel refused are
	// planned too); the refused cases' masks built once a mask on each rank (kept for the
	// cases after)
	if ok := 2 * 2 * 2 * n; builds > ok+2*n {
		t.Errorf("%d masks built on %d ranks: want at most %d (the ok samples') and one a mask for the refused cases", builds, n, ok)
	}
	// ring-p2p's ok rows, by mask, pass and sample
	type key struct {
		mask, pass string
		sample     int64
	}
	ok := map[key]results.Row{}
	for _, row := range rows[0] {
		if row.Status == results.StatusOK {
			ok[key{row.Mask, row.Pass, row.Sample}] = row
		}
	}
	if len(ok) != 8 {
		t.Fatalf("%d ok rows, want ring-p2p's 2 masks x 2 passes x 2 samples", len(ok))
	}
	paths := map[string]int{}
	for rank, rs := range rows {
		for _, row := range rs {
			if row.Status != results.StatusUnsupported {
				continue
			}
			what := fmt.Sprintf("rank %d %s %s %d:%d %s (%s)", rank, row.Method, row.Mask, row.HeadsQ, row.HeadsKV, row.Pass, row.Reason)
			paths[row.Method]++
			o, found := ok[key{row.Mask, row.Pass, row.Sample}]
			if !found {
				t.Fatalf("%s: no ok row of its mask and pass", what)
			}
			if row.Seed != o.Seed {
				t.Errorf("%s: seed %d, the ok row's %d", what, row.Seed, o.Seed)
			}
			if row.MaskArea != o.MaskArea || row.MaskArea <= 0 {
				t.Errorf("%s: mask_area %d, want the ok row's %d", what, row.MaskArea, o.MaskArea)
			}
			if want := o.FLOPs * float64(row.HeadsQ) / float64(o.HeadsQ); row.FLOPs != want || row.FLOPs <= 0 {
				t.Errorf("%s: flops %g, want %g (the ok row's %g at %d query heads)", what, row.FLOPs, want, o.FLOPs, o.HeadsQ)
			}
			pass, err := kernels.ParsePass(row.Pass)
			if err != nil {
				t.Fatal(err)
			}
			if want := kernels.AreaFLOPs(float64(row.MaskArea), int(row.HeadsQ), int(row.HeadDim), pass); row.FLOPs != want {
				t.Errorf("%s: flops %g, want 4 x area x heads x dim x pass factor = %g", what, row.FLOPs, want)
			}
			if row.MaskParams != o.MaskParams || row.DocSource != o.DocSource {
				t.Errorf("%s: mask_params %s, doc_source %q; the ok row's %s, %q", what, row.MaskParams, row.DocSource, o.MaskParams, o.DocSource)
			}
		}
	}
	for _, m := range sw.Methods {
		if paths[m] == 0 {
			t.Errorf("no unsupported row of %s: a path is not tested (%v)", m, paths)
		}
	}
}

// TestCPMaskFactsKeptOnlyWhileARefusedCaseIsAhead: a runner keeps a sample's mask facts
// (its parameters, the document lengths among them) only while a refused case of that
// mask is still to come. It had kept every sample's of every case for the whole sweep,
// read by none (8.4 MB a rank for 8 samples of 262,144 1-token documents): here the
// refused usp cases come first, so after ring-p2p's samples nothing is left, and a sweep
// without a refused case keeps nothing at any point.
func TestCPMaskFactsKeptOnlyWhileARefusedCaseIsAhead(t *testing.T) {
	const n = 3
	for _, methods := range [][]string{{"usp", "ring-p2p"}, {"ring-p2p"}} {
		sw := CPSweep{Methods: methods, Masks: []string{"causal_document", "causal"}, SeqLen: 96,
			Heads: []Heads{{headsOK, 2}}, HeadDim: 8, DType: tensor.BF16,
			Passes: []kernels.Pass{kernels.Fwd}, Samples: 3, Seed: 5, Kernel: "fault", Build: cpTestMasks}
		cases, err := sw.Cases(n)
		if err != nil {
			t.Fatal(err)
		}
		var mu sync.Mutex
		most, left := map[int]int{}, map[int]int{}
		unsupported := 0
		err = local.Run(n, func(c comm.Comm) error {
			r := &CPRunner{Sweep: sw, Comm: c, Kernel: faultKernel{ref.New(ref.Options{}), true}, Warmup: 0, Iters: 1,
				Base: results.Row{Host: "test"}}
			err := RunCP(context.Background(), r, cases, func(_ int, row results.Row) error {
				mu.Lock()
				defer mu.Unlock()
				if len(r.masks) > most[c.Rank()] {
					most[c.Rank()] = len(r.masks)
				}
				if row.Status == results.StatusUnsupported && row.MaskArea > 0 {
					unsupported++
				}
				return nil
			})
			mu.Lock()
			left[c.Rank()] = len(r.masks)
			mu.Unlock()
			return err
		}, local.WithTimeout(time.Minute))
		if err != nil {
			t.Fatal(err)
		}
		for rank := 0; rank < n; rank++ {
			if left[rank] != 0 {
				t.Errorf("%v, rank %d: %d samples' mask facts kept after the sweep, want none (no refused case after the last)", methods, rank, left[rank])
			}
			if want := 0; len(methods) == 1 && most[rank] != want {
				t.Errorf("%v, rank %d: up to %d samples' mask facts kept, want %d (no refused case)", methods, rank, most[rank], want)
			}
		}
		if len(methods) == 2 && unsupported != n*2 {
			t.Errorf("%v: %d unsupported rows with their mask's area, want usp's 2 masks (a refused case's rows are its first sample's) on each of %d ranks", methods, unsupported, n)
		}
	}
}
