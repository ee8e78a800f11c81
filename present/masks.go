package present

import (
	"fmt"
	"image"
	"image/color"
	"image/png"
	"io"
	"slices"
	"sort"
	"strings"

	"github.com/longca/longca/dataset"
	"github.com/longca/longca/mask"
)

// WriteMaskList prints the 14 masks, the benchmarks they belong to and a line each.
func WriteMaskList(w io.Writer) {
	fmt.Fprintf(w, "# %-22s %-10s %s\n", "mask", "bench", "definition (MASKS.md)")
	for _, n := range mask.Names() {
		fmt.Fprintf(w, "%-24s %-10s %s\n", n, maskBenches(n), mask.Describe(n))
	}
}

// maskBenches names the benchmarks mask n belongs to: kernel, cp or kernel,cp.
func maskBenches(n string) string {
	var in []string
	if slices.Contains(mask.KernelMasks(), n) {
		in = append(in, "kernel")
	}
	if slices.Contains(mask.CPMasks(), n) {
		in = append(in, "cp")
	}
	return strings.Join(in, ",")
}

// WriteMaskTable prints the summary and the text drawing.
func WriteMaskTable(w io.Writer, sp mask.Spec, headsQ, headDim int) {
	m := sp.Mask
	area := m.Area()
	fmt.Fprintf(w, "# longca masks: %s, S = %d (%s), seed %d\n", sp.Name, m.SeqQ, dataset.FormatSize(m.SeqQ), sp.Seed)
	var keys []string
	for k := range sp.Params {
		if k != "doc_lengths" {
			keys = append(keys, k+"="+sp.Params[k])
		}
	}
	sort.Strings(keys)
	if len(keys) > 0 {
		fmt.Fprintf(w, "# params: %s\n", strings.Join(keys, " "))
	}
	fmt.Fprintf(w, "# %8s %16s %10s %14s   (fwd FLOPs = 4 * area * heads_q %d * head_dim %d)\n", "slices", "area", "density", "fwd_flops", headsQ, headDim)
	fmt.Fprintf(w, "%10d %16d %10.6f %14.4e\n", len(m.Slices), area, m.Density(), 4*float64(area)*float64(headsQ)*float64(headDim))
	for _, line := range DrawMask(m) {
		fmt.Fprintln(w, line)
	}
}

// DrawMask draws one character a cell ('#' allowed, '.' not) up to 128 tokens, else
// the block states on a grid of at most 64 x 64 ('#' full, '+' partial, '.' empty).
func DrawMask(m mask.Mask) []string {
	var out []string
	if m.SeqQ <= 128 && m.SeqK <= 128 {
		out = append(out, "# one character a token: '#' allowed, '.' masked")
		for q := 0; q < m.SeqQ; q++ {
			row := make([]byte, m.SeqK)
			for k := range row {
				row[k] = '.'
				if m.Allowed(q, k) {
					row[k] = '#'
				}
			}
			out = append(out, string(row))
		}
		return out
	}
	bq, bk := (m.SeqQ+63)/64, (m.SeqK+63)/64
	bm := mask.Blocks(m, mask.UniformEdges(m.SeqQ, bq), mask.UniformEdges(m.SeqK, bk))
	out = append(out, fmt.Sprintf("# one character a block of %d x %d tokens: '#' full, '+' partial, '.' empty", bq, bk))
	nk := len(bm.KEdges) - 1
	for _, r := range bm.Rows {
		row := []byte(strings.Repeat(".", nk))
		for _, e := range r {
			row[e.K] = '+'
			if e.State == mask.FullBlock {
				row[e.K] = '#'
			}
		}
		out = append(out, string(row))
	}
	return out
}

// EncodeMaskPNG draws the mask as a greyscale PNG (at most 512 x 512 pixels) on w: black
// allowed, white masked, and grey for partial blocks when the sequence is longer than 512
// tokens. The caller owns where the bytes go (masks --png writes them whole or not at all).
func EncodeMaskPNG(w io.Writer, m mask.Mask) error {
	n := min(max(m.SeqQ, m.SeqK), 512)
	bq, bk := (m.SeqQ+n-1)/n, (m.SeqK+n-1)/n
	bm := mask.Blocks(m, mask.UniformEdges(m.SeqQ, bq), mask.UniformEdges(m.SeqK, bk))
	rows, cols := len(bm.QEdges)-1, len(bm.KEdges)-1
	cell := max(1, 512/max(rows, cols))
	img := image.NewGray(image.Rect(0, 0, cols*cell, rows*cell))
	for i := range img.Pix {
		img.Pix[i] = 255
	}
	for i, r := range bm.Rows {
		for _, e := range r {
			// Darker the more of the block is allowed.
			size := float64(bm.QEdges[i+1]-bm.QEdges[i]) * float64(bm.KEdges[e.K+1]-bm.KEdges[e.K])
			v := uint8(255 * (1 - float64(e.Area)/size) * 0.8)
			for y := i * cell; y < (i+1)*cell; y++ {
				for x := e.K * cell; x < (e.K+1)*cell; x++ {
					img.SetGray(x, y, color.Gray{Y: v})
				}
			}
		}
	}
	return png.Encode(w, img)
}
