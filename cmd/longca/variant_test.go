package main

import (
	"fmt"
	"testing"

	"github.com/longca/longca/kernels"
	"github.com/longca/longca/kernels/ref"
	"github.com/longca/longca/results"
)

// variantRef is the CPU reference under another name, with variants: it describes itself
// by the variant it was made with, as cuda and cudnn do.
type variantRef struct {
	*ref.Kernel
	name, variant string
}

func (k variantRef) Name() string { return k.name }

func (k variantRef) Describe(kernels.Problem, kernels.Pass) kernels.Info {
	return kernels.Info{Variant: k.variant}
}

func init() {
	for _, name := range []string{"vt-sm", "vt-dnn"} {
		kernels.RegisterVariants(name, []string{"fast: test", "slow: test"})
		kernels.Register(name, "test only: ref that records its variant", func(o kernels.Options) (kernels.Kernel, error) {
			if o.Variant != "" && o.Variant != "fast" && o.Variant != "slow" {
				return nil, kernels.Unsupported(fmt.Errorf("%s: unknown variant %q", name, o.Variant))
			}
			return variantRef{ref.New(ref.Options{}), name, o.Variant}, nil
		})
	}
}

// --variant KERNEL=VARIANT,...: each kernel of one sweep runs, and is recorded in
// kernel_variant, with its own variant (the plain form gave every kernel the same name,
// so two kernels with different variant names could not be timed in one sweep).
func TestKernelVariantPerKernel(t *testing.T) {
	dir := t.TempDir()
	args := []string{"kernel", "--kernels", "vt-sm,vt-dnn", "--variant", "vt-sm=fast,vt-dnn=slow", "--masks", "causal",
		"--seqlens", "128", "--heads", "2:1", "--head-dim", "16", "--passes", "fwd", "-w", "0", "-n", "1", "--no-check",
		"--out", dir, "--run-id", "v"}
	if _, errOut, code := runCLI(t, args...); code != 0 {
		t.Fatalf("%v: exit %d: %s", args, code, errOut)
	}
	rows, err := results.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, r := range rows {
		if r.Status != results.StatusOK {
			t.Errorf("%s: status %s (%s)", r.Kernel, r.Status, r.Reason)
		}
		got[r.Kernel] = r.KernelVariant
	}
	if got["vt-sm"] != "fast" || got["vt-dnn"] != "slow" {
		t.Errorf("kernel_variant by kernel: %v, want vt-sm fast, vt-dnn slow", got)
	}
}

// A bad per-kernel --variant is one line naming the flag, exit 2, before anything runs.
func TestVariantFlagErrors(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"kernel", "--kernels", "ref", "--variant", "cudaa=sm90", "--dry-run"}, `--variant: unknown kernel "cudaa"`},
		{[]string{"kernel", "--kernels", "ref", "--variant", "ref=fast", "--dry-run"}, "--variant: kernel ref has no variants"},
		{[]string{"kernel", "--kernels", "vt-sm", "--variant", "vt-sm=fastest", "--dry-run"}, `kernel vt-sm has no variant "fastest"`},
		{[]string{"cp", "--kernel", "ref", "--variant", "nosuch=x", "--dry-run"}, `--variant: unknown kernel "nosuch"`},
		// the plain form, checked against the sweep's kernels (it used to reach the kernel
		// and turn every row unsupported, exit 0)
		{[]string{"kernel", "--kernels", "vt-sm", "--variant", "fastest", "--dry-run"}, `--variant: kernel vt-sm has no variant "fastest"`},
		{[]string{"kernel", "--kernels", "vt-sm,cuda", "--variant", "fast", "--dry-run"}, `kernel cuda has no variant "fast"`},
		{[]string{"kernel", "--kernels", "ref", "--variant", "fast", "--dry-run"}, "no kernel of this sweep (ref) has variants"},
		{[]string{"cp", "--kernel", "vt-sm", "--variant", "fastest", "--ranks", "2"}, `--variant: kernel vt-sm has no variant "fastest"`},
	} {
		_, errOut, code := captureRun(t, c.args...)
		checkUsageError(t, c.args, code, errOut, c.want)
	}
}
