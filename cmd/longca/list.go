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
		if _, err := newKernel(k, kernels.Options{}); err != nil {
			avail = "unavailable here"
		}
		fmt.Fprintf(w, "  %-24s %-17s %s\n", k, avail, kernels.Doc(k))
		for _, v := range kernels.Variants(k) {
			fmt.Fprintf(w, "  %-24s %-17s   --variant %s\n", "", "", v)
		}
	}
	listCPMethods(w)
	return nil
}

// listCPMethods prints the CP methods registered in spmd/cp with their descriptions.
func listCPMethods(w io.Writer) {
	fmt.Fprintln(w, "# cp methods")
	for _, n := range cp.Names() {
		doc := ""
		if m, err := cp.New(n); err == nil {
			doc = m.Doc()
		}
		fmt.Fprintf(w, "  %-24s %s\n", n, doc)
	}
}
