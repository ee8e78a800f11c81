package session

import (
	"context"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/longca/longca/dataset"
	"github.com/longca/longca/harness"
	"github.com/longca/longca/kernels"
	"github.com/longca/longca/spmd"
	"github.com/longca/longca/tensor"
)

// kernel --kernels ref --counts d1.txt --seqlens 256K --head-dim 32 --passes P -w 1 -n 1
// (1-token documents) peaked at these resident sizes (/usr/bin/time -v, the build
// machine), where FitKernels counted the check at 4K (a full mask's area: 0.72, 1.18,
// 0.96 and 1.39 GB): the documents' area is small, so the check runs at the full length.
var shortDocPeaks = []struct {
	mask  string
	heads harness.Heads
	pass  kernels.Pass
	peak  float64 // bytes
}{
	{"causal_document", harness.Heads{Q: 1, KV: 1}, kernels.Fwd, 1019244 << 10},
	{"causal_document", harness.Heads{Q: 1, KV: 1}, kernels.Bwd, 1963832 << 10},
	{"full_document", harness.Heads{Q: 2, KV: 1}, kernels.Fwd, 1357088 << 10},
	{"causal_document", harness.Heads{Q: 4, KV: 1}, kernels.Fwd, 2641224 << 10},
}

func shortDocSweep(maskName string, seqlen int, h harness.Heads, d int, pass kernels.Pass, counts []int) KernelSweep {
	docs := harness.Docs{Source: &dataset.Empirical{Name: "d1.txt", ID: "counts:d1.txt", Counts: counts}}
	sw := harness.Sweep{Masks: []string{maskName}, SeqLens: []int{seqlen}, Heads: []harness.Heads{h}, HeadDim: d, DType: tensor.BF16,
		Kernels: []string{"ref"}, Passes: []kernels.Pass{pass}, Seed: 42}
	return KernelSweep{Sweep: sw, Build: docs.KernelBuilder(), Warmup: 1, Iters: 1, Check: true, CheckBudget: harness.DefaultCheckBudget}
}

// TestFitKernelsCountsTheCheckOfShortDocuments: the estimate of each case above is at least
// its measured peak, and on a host where that peak does not fit FitKernels refuses it
// before anything runs, in one line naming --check-budget and a budget under which the
// check runs smaller and the case fits (accepted then).
func TestFitKernelsCountsTheCheckOfShortDocuments(t *testing.T) {
	s := New("kernel", "", "", spmd.World{Size: 1}, "test", nil, nil, nil)
	var pl place
	pl.k, pl.onDevice, pl.isRef, pl.devBytes, pl.ok = KernelPlace("ref", kernels.Options{})
	budgetRE := regexp.MustCompile(`give --check-budget (\S+) or less \(checks it at 4K`)
	for _, tc := range shortDocPeaks {
		k := shortDocSweep(tc.mask, 256<<10, tc.heads, 32, tc.pass, []int{1})
		cs := k.Sweep.Cases()[0]
		withHost(t, 1<<40)
		if f, area := fitFootprint(cs, k, pl, Machine(), planCache{}); f.Host < tc.peak || area == nil {
			t.Errorf("%s: estimated at %s, under the %s measured", cs, harness.FormatBytes(f.Host), harness.FormatBytes(tc.peak))
		}
		withHost(t, tc.peak) // its share for a case is less than the peak
		_, err := s.FitKernels(context.Background(), k)
		if _, usage := err.(*UsageError); !usage {
			t.Fatalf("%s on a host of its peak: %v, want a usage error", cs, err)
		}
		msg := err.Error()
		if !strings.HasPrefix(msg, "longca: --check-budget 2e+09: case "+cs.String()) || strings.Contains(msg, "\n") || !strings.Contains(msg, "its check runs at 256K") {
			t.Errorf("refusal %q", msg)
		}
		m := budgetRE.FindStringSubmatch(msg)
		if m == nil {
			t.Fatalf("refusal %q names no budget", msg)
		}
		b, perr := strconv.ParseFloat(m[1], 64)
		if perr != nil {
			t.Fatalf("refusal %q: budget %q: %v", msg, m[1], perr)
		}
		k.CheckBudget = b
		if _, err := s.FitKernels(context.Background(), k); err != nil {
			t.Errorf("%s at --check-budget %g: %v", cs, b, err)
		}
	}
}

// TestFitKernelsKeepsTheBoundOfOtherCases: full and causal masks, unchecked cases, and
// documents long enough that the check runs at 4K anyway are counted as
// harness.KernelFootprint counts them, and full and causal masks are not laid out for it.
func TestFitKernelsKeepsTheBoundOfOtherCases(t *testing.T) {
	withHost(t, 1<<40)
	var pl place
	pl.k, pl.onDevice, pl.isRef, pl.devBytes, pl.ok = KernelPlace("ref", kernels.Options{})
	for _, k := range []KernelSweep{
		shortDocSweep("full", 64<<10, harness.Heads{Q: 8, KV: 2}, 64, kernels.Fwd, []int{1}),
		shortDocSweep("causal", 256<<10, harness.Heads{Q: 1, KV: 1}, 32, kernels.Bwd, []int{1}),
		shortDocSweep("causal", 1024, harness.Heads{Q: 4, KV: 1}, 32, kernels.Fwd, []int{1}),
		shortDocSweep("causal_document", 256<<10, harness.Heads{Q: 1, KV: 1}, 32, kernels.Fwd, []int{4096}),
		shortDocSweep("full_document", 64<<10, harness.Heads{Q: 64, KV: 8}, 128, kernels.Bwd, []int{8192}),
	} {
		cs := k.Sweep.Cases()[0]
		plans := planCache{}
		f, _ := fitFootprint(cs, k, pl, Machine(), plans)
		if want := harness.KernelFootprint(cs, true, k.CheckBudget, false, true); f != want {
			t.Errorf("%s: %+v, the bound's %+v", cs, f, want)
		}
		if harness.CheckSizeBounded(cs) && len(plans) > 0 {
			t.Errorf("%s: %d masks laid out", cs, len(plans))
		}
		k.Check = false
		if f, area := fitFootprint(cs, k, pl, Machine(), planCache{}); area != nil || f != harness.KernelFootprint(cs, false, 0, false, true) {
			t.Errorf("%s unchecked: %+v", cs, f)
		}
	}
}
