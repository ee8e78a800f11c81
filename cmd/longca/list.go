package main

import (
	"context"
	"fmt"
	"io"
	"sort"
	"strings"

	"github.com/longca/longca/kernels"
	"github.com/longca/longca/kernels/external"
	"github.com/longca/longca/mask"
	"github.com/longca/longca/spmd"
	"github.com/longca/longca/spmd/cp"
	"github.com/urfave/cli/v2"
)

func init() {
	register(&cli.Command{
		Name:   "list",
		Usage:  "list the registered masks, kernels (with the peers available here and their versions) and CP methods",
		Flags:  kernelFlags(),
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
	ko, err := kernelOptions(c, spmd.World{Size: 1})
	if err != nil {
		return err
	}
	fmt.Fprintln(w, "# kernels")
	for _, k := range kernels.Names() {
		if strings.HasSuffix(k, ":PATH") { // a family: any program speaking the protocol
			fmt.Fprintf(w, "  %-24s %-17s %s\n", k, "", kernels.Doc(k))
			continue
		}
		avail := "available"
		p := peerStatus(c.Context, k, ko)
		if p.Error != "" {
			avail = "unavailable here"
		}
		fmt.Fprintf(w, "  %-24s %-17s %s\n", k, avail, kernels.Doc(k))
		for _, v := range kernels.Variants(k) {
			fmt.Fprintf(w, "  %-24s %-17s   --variant %s\n", "", "", v)
		}
		if p.Peer && p.Error != "" {
			fmt.Fprintf(w, "  %-24s %-17s why: %s\n", "", "", p.Error)
		} else if p.Peer {
			fmt.Fprintf(w, "  %-24s %-17s %s\n", "", "", p.versionText())
		}
	}
	listCPMethods(w)
	fmt.Fprintln(w, "# libraries")
	writeLibraries(w, probeLibraries())
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

// peerInfo is whether a kernel can run here and, for an external one, its versions.
type peerInfo struct {
	Kernel   string            `json:"kernel"`
	Peer     bool              `json:"peer"`
	Error    string            `json:"error,omitempty"`
	Versions map[string]string `json:"versions,omitempty"`
}

// peerStatus makes the kernel and, for an external worker's, asks it (starting the
// worker: a Python import of torch takes seconds).
func peerStatus(ctx context.Context, name string, o kernels.Options) peerInfo {
	if ctx == nil {
		ctx = context.Background()
	}
	p := peerInfo{Kernel: name}
	k, err := newKernel(name, o)
	if err != nil {
		p.Error = err.Error()
		return p
	}
	a, ok := k.(interface {
		Available(context.Context) (external.Versions, error)
	})
	if !ok {
		return p
	}
	p.Peer = true
	v, err := a.Available(ctx)
	p.Versions = v
	if err != nil {
		p.Error = err.Error()
	}
	return p
}

// versionText is "torch 2.11.0, triton 3.6.0, ...", sorted.
func (p peerInfo) versionText() string {
	var parts []string
	for k, v := range p.Versions {
		parts = append(parts, k+" "+v)
	}
	sort.Strings(parts)
	return strings.Join(parts, ", ")
}
