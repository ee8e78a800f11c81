package main

import (
	"slices"
	"strings"

	"github.com/longca/longca/mask"
	"github.com/urfave/cli/v2"
)

// maskOptionFlags are the flags that set a mask option, the option (mask.Reads, which
// each mask declares beside its builder) and how a line says a mask has it or not.
var maskOptionFlags = []struct {
	flag       string
	reads      mask.Reads
	has, lacks string // "has a window", "has no window"
	readers    string // "masks with one"
}{
	{"window", mask.ReadsWindow, "has a window", "has no window", "masks with one"},
	{"block-size", mask.ReadsBlockSize, "has blocks", "has no blocks", "masks with them"},
	{"dist", mask.ReadsDocuments, "draws documents", "draws no documents", "masks that do"},
	{"counts", mask.ReadsDocuments, "draws documents", "draws no documents", "masks that do"},
	{"column", mask.ReadsDocuments, "draws documents", "draws no documents", "masks that do"},
	{"max-doc", mask.ReadsDocuments, "draws documents", "draws no documents", "masks that do"},
	{"purpose", mask.ReadsDocuments, "draws documents", "draws no documents", "masks that do"},
}

// checkMaskOptions refuses, naming it, a mask option given (--window, --block-size, the
// document flags) that no mask of the run reads: it would change nothing (`masks --mask
// full --window 64` printed the full mask, exit 0). One mask of a list that reads it is
// enough: the others are built as always. Flags the command does not have, and unknown
// masks (refused where they are built), are skipped; list says the masks came from --masks.
func checkMaskOptions(c *cli.Context, masks []string, list bool) error {
	for _, m := range masks {
		if !slices.Contains(mask.Names(), m) {
			return nil
		}
	}
	for _, f := range maskOptionFlags {
		if !c.IsSet(f.flag) || slices.ContainsFunc(masks, func(m string) bool { return mask.ReadsOf(m).Has(f.reads) }) {
			continue
		}
		readers := strings.Join(mask.Reading(f.reads), ", ")
		if list {
			return usageError("--%s: no mask of --masks %s %s (%s: %s): leave --%s out, or add one of those to --masks",
				f.flag, strings.Join(masks, ","), f.has, f.readers, readers, f.flag)
		}
		return usageError("--%s: mask %s %s (%s: %s): leave --%s out", f.flag, strings.Join(masks, ","), f.lacks, f.readers, readers, f.flag)
	}
	return nil
}
