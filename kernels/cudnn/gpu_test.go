//go:build gpu

package cudnn

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/longca/longca/kernels"
	"github.com/longca/longca/kernels/check"
	"github.com/longca/longca/mask"
	"github.com/longca/longca/tensor"
)

// The GPU tests (go test -tags gpu; kernels/cudnn/gpu.sh runs them on the GPU machine):
// the kernel against the CPU reference by the rule of MASKS.md, through kernels/check
// (inputs from a seed, outputs poisoned with NaN first so an unwritten element fails).

var (
	kernOnce sync.Once
	kern     *Kernel
	kernErr  error
	logMu    sync.Mutex
	logs     []string
)

// gpuKernel is the registered "cudnn" kernel, made once; every plan's build log is kept.
func gpuKernel(t *testing.T) *Kernel {
	t.Helper()
	kernOnce.Do(func() {
		var k kernels.Kernel
		k, kernErr = kernels.New("cudnn", kernels.Options{})
		if kernErr == nil {
			kern = k.(*Kernel)
			kern.BuildLog = func(s string) {
				logMu.Lock()
				logs = append(logs, s)
				logMu.Unlock()
			}
		}
	})
	if kernErr != nil {
		t.Fatalf("the cudnn kernel does not start (this test needs cuDNN 9 and a GPU): %v", kernErr)
	}
	return kern
}

// takeLogs returns the build logs written since the last call.
func takeLogs() []string {
	logMu.Lock()
	defer logMu.Unlock()
	out := logs
	logs = nil
	return out
}

// checkCase runs forward and backward of p against the reference and reports.
func checkCase(t *testing.T, k *Kernel, name string, p kernels.Problem, showLogs bool) {
	t.Helper()
	rep, err := check.Both(context.Background(), k, p, 7)
	built := takeLogs()
	if showLogs || err != nil || !rep.Pass {
		for _, l := range built {
			t.Logf("plan build log:\n%s", l)
		}
	}
	if err != nil {
		t.Errorf("%s: %v", name, err)
		return
	}
	info := k.Describe(p, kernels.FwdBwd)
	t.Logf("%s: %s [%s]", name, rep, info.Variant)
	if !rep.Pass {
		t.Errorf("%s: FAIL %s", name, rep)
	}
}

func build(t *testing.T, name string, s int, o mask.Options) mask.Mask {
	t.Helper()
	o.Seed = 42
	spec, err := mask.Build(name, s, o)
	if err != nil {
		t.Fatal(err)
	}
	return spec.Mask
}

// TestGPUSmoke is the first thing to run on a GPU: the version, then tiny cases of each
// kind of graph (dense SDPA op, dense composite causal and sliding window, ragged
// documents, GQA and MHA, both head dims) with every plan's build log.
func TestGPUSmoke(t *testing.T) {
	k := gpuKernel(t)
	t.Logf("cuDNN %s (%s), device %s, variant %s", k.lib.VersionString(), k.lib.Path(), k.dev.Props, k.variant)
	for _, c := range []struct {
		mask    string
		s       int
		hq, hkv int
		d       int
	}{
		{"full", 256, 4, 2, 128},
		{"causal", 256, 4, 2, 128},
		{"causal", 256, 4, 4, 64},
		{"sliding_window_causal", 512, 4, 2, 128},
		{"full_document", 512, 4, 2, 128},
		{"causal_document", 512, 4, 2, 64},
	} {
		m := build(t, c.mask, c.s, mask.Options{Window: 100})
		p := kernels.Problem{HeadsQ: c.hq, HeadsKV: c.hkv, HeadDim: c.d, DType: tensor.BF16, Mask: m}
		checkCase(t, k, fmt.Sprintf("%s S=%d %d:%d d=%d", c.mask, c.s, c.hq, c.hkv, c.d), p, true)
	}
}

// TestGPUMasks checks every mask at 1K (GQA 8:2 and MHA 4:4, head dim 128, bf16; fp16
// for two), including those cut into several calls (merged by log-sum-exp).
func TestGPUMasks(t *testing.T) {
	k := gpuKernel(t)
	for _, name := range mask.Names() {
		m := build(t, name, 1024, mask.Options{Window: 128, BlockSize: 128, LongMin: 128, LongMax: 400})
		for _, h := range [][2]int{{8, 2}, {4, 4}} {
			p := kernels.Problem{HeadsQ: h[0], HeadsKV: h[1], HeadDim: 128, DType: tensor.BF16, Mask: m}
			checkCase(t, k, fmt.Sprintf("%s %d:%d", name, h[0], h[1]), p, false)
		}
	}
	for _, name := range []string{"causal", "causal_document"} {
		p := kernels.Problem{HeadsQ: 8, HeadsKV: 2, HeadDim: 128, DType: tensor.FP16, Mask: build(t, name, 1024, mask.Options{})}
		checkCase(t, k, name+" fp16", p, false)
	}
}

// TestGPUContextParallelSteps checks the sub-masks of ring attention's steps (zigzag
// sharding over 4 ranks) of the four CP masks: rows with no key, pieces of several
// shapes, bottom-right trapezoids.
func TestGPUContextParallelSteps(t *testing.T) {
	k := gpuKernel(t)
	for _, name := range mask.CPMasks() {
		m := build(t, name, 2048, mask.Options{LongMin: 200, LongMax: 700})
		for r := range 4 {
			for s := range 4 {
				sub := zigzag(m, 4, r, s)
				if sub.Empty() {
					continue
				}
				p := kernels.Problem{HeadsQ: 8, HeadsKV: 2, HeadDim: 128, DType: tensor.BF16, Mask: sub}
				c, _ := cutMask(sub)
				checkCase(t, k, fmt.Sprintf("%s q%d k%d (%s)", name, r, s, strings.ReplaceAll(c.String(), ";", ",")), p, false)
			}
		}
	}
}
