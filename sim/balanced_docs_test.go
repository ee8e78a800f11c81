package sim

import (
	"context"
	"runtime"
	"testing"

	"github.com/longca/longca/dataset"
	"github.com/longca/longca/internal/heaptest"
	"github.com/longca/longca/kernels"
	"github.com/longca/longca/mask"
	"github.com/longca/longca/spmd/cp"
	"github.com/longca/longca/tensor"
)

// countsSource is a source of k documents, the i-th of length(i) tokens (a counts file's).
func countsSource(t *testing.T, k int, length func(i int) int) dataset.Source {
	t.Helper()
	counts := make([]int, k)
	for i := range counts {
		counts[i] = length(i)
	}
	src := dataset.NewCounts("counts.txt", counts)
	return src
}

// TestBalancedDocsBoundMeasured: balanced's estimate from its own layout (BalancedDocs:
// its blocks are cut from the sequence, each document held about once over all the
// dispatch ranks) is at least the heap its prediction takes, fwd and bwd, on 1-token and
// 1- to 64-token documents, on meshes where one dispatch rank holds every document
// (--cp-ulysses n), the plan's, and thd keys; within 3 times it where one dispatch rank
// holds every document (the most a document measured: elsewhere a case holds less a
// document, and the estimate is a bound); and, from 8 GPUs, far below zigzag on every
// rank, which it was counted as (18.8 GiB for 256 GPUs of short documents whose case
// peaks at 15 MB).
func TestBalancedDocsBoundMeasured(t *testing.T) {
	if testing.Short() {
		t.Skip("predicts balanced on up to 262,144 documents")
	}
	one := countsSource(t, 10, func(int) int { return 1 })
	short := countsSource(t, 5000, func(i int) int { return 1 + i*37%64 })
	for _, c := range []struct {
		name    string
		src     dataset.Source
		n, tpr  int
		ulysses int
		thd     bool
		close   bool // one dispatch rank holds every document: the estimate is held close
	}{
		{"1-token, 2 GPUs, --cp-ulysses 2", one, 2, 65536, 2, false, true},
		{"1-token, 4 GPUs, --cp-ulysses 4", one, 4, 65536, 4, false, true},
		{"1-token, 8 GPUs, the plan's mesh", one, 8, 16384, 0, false, false},
		{"1-token, 16 GPUs, thd keys", one, 16, 16384, 0, true, false},
		{"1-token, 64 GPUs, --cp-ulysses 1", one, 64, 4096, 1, false, false},
		{"short, 8 GPUs, the plan's mesh", short, 8, 65536, 0, false, false},
		{"short, 64 GPUs, thd keys", short, 64, 8192, 0, true, false},
	} {
		seqlen := c.n * c.tpr
		spec, err := mask.Build("causal_document", seqlen, mask.Options{Seed: 42, Purpose: mask.PurposeCP, Source: c.src})
		if err != nil {
			t.Fatal(err)
		}
		docs, err := spec.Docs()
		if err != nil {
			t.Fatal(err)
		}
		p := kernels.Problem{HeadsQ: 64, HeadsKV: 8, HeadDim: 128, DType: tensor.BF16, Mask: spec.Mask}
		passes := []kernels.Pass{kernels.Fwd, kernels.Bwd}
		o := Options{Machine: MachinePresets["h100-ib"], Kernel: KernelPresets["fa3-h100"], PartialDType: tensor.FP32}
		cfg := cp.Config{Ranks: c.n, HeadFirst: true, Docs: docs, Ulysses: c.ulysses}
		if c.thd {
			cfg.KVLayout, cfg.Stages = cp.KVDocs, 1
		}
		m, _ := cp.New("balanced")
		var pl *cp.Plan
		got, _ := heaptest.Peak(func() { pl, _, err = Predict(context.Background(), m, cfg, p, passes, o) })
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		parallel := runtime.GOMAXPROCS(0)
		if c.n <= DefaultExactRanks {
			parallel = c.n
		}
		steps, w := TracedSteps(c.n, 0, 0), PassWeight(passes)
		blocks, _ := BlockWork(c.n, seqlen, pl.Config.Block, pl.Config.Ulysses, 0, 0)
		est := MemoryBytesIn(c.n, BalancedDocs(len(docs)), steps, w, parallel) + SequenceBytes(seqlen) + blocks
		zigzag := MemoryBytesIn(c.n, ZigzagDocs(c.n, len(docs)), steps, w, parallel) + SequenceBytes(seqlen) + blocks
		t.Logf("%s (%d documents, %dx%d mesh): peak heap %.1f MB, estimated %.1f MB (zigzag on every rank %.0f MB)",
			c.name, len(docs), pl.Config.Ulysses, pl.Config.Ring, got/1e6, est/1e6, zigzag/1e6)
		switch {
		case got > est:
			t.Errorf("%s: %.1f MB of heap, estimated %.1f MB", c.name, got/1e6, est/1e6)
		case c.close && est > 3.5*got: // (3.04x on 2 GPUs --cp-ulysses 2 once spmd/cp's Plan.cached made each sub-mask once: the two ranks had each made their own)
			t.Errorf("%s: estimated %.1f MB, over 3.5 times the %.1f MB of heap", c.name, est/1e6, got/1e6)
		case c.n >= 8 && est*4 > zigzag:
			t.Errorf("%s: estimated %.1f MB, not far below zigzag on every rank (%.1f MB)", c.name, est/1e6, zigzag/1e6)
		}
	}
}

// TestContiguousDocsExpected: the contiguous layout estimated before the documents are
// drawn (their expected count) meets about as many documents a chunk as the drawn ones
// do, and no more than there are.
func TestContiguousDocsExpected(t *testing.T) {
	short := countsSource(t, 5000, func(i int) int { return 1 + i*37%64 })
	for _, ring := range []int{1, 8, 64, 512} {
		seqlen := 512 * 8192
		spec, err := mask.Build("causal_document", seqlen, mask.Options{Seed: 42, Purpose: mask.PurposeCP, Source: short})
		if err != nil {
			t.Fatal(err)
		}
		docs, err := spec.Docs()
		if err != nil {
			t.Fatal(err)
		}
		drawn := ContiguousDocs(ring, docs, seqlen)
		exp := ContiguousDocsExpected(ring, float64(len(docs)), seqlen)
		if exp.RankDocs > float64(len(docs)) || exp.RankDocs < 0.85*drawn.RankDocs || exp.RankDocs > 1.25*drawn.RankDocs {
			t.Errorf("ring %d: %.0f documents a chunk expected, %.0f drawn (of %d)", ring, exp.RankDocs, drawn.RankDocs, len(docs))
		}
		if exp.Pieces != drawn.Pieces || exp.Steps != drawn.Steps {
			t.Errorf("ring %d: expected %+v, drawn %+v", ring, exp, drawn)
		}
	}
}
