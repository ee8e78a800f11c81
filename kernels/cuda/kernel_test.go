package cuda

import (
	"strings"
	"testing"

	"github.com/longca/longca/internal/cuda"
	"github.com/longca/longca/kernels"
	"github.com/longca/longca/mask"
	"github.com/longca/longca/tensor"
)

// Without a GPU the registered kernel fails to start with the driver's reason, and the
// harness records the case as unsupported rather than crashing.
func TestRegisteredWithoutGPU(t *testing.T) {
	found := false
	for _, n := range kernels.Names() {
		found = found || n == "cuda"
	}
	if !found {
		t.Fatal(`"cuda" is not registered`)
	}
	if cuda.Available() == nil {
		t.Log("a GPU is present: the GPU tests (tag gpu) cover this machine")
		return
	}
	if _, err := kernels.New("cuda", kernels.Options{}); err == nil || !strings.Contains(err.Error(), "libcuda") {
		t.Fatalf(`kernels.New("cuda") without a driver: %v`, err)
	}
	if _, err := kernels.New("cuda", kernels.Options{Variant: "v9:v1"}); err == nil || !strings.Contains(err.Error(), "--variant") {
		t.Fatalf("bad variant: %v", err)
	}
	if _, err := kernels.New("cuda", kernels.Options{Device: -1}); err == nil || !strings.Contains(err.Error(), "--device") {
		t.Fatalf("bad device: %v", err)
	}
}

func TestSupportsNamesTheFlag(t *testing.T) {
	k := &Kernel{}
	m := mask.Mask{SeqQ: 8, SeqK: 8, Slices: []mask.Slice{{Q: mask.Range{End: 8}, K: mask.Range{End: 8}}}}
	for _, c := range []struct {
		p    kernels.Problem
		flag string
	}{
		{kernels.Problem{HeadsQ: 2, HeadsKV: 2, HeadDim: 96, DType: tensor.BF16, Mask: m}, "--head-dim"},
		{kernels.Problem{HeadsQ: 2, HeadsKV: 2, HeadDim: 64, DType: tensor.FP32, Mask: m}, "--dtype"},
		{kernels.Problem{HeadsQ: 3, HeadsKV: 2, HeadDim: 64, DType: tensor.BF16, Mask: m}, "--heads"},
	} {
		err := k.Supports(c.p)
		if err == nil || !strings.Contains(err.Error(), c.flag) {
			t.Errorf("%+v: %v, want a reason naming %s", c.p, err, c.flag)
		}
	}
	for _, dt := range []tensor.DType{tensor.BF16, tensor.FP16} {
		for _, d := range []int{64, 128} {
			if err := k.Supports(kernels.Problem{HeadsQ: 8, HeadsKV: 2, HeadDim: d, DType: dt, Mask: m}); err != nil {
				t.Errorf("%s d%d: %v", dt, d, err)
			}
		}
	}
}

// Every version's shared memory fits the H200's 227 KB opt-in limit, and the source
// instantiates each version's entry point.
func TestVersionsMatchSource(t *testing.T) {
	entry := map[string]string{"fwd": "FWD_ENTRY(fwd,", "fwd2": "FWD_ENTRY(fwd2,", "fwd3": "fwd3_##NAME",
		"bwd": "BWD_ENTRY(bwd,", "bwd2": "BWD_ENTRY(bwd2,"}
	for _, vs := range []map[string]variant{fwdVariants, bwdVariants} {
		for name, v := range vs {
			if sh := v.shared(128); sh > 227<<10 {
				t.Errorf("%s %s: %d bytes of shared memory", v.fn, name, sh)
			}
			if e, ok := entry[v.fn]; !ok || !strings.Contains(source, e) {
				t.Errorf("version %s: no entry point %s in attention.cu", name, v.fn)
			}
		}
	}
	for _, dt := range []string{"ENTRIES(bf16, __nv_bfloat16, 64)", "ENTRIES(bf16, __nv_bfloat16, 128)", "ENTRIES(fp16, __half, 64)", "ENTRIES(fp16, __half, 128)"} {
		if !strings.Contains(source, dt) {
			t.Errorf("attention.cu does not instantiate %s", dt)
		}
	}
	for _, bad := range []string{"v9:v1", "v1:v3", "v1", "v1:"} {
		if _, _, _, _, err := pickVariants(bad); err == nil {
			t.Errorf("variant %q accepted", bad)
		}
	}
	if _, _, f, b, err := pickVariants(""); err != nil || f != defaultFwd || b != defaultBwd {
		t.Errorf(`variant "": %s:%s %v`, f, b, err)
	}
}
