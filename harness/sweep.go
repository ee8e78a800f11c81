package harness

import (
	"fmt"
	"io"
	"strings"

	"github.com/longca/longca/kernels"
	"github.com/longca/longca/tensor"
)

// Case is one measurement to make: one kernel on one problem in one pass.
type Case struct {
	Mask    string
	SeqLen  int
	Heads   Heads
	HeadDim int
	DType   tensor.DType
	Kernel  string
	Pass    kernels.Pass
	Seed    uint64
}

func (c Case) String() string {
	return fmt.Sprintf("%s S=%s heads=%s d=%d %s %s %s", c.Mask, FormatSize(c.SeqLen), c.Heads, c.HeadDim, c.DType, c.Kernel, c.Pass)
}

// Sweep is the cross product the CLI's flags describe.
type Sweep struct {
	Masks   []string
	SeqLens []int
	Heads   []Heads
	HeadDim int
	DType   tensor.DType
	Kernels []string
	Passes  []kernels.Pass
	Seed    uint64
}

// Cases expands the sweep: masks x seqlens x heads x kernels x passes, in that order
// (the last varies fastest).
func (s Sweep) Cases() []Case {
	var out []Case
	for _, m := range s.Masks {
		for _, n := range s.SeqLens {
			for _, h := range s.Heads {
				for _, k := range s.Kernels {
					for _, p := range s.Passes {
						out = append(out, Case{m, n, h, s.HeadDim, s.DType, k, p, s.Seed})
					}
				}
			}
		}
	}
	return out
}

// PrintPlan writes the cases with their mask area and FLOPs, building each mask (which
// is cheap) but running nothing: the --dry-run output. Lines not describing a case start
// with '#'.
func PrintPlan(w io.Writer, cases []Case, build MaskBuilder) error {
	mw := len("mask")
	for _, c := range cases {
		mw = max(mw, len(c.Mask))
	}
	var b strings.Builder
	fmt.Fprintf(&b, "#%5s  %-*s %8s %7s %8s %5s %8s %7s %14s %12s\n", "case", mw, "mask", "seqlen", "heads", "head_dim", "dtype", "kernel", "pass", "area", "GFLOP")
	var total float64
	for i, c := range cases {
		fmt.Fprintf(&b, " %5d  %-*s %8d %7s %8d %5s %8s %7s", i+1, mw, c.Mask, c.SeqLen, c.Heads, c.HeadDim, c.DType, c.Kernel, c.Pass)
		spec, err := build(c.Mask, c.SeqLen, c.Seed)
		if err != nil {
			fmt.Fprintf(&b, " %14s %12s  # %v\n", "-", "-", err)
			continue
		}
		f := problem(c, spec.Mask).FLOPs(c.Pass)
		total += f
		fmt.Fprintf(&b, " %14d %12.3f\n", spec.Mask.Area(), f/1e9)
	}
	fmt.Fprintf(&b, "# %d cases, %.3f TFLOP in all (dry run: nothing was run)\n", len(cases), total/1e12)
	_, err := io.WriteString(w, b.String())
	return err
}
