package main

import (
	"errors"
	"fmt"
	"io"
	"syscall"

	"github.com/longca/longca/internal/smallfile"
	"github.com/longca/longca/mask"
	"github.com/longca/longca/present"
	"github.com/longca/longca/results"
	"github.com/longca/longca/session"
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
			&cli.StringFlag{Name: "mask", Usage: "mask name (the list: longca masks without --mask)"},
			&cli.StringFlag{Name: "seqlen", Usage: "tokens in the packed sequence (suffixes K, M: 48K)"},
			&cli.Uint64Flag{Name: "seed", Value: 42, Usage: "seed of the one generator"},
			&cli.StringFlag{Name: "window", Usage: "sliding-window half-width in tokens (default 1K, at most S)"},
			&cli.StringFlag{Name: "block-size", Usage: "block_causal_document's block in tokens (default 1K; S must be a multiple)"},
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
		// every other flag builds, draws or writes the mask (--png, --out, --format json were
		// ignored without one, exit 0)
		for _, f := range c.Command.Flags {
			if name := f.Names()[0]; name != "mask" && name != "help" && c.IsSet(name) {
				return usageError("--%s given without --mask: name a mask (--mask causal) or drop --%s to list them", name, name)
			}
		}
		present.WriteMaskList(w)
		return nil
	}
	if err := checkMaskOptions(c, []string{c.String("mask")}, false); err != nil {
		return err
	}
	for _, src := range []string{"dist", "counts"} { // --purpose picks the distribution only when none is given
		if c.IsSet("purpose") && c.IsSet(src) {
			return usageError("--purpose %s with --%s: --purpose picks a built-in distribution when none is given: leave one of them out", c.String("purpose"), src)
		}
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
	o := mask.Options{Seed: c.Uint64("seed")}
	if o.Window, err = tokensFlag(c, "window", 0); err != nil {
		return err
	}
	if o.BlockSize, err = tokensFlag(c, "block-size", 0); err != nil {
		return err
	}
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
	if out, png := c.String("out"), c.String("png"); sameFile(out, png) {
		// (the PNG was written over the JSON, exit 0)
		return usageError("--out %s and --png %s name one file: give each its own", out, png)
	}
	docs, err := docsFromFlags(c)
	if err != nil {
		return err
	}
	o.Source, o.MaxDoc = docs.Source, docs.MaxDoc
	if err := session.FitMask(c.String("mask"), s, o.BlockSize); err != nil {
		return err
	}
	sp, err := mask.Build(c.String("mask"), s, o)
	if err != nil {
		if mask.IsInputError(err) {
			return usageError("%v", err)
		}
		return err
	}
	if out := c.String("out"); out != "" {
		if err := writeOutput("out", out, func(w io.Writer) error { return sp.WriteJSON(w, false) }); err != nil {
			return err
		}
	}
	if p := c.String("png"); p != "" {
		if err := writeOutput("png", p, func(w io.Writer) error { return present.EncodeMaskPNG(w, sp.Mask) }); err != nil {
			return err
		}
	}
	if format == "json" {
		if c.String("out") != "" {
			return nil // the JSON went to --out
		}
		return sp.WriteJSON(w, false)
	}
	present.WriteMaskTable(w, sp, hq, hd)
	return nil
}

// writeMaskFile writes masks' --out and --png files; a variable so that a test can fill
// the disk midway.
var writeMaskFile = smallfile.WriteWhole

// writeOutput writes the file path of --flag whole or not at all (smallfile.WriteWhole: a
// temporary file renamed over path once complete), as run writes its mask JSONs and
// plots: written in place, a disk that filled or a kill midway left a partial file over
// the old one. A path that cannot be written (no such folder, no permission, a folder, a
// read-only file system) or a disk without room is a usage error (exit 2) naming the
// flag; other failures are returned as they are (exit 1).
func writeOutput(flag, path string, fill func(io.Writer) error) error {
	err := writeMaskFile(path, fill)
	switch {
	case err == nil:
		return nil
	case results.Unwritable(err) || errors.Is(err, syscall.EISDIR) || errors.Is(err, syscall.ENOTDIR):
		return usageError("--%s %s: %v: give a file in a folder you can write", flag, path, cleanPathError(err))
	case results.NoRoom(err) && errors.Is(err, smallfile.ErrCutInPlace):
		return usageError("--%s %s: %v: cut short (written in place: its folder admits no temporary file); make room (space, quota, ulimit -f) and run again, or give --%s a folder with room",
			flag, path, cleanPathError(err), flag)
	case results.NoRoom(err):
		return usageError("--%s %s: %v: not written (a file there is left as it was); make room (space, quota, ulimit -f), or give --%s a folder with room",
			flag, path, cleanPathError(err), flag)
	}
	return fmt.Errorf("masks: --%s %s: %w", flag, path, err)
}
