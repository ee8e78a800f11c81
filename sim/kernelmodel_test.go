package sim

import (
	"math"
	"testing"

	"github.com/longca/longca/kernels"
	"github.com/longca/longca/mask"
	"github.com/longca/longca/tensor"
)

// TestH200PresetFitsKernelAlone: the preset longca-cuda-h200 is Fit's answer (rounded) to
// the kernel-alone rows of the H200 run of 2026-12-05 (the kernel_tflops baseline of
// longca cp --ranks 8 --kernel cuda --baseline measure, 8K tokens per rank, 64:8, d128,
// seed 42, KernelPresets' comment), from the earlier preset (532 / 397 dense, longcaShape)
// as prior: every coefficient within 1% of a fresh fit, and every one of the 8 rows
// predicted within 7% (rms at most 1.5% forward, 4% backward).
func TestH200PresetFitsKernelAlone(t *testing.T) {
	type alone struct {
		mask   string
		seqlen int        // the baseline's tokens (the document masks of call 1 were padded to 8210)
		tflops [2]float64 // fwd, bwd
	}
	runs := [][]alone{
		{ // 2026-12-05 cp-final.sh: --ranks 8 --kernel cuda --baseline measure, the six methods
			{"full", 8192, [2]float64{590.5, 535.2}}, {"causal", 8192, [2]float64{563.3, 460.4}},
			{"full_document_long", 8192, [2]float64{544.5, 463.2}}, {"causal_document_long", 8192, [2]float64{474.1, 387.1}},
		},
	}
	preset := KernelPresets["longca-cuda-h200"]
	var samples []Sample
	for _, run := range runs {
		for _, a := range run {
			spec, err := mask.Build(a.mask, a.seqlen, mask.Options{Seed: 42, Purpose: mask.PurposeCP})
			if err != nil {
				t.Fatal(err)
			}
			p := kernels.Problem{HeadsQ: 64, HeadsKV: 8, HeadDim: 128, DType: tensor.BF16, Mask: spec.Mask}
			tl := TilesOf(spec.Mask, preset.TileQ, preset.TileK)
			for i, pass := range []kernels.Pass{kernels.Fwd, kernels.Bwd} {
				samples = append(samples, Sample{Label: a.mask + " " + pass.String(), Pass: pass, Tiles: tl, Heads: 64, Dim: 128,
					Seconds: p.FLOPs(pass) / (a.tflops[i] * 1e12)})
			}
		}
	}
	prior := presetModel("prior", "", 132, 532, 397, 15, 40, longcaShape)
	fit, rep, err := Fit(prior, samples, "the H200 kernel-alone rows")
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("fit: %s", rep)
	for _, c := range []struct {
		name      string
		got, want float64
	}{
		{"fwd launch", preset.Fwd.LaunchUs, fit.Fwd.LaunchUs}, {"fwd full tile", preset.Fwd.FullTileNs, fit.Fwd.FullTileNs},
		{"fwd partial tile", preset.Fwd.PartialTileNs, fit.Fwd.PartialTileNs}, {"fwd row", preset.Fwd.RowNs, fit.Fwd.RowNs},
		{"bwd launch", preset.Bwd.LaunchUs, fit.Bwd.LaunchUs}, {"bwd full tile", preset.Bwd.FullTileNs, fit.Bwd.FullTileNs},
		{"bwd partial tile", preset.Bwd.PartialTileNs, fit.Bwd.PartialTileNs}, {"bwd row", preset.Bwd.RowNs, fit.Bwd.RowNs},
	} {
		if math.Abs(c.got/c.want-1) > 0.01 {
			t.Errorf("%s: preset %.4g, the fit %.4g (more than 1%% apart): refit the preset", c.name, c.got, c.want)
		}
	}
	var sq, n [2]float64
	for _, s := range samples {
		e := preset.TimeOn(s.Pass, s.Tiles, s.Heads, s.Dim)/s.Seconds - 1
		pi := 0
		if s.Pass == kernels.Bwd {
			pi = 1
		}
		sq[pi], n[pi] = sq[pi]+e*e, n[pi]+1
		if math.Abs(e) > 0.07 {
			t.Errorf("%s: preset %+.1f%% off the kernel alone (limit 7%%)", s.Label, 100*e)
		}
	}
	for pi, limit := range [2]float64{0.015, 0.04} {
		if rms := math.Sqrt(sq[pi] / n[pi]); n[pi] == 0 || rms > limit {
			t.Errorf("%s: rms error %.1f%% over the %.0f rows, limit %.1f%%", []string{"fwd", "bwd"}[pi], 100*rms, n[pi], 100*limit)
		}
	}
}
