package main

import (
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/longca/longca/present"
	"github.com/longca/longca/results"
	"github.com/longca/longca/session"
	"github.com/urfave/cli/v2"
)

func init() {
	register(&cli.Command{
		Name:      "merge",
		Usage:     "join every rank's results file of each run in DIR into one Arrow file (and Parquet, CSV)",
		ArgsUsage: "DIR",
		Description: "Every rank 0..n-1 of each run (files <run>.rank-<r>-of-<n>.arrow) must be present;\n" +
			"missing ranks are named. --allow-missing merges anyway and records the missing ranks in the\n" +
			"output's schema metadata (longca.allow_missing, longca.missing). Files of longca versions\n" +
			"whose columns differ are joined by column name (docs/results-format.md); another schema\n" +
			"version is refused, naming both files. Runs that hold no row at all are refused (exit 2,\n" +
			"nothing written), saying what their files are.",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "out", Usage: "merged Arrow file (default DIR/merged.arrow)"},
			&cli.BoolFlag{Name: "parquet", Usage: "also write the merge as Parquet (.parquet beside --out)"},
			&cli.BoolFlag{Name: "csv", Usage: "also write the merge as CSV (.csv beside --out)"},
			&cli.BoolFlag{Name: "allow-missing", Usage: "merge even when ranks are missing"},
			&cli.StringSliceFlag{Name: "run", Usage: "merge only this run id (repeatable)"},
		},
		Action: mergeAction,
	})
}

func mergeAction(c *cli.Context) error {
	args, err := positionalArgs(c)
	if err != nil {
		return err
	}
	if len(args) != 1 {
		return usageError("merge takes one folder: longca merge DIR [--out FILE] (got %d arguments)", len(args))
	}
	if st, err := os.Stat(args[0]); err != nil || !st.IsDir() {
		why := "is not a folder"
		if err != nil {
			why = cleanPathError(err).Error()
		}
		return usageError("merge %s: %s: give the results folder (longca merge DIR)", args[0], why)
	}
	if out := c.String("out"); out != "" {
		if err := writableFileFlag("out", out); err != nil {
			return err
		}
	}
	res, err := session.Merge(args[0], results.MergeOptions{
		Out: c.String("out"), Parquet: c.Bool("parquet"), CSV: c.Bool("csv"),
		AllowMissing: c.Bool("allow-missing"), Runs: c.StringSlice("run"), RefuseEmpty: true,
	})
	if errors.Is(err, results.ErrMissingRanks) {
		return usageError("%v", err) // the folder given is incomplete: --allow-missing or the missing files
	}
	if errors.Is(err, results.ErrNoRows) {
		return noRowsError(args[0], res)
	}
	if err != nil {
		return err
	}
	for _, s := range res.Skipped {
		log.Warn().Str("skipped", s).Msg("merge: file left out; its rank counts as missing")
	}
	present.WriteMerge(c.App.Writer, stillWriting(res))
	return nil
}

// stillWriting is res with each truncated rank file that was written to within
// results.RecentWrite of the merge said to be so: a merge cannot tell a writer still
// going (`longca merge DIR` run to watch a long job) from one killed a moment ago, and
// "writer did not finish" alone read as a run cut short.
func stillWriting(res results.MergeResult) results.MergeResult {
	if len(res.Recent) == 0 {
		return res
	}
	trunc := make([]string, len(res.Truncated)) // (res.Truncated is the merged file's record)
	for i, t := range res.Truncated {
		trunc[i] = t
		if age, ok := res.Recent[t]; ok {
			trunc[i] = fmt.Sprintf("%s (last written %s ago: still being written, or killed just now; merge again once its run ends for all its rows)", t, age)
		}
	}
	res.Truncated = trunc
	return res
}

// noRowsError is the refusal of a merge whose runs hold no row (results.ErrNoRows, nothing
// written): it printed "merged 0 rows" and exited 0, where the files are what a run that
// stopped before its first row leaves (refused, failed, interrupted; before the claim of
// session.claimRankFile, both of two cp runs given one run id at once), or are still being
// written. One line naming the runs, what their files are, and the fix.
func noRowsError(dir string, res results.MergeResult) error {
	e := rowless{runs: res.Runs, open: len(res.Truncated), dir: dir}
	if runs, err := results.Scan(dir); err == nil {
		for _, id := range res.Runs {
			if rf := runs[id]; rf != nil {
				e.files += len(rf.Paths)
			}
		}
	}
	return usageError("merge %s: nothing to merge: %s hold no rows %s; nothing was written: merge a folder with rows, or remove these files to free the run id (rm %s)",
		dir, e.what(), e.state("merge once it ends"), e.rm())
}

// positionalArgs returns the command's positional arguments, applying any flags given
// after them (urfave/cli stops at the first argument: `longca report DIR --pass fwd`).
func positionalArgs(c *cli.Context) ([]string, error) {
	var pos []string
	args := c.Args().Slice()
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			pos = append(pos, args[i+1:]...)
			break
		}
		if len(a) < 2 || a[0] != '-' {
			pos = append(pos, a)
			continue
		}
		name, val, hasVal := strings.Cut(strings.TrimLeft(a, "-"), "=")
		f := findFlag(c.Command.Flags, name)
		if f == nil {
			return nil, usageError("%s: unknown flag %s (see longca %s --help)", c.Command.Name, a, c.Command.Name)
		}
		if _, isBool := f.(*cli.BoolFlag); isBool && !hasVal {
			val, hasVal = "true", true
		}
		if !hasVal {
			if i+1 >= len(args) {
				return nil, usageError("%s given without a value: %s", a, flagWants(f, false, c.Command.Name+" "))
			}
			i++
			val = args[i]
		}
		if err := c.Set(name, val); err != nil { // Go's flag errors: "parse error", "value out of range"
			return nil, usageError("%s %s: %s", dashed(name), shownValue(val), flagWants(f, err.Error() == "value out of range", c.Command.Name+" "))
		}
	}
	return pos, nil
}

func findFlag(flags []cli.Flag, name string) cli.Flag {
	for _, f := range flags {
		for _, n := range f.Names() {
			if n == name {
				return f
			}
		}
	}
	return nil
}
