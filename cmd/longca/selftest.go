package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"time"

	"github.com/longca/longca/comm/commtest"
	"github.com/longca/longca/results"
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
	if x := c.Int("exit-rank"); c.IsSet("exit-rank") && (x < 0 || x >= w.Size) {
		return usageError("--exit-rank %d: the world has ranks 0..%d", x, w.Size-1)
	}
	withRank(w.Rank, w.Size)
	cm, err := spmd.Open(context.Background(), w, o)
	if err != nil {
		return err
	}
	out := c.App.Writer
	who := fmt.Sprintf("rank %d of %d (%s)", w.Rank, w.Size, spmd.Choose(w, spmd.Options{Backend: c.String("backend")}))
	if w.Rank == c.Int("exit-rank") {
		fmt.Fprintf(out, "selftest comm: %s leaves early on purpose\n", who)
		return cm.Close()
	}
	start := time.Now()
	ran := 0
	failed := commtest.RunRank(cm, func(name string, err error) {
		ran++
		if err != nil {
			fmt.Fprintf(os.Stderr, "selftest comm: %s: %s: FAIL: %v\n", who, name, err)
		} else if c.Bool("verbose") {
			fmt.Fprintf(out, "selftest comm: %s: %s: ok\n", who, name)
		}
	})
	total := len(commtest.Cases()) + 1
	if failed == 0 {
		// Rank 0's bytes to every rank: MPI_Bcast under MPI, else the TCP store.
		ran++
		want := []byte(fmt.Sprintf("from rank 0 of %d", w.Size))
		data := []byte(nil)
		if w.Rank == 0 {
			data = want
		}
		got, err := spmd.Share(context.Background(), w, o, "selftest/share", data, len(want))
		if err == nil && string(got) != string(want) {
			err = fmt.Errorf("got %q, want %q", got, want)
		}
		if err != nil {
			failed++
			fmt.Fprintf(os.Stderr, "selftest comm: %s: share-from-rank-0: FAIL: %v\n", who, err)
		}
	}
	fmt.Fprintf(out, "selftest comm: %s: %d passed, %d failed, %d not run (%.2fs)\n", who, ran-failed, failed, total-ran, time.Since(start).Seconds())
	if failed > 0 {
		// The communicator may be stuck (a peer is gone): exit without closing it.
		return cli.Exit("", 1)
	}
	return cm.Close()
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
	rw, err := results.Create(c.String("dir"), run, w.Rank, w.Size)
	if err != nil {
		return err
	}
	dev := "cpu"
	if d, err := spmd.DeviceIndex(w, os.Getenv); err == nil {
		dev = fmt.Sprintf("cuda:%d", d)
	}
	row := results.Row{RunID: run, Time: time.Now().UTC(), Host: w.Host, Rank: int64(w.Rank), WorldSize: int64(w.Size),
		LocalRank: int64(w.LocalRank), Launcher: w.Launcher, Device: dev, Backend: "none", Bench: "selftest",
		Status: results.StatusOK, Version: Version, Command: "selftest results"}
	if err := rw.Write(row); err != nil {
		rw.Close()
		return err
	}
	if err := rw.Close(); err != nil {
		return err
	}
	fmt.Fprintf(c.App.Writer, "selftest results: rank %d of %d wrote %s\n", w.Rank, w.Size, filepath.Base(rw.Path()))
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
	loaded, err := results.LoadChecked(c.Args().First())
	if err != nil {
		return err
	}
	seen := map[int64]int{}
	for _, r := range loaded.Rows {
		seen[r.Rank]++
	}
	var problems []string
	per := seen[0]
	for r := range int64(n) {
		if seen[r] == 0 || seen[r] != per {
			problems = append(problems, fmt.Sprintf("rank %d has %d rows (rank 0 has %d)", r, seen[r], per))
		}
		delete(seen, r)
	}
	var extra []int
	for r := range seen {
		extra = append(extra, int(r))
	}
	sort.Ints(extra)
	if len(extra) > 0 {
		problems = append(problems, fmt.Sprintf("ranks %v are outside 0..%d", extra, n-1))
	}
	if len(problems) > 0 {
		return cli.Exit(fmt.Sprintf("selftest merged: %s: %v", c.Args().First(), problems), 1)
	}
	fmt.Fprintf(c.App.Writer, "selftest merged: %s holds %d rows from each of %d ranks\n", c.Args().First(), per, n)
	return nil
}
