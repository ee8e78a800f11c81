package session

import (
	"math"
	"strings"
	"testing"

	"github.com/longca/longca/harness"
	"github.com/longca/longca/kernels"
	"github.com/longca/longca/sim"
	"github.com/longca/longca/tensor"
)

// simulation is longca simulate's default description of one method and mask on gpus
// (8K tokens a GPU, 64:8 heads, fwd and bwd) with exact and sampled ranks.
func simulation(method, mk string, gpus, exact, sampled int) *Simulation {
	return &Simulation{
		Sweep: harness.CPSweep{Methods: []string{method}, Masks: []string{mk}, Heads: []harness.Heads{{Q: 64, KV: 8}}, HeadDim: 128,
			DType: tensor.BF16, Passes: []kernels.Pass{kernels.Fwd, kernels.Bwd}, Samples: 1, Seed: 42},
		TokensPerRank: 8192, GPUs: []int{gpus}, Machine: sim.MachinePresets[sim.DefaultPreset], Exact: exact, Sampled: sampled,
	}
}

// TestFitSimulationCountsTracedRanks: 4096 exact ranks of ring-p2p (each rank's events in
// every step and pass) are refused on a host with 18 GiB to give, as is a sample of every
// one of 4096 ranks (--sampled-ranks 4096); 1024 exact ranks (4.8 GB measured) and the
// default sample of 4096 fit. The estimate let 4096 exact ranks through ("at_most 6s"),
// and the run grew to 23.5 GB.
func TestFitSimulationCountsTracedRanks(t *testing.T) {
	const avail = 18 << 30
	for _, c := range []struct {
		gpus, exact, sampled int
		want                 string // "": fits
	}{
		{4096, 4096, 0, "use a smaller --exact-ranks (4096 traces every rank of 4096)"},
		{4096, 16, 4096, "use a smaller --sampled-ranks (4096)"},
		{1024, 1024, 0, ""},
		{4096, 16, 0, ""},
	} {
		o := simulation("ring-p2p", "causal", c.gpus, c.exact, c.sampled)
		err := fitSimulationIn(o, maskCache(o), avail, 1)
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%d GPUs, --exact-ranks %d --sampled-ranks %d: refused: %v", c.gpus, c.exact, c.sampled, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "of host memory")):
			t.Errorf("%d GPUs, --exact-ranks %d --sampled-ranks %d: %v; want a refusal saying %q", c.gpus, c.exact, c.sampled, err, c.want)
		}
	}
}

// TestMemoryEstimateCoversMeasuredRuns: the estimate of each run measured for it (peak
// resident memory of longca simulate --exact-ranks N --samples 1, default sizes, on the
// 2-core build machine) is above the measurement, for one case at a time.
func TestMemoryEstimateCoversMeasuredRuns(t *testing.T) {
	for _, m := range []struct {
		method, mask string
		gpus         int
		gb           float64
	}{
		{"ring-p2p", "causal", 1024, 4.66}, {"ring-p2p", "full", 1024, 4.79}, {"usp", "full", 1024, 3.90},
		{"loongtrain", "full", 1024, 4.51}, {"ring-p2p", "causal", 512, 1.30}, {"ring-p2p", "causal", 128, 0.15},
		{"ring-p2p", "full_document_long", 128, 0.66}, {"ring-allgather", "full_document_long", 256, 6.15},
		{"ring-p2p", "full_document_long", 256, 6.28}, {"ring-p2p", "causal_document_long", 256, 3.60},
	} {
		o := simulation(m.method, m.mask, m.gpus, m.gpus, 0)
		b := maskCache(o)(m.mask, o.seqlenFor(m.gpus), o.Sweep.Seed)
		if b.err != nil {
			t.Fatal(b.err)
		}
		w := sim.PassWeight(o.Sweep.Passes)
		est := sim.MemoryBytes(m.gpus, len(b.docs), sim.TracedSteps(m.gpus, m.gpus, 0), w, m.gpus) + sim.SequenceBytes(o.seqlenFor(m.gpus))
		if est < m.gb*1e9 {
			t.Errorf("%s %s on %d exact ranks: estimated %.2f GB, measured %.2f GB", m.method, m.mask, m.gpus, est/1e9, m.gb)
		}
	}
}

// A calibration over 25% rms error in either pass is warned of, naming --kernel-model and
// the prior; one within it is not.
func TestPoorFitWarning(t *testing.T) {
	if w := poorFitWarning(sim.FitReport{Samples: [2]int{4, 4}, RMSRel: [2]float64{0.02, 0.04}}, "fa3-h100"); w != "" {
		t.Errorf("a good fit warned: %s", w)
	}
	for _, rms := range [][2]float64{{0.31, 0.02}, {0.01, 6013.8}, {math.NaN(), 0}} {
		w := poorFitWarning(sim.FitReport{Samples: [2]int{4, 4}, RMSRel: rms}, "cpu-ref")
		if !strings.Contains(w, "--kernel-model") || !strings.Contains(w, "cpu-ref") {
			t.Errorf("rms %v: %q, want a warning naming --kernel-model and the prior", rms, w)
		}
	}
}

// TestFitSimulationCountsBalancedBlocks: balanced's sub-masks at its default block grow as
// the square of the sequence's blocks: 64 GPUs of 1M tokens (causal, fwd, measured 7.7 GB
// and 59-68 s under a logged at_most of 3 s) are counted, 2M (four times that) is refused
// on a host of 18 GiB to give, and the same sizes without balanced are not refused for it.
func TestFitSimulationCountsBalancedBlocks(t *testing.T) {
	const avail = 18 << 30
	sized := func(method string, tpr int) *Simulation {
		o := simulation(method, "causal", 64, 0, 0)
		o.TokensPerRank, o.Sweep.Passes = tpr, []kernels.Pass{kernels.Fwd}
		return o
	}
	o := sized("balanced", 1<<20)
	if b, _ := o.blockWork(64); b < 7.7e9 {
		t.Errorf("64 GPUs of 1M tokens: %.1f GB counted for balanced's sub-masks, under the 7.7 measured", b/1e9)
	}
	if err := fitSimulationIn(o, maskCache(o), avail, 1); err != nil {
		t.Errorf("64 GPUs of 1M tokens (measured 7.7 GB): refused: %v", err)
	}
	o = sized("balanced", 2<<20)
	if err := fitSimulationIn(o, maskCache(o), avail, 1); err == nil || !strings.Contains(err.Error(), "of host memory") || !strings.Contains(err.Error(), "a larger --cp-block") {
		t.Errorf("64 GPUs of 2M tokens: %v; want a refusal for memory naming --cp-block", err)
	}
	if b, s := sized("ring-p2p", 2<<20).blockWork(64); b != 0 || s != 0 {
		t.Errorf("ring-p2p: %g bytes, %g s of balanced's sub-masks", b, s)
	}
}
