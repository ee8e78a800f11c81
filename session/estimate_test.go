package session

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/longca/longca/harness"
	"github.com/longca/longca/kernels"
	"github.com/longca/longca/spmd"
	"github.com/longca/longca/spmd/cp"
	"github.com/longca/longca/tensor"
	"github.com/rs/zerolog"
)

// EstimateCP is harness.CPEstimate for the run as CP runs it: a sweep past SlowSweep says
// so once, with its estimate and the rates it assumed; a short one says nothing; and the
// estimate grows with what the run adds (checks, --overlap).
func TestEstimateCP(t *testing.T) {
	sweep := func(seqlen, samples int) (harness.CPSweep, []harness.CPCase) {
		s := harness.CPSweep{Methods: []string{"ring-p2p"}, Masks: []string{"causal"}, SeqLen: seqlen, Heads: []harness.Heads{{Q: 8, KV: 2}},
			HeadDim: 64, DType: tensor.BF16, Passes: []kernels.Pass{kernels.Fwd, kernels.Bwd}, Samples: samples, Seed: 42, Kernel: "ref",
			Mesh: cp.Config{HeadFirst: true}}
		cases, err := s.Cases(4)
		if err != nil {
			t.Fatal(err)
		}
		return s, cases
	}
	var buf bytes.Buffer
	log := zerolog.New(&buf)
	s := New("cp", "", "", spmd.World{Size: 1}, "test", &log, nil, nil)
	long, lc := sweep(256*1024, harness.MaxSamples)
	r := CPRun{Sweep: long, Cases: lc, Ranks: 4, InProcess: true, Warmup: 5, Iters: 15}
	est := s.EstimateCP(context.Background(), r)
	if est == nil || est.Total() <= SlowSweep {
		t.Fatalf("a 256K causal sweep on the CPU reference, %d samples: estimate %v, want over %s", harness.MaxSamples, est.Total(), SlowSweep)
	}
	if n := strings.Count(buf.String(), "this CP sweep will take about"); n != 1 {
		t.Errorf("%d warnings of a long sweep, want 1:\n%s", n, buf.String())
	}
	buf.Reset()
	short, sc := sweep(1024, 1)
	r = CPRun{Sweep: short, Cases: sc, Ranks: 4, InProcess: true, Warmup: 1, Iters: 1}
	base := s.EstimateCP(context.Background(), r)
	if base == nil || base.Total() <= 0 || base.Total() > SlowSweep || buf.Len() != 0 {
		t.Fatalf("a 1K sweep: estimate %v, log %q", base.Total(), buf.String())
	}
	r.Check, r.Overlap = true, true
	if more := s.EstimateCP(context.Background(), r); more.Total() <= base.Total() {
		t.Errorf("checked and with --overlap: %v, not more than %v", more.Total(), base.Total())
	}
	r.Sweep.Kernel = "no-such-kernel"
	if got := s.EstimateCP(context.Background(), r); got != nil {
		t.Errorf("a kernel that cannot be made: an estimate, want nil")
	}
}

// splitter is a device kernel whose backward splits a KV head's query heads over parts blocks.
type splitter struct {
	kernels.Kernel
	parts int
}

func (s splitter) BackwardPartials(group, d int) int { return s.parts }

// A case's device footprint holds the split backward's fp32 partials as many parts as the
// kernel says (cuda's sm90g8: 8 at 64:8, 4.3 GB at 64K d128), none for a kernel that does not
// split or for the forward.
func TestFootprintPartials(t *testing.T) {
	cs := harness.Case{Mask: "full", SeqLen: 65536, Heads: harness.Heads{Q: 64, KV: 8}, HeadDim: 128, DType: tensor.BF16, Kernel: "cuda", Pass: kernels.Bwd}
	var ks KernelSweep
	plain := footprint(cs, ks, place{onDevice: true, ok: true})
	split := footprint(cs, ks, place{k: splitter{parts: 8}, onDevice: true, ok: true})
	if got, want := split.Device-plain.Device, 2*8*65536.0*8*128*4; got != want {
		t.Errorf("64K 64:8 d128 backward split 8: %.3g more bytes than unsplit, want %.3g", got, want)
	}
	cs.Pass = kernels.Fwd
	if f, g := footprint(cs, ks, place{k: splitter{parts: 8}, onDevice: true, ok: true}), footprint(cs, ks, place{onDevice: true, ok: true}); f != g {
		t.Errorf("the forward's footprint grew with the split: %+v against %+v", f, g)
	}
}

// --settle is counted in a kernel sweep's estimate for the cases timed on a GPU (each grows
// by it), not for the CPU's, which never idle.
func TestEstimateCountsSettle(t *testing.T) {
	s := &Session{}
	sw := harness.Sweep{Masks: []string{"full"}, SeqLens: []int{128, 256}, Heads: []harness.Heads{{Q: 2, KV: 1}}, HeadDim: 8,
		DType: tensor.BF16, Kernels: []string{"ref", "gpu"}, Passes: []kernels.Pass{kernels.Fwd}}
	var pl place
	pl.k, pl.onDevice, pl.isRef, pl.devBytes, pl.ok = KernelPlace("ref", kernels.Options{})
	gpu := pl
	gpu.onDevice = true // the same kernel placed on a device: what the estimate asks of a GPU kernel
	places := map[string]place{"ref": pl, "gpu": gpu}
	k := KernelSweep{Sweep: sw, Warmup: 0, Iters: 1}
	m := harness.Machine{DeviceFLOPs: 1e14, RefFLOPs: 1e9}
	base := s.newEstimate(k, sw.Cases(), places, m).Total()
	k.Settle = 3 * time.Second
	with := s.newEstimate(k, sw.Cases(), places, m).Total()
	if d := with - base; d < 5900*time.Millisecond || d > 6100*time.Millisecond {
		t.Errorf("estimate %s without settle, %s with 3s on 2 GPU cases and 2 CPU cases: want 6s more", base, with)
	}
}

// kernels/ref lists a key range a query row for each of balanced's dispatch blocks before
// merging them, so a small --cp-block grows its spans as the sequence times its blocks
// (cp --kernel ref --cp-block 1 on 8 ranks of 8K tokens grew past 5.8 GB in 20 s): FitCP
// counts them and names --cp-block with the smallest block that fits; the default block,
// other methods and other kernels are not held to it.
func TestFitCPCountsRefSpansOfBalancedBlocks(t *testing.T) {
	defer func(m func() harness.Machine) { Machine = m }(Machine)
	Machine = func() harness.Machine { return harness.Machine{HostBytes: 16 << 30, RefFLOPs: 1e9, DeviceFLOPs: 1e12} }
	sweep := func(method string, block int) harness.CPSweep {
		return harness.CPSweep{Methods: []string{method}, Masks: []string{"causal"}, SeqLen: 64 << 10, Heads: []harness.Heads{{Q: 1, KV: 1}},
			HeadDim: 16, DType: tensor.BF16, Passes: []kernels.Pass{kernels.Fwd}, Samples: 1, Seed: 42, Kernel: "ref",
			Mesh: cp.Config{Block: block}}
	}
	err := FitCP(sweep("balanced", 1), 8, 8, true, kernels.Options{}, false, 0, "--tokens-per-rank 8K")
	if err == nil || !strings.Contains(err.Error(), "--cp-block 1 with --kernel ref") || !strings.Contains(err.Error(), "give --cp-block 8 or more") {
		t.Errorf("--cp-block 1, 8 ranks of 8K on the reference: %v, want a refusal naming --cp-block and the block of 8", err)
	}
	if _, usage := err.(*UsageError); !usage {
		t.Errorf("not a usage error: %v", err)
	}
	for _, ok := range []harness.CPSweep{sweep("balanced", 8), sweep("balanced", 0), sweep("ring-p2p", 1)} {
		if err := FitCP(ok, 8, 8, true, kernels.Options{}, false, 0, "--tokens-per-rank 8K"); err != nil {
			t.Errorf("%v --cp-block %d: %v", ok.Methods, ok.Mesh.Block, err)
		}
	}
	if r := harness.RefRangesPerRow(64<<10, 8); r != 8192 {
		t.Errorf("RefRangesPerRow(64K, block 8) = %v, want 8192", r)
	}
}

// A dry run plans balanced's dispatch, a few words and a placement a block: at a small
// --cp-block that outgrew the plan's estimate (cp --dry-run on 64 ranks of 128K at
// --cp-block 1: 1.1 GB and 55 s, estimated at 130 MB and under a second). FitCPPlan counts
// it and names --cp-block where it is what does not fit.
func TestFitCPPlanCountsTheDispatch(t *testing.T) {
	defer func(m func() harness.Machine) { Machine = m }(Machine)
	Machine = func() harness.Machine { return harness.Machine{HostBytes: 16 << 30, RefFLOPs: 1e9, DeviceFLOPs: 1e12} }
	sweep := func(block int) harness.CPSweep {
		return harness.CPSweep{Methods: []string{"balanced"}, Masks: []string{"causal"}, SeqLen: 64 << 20, Heads: []harness.Heads{{Q: 64, KV: 8}},
			HeadDim: 128, DType: tensor.BF16, Passes: []kernels.Pass{kernels.Fwd}, Samples: 1, Seed: 42, Kernel: "ref",
			Mesh: cp.Config{Block: block}}
	}
	err := FitCPPlan(sweep(1), 64, "--ranks 64, --tokens-per-rank 1M")
	if err == nil || !strings.Contains(err.Error(), "--cp-block 1: balanced's dispatch") {
		t.Errorf("64 ranks of 1M at --cp-block 1: %v, want a refusal naming --cp-block", err)
	}
	for _, b := range []int{0, 512} {
		if err := FitCPPlan(sweep(b), 64, "--ranks 64, --tokens-per-rank 1M"); err != nil {
			t.Errorf("--cp-block %d: %v", b, err)
		}
	}
	if by, s := harness.CPDispatchWork(8<<20, 1); by < 1.1e9 || s < 55 {
		t.Errorf("CPDispatchWork(8M tokens, block 1) = %.3g bytes, %.3g s: under the 1.1 GB and 55 s measured", by, s)
	}
}
