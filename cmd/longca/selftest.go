package main

import (
	"fmt"
	"os"
	"path/filepath"
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
		if x = c.Int("exit-rank"); x < 0 || x >= w.Size {
			return usageError("--exit-rank %d: the world has ranks 0..%d", x, w.Size-1)
		}
	}
	return newSession(c, "selftest", "", "", w).SelftestComm(c.Context, o, x, c.Bool("verbose"))
}

func selftestResults(c *cli.Context) error {
	w, _, err := discoverWorld(c)
	if err != nil {
		return err
	}
	run := c.String("run")
	if run == "" {
		run = os.Getenv("SLURM_JOB_ID")
	}
	if run == "" {
		run = "selftest"
	}
	dev := "cpu"
	if d, err := spmd.DeviceIndex(w, os.Getenv); err == nil {
		dev = fmt.Sprintf("cuda:%d", d)
	}
	ss := newSession(c, "selftest", c.String("dir"), run, w)
	ss.OutFlag = "--dir"
	row := ss.BaseRow(w)
	row.Time, row.Host, row.WorldSize, row.Device, row.Backend = time.Now().UTC(), w.Host, int64(w.Size), dev, "none"
	row.Status, row.Command = results.StatusOK, "selftest results"
	path, err := ss.WriteRankRows(run, w.Rank, w.Size, []results.Row{row})
	if err != nil {
		return err
	}
	fmt.Fprintf(c.App.Writer, "selftest results: rank %d of %d wrote %s\n", w.Rank, w.Size, filepath.Base(path))
	return nil
}

func selftestMerged(c *cli.Context) error {
	if c.NArg() != 1 {
		return usageError("selftest merged takes one FILE, the merged results file")
	}
	n := c.Int("ranks")
	if n < 1 {
		return usageError("--ranks %d: give the world size the file must cover", n)
	}
	msg, err := session.CheckMerged(c.Args().First(), n)
	if err != nil {
		return err
	}
	fmt.Fprintln(c.App.Writer, msg)
	return nil
}
