package present

import (
	"fmt"
	"io"
	"strings"

	"github.com/longca/longca/internal/dl"
	"github.com/longca/longca/internal/textcut"
	"github.com/longca/longca/kernels"
	"github.com/longca/longca/mask"
)

// WriteList is what `longca list` prints: the masks (and the benches each belongs to), the
// registered kernels with whether each runs here (peers: their versions, or why not) and
// their variants, the CP methods, and the device libraries' probes. peers holds one
// PeerInfo per kernels.Names() entry, in that order. A variant's line is cut to about
// variantWidth bytes unless long (a variant's doc is its record: sm90's runs to pages).
func WriteList(w io.Writer, peers []PeerInfo, libs []dl.Probe, long bool) {
	fmt.Fprintln(w, "# masks")
	for _, m := range mask.Names() {
		fmt.Fprintf(w, "  %-24s %-9s %s\n", m, maskBenches(m), mask.Describe(m))
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
		cut := false
		for _, v := range kernels.Variants(k) {
			if !long && len(v) > variantWidth {
				v, cut = cutAtWord(v, variantWidth), true
			}
			fmt.Fprintf(w, "  %-24s %-17s   --variant %s\n", "", "", v)
		}
		if cut {
			fmt.Fprintf(w, "  %-24s %-17s   (variants cut at %d characters: longca list --long prints them whole)\n", "", "", variantWidth)
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

// variantWidth is where longca list cuts a variant's line without --long.
const variantWidth = 160

// cutAtWord is s cut to at most n bytes at a space (at a character boundary where none
// is near), with " ..." after it.
func cutAtWord(s string, n int) string {
	if len(s) <= n {
		return s
	}
	head := s[:n]
	if cut := strings.LastIndexByte(head, ' '); cut >= n/2 {
		head = s[:cut]
	} else {
		head = textcut.Prefix(s, n)
	}
	return strings.TrimRight(head, " ,;:(") + " ..."
}
