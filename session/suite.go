package session

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/longca/longca/harness"
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
	kept := keptIn(len(res.Rows), res.File) // where the rows are, should a write below find no room
	if err := s.WriteMaskJSON(filepath.Join(s.Out, "masks"), k.Sweep, k.Build); err != nil {
		return s.NoRoom(err, kept)
	}
	m, err := s.MergeRun(merged, parquet)
	if err != nil {
		return s.NoRoom(err, kept)
	}
	loaded, err := results.LoadChecked(m.Files[0])
	if err != nil {
		return err
	}
	rows := loaded.Rows
	title := fmt.Sprintf("longca run: suite %s, run %s, %d rows", name, s.RunID, len(rows))
	if sweepErr != nil {
		why := sweepErr.Error()
		if errors.Is(sweepErr, context.Canceled) || errors.Is(sweepErr, harness.ErrInterrupted) {
			why = "interrupted" // Go's "context canceled" says nothing to a reader
		}
		title += fmt.Sprintf(" (stopped early: %s)", why)
	}
	var table strings.Builder
	if err := present.WriteReport(&table, rows, "", title); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(s.Out, s.RunID+".report.txt"), []byte(table.String()), 0o644); err != nil {
		return s.NoRoom(fmt.Errorf("report: %w", err), kept)
	}
	plotDir := filepath.Join(s.Out, s.RunID+".plots")
	n, err := present.WriteAllPlots(plotDir, present.Summarize(rows, ""))
	if err != nil {
		return s.NoRoom(err, kept)
	}
	fmt.Fprint(s.Stdout, table.String())
	fmt.Fprintf(s.Stdout, "# wrote %s, %s, %s.report.txt and %d plots in %s\n",
		filepath.Base(res.File), filepath.Base(m.Files[0]), s.RunID, n, plotDir)
	if sweepErr != nil {
		if errors.Is(sweepErr, context.Canceled) {
			return &ExitError{130, fmt.Sprintf("longca: interrupted after %d of %d cases; the files above hold them", len(res.Rows), len(k.Sweep.Cases()))}
		}
		return sweepErr
	}
	return nil
}
