package cudnn

import (
	_ "embed"
	"fmt"

	"github.com/longca/longca/internal/cuda"
	"github.com/longca/longca/tensor"
)

//go:embed helpers.cu
var helperSource string

// helpers are the small kernels of helpers.cu on one device, launched on its stream.
type helpers struct {
	dev *cuda.Device
	mod *cuda.Module
	fns map[string]*cuda.Function
}

// newHelpers compiles (or loads from the NVRTC cache) the helper kernels.
func newHelpers(dev *cuda.Device) (*helpers, error) {
	m, err := dev.LoadSource(helperSource, "longca_cudnn_helpers.cu")
	if err != nil {
		return nil, fmt.Errorf("cudnn helper kernels: %w", err)
	}
	return &helpers{dev: dev, mod: m, fns: map[string]*cuda.Function{}}, nil
}

// launch runs a grid-stride kernel over n items on the device's stream (the caller
// holds the device's context, under Device.Do).
func (h *helpers) launch(name string, n int64, args ...any) error {
	if n == 0 {
		return nil
	}
	f, ok := h.fns[name]
	if !ok {
		var err error
		if f, err = h.mod.Function(name); err != nil {
			return err
		}
		h.fns[name] = f
	}
	blocks := int(max(1, min(int64(h.dev.SMs*8), (n+255)/256)))
	return f.Launch(cuda.Dim3{X: blocks}, cuda.Dim3{X: 256}, 0, h.dev.Stream(), args...)
}

func suffix(dt tensor.DType) string {
	if dt == tensor.FP16 {
		return "fp16"
	}
	return "bf16"
}

// lseToHeads writes thd ([tokens, heads], cuDNN's packed stats) into ht ([heads, tokens]).
func (h *helpers) lseToHeads(thd, ht *cuda.Buffer, tokens, heads int) error {
	return h.launch("lse_to_heads", int64(tokens)*int64(heads), thd, ht, tokens, heads)
}

// lseToTokens writes ht ([heads, tokens]) into thd ([tokens, heads]).
func (h *helpers) lseToTokens(ht, thd *cuda.Buffer, tokens, heads int) error {
	return h.launch("lse_to_tokens", int64(tokens)*int64(heads), ht, thd, tokens, heads)
}

// merge folds a partial output and lse into fp32 accumulators by log-sum-exp.
func (h *helpers) merge(acc, lacc, out, lse *cuda.Buffer, tokens, heads, dim int, dt tensor.DType) error {
	return h.launch("merge_"+suffix(dt), int64(tokens)*int64(heads), acc, lacc, out, lse, tokens, heads, dim)
}

// accumulate adds x (the I/O type) into the fp32 acc.
func (h *helpers) accumulate(acc, x *cuda.Buffer, dt tensor.DType) error {
	return h.launch("accumulate_"+suffix(dt), int64(x.Numel()), acc, x, uint64(x.Numel()))
}

// convert writes the fp32 src into dst in its I/O type.
func (h *helpers) convert(dst, src *cuda.Buffer, dt tensor.DType) error {
	return h.launch("convert_"+suffix(dt), int64(dst.Numel()), dst, src, uint64(dst.Numel()))
}
