package session

import (
	"context"
	"runtime"
	"testing"

	"github.com/longca/longca/harness"
	"github.com/longca/longca/internal/heaptest"
	"github.com/longca/longca/kernels"
	"github.com/longca/longca/sim"
	"github.com/longca/longca/spmd/cp"
	"github.com/longca/longca/tensor"
)

// TestZigzagLaidBoundsMeasured: the memory of a zigzag case counted from its documents'
// lengths (zigzagLaid) is at least the heap its prediction takes (heaptest.Peak of
// sim.Predict, fwd and bwd) and within 3 times it, on 1-token and 1- to 64-token
// documents, rings of 8 to 64 ranks, every rank traced or a sample, ring-p2p, usp and
// ring-allgather, and on the default (long) documents; never above sim.ZigzagDocs' figure
// (one slice a document and piece pair, as these masks have).
// sim.ZigzagDocs counts every document as long: 64 GPUs of 1-token documents were
// estimated at 19 GiB a case where the prediction's heap peaked at 2.3 GB (rank 0 holds
// every document, and each of its 64 steps' sub-masks was given a slot for each); 0.2 GB
// since they hold their slices alone (spmd/cp subMask), estimated at 0.29 GB.
func TestZigzagLaidBoundsMeasured(t *testing.T) {
	if testing.Short() {
		t.Skip("predicts zigzag cases of up to 131,072 documents (5-10 s)")
	}
	ones := countsDocs(t, 10, func(int) int { return 1 })
	short := countsDocs(t, 5000, func(i int) int { return 1 + i*37%64 })
	for _, c := range []struct {
		name    string
		docs    harness.Docs
		method  string
		n, tpr  int
		ulysses int
		mk      string
		far     bool // every document long is far above the heap
	}{
		{"1-token, 8 GPUs, every rank traced", ones, "ring-p2p", 8, 8192, 0, "causal_document", true},
		{"1-token, 32 GPUs, sampled", ones, "ring-p2p", 32, 2048, 0, "causal_document", true},
		{"1-token, ring-allgather, 32 GPUs", ones, "ring-allgather", 32, 4096, 0, "causal_document", true},
		{"short, 16 GPUs, every rank traced", short, "ring-p2p", 16, 8192, 0, "causal_document", false},
		{"short, 64 GPUs, sampled", short, "ring-p2p", 64, 8192, 0, "causal_document", false},
		{"short, usp 2x32", short, "usp", 64, 8192, 2, "full_document", false},
		{"long, 64 GPUs", harness.Docs{}, "ring-p2p", 64, 8192, 0, "full_document_long", false},
	} {
		o := onDocs(simulation(c.method, c.mk, c.n, 0, 0), c.docs)
		if c.docs.IsDefault() {
			o = simulation(c.method, c.mk, c.n, 0, 0)
		}
		o.TokensPerRank = c.tpr
		seqlen := o.seqlenFor(c.n)
		b := maskCache(o)(c.mk, seqlen, o.Sweep.Seed)
		if b.err != nil {
			t.Fatal(b.err)
		}
		cfg := cp.Config{Ranks: c.n, HeadFirst: true, Docs: b.docs, Sharding: cp.Zigzag, Ulysses: c.ulysses}
		ring := c.n
		if c.ulysses > 0 {
			cfg.Ring = c.n / c.ulysses
			ring = cfg.Ring
		}
		passes := []kernels.Pass{kernels.Fwd, kernels.Bwd}
		p := kernels.Problem{HeadsQ: 64, HeadsKV: 8, HeadDim: 128, DType: tensor.BF16, Mask: b.spec.Mask}
		opts := sim.Options{Machine: sim.MachinePresets["h100-ib"], Kernel: sim.KernelPresets["fa3-h100"], PartialDType: tensor.FP32}
		m, _ := cp.New(c.method)
		var err error
		got, _ := heaptest.Peak(func() { _, _, err = sim.Predict(context.Background(), m, cfg, p, passes, opts) })
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		parallel := runtime.GOMAXPROCS(0) // traced ranks walking their steps at once
		if c.n <= sim.DefaultExactRanks {
			parallel = c.n
		}
		steps, w := sim.TracedSteps(c.n, 0, 0), sim.PassWeight(passes)
		lay := zigzagLaid(c.n, ring, b.docs, b.spec.Mask).memLayout(parallel, c.method == "ring-allgather")
		est := sim.MemoryBytesIn(c.n, lay, steps, w, parallel) + sim.SequenceBytes(seqlen)
		old := sim.MemoryBytesIn(c.n, sim.ZigzagDocs(ring, len(b.docs)), steps, w, parallel) + sim.SequenceBytes(seqlen)
		t.Logf("%s (%d documents): peak heap %.1f MB, estimated %.1f MB (%.1fx), every document long %.1f MB (%.1fx)",
			c.name, len(b.docs), got/1e6, est/1e6, est/got, old/1e6, old/got)
		switch {
		case got > est:
			t.Errorf("%s: %.1f MB of heap, estimated %.1f MB", c.name, got/1e6, est/1e6)
		case est > 3*got && got > 20e6: // (below, a case's fixed cost, 16 MB, is most of the estimate)
			t.Errorf("%s: estimated %.1f MB, over 3 times the %.1f MB of heap", c.name, est/1e6, got/1e6)
		case est > old:
			t.Errorf("%s: estimated %.1f MB, above the %.1f MB of every document long", c.name, est/1e6, old/1e6)
		case c.far && old < 5*got:
			t.Errorf("%s: every document long is %.1f MB, not far above the %.1f MB of heap: the case does not show the layout", c.name, old/1e6, got/1e6)
		}
	}
}
