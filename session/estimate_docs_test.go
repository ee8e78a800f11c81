package session

import (
	"context"
	"strings"
	"testing"

	"github.com/longca/longca/dataset"
	"github.com/longca/longca/harness"
	"github.com/longca/longca/kernels"
	"github.com/longca/longca/mask"
	"github.com/longca/longca/spmd"
	"github.com/longca/longca/spmd/cp"
	"github.com/longca/longca/tensor"
)

// onesSweep is finding 1's CP sweep: ring-p2p over causal_document of documents of the
// given token counts, 8:2 heads of dim 32, the forward, on the reference.
func onesSweep(seqlen int, counts []int, sh cp.Sharding) harness.CPSweep {
	docs := harness.Docs{Source: &dataset.Empirical{Name: "d1.txt", ID: "counts:d1.txt", Counts: counts}}
	return harness.CPSweep{Methods: []string{"ring-p2p"}, Masks: []string{"causal_document"}, SeqLen: seqlen, Heads: []harness.Heads{{Q: 8, KV: 2}},
		HeadDim: 32, DType: tensor.BF16, Passes: []kernels.Pass{kernels.Fwd}, Samples: 1, Seed: 42, Kernel: "ref",
		Build: docs.CPBuilder(), Docs: docs, Mesh: cp.Config{HeadFirst: true, Sharding: sh}}
}

func withHost(t *testing.T, bytes float64) {
	t.Helper()
	old := Machine
	Machine = func() harness.Machine { return harness.Machine{HostBytes: bytes, RefFLOPs: 1e9, DeviceFLOPs: 1e12} }
	t.Cleanup(func() { Machine = old })
}

// cp --ranks 8 --tokens-per-rank 4K of 1-token documents: zigzag pads each to 16 tokens,
// so every rank holds 65,536 tokens, and the run peaked at 8.0 GB (and died in comm/local
// under ulimit -v 4000000) after FitCP had counted 4,608 tokens a rank. FitCP counts the
// padding, the ranks' masks and the check (at the full length: the documents' area is
// small), and refuses it on a host of 4 GiB in one line naming the documents and the
// length, and --sharding contiguous, which fits there; long documents fit.
func TestFitCPCountsPaddedDocuments(t *testing.T) {
	withHost(t, 4<<30)
	err := FitCP(onesSweep(8*4096, []int{1}, cp.DefaultSharding), 8, 8, true, kernels.Options{}, true, 0, "--tokens-per-rank 4K, --heads 8:2, --head-dim 32")
	if _, usage := err.(*UsageError); !usage {
		t.Fatalf("8 ranks of 4K 1-token documents on 4 GiB: %v, want a usage error", err)
	}
	for _, want := range []string{"--tokens-per-rank 4K:", "8 rank(s) of 65538 tokens", "counts:d1.txt gives documents of 1 token on average, about 32768 a sequence", "zigzag sharding pads",
		"--counts", "--sharding contiguous, which fits"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("refusal %q does not say %q", err, want)
		}
	}
	if strings.Contains(err.Error(), "\n") {
		t.Errorf("refusal of more than one line: %q", err)
	}
	for _, ok := range []harness.CPSweep{onesSweep(8*4096, []int{1}, cp.Contiguous), onesSweep(8*4096, []int{4096}, cp.DefaultSharding)} {
		if err := FitCP(ok, 8, 8, true, kernels.Options{}, true, 0, "--tokens-per-rank 4K"); err != nil {
			t.Errorf("%v, documents %v: %v", ok.Mesh.Sharding, ok.Docs.Source.(*dataset.Empirical).Counts, err)
		}
	}
	// a host the sequence does not fit however long its documents: the sizes are named
	withHost(t, 64<<20)
	if err = FitCP(onesSweep(8*4096, []int{1}, cp.DefaultSharding), 8, 8, true, kernels.Options{}, true, 0, "--tokens-per-rank 4K, --heads 8:2, --head-dim 32"); err == nil || strings.Contains(err.Error(), "--sharding contiguous") {
		t.Errorf("on 64 MiB: %v, want the sizes named and no --sharding contiguous", err)
	}
}

// cp --dry-run --ranks 8 --tokens-per-rank 2M of 1-token documents built 16M documents'
// mask (3.7 GB; Go's fatal out-of-memory under ulimit -v 3000000) before any estimate:
// FitCPPlan counts a mask of documents and its plan, and refuses it in one line naming
// the documents and the length.
func TestFitCPPlanCountsTheMasksDocuments(t *testing.T) {
	withHost(t, 3e9)
	err := FitCPPlan(onesSweep(8<<21, []int{1}, cp.DefaultSharding), 8, "--ranks 8, --tokens-per-rank 2M")
	if _, usage := err.(*UsageError); !usage {
		t.Fatalf("a dry run of 8 ranks of 2M 1-token documents on 3 GB: %v, want a usage error", err)
	}
	for _, want := range []string{"--tokens-per-rank 2M:", "documents of 1 token on average, about 16777216 a sequence", "give longer documents (--counts) or a shorter sequence (--tokens-per-rank 2M)"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("refusal %q does not say %q", err, want)
		}
	}
	if err := FitCPPlan(onesSweep(8<<21, []int{4096}, cp.DefaultSharding), 8, "--ranks 8, --tokens-per-rank 2M"); err != nil {
		t.Errorf("4K-token documents: %v", err)
	}
}

// kernel --kernels ref over masks of 1-token documents was estimated at a tenth of its
// time or less (16K: "2s" for 25.9 s; 64K: "9s" for 300 s and more): the reference's
// rows, elements and tile walks are most of it. Measured on one core of the build
// machine: 0.11 s a forward of causal_document at 16K (8:2, dim 32), 0.36 s of
// share_question; the estimate of ten repetitions is at least ten of those, and the
// check's references at their full length are counted too.
func TestKernelEstimateCountsTheReferencesWork(t *testing.T) {
	ones := harness.Docs{Source: &dataset.Empirical{Name: "ones", Counts: []int{1}}}
	sw := harness.Sweep{Masks: []string{"causal_document", "share_question"}, SeqLens: []int{16384}, Heads: []harness.Heads{{Q: 8, KV: 2}},
		HeadDim: 32, DType: tensor.BF16, Kernels: []string{"ref"}, Passes: []kernels.Pass{kernels.Fwd}, Seed: 42}
	var pl place
	pl.k, pl.onDevice, pl.isRef, pl.devBytes, pl.ok = KernelPlace("ref", kernels.Options{})
	m := harness.Machine{DeviceFLOPs: 1e14, RefFLOPs: 1e9}
	measured := map[string]float64{"causal_document": 0.111, "share_question": 0.358}
	for _, check := range []bool{false, true} {
		k := KernelSweep{Sweep: sw, Build: ones.KernelBuilder(), Warmup: 0, Iters: 10, Check: check}
		est := (&Session{}).newEstimate(k, sw.Cases(), map[string]place{"ref": pl}, m)
		for i, c := range sw.Cases() {
			want := 10 * measured[c.Mask]
			if check {
				want += 2 * measured[c.Mask] // the exact and naive references, at the full length
			}
			if got := est.Seconds(i); got < want {
				t.Errorf("check %v: %s estimated at %.2f s, under the %.2f s measured", check, c.Mask, got, want)
			}
		}
	}
}

// A CP run of 1-token documents on the reference (8 ranks of 1K, ring-p2p, the forward,
// checked, with its baseline) took 3.0 s on the build machine and was estimated at 0.6 s:
// every rank's masks of 8K documents, the reference's work on its 16-fold padded tokens,
// and the check at the full length (the documents' area is small) were not counted. The
// same run under contiguous sharding took 0.96 s; the estimates keep the two apart.
func TestEstimateCPCountsShortDocuments(t *testing.T) {
	s := New("cp", "", "", spmd.World{Size: 1}, "test", nil, nil, nil)
	est := func(sh cp.Sharding) float64 {
		sw := onesSweep(8*1024, []int{1}, sh)
		cases, err := sw.Cases(8)
		if err != nil {
			t.Fatal(err)
		}
		e := s.EstimateCP(context.Background(), CPRun{Sweep: sw, Cases: cases, Ranks: 8, InProcess: true, Warmup: 0, Iters: 1,
			Check: true, Baseline: &harness.Baseline{}})
		return e.Total().Seconds()
	}
	zigzag, contiguous := est(cp.DefaultSharding), est(cp.Contiguous)
	if zigzag < 2 {
		t.Errorf("8 ranks of 1K 1-token documents: estimated %.2f s, measured 3.0 s", zigzag)
	}
	if contiguous < 0.8 || zigzag < 1.8*contiguous {
		t.Errorf("estimated %.2f s zigzag, %.2f s contiguous: measured 3.0 and 0.96 s", zigzag, contiguous)
	}
}

// The refusal of a mask too big to build names the flags that make that mask smaller, by
// the command that runs it: a mask of documents (kernel) is counted at a document a
// token, so a shorter --seqlens, whatever --counts or --max-doc give (it named sparse's
// --block and --avg-block, and --heads, which changes no mask of documents); a
// block-sparse one (sparse) the layout's block flag, --ratios, --heads and --seqlens.
func TestFitPlanMasksNamesTheMasksFlags(t *testing.T) {
	withHost(t, 1<<30)
	docs := harness.Case{Mask: "causal_document", SeqLen: 16 << 20, Heads: harness.Heads{Q: 8, KV: 2}, HeadDim: 32, Kernel: "ref"}
	uniform := harness.Case{Mask: "block_sparse_uniform", SeqLen: 64 << 10, Heads: harness.Heads{Q: 8, KV: 2}, HeadDim: 32, Kernel: "ref",
		Sparse: harness.SparseSpec{Block: 1, Ratio: 0.5}}
	variable := uniform
	variable.Sparse = harness.SparseSpec{AvgBlock: 1, Ratio: 0.5}
	for _, c := range []struct {
		cs          harness.Case
		wants, nots []string
	}{
		{docs, []string{"give a shorter --seqlens", "--counts", "--max-doc"}, []string{"--block", "--heads", "--avg-block"}},
		{uniform, []string{"--block)", "--ratios", "--heads", "--seqlens"}, []string{"--avg-block", "--counts"}},
		{variable, []string{"--avg-block", "--ratios", "--heads", "--seqlens"}, []string{"--block)", "--counts"}},
	} {
		err := FitPlanMasks([]harness.Case{c.cs})
		if err == nil {
			t.Fatalf("%s: fits in 1 GiB", c.cs)
		}
		for _, w := range c.wants {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: %q does not name %s", c.cs, err, w)
			}
		}
		for _, w := range c.nots {
			if strings.Contains(err.Error(), w) {
				t.Errorf("%s: %q names %s, which does not change this mask", c.cs, err, w)
			}
		}
	}
	if !mask.DrawsDocuments(docs.Mask) {
		t.Fatal("causal_document draws no documents")
	}
}
