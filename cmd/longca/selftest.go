package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/longca/longca/results"
	"github.com/longca/longca/session"
	"github.com/longca/longca/spmd"
	"github.com/urfave/cli/v2"
)

func init() {
	register(&cli.Command{
		Name:   "selftest",
		Hidden: true,
		Usage:  "check the SPMD runtime under a real launcher (for CI and cluster bring-up)",
		Subcommands: []*cli.Command{
			{
				Name:  "comm",
				Usage: "run every collective of the comm test table on this rank and check the values",
				Flags: append([]cli.Flag{
					&cli.IntFlag{Name: "exit-rank", Value: -1, Usage: "this rank leaves before the tests (to check that the others fail naming it)"},
					&cli.BoolFlag{Name: "verbose", Usage: "print every case, not only failures"},
				}, worldFlags()...),
				Action: selftestComm,
			},
			{
				Name:  "results",
				Usage: "write one results row for this rank, so that merge can check every rank",
				Flags: append([]cli.Flag{
					&cli.StringFlag{Name: "dir", Value: "results", Usage: "folder of the rank files"},
					&cli.StringFlag{Name: "run", Usage: "run id shared by all ranks (default: SLURM_JOB_ID, else selftest)"},
				}, worldFlags()...),
				Action: selftestResults,
			},
			{
				Name:      "merged",
				Usage:     "check that a merged results file holds rows from each of --ranks ranks, as many from each",
				ArgsUsage: "FILE",
				Flags:     []cli.Flag{&cli.IntFlag{Name: "ranks", Usage: "world size the file must cover"}},
				Action:    selftestMerged,
			},
		},
	})
}

func selftestComm(c *cli.Context) error {
	w, o, err := discoverWorld(c)
	if err != nil {
		return err
	}
	x := -1
	if c.IsSet("exit-rank") {
		if x = c.Int("exit-rank"); x < -1 || x >= w.Size { // (-1, the default: no rank leaves)
			return usageError("--exit-rank %d: the world has ranks 0..%d (or -1: none leaves)", x, w.Size-1)
		}
	}
	return newSession(c, "selftest", "", "", w).SelftestComm(c.Context, o, x, c.Bool("verbose"))
}

func selftestResults(c *cli.Context) (err error) {
	defer func() { err = usageOnRankZero(err) }()
	w, _, err := discoverWorld(c)
	if err != nil {
		return err
	}
	run, from := c.String("run"), "--run"
	if run == "" {
		run, from = os.Getenv("SLURM_JOB_ID"), "SLURM_JOB_ID (the default --run)"
	}
	if run == "" {
		run = "selftest"
	}
	// The run id and the folder are checked before the row is written: bad input is one
	// line naming the flag (exit status 2), not a failed write.
	if err := results.CheckRunID(run); err != nil {
		return usageError("%s: %v", from, err)
	}
	dir := c.String("dir")
	if dir == "" {
		return usageError("--dir is empty: give the folder of the rank files (default results)")
	}
	if err := writableDir(dir); err != nil {
		return usageError("--dir %s: %v: give a folder you can write", dir, err)
	}
	if err := results.CheckNewRun(dir, run, w.Size, false); err != nil {
		return usageError("--dir %s: %v", dir, strings.TrimPrefix(err.Error(), "results: "))
	}
	dev := "cpu"
	if d, err := spmd.DeviceIndex(w, os.Getenv); err == nil {
		dev = fmt.Sprintf("cuda:%d", d)
	}
	ss := newSession(c, "selftest", dir, run, w)
	ss.OutFlag = "--dir"
	row := ss.BaseRow(w)
	row.Time, row.Host, row.WorldSize, row.Device, row.Backend = time.Now().UTC(), w.Host, int64(w.Size), dev, "none"
	row.Status, row.Command = results.StatusOK, "selftest results"
	path, err := ss.WriteRankRows(run, w.Rank, w.Size, []results.Row{row}, 1)
	if err != nil {
		return err
	}
	fmt.Fprintf(c.App.Writer, "selftest results: rank %d of %d wrote %s\n", w.Rank, w.Size, filepath.Base(path))
	return nil
}

func selftestMerged(c *cli.Context) error {
	pos, err := positionalArgs(c) // (flags after FILE too, as report and merge take them)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return usageError("selftest merged takes one FILE, the merged results file")
	}
	n := c.Int("ranks")
	if n < 1 || n > spmd.MaxWorld {
		return usageError("--ranks %d: give the world size the file must cover (1 to %d)", n, spmd.MaxWorld)
	}
	path := pos[0]
	if _, err := os.Stat(path); err != nil {
		return usageError("selftest merged %s: %v: give the merged results file (longca merge's output)", path, cleanPathError(err))
	}
	msg, err := session.CheckMerged(path, n)
	switch {
	case errors.Is(err, results.ErrUsage): // a folder none of whose files can be read: the text names the fix
		return usageError("selftest merged %s: %v", path, strings.TrimPrefix(err.Error(), "results: "))
	case errors.Is(err, results.ErrNotResults) || errors.Is(err, results.ErrDamaged): // the text names the file
		return usageError("selftest merged: %v: give the merged results file (longca merge's output)", strings.TrimPrefix(err.Error(), "results: "))
	}
	if err != nil {
		return err
	}
	fmt.Fprintln(c.App.Writer, msg)
	return nil
}
