package session

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/longca/longca/harness"
	"github.com/longca/longca/internal/smallfile"
	"github.com/longca/longca/present"
	"github.com/longca/longca/results"
)

// ExitError ends a command with its own status and message (130 after Ctrl-C).
type ExitError struct {
	Code int
	Msg  string
}

func (e *ExitError) Error() string { return e.Msg }

// ExitCode is the status the command exits with.
func (e *ExitError) ExitCode() int { return e.Code }

// Suite runs a standard suite (`longca run`): the sweep, then whatever it measured
// (all of it, or the rows before Ctrl-C or a worker failure) merged into
// <run>.merged.arrow (and .parquet), reported in <run>.report.txt and on Stdout, and
// drawn in <run>.plots; the masks go to masks/ as JSON.
func (s *Session) Suite(ctx context.Context, name string, k KernelSweep, parquet bool) error {
	merged := results.MergedPath(s.Out, s.RunID)
	if _, err := os.Stat(merged); err == nil {
		return Usagef("--out %s already holds run %s (%s): give another --run-id or folder", s.Out, s.RunID, filepath.Base(merged))
	}
	s.log().Info().Str("suite", name).Strs("kernels", k.Sweep.Kernels).Str("out", s.Out).Msg("longca run")
	est, err := s.FitKernels(ctx, k)
	if err != nil {
		return err
	}
	res, sweepErr := s.RunKernels(ctx, k, est)
	var usage *UsageError
	if sweepErr != nil && (len(res.Rows) == 0 || errors.As(sweepErr, &usage)) {
		return sweepErr // (a full disk: what follows would fail too, and blamed its masks folder)
	}
	// Interrupted (Ctrl-C) or stopped after a worker failure: what was measured is still
	// merged, reported and plotted.
	after := afterSweep{s: s, rows: len(res.Rows), cases: len(k.Sweep.Cases()), file: res.File, complete: sweepErr == nil,
		merged: merged, parquet: parquet, stopped: sweepErr}
	if err := s.WriteMaskJSON(filepath.Join(s.Out, "masks"), k.Sweep, k.Build); err != nil {
		return after.noRoom(err, wroteNothing)
	}
	m, err := s.MergeRun(merged, parquet)
	if err != nil {
		return after.noRoom(err, wroteMasks)
	}
	loaded, err := results.LoadChecked(m.Files[0])
	if err != nil {
		return err
	}
	rows := loaded.Rows
	title := fmt.Sprintf("longca run: suite %s, run %s, %d rows", name, s.RunID, len(rows))
	if sweepErr != nil {
		title += fmt.Sprintf(" (stopped early: %s)", stoppedWhy(sweepErr))
	}
	var table strings.Builder
	if err := present.WriteReport(&table, rows, "", title); err != nil {
		return err
	}
	// whole or not at all: a disk that filled left a cut report under its name
	if err := writeWhole(filepath.Join(s.Out, s.RunID+".report.txt"), func(w io.Writer) error {
		_, err := io.WriteString(w, table.String())
		return err
	}); err != nil {
		return after.noRoom(fmt.Errorf("report: %w", err), wroteMerge)
	}
	plotDir := filepath.Join(s.Out, s.RunID+".plots")
	n, err := writePlots(plotDir, present.Summarize(rows, ""))
	if err != nil {
		return after.noRoom(err, wroteReport)
	}
	fmt.Fprint(s.Stdout, table.String())
	wrote := []string{filepath.Base(res.File)}
	for _, f := range m.Files { // the merged Arrow file, and its Parquet with --parquet
		wrote = append(wrote, filepath.Base(f))
	}
	fmt.Fprintf(s.Stdout, "# wrote %s, %s.report.txt and %d plots in %s\n", strings.Join(wrote, ", "), s.RunID, n, plotDir)
	if sweepErr != nil {
		if errors.Is(sweepErr, context.Canceled) {
			return &ExitError{130, fmt.Sprintf("longca: interrupted after %d of %d cases; the files above hold them", len(res.Rows), len(k.Sweep.Cases()))}
		}
		return sweepErr
	}
	return nil
}

// writeWhole writes one of run's files after the sweep (a mask's JSON, the report) whole or
// not at all, and writePlots draws the plots (each PNG whole or not at all); variables so
// that a test can fill the disk after the sweep.
var (
	writeWhole = smallfile.WriteWhole
	writePlots = present.WriteAllPlots
)

// stoppedWhy is why a sweep stopped early, in a reader's words.
func stoppedWhy(err error) string {
	if errors.Is(err, context.Canceled) || errors.Is(err, harness.ErrInterrupted) {
		return "interrupted" // Go's "context canceled" says nothing to a reader
	}
	return err.Error()
}

// What run had written after its sweep when a write found no room, in its order: the
// mask JSONs, the merge, the report, then the plots.
const (
	wroteNothing = iota
	wroteMasks
	wroteMerge
	wroteReport
)

// afterSweep is where a run stands once its sweep is over, for the message of a write
// after it that finds no room (a full disk, quota or ulimit -f).
type afterSweep struct {
	s           *Session
	rows, cases int    // rows in file, of the sweep's cases
	file        string // the rank file
	complete    bool   // the sweep measured every case (else stopped, why)
	stopped     error
	merged      string // the run's merged file
	parquet     bool
}

// noRoom is err (a write after the sweep that had written what done says) as Session.NoRoom
// makes it: a usage error, exit 2, naming --out; other errors as they are. It told the
// user to run again under another --run-id although every case was measured and the rank
// file complete (only the mask JSONs, the merge, the report or the plots were not
// written): now it says every row is in, what is missing, and the commands that finish
// the run from the rank file without measuring again.
func (a afterSweep) noRoom(err error, done int) error {
	s := a.s
	if !results.NoRoom(err) {
		return err
	}
	why := noRoomWhy(err)
	plots := filepath.Join(s.Out, s.RunID+".plots")
	report := filepath.Join(s.Out, s.RunID+".report.txt")
	var missing []string
	if done < wroteMasks {
		missing = append(missing, "the mask JSONs in "+filepath.Join(s.Out, "masks")+" (some or all; not needed to read the rows)")
	}
	if done < wroteMerge {
		if _, serr := os.Stat(a.merged); done == wroteMasks && a.parquet && serr == nil {
			pq, _ := results.ExportPaths(a.merged)
			missing = append(missing, filepath.Base(pq))
		} else {
			missing = append(missing, filepath.Base(a.merged))
		}
	}
	if done < wroteReport {
		missing = append(missing, filepath.Base(report))
	}
	missing = append(missing, filepath.Base(plots))
	var finish []string
	if done < wroteMerge {
		m := "longca merge " + shellWord(s.Out) + " --run " + shellWord(s.RunID) + " --out " + shellWord(a.merged)
		if a.parquet {
			m += " --parquet"
		}
		finish = append(finish, m)
	}
	r := "longca report " + shellWord(a.merged) + " --plot " + shellWord(plots)
	if done < wroteReport {
		r += " > " + shellWord(report)
	}
	finish = append(finish, r)
	how := fmt.Sprintf("make room (space, quota, ulimit -f) and finish with `%s`", strings.Join(finish, " && "))
	if done < wroteMerge {
		how += ", or give merge's --out and report's --plot a folder with room"
	} else {
		how += ", or give --plot a folder with room"
	}
	if a.complete {
		return Usagef("%s %s: %v after the sweep: every row is in: all %d cases were measured and their %d row(s) are in %s (complete); not written: %s; do not measure again: %s",
			s.outFlag(), s.Out, why, a.cases, a.rows, a.file, strings.Join(missing, ", "), how)
	}
	return Usagef("%s %s: %v: %s (%d of %d cases: stopped early: %s); not written: %s; make room (space, quota, ulimit -f) and run again under another --run-id, or give %s a folder with room; or keep these rows: %s",
		s.outFlag(), s.Out, why, keptIn(a.rows, a.file), a.rows, a.cases, stoppedWhy(a.stopped), strings.Join(missing, ", "), s.outFlag(), how)
}
