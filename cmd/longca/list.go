package main

import (
	"fmt"
	"io"

	"github.com/longca/longca/kernels"
	"github.com/longca/longca/mask"
	"github.com/longca/longca/spmd/cp"
	"github.com/urfave/cli/v2"
)

func init() {
	register(&cli.Command{
		Name:   "list",
		Usage:  "list the registered masks, kernels and CP methods",
		Action: listAction,
	})
}

// cpMethodLister, when set (by the CP methods' file), lists the CP methods as
// name/description pairs for `longca list`; unset, the names come from spmd/cp's
// registry without descriptions.
var cpMethodLister func() [][2]string

func listAction(c *cli.Context) error {
	w := c.App.Writer
	kernelMasks := map[string]bool{}
	for _, m := range mask.KernelMasks() {
		kernelMasks[m] = true
	}
	fmt.Fprintln(w, "# masks")
	for _, m := range mask.Names() {
		use := "cp"
		if kernelMasks[m] {
			use = "kernel"
		}
		fmt.Fprintf(w, "  %-24s %-7s %s\n", m, use, mask.Describe(m))
	}
	fmt.Fprintln(w, "# kernels")
	for _, k := range kernels.Names() {
		avail := "available"
		if _, err := newKernel(k); err != nil {
			avail = "unavailable here"
		}
		fmt.Fprintf(w, "  %-24s %-17s %s\n", k, avail, kernels.Doc(k))
	}
	listCPMethods(w)
	return nil
}

// listCPMethods prints the CP methods section.
// CP methods: the CP engineer sets cpMethodLister from the `longca cp` file.
func listCPMethods(w io.Writer) {
	fmt.Fprintln(w, "# cp methods")
	list := [][2]string{}
	if cpMethodLister != nil {
		list = cpMethodLister()
	} else {
		for _, n := range cp.Names() {
			list = append(list, [2]string{n, "(longca cp --methods " + n + ")"})
		}
	}
	if len(list) == 0 {
		fmt.Fprintln(w, "  (none registered)")
	}
	for _, m := range list {
		fmt.Fprintf(w, "  %-24s %s\n", m[0], m[1])
	}
}
