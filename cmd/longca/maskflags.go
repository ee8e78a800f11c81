package main

import (
	"slices"
	"strings"

	"github.com/longca/longca/mask"
	"github.com/urfave/cli/v2"
)

// maskOptionFlags are the flags that set a mask option, by the option they set (mask.Reads,
// which each mask declares beside its builder), with how a line says a mask has it or not.
var maskOptionFlags = []struct {
	flags      []string
	reads      mask.Reads
	has, lacks string // "has a window", "has no window"
	readers    string // "masks with one"
}{
	{[]string{"window"}, mask.ReadsWindow, "has a window", "has no window", "masks with one"},
	{[]string{"block-size"}, mask.ReadsBlockSize, "has blocks", "has no blocks", "masks with them"},
	{[]string{"dist", "counts", "column", "max-doc", "purpose"}, mask.ReadsDocuments, "draws documents", "draws no documents", "masks that do"},
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
	for _, o := range maskOptionFlags {
		if slices.ContainsFunc(masks, func(m string) bool { return mask.ReadsOf(m).Has(o.reads) }) {
			continue
		}
		for _, flag := range o.flags {
			if !c.IsSet(flag) {
				continue
			}
			readers := strings.Join(mask.Reading(o.reads), ", ")
			if list {
				return usageError("--%s: no mask of --masks %s %s (%s: %s): leave --%s out, or add one of those to --masks",
					flag, strings.Join(masks, ","), o.has, o.readers, readers, flag)
			}
			return usageError("--%s: mask %s %s (%s: %s): leave --%s out", flag, strings.Join(masks, ","), o.lacks, o.readers, readers, flag)
		}
	}
	return nil
}
