package main

import (
	"encoding/json"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"io"
	"os"
	"slices"
	"sort"
	"strings"

	"github.com/longca/longca/dataset"
	"github.com/longca/longca/mask"
	"github.com/urfave/cli/v2"
)

func init() {
	register(&cli.Command{
		Name:  "masks",
		Usage: "list the masks, or build one and print its slices, area, FLOPs and picture",
		Description: "Without --mask: the 14 masks of MASKS.md with a line each. With --mask and --seqlen: the\n" +
			"mask's slice count, area, density and forward FLOPs (4 * area * heads_q * head_dim) and a\n" +
			"text drawing (one character a cell up to 128 tokens, else block states on a <= 64 x 64 grid:\n" +
			"'#' full, '+' partial, '.' empty); --format json prints the slices in MASKS.md's JSON form.",
		Flags: append([]cli.Flag{
			&cli.StringFlag{Name: "mask", Usage: "mask name (see `longca masks`)"},
			&cli.StringFlag{Name: "seqlen", Usage: "tokens in the packed sequence (suffixes K, M: 48K)"},
			&cli.Uint64Flag{Name: "seed", Value: 42, Usage: "seed of the one generator"},
			&cli.IntFlag{Name: "window", Usage: "sliding-window half-width (default 1024, at most S)"},
			&cli.IntFlag{Name: "block-size", Usage: "block_causal_document's block (default 1024; S must be a multiple)"},
			&cli.StringFlag{Name: "purpose", Value: "default", Usage: "which MASKS.md rule picks the distribution without --dist: default, kernel or cp"},
			&cli.IntFlag{Name: "heads-q", Value: 64, Usage: "query heads, for the FLOPs"},
			&cli.IntFlag{Name: "head-dim", Value: 128, Usage: "head dimension, for the FLOPs"},
			&cli.StringFlag{Name: "format", Value: "table", Usage: "table or json"},
			&cli.StringFlag{Name: "out", Usage: "also write the mask's JSON to this file"},
			&cli.StringFlag{Name: "png", Usage: "draw the mask into this PNG file"},
		}, docsFlags()...),
		Action: masksAction,
	})
}

func masksAction(c *cli.Context) error {
	w := c.App.Writer
	if !c.IsSet("mask") {
		if c.IsSet("seqlen") {
			return usageError("--seqlen given without --mask: name a mask (--mask causal) or drop --seqlen to list them")
		}
		writeMaskList(w)
		return nil
	}
	format := c.String("format")
	if format != "table" && format != "json" {
		return usageError("--format %q: use table or json", format)
	}
	if !c.IsSet("seqlen") {
		return usageError("--seqlen is required with --mask (e.g. --seqlen 16K)")
	}
	s, err := parseSeqlen(c)
	if err != nil {
		return err
	}
	hq, hd := c.Int("heads-q"), c.Int("head-dim")
	if hq < 1 || hd < 1 {
		return usageError("--heads-q %d and --head-dim %d must both be at least 1", hq, hd)
	}
	o := mask.Options{Seed: c.Uint64("seed"), Window: c.Int("window"), BlockSize: c.Int("block-size")}
	if c.IsSet("window") && o.Window < 1 {
		return usageError("--window must be at least 1, got %d", o.Window)
	}
	if c.IsSet("block-size") && o.BlockSize < 1 {
		return usageError("--block-size must be at least 1, got %d", o.BlockSize)
	}
	switch c.String("purpose") {
	case "default":
	case "kernel":
		o.Purpose = mask.PurposeKernel
	case "cp":
		o.Purpose = mask.PurposeCP
	default:
		return usageError("--purpose %q: use default, kernel or cp", c.String("purpose"))
	}
	docs, err := docsFromFlags(c)
	if err != nil {
		return err
	}
	o.Source, o.MaxDoc = docs.Source, docs.MaxDoc
	sp, err := mask.Build(c.String("mask"), s, o)
	if err != nil {
		if mask.IsInputError(err) {
			return usageError("%v", err)
		}
		return err
	}
	if out := c.String("out"); out != "" {
		if err := writeSpecFile(out, sp); err != nil {
			return err
		}
	}
	if p := c.String("png"); p != "" {
		if err := writeMaskPNG(p, sp.Mask); err != nil {
			return err
		}
	}
	if format == "json" {
		if c.String("out") != "" {
			return nil // the JSON went to --out
		}
		b, err := json.Marshal(sp)
		if err != nil {
			return fmt.Errorf("masks: %w", err)
		}
		_, err = fmt.Fprintf(w, "%s\n", b)
		return err
	}
	writeMaskTable(w, sp, hq, hd)
	return nil
}

// writeMaskList prints the 14 masks, the benchmarks they belong to and a line each.
func writeMaskList(w io.Writer) {
	fmt.Fprintf(w, "# %-22s %-10s %s\n", "mask", "bench", "definition (MASKS.md)")
	kernel, cp := mask.KernelMasks(), mask.CPMasks()
	for _, n := range mask.Names() {
		var in []string
		if slices.Contains(kernel, n) {
			in = append(in, "kernel")
		}
		if slices.Contains(cp, n) {
			in = append(in, "cp")
		}
		fmt.Fprintf(w, "%-24s %-10s %s\n", n, strings.Join(in, ","), mask.Describe(n))
	}
}

func writeSpecFile(path string, sp mask.Spec) error {
	b, err := json.Marshal(sp)
	if err != nil {
		return fmt.Errorf("masks: %w", err)
	}
	if err := os.WriteFile(path, append(b, '\n'), 0o644); err != nil {
		return usageError("--out: %v", err)
	}
	return nil
}

// writeMaskTable prints the summary and the text drawing.
func writeMaskTable(w io.Writer, sp mask.Spec, headsQ, headDim int) {
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
	for _, line := range drawMask(m) {
		fmt.Fprintln(w, line)
	}
}

// drawMask draws one character a cell ('#' allowed, '.' not) up to 128 tokens, else
// the block states on a grid of at most 64 x 64 ('#' full, '+' partial, '.' empty).
func drawMask(m mask.Mask) []string {
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

// writeMaskPNG draws the mask as a greyscale image: black allowed, white masked, and
// grey for partial blocks when the sequence is longer than 512 tokens.
func writeMaskPNG(path string, m mask.Mask) error {
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
	f, err := os.Create(path)
	if err != nil {
		return usageError("--png: %v", err)
	}
	if err := png.Encode(f, img); err != nil {
		f.Close()
		return fmt.Errorf("masks: writing %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("masks: writing %s: %w", path, err)
	}
	return nil
}
