package main

import (
	"errors"
	"os"
	"strings"

	"github.com/longca/longca/present"

	"github.com/longca/longca/kernels"
	"github.com/longca/longca/results"
	"github.com/urfave/cli/v2"
)

func init() {
	register(&cli.Command{
		Name:      "report",
		Usage:     "print the table of a results file or folder (nccl-tests style) and draw PNG plots",
		ArgsUsage: "FILE|DIR",
		Description: "One row per case (mask, seqlen, heads, pass), each kernel's TFLOP/s side by side (or its\n" +
			"status: unsupported, oom, wrong, error), then with several kernels the same cases as ratios to\n" +
			"the fastest kernel; lines that are not data start with '#'. A folder is read through its\n" +
			"merged.arrow when that holds every run whose rank files are there, else through its rank\n" +
			"files alone (never both). A CP case counts once: the ranks agree on its row and each writes\n" +
			"it, and the lowest rank's is shown. --plot DIR draws TFLOP/s against the\n" +
			"sequence length, one line per kernel, and grouped bars (bars_*.png: one group per length, one\n" +
			"bar per kernel), one PNG of each per (mask, pass, heads). CP rows also get the CP table\n" +
			"(per-rank and per-device TFLOP/s, the kernel alone, efficiency, overlap, check).",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "pass", Usage: "only this pass: fwd, bwd or fwd+bwd"},
			&cli.StringFlag{Name: "plot", Usage: "write PNG plots into this folder"},
		},
		Action: reportAction,
	})
}

func reportAction(c *cli.Context) error {
	args, err := positionalArgs(c)
	if err != nil {
		return err
	}
	if len(args) != 1 {
		return usageError("report takes one file or folder: longca report FILE|DIR (got %d arguments)", len(args))
	}
	pass := c.String("pass")
	if pass != "" {
		p, err := kernels.ParsePass(pass)

		if err != nil {
			return usageError("--pass: %v", err)
		}
		pass = p.String()
	}
	path := args[0]
	if _, err := os.Stat(path); err != nil {
		return usageError("report %s: %v: give a results file or folder", path, cleanPathError(err))
	}
	dir := c.String("plot")
	if dir != "" {
		if err := writableDir(dir); err != nil {
			return usageError("--plot %s: %v", dir, err)
		}
	}
	loaded, err := results.LoadChecked(path)
	if errors.Is(err, results.ErrNotResults) || errors.Is(err, results.ErrDamaged) || errors.Is(err, results.ErrUsage) {
		return usageError("report %s: %v", path, strings.TrimPrefix(err.Error(), "results: "))
	}
	if err != nil {
		return err
	}
	for _, s := range loaded.Skipped {
		log.Warn().Str("skipped", s).Msg("report: file left out")
	}
	return present.WriteReportFull(c.App.Writer, path, onePerCPCase(loaded.Rows), pass, dir)
}

// onePerCPCase keeps, of each run's CP rows, those of its lowest rank: the ranks of a CP
// case agree on one row and each writes it, so a folder or merged file of an N-rank run
// holds every CP case N times, and the kernel-style table counted each N times ("Cases: 4
// Rows: 8" for 2 ranks). Other rows (each rank's own measurement) are all kept.
func onePerCPCase(rows []results.Row) []results.Row {
	low := map[string]int64{}
	for _, r := range rows {
		if l, ok := low[r.RunID]; r.Bench == "cp" && (!ok || r.Rank < l) {
			low[r.RunID] = r.Rank
		}
	}
	if len(low) == 0 {
		return rows
	}
	out := rows[:0:0]
	for _, r := range rows {
		if r.Bench != "cp" || r.Rank == low[r.RunID] {
			out = append(out, r)
		}
	}
	return out
}
