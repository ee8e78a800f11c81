package present

import (
	"fmt"
	"io"
	"strings"

	"github.com/longca/longca/internal/dl"
	"github.com/longca/longca/kernels"
	"github.com/longca/longca/mask"
)

// WriteList is what `longca list` prints: the masks (and the bench each belongs to), the
// registered kernels with whether each runs here (peers: their versions, or why not) and
// their variants, the CP methods, and the device libraries' probes. peers holds one
// PeerInfo per kernels.Names() entry, in that order.
func WriteList(w io.Writer, peers []PeerInfo, libs []dl.Probe) {
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
	for i, k := range kernels.Names() {
		if strings.HasSuffix(k, ":PATH") { // a family: any program speaking the protocol
			fmt.Fprintf(w, "  %-24s %-17s %s\n", k, "", kernels.Doc(k))
			continue
		}
		avail := "available"
		p := peers[i]
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
			fmt.Fprintf(w, "  %-24s %-17s %s\n", "", "", p.VersionText())
		}
	}
	WriteCPMethods(w)
	fmt.Fprintln(w, "# libraries")
	WriteLibraries(w, libs)
}
