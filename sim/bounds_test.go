package sim

import (
	"context"
	"runtime"
	"testing"
	"time"

	"github.com/longca/longca/internal/heaptest"
	"github.com/longca/longca/kernels"
	"github.com/longca/longca/spmd/cp"
	"github.com/longca/longca/tensor"
)

// TestMemoryBytesBoundsExactRanks: the estimate of a case whose every rank is traced
// (--exact-ranks N) is at least the heap its prediction takes, for every method on a
// mask without documents and one with, at longca simulate's default sizes (8K tokens a
// rank, 64:8 heads, fwd and bwd). The estimate had no term for the traces (a rank's
// events in every step and pass): 4096 exact ranks were let through at a few GB and
// grew past 23 GB.
func TestMemoryBytesBoundsExactRanks(t *testing.T) {
	const n = 64
	passes := []kernels.Pass{kernels.Fwd, kernels.Bwd}
	o := Options{Machine: MachinePresets["h100-ib"], Kernel: KernelPresets["fa3-h100"], ExactRanks: n, PartialDType: tensor.FP32}
	for _, mk := range []string{"causal", "full_document_long"} {
		p, docs := problem(t, mk, n*8192, 64, 8, 128)
		for _, name := range cp.Names() {
			m, _ := cp.New(name)
			cfg := cp.Config{Ranks: n, HeadFirst: true, Docs: docs}
			switch name {
			case "usp", "loongtrain": // the longest ring of their meshes
				cfg.Ulysses, cfg.Ring = 2, n/2
			case "ulysses":
				continue // 8 KV heads do not split over 64 ranks
			}
			var err error
			got, _ := heaptest.Peak(func() { _, _, err = Predict(context.Background(), m, cfg, p, passes, o) })
			if err != nil {
				t.Fatalf("%s %s: %v", name, mk, err)
			}
			est := MemoryBytes(n, len(docs), TracedSteps(n, n, 0), PassWeight(passes), n)
			t.Logf("%s %s (%d documents): peak heap %.1f MB, estimated %.1f MB", name, mk, len(docs), got/1e6, est/1e6)
			if got > est {
				t.Errorf("%s on %d exact ranks, %s (%d documents): %.1f MB of heap, estimated %.1f MB", name, n, mk, len(docs), got/1e6, est/1e6)
			}
		}
	}
}

// TestTracedStepsCountsTheSample: every rank through every step when exact; a sample of
// --sampled-ranks (never more than the ranks) otherwise; the default sample bounded on
// every ring length.
func TestTracedStepsCountsTheSample(t *testing.T) {
	if got := TracedSteps(4096, 4096, 0); got != 4096*4096 {
		t.Errorf("4096 exact ranks: %g steps, want 4096^2", got)
	}
	if got := TracedSteps(4096, 16, 1_000_000_000); got != 4096*4096 {
		t.Errorf("a sample of a billion on 4096 ranks: %g steps, want 4096^2 (every rank)", got)
	}
	if got := TracedSteps(4096, 16, 100); got < 100*4096 {
		t.Errorf("100 sampled ranks of 4096: %g steps, want at least 100 x 4096", got)
	}
	for _, n := range []int{17, 64, 100, 128, 200, 256, 1000, 8192} {
		got := TracedSteps(n, 16, 0)
		for r := 1; r <= n; r++ { // every ring length R <= n: its sample through R steps
			if want := float64(min(sampledRanks(r)+max(sampledRanks(r)/4, 2), r) * r); got < want {
				t.Fatalf("%d ranks: %g steps, fewer than a ring of %d's %g", n, got, r, want)
			}
		}
	}
}

// TestBlockWorkBoundsSmallBlocks: balanced's sub-masks at a small --cp-block (every
// rank's query blocks against every block it fetches) are within what MemoryBytes and
// BlockWork estimate together, on causal (the mask whose dispatch scatters the blocks
// most) at 64 GPUs and on a document mask at 8. MemoryBytes alone let --cp-block 1 on 64
// GPUs start at "at_most 1s" and grow past 11 GB.
func TestBlockWorkBoundsSmallBlocks(t *testing.T) {
	passes := []kernels.Pass{kernels.Fwd, kernels.Bwd}
	o := Options{Machine: MachinePresets["h100-ib"], Kernel: KernelPresets["fa3-h100"], PartialDType: tensor.FP32}
	for _, c := range []struct {
		mask     string
		n, block int
	}{{"causal", 64, 32}, {"causal_document_long", 8, 2}} {
		p, docs := problem(t, c.mask, c.n*8192, 64, 8, 128)
		m, _ := cp.New("balanced")
		var err error
		start := time.Now()
		got, _ := heaptest.Peak(func() {
			_, _, err = Predict(context.Background(), m, cp.Config{Ranks: c.n, HeadFirst: true, Docs: docs, Block: c.block}, p, passes, o)
		})
		took := time.Since(start).Seconds()
		if err != nil {
			t.Fatalf("%s at --cp-block %d: %v", c.mask, c.block, err)
		}
		mem := MemoryBytes(c.n, len(docs), TracedSteps(c.n, 0, 0), PassWeight(passes), min(c.n, runtime.GOMAXPROCS(0))) + SequenceBytes(c.n*8192)
		bytes, seconds := BlockWork(c.n, c.n*8192, c.block, 0, 0, 0)
		t.Logf("%s on %d GPUs, --cp-block %d: peak heap %.1f MB in %.1f s; MemoryBytes %.1f MB, BlockWork %.1f MB %.1f s",
			c.mask, c.n, c.block, got/1e6, took, mem/1e6, bytes/1e6, seconds)
		if got > mem+bytes {
			t.Errorf("%s on %d GPUs, --cp-block %d: %.1f MB of heap, estimated %.1f MB", c.mask, c.n, c.block, got/1e6, (mem+bytes)/1e6)
		}
	}
	// the reviewer's case: --cp-block 1 on 64 GPUs of 128K tokens, far past any host
	if b, s := BlockWork(64, 64<<17, 1, 0, 0, 0); b < 1e12 || s < 3600 {
		t.Errorf("--cp-block 1 on 64 GPUs of 128K tokens: %.3g bytes, %.3g s; want far past a host's memory and an hour", b, s)
	}
}
