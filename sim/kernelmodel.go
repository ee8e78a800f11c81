package sim

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	"github.com/longca/longca/kernels"
)

// PassModel prices one pass of a block-tiled attention kernel on a mask's tiles, per
// query head, at head dim 128 (scaled by HeadDim/128):
//
//	time = launch + max(heads x (full x FullTileNs + partial x PartialTileNs + rows x RowNs),
//	                    SMs x (maxRow x PartialTileNs + RowNs))
//
// A full tile is computed at the kernel's dense rate; a partial tile is computed whole
// and masked per element (slower, and only part of its pairs count as FLOPs); every
// q-block row costs a prologue and epilogue (loading Q, writing O and the LSE, or dQ in
// the backward). The second term is the critical path of the busiest row when there are
// fewer rows x heads than the GPU has SMs. So two masks of the same FLOPs can differ:
// the document masks of CP steps at many ranks are many tiny rectangles, mostly
// partial tiles.
type PassModel struct {
	LaunchUs      float64 `json:"launch_us"`
	FullTileNs    float64 `json:"full_tile_ns"`
	PartialTileNs float64 `json:"partial_tile_ns"`
	RowNs         float64 `json:"row_ns"`
}

// KernelModel is a kernel's rate model: the tile grid it works on, its SMs, and the
// forward and backward prices.
type KernelModel struct {
	Name  string    `json:"name"`
	TileQ int       `json:"tile_q"`
	TileK int       `json:"tile_k"`
	SMs   int       `json:"sms"`
	Fwd   PassModel `json:"fwd"`
	Bwd   PassModel `json:"bwd"`
	// Source says where the numbers come from: a preset's published figures, or the rows
	// a fit used and how well it fits them.
	Source string `json:"source"`
	// FittedTo is the kernel whose rows a fit used (--calibrate, --kernel-rows), "" for a
	// preset: what readers of a prediction's rows ask of its model, not Source's prose.
	FittedTo string `json:"fitted_to,omitempty"`
}

// tileNs is the time of one full tile of one head at dense rate tflops: 4 x bq x bk x 128
// FLOPs for the forward, 2.5 times that for the backward (MASKS.md).
func tileNs(bq, bk int, tflops float64, pass kernels.Pass) float64 {
	return 4 * float64(bq*bk) * 128 * pass.FLOPsFactor() / (tflops * 1e12) * 1e9
}

// shape is the cost of a partial tile and of a q-block row relative to a full tile,
// forward and backward: how a kernel handles masks beyond its dense rate.
type shape struct{ fwdPartial, fwdRow, bwdPartial, bwdRow float64 }

var (
	// faShape: FlashAttention-3's published document-causal rates (545 / 377 against 688
	// / 588 full) need partial tiles well dearer than full ones.
	faShape = shape{1.8, 2, 2.6, 3}
	// longcaShape: longca's cuda kernel, fitted to its measured rates on 4 to 6 masks
	// (DEVICE.md, docs/perf.md): partial tiles about as dear as full ones, rows dear.
	longcaShape = shape{1.15, 1.7, 1.0, 1.8}
	// longcaSM90Shape: the same kernel's sm90 variant as of 2026-12-05, fitted with its
	// dense rates (KernelPresets' longca-cuda-h200); {1.16, 1.76, 1.16, 2.09} on 2026-12-03.
	longcaSM90Shape = shape{1.24, 1.93, 1.36, 2.46}
)

// presetModel builds a model from dense rates (TFLOP/s on full tiles), launch overheads
// and a shape.
func presetModel(name, source string, sms int, fwdTF, bwdTF float64, launchFwd, launchBwd float64, sh shape) KernelModel {
	const bq, bk = 128, 128
	f, b := tileNs(bq, bk, fwdTF, kernels.Fwd), tileNs(bq, bk, bwdTF, kernels.Bwd)
	return KernelModel{
		Name: name, TileQ: bq, TileK: bk, SMs: sms, Source: source,
		Fwd: PassModel{LaunchUs: launchFwd, FullTileNs: f, PartialTileNs: sh.fwdPartial * f, RowNs: sh.fwdRow * f},
		Bwd: PassModel{LaunchUs: launchBwd, FullTileNs: b, PartialTileNs: sh.bwdPartial * b, RowNs: sh.bwdRow * b},
	}
}

// KernelPresets are rate models from published or recorded figures, for predictions
// before any row is measured. A fit to measured rows (Fit) replaces them.
var KernelPresets = map[string]KernelModel{
	// FlashAttention-3 on H100 SXM, bf16, d 128: about 690 TFLOP/s forward and 590
	// backward on full masks at 16K, 64:8 (DEVICE.md's published figures).
	"fa3-h100": presetModel("fa3-h100", "preset: FlashAttention-3 on H100, published dense rates 690 fwd / 590 bwd TFLOP/s (bf16, d128)", 132, 690, 590, 10, 25, faShape),
	// FlashAttention-2 on A100 SXM: about 220 forward, 190 backward.
	"fa2-a100": presetModel("fa2-a100", "preset: FlashAttention-2 on A100, published dense rates 220 fwd / 190 bwd TFLOP/s (bf16, d128)", 108, 220, 190, 10, 25, faShape),
	// longca's own cuda kernel on the H200, variant sm90, fitted (Fit, from the earlier
	// preset of 532 / 397 and longcaShape) to the kernel-alone rows of the H200 run of
	// 2026-12-05 03:00 UTC (scripts/device/cp-final.sh, sm90 as of call 53: the d128
	// backward's pairs): the kernel_tflops baseline that longca cp --ranks 8 --kernel cuda
	// --baseline measure (8K tokens per rank, 64:8, d128, seed 42) measured per mask and
	// pass (docs/results/h200-cp-final-bal-20261205.txt): full 590.5 fwd / 535.2 bwd, causal
	// 563.3 / 460.4, full_document_long 544.5 / 463.2, causal_document_long 474.1 / 387.1
	// TFLOP/s. The fit reproduces the 8 within 6% (rms 1.3% fwd, 3.6% bwd:
	// TestH200PresetFitsKernelAlone). Refitted on 2026-12-07 when Fit began levelling a prior
	// far from its rows (the backward's launch 40 -> 39 us, its row cost 2.51 -> 2.46
	// tiles). The preset of 2026-12-03 (call 9's kernel: 559 / 465, shape {1.16, 1.76,
	// 1.16, 2.09}) ran 8-19% slow against these rows.
	"longca-cuda-h200": presetModel("longca-cuda-h200", "preset: longca cuda kernel (sm90) on H200, dense 617 fwd / 539 bwd TFLOP/s, fitted to its kernel-alone rows at 8K 64:8 on 4 masks (H200, 2026-12-05)", 132, 617, 539, 15, 39, longcaSM90Shape),
	// The same kernel's first version (sm80 path, the one docs/cp-gpu.md's CP run of
	// 2026-12-02 used): 262 forward, 163 backward on full 16K (DEVICE.md).
	"longca-cuda-h200-v1": presetModel("longca-cuda-h200-v1", "preset: longca cuda kernel v1 (sm80 path) on H200, measured 262 fwd / 163 bwd TFLOP/s on full 16K 64:8 (DEVICE.md, 2026-12-03)", 132, 262, 163, 15, 40, longcaShape),
	// longca's float64 CPU reference (ref), one core per rank: a few GFLOP/s, priced on
	// 16 x 16 tiles (it loops over allowed pairs, so tiles follow the area closely).
	"cpu-ref": {Name: "cpu-ref", TileQ: 16, TileK: 16, SMs: 1, Source: "preset: longca's CPU reference kernel, about 5 GFLOP/s forward and 4 backward (fp32, one core); calibrate it here with --calibrate ref",
		Fwd: PassModel{LaunchUs: 20, FullTileNs: tileNs(16, 16, 0.005, kernels.Fwd), PartialTileNs: tileNs(16, 16, 0.005, kernels.Fwd), RowNs: tileNs(16, 16, 0.005, kernels.Fwd) / 4},
		Bwd: PassModel{LaunchUs: 40, FullTileNs: tileNs(16, 16, 0.004, kernels.Bwd), PartialTileNs: tileNs(16, 16, 0.004, kernels.Bwd), RowNs: tileNs(16, 16, 0.004, kernels.Bwd) / 4}},
}

// KernelPresetNames lists the kernel presets, sorted.
func KernelPresetNames() []string {
	out := make([]string, 0, len(KernelPresets))
	for n := range KernelPresets {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// KernelPreset returns a preset by name.
func KernelPreset(name string) (KernelModel, error) {
	m, ok := KernelPresets[name]
	if !ok {
		return KernelModel{}, fmt.Errorf("unknown kernel model %q: use one of %s, or calibrate from rows (--kernel-rows)", name, strings.Join(KernelPresetNames(), ", "))
	}
	return m, nil
}

func (km KernelModel) pass(p kernels.Pass) PassModel {
	if p == kernels.Bwd {
		return km.Bwd
	}
	return km.Fwd
}

// Time is the predicted seconds of one pass (fwd or bwd) of the kernel on problem p
// (fwd+bwd is the sum).
func (km KernelModel) Time(pass kernels.Pass, p kernels.Problem) float64 {
	return km.TimeOn(pass, TilesOf(p.Mask, km.TileQ, km.TileK), p.HeadsQ, p.HeadDim)
}

// TimeOn is Time for a mask's tiles (TilesOf with the model's tile sizes).
func (km KernelModel) TimeOn(pass kernels.Pass, t Tiles, heads, dim int) float64 {
	if pass == kernels.FwdBwd {
		return km.timeOf(kernels.Fwd, t, heads, dim) + km.timeOf(kernels.Bwd, t, heads, dim)
	}
	return km.timeOf(pass, t, heads, dim)
}

func (km KernelModel) timeOf(pass kernels.Pass, t Tiles, heads, dim int) float64 {
	if t.Total() == 0 {
		return 0
	}
	pm := km.pass(pass)
	scale := float64(dim) / 128
	work := float64(heads) * (float64(t.Full)*pm.FullTileNs + float64(t.Partial)*pm.PartialTileNs + float64(t.Rows)*pm.RowNs)
	crit := float64(km.SMs) * (float64(t.MaxRow)*pm.PartialTileNs + pm.RowNs)
	return pm.LaunchUs*1e-6 + scale*max(work, crit)*1e-9
}

// JSON is the model as recorded in rows.
func (km KernelModel) JSON() string {
	b, _ := json.Marshal(km)
	return string(b)
}
