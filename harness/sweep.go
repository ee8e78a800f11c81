package harness

import (
	"fmt"
	"io"
	"text/tabwriter"

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
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "# case\tmask\tseqlen\theads\thead_dim\tdtype\tkernel\tpass\tarea\tGFLOP\t")
	var total float64
	for i, c := range cases {
		spec, err := build(c.Mask, c.SeqLen, c.Seed)
		if err != nil {
			fmt.Fprintf(tw, "%d\t%s\t%d\t%s\t%d\t%s\t%s\t%s\t-\t-\t# %v\n", i+1, c.Mask, c.SeqLen, c.Heads, c.HeadDim, c.DType, c.Kernel, c.Pass, err)
			continue
		}
		p := problem(c, spec.Mask)
		f := p.FLOPs(c.Pass)
		total += f
		fmt.Fprintf(tw, "%d\t%s\t%d\t%s\t%d\t%s\t%s\t%s\t%d\t%.3f\t\n", i+1, c.Mask, c.SeqLen, c.Heads, c.HeadDim, c.DType, c.Kernel, c.Pass, spec.Mask.Area(), f/1e9)
	}
	fmt.Fprintf(tw, "# %d cases, %.3f TFLOP in all (dry run: nothing was run)\n", len(cases), total/1e12)
	return tw.Flush()
}
