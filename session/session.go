// Package session is the run session under every command of longca: a command parses its
// flags, describes its cases (a kernel sweep, a CP sweep, a simulation, a selftest row)
// and hands them to a Session, which owns the rest: the world (launched ranks, or
// in-process ranks with their device mover, both through spmd.RunRanks), the rank file,
// the base row every row starts from, progress with one time estimate, Ctrl-C, the merge,
// the report and the plots.
package session

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/longca/longca/results"
	"github.com/longca/longca/spmd"
	"github.com/rs/zerolog"
)

// UsageError is bad input found by the session (a folder that cannot be written, a run
// id that is not one, a case too big for the machine): one line naming the flag and the
// fix; the command exits with status 2 (its ExitCode).
type UsageError struct{ msg string }

// Usagef makes a UsageError.
func Usagef(format string, args ...any) error {
	return &UsageError{msg: fmt.Sprintf(format, args...)}
}

func (e *UsageError) Error() string { return "longca: " + e.msg }

// ExitCode is 2, the status of bad usage (urfave/cli's ExitCoder).
func (e *UsageError) ExitCode() int { return 2 }

// Session is one command's run: where its rows go and what every row records of it.
type Session struct {
	// Out is the results folder, RunID the run id (see Target).
	Out, RunID string
	// Bench is the rows' bench column: kernel, sparse, cp, simulate or selftest.
	Bench string
	// World is this process among the ranks a launcher started (rank 0 of 1 alone).
	World spmd.World
	// Version and Command are recorded in every row, and so is Env (EnvSettings), except
	// on simulate's rows, which no variable of the environment changes.
	Version, Command, Env string
	// Log is the one logger (rank-tagged once the world is known); nil: no log.
	Log *zerolog.Logger
	// Stdout gets tables, Stderr the "# results:" lines.
	Stdout, Stderr io.Writer
	// OutFlag names the folder's flag in errors ("--out" when empty).
	OutFlag string
}

// New is a session of bench writing into out under runID (both checked by the command:
// the folder writable, the id valid), as rank w.
func New(bench, out, runID string, w spmd.World, version string, log *zerolog.Logger, stdout, stderr io.Writer) *Session {
	s := &Session{Bench: bench, Out: out, RunID: runID, World: w, Version: version, Command: strings.Join(os.Args, " "), Log: log, Stdout: stdout, Stderr: stderr}
	if bench != "simulate" {
		s.Env = EnvSettings(os.Environ())
	}
	if s.Stdout == nil {
		s.Stdout = os.Stdout
	}
	if s.Stderr == nil {
		s.Stderr = os.Stderr
	}
	return s
}

// DefaultOutDir is the results folder of a run given no --out. One process: out/<what>-<UTC
// time>, with -2, -3 ... where that folder exists already (two runs started in one second).
// Several ranks, each its own process (ranks > 1): out/<what>-<job id>, the launcher's job id
// (spmd.JobID: Slurm's job and step, PMIx's namespace, Open MPI's job id, torchrun's run id,
// or LONGCA_JOB_ID) with the characters a run id cannot hold as '-', so that every rank names
// the same folder (each rank's clock could name another second); a usage error where no
// launcher gives one.
func DefaultOutDir(what string, ranks int) (string, error) {
	if ranks > 1 {
		id := spmd.JobID()
		if id == "" {
			return "", Usagef("--out: the %d ranks write one folder, and no launcher job id here names one (Slurm, PMIx, Open MPI, torchrun or %s): give --out", ranks, spmd.EnvJobID)
		}
		return filepath.Join("out", results.RunIDFrom(what+"-"+id)), nil
	}
	if st, err := os.Stat("out"); err == nil && !st.IsDir() {
		return "", Usagef("--out: the default results folder is under ./out, and ./out is a file here: give --out, or move that file")
	}
	base := filepath.Join("out", what+"-"+time.Now().UTC().Format("20060102T150405Z"))
	for i := 1; i < 100; i++ {
		dir := base
		if i > 1 {
			dir = fmt.Sprintf("%s-%d", base, i)
		}
		if _, err := os.Lstat(dir); errors.Is(err, os.ErrNotExist) {
			return dir, nil
		}
	}
	return "", Usagef("--out: %s and its 98 numbered neighbours exist already: give --out", base)
}

func (s *Session) log() *zerolog.Logger {
	if s.Log == nil {
		l := zerolog.Nop()
		return &l
	}
	return s.Log
}

// TagRank tags every later log line with the rank and world size.
func (s *Session) TagRank(rank, size int) {
	if s.Log != nil {
		*s.Log = s.Log.With().Str("rank", fmt.Sprintf("%d/%d", rank, size)).Logger()
	}
}

// BaseRow holds the columns every row of rank w of this session shares.
func (s *Session) BaseRow(w spmd.World) results.Row {
	host := w.Host
	if host == "" {
		host, _ = os.Hostname()
	}
	return results.Row{
		RunID: s.RunID, Host: host, Rank: int64(w.Rank), WorldSize: int64(max(w.Size, 1)), LocalRank: int64(w.LocalRank),
		Launcher: w.Launcher, Bench: s.Bench, Version: s.Version, Command: s.Command, Env: s.Env,
	}
}

// RankFile creates rank's results file of n ranks in the session's folder: the one place
// a results file is created. planned is the rows the rank's sweep plans (every case,
// sample and pass), recorded in the file (results.MetaPlannedRows) so that a sweep
// stopped before its end is told from a whole one; negative: not known.
func (s *Session) RankFile(runID string, rank, n, planned int) (*results.Writer, error) {
	w, err := results.CreatePlanned(s.Out, runID, rank, max(n, 1), planned)
	if err != nil {
		if results.NoRoom(err) {
			return nil, s.NoRoom(err, "nothing was written")
		}
		if errors.Is(err, syscall.EMFILE) { // said once for all in-process ranks (oneUsage)
			return nil, Usagef("%s %s: this process may have no more files open (%v): raise the limit (ulimit -n), or run fewer ranks in it", s.outFlag(), s.Out, syscall.EMFILE)
		}
		return nil, fmt.Errorf("%s %s: %w", s.outFlag(), s.Out, err)
	}
	return w, nil
}

// outFlag is the flag that names the session's folder.
func (s *Session) outFlag() string {
	if s.OutFlag == "" {
		return "--out"
	}
	return s.OutFlag
}

// NoRoom is err, a write into the session's folder, as the usage error it is when the
// machine refused it for want of room (results.NoRoom: the disk or quota full, the file
// size limit, the folder read-only): one line naming the folder, kept (where the rows
// measured so far are), and the fix. It exited 1 with Arrow's words, and `run` then
// blamed its masks folder. Other errors are returned as they are.
func (s *Session) NoRoom(err error, kept string) error {
	if !results.NoRoom(err) {
		return err
	}
	why := noRoomWhy(err)
	return Usagef("%s %s: %v: %s; make room (space, quota, ulimit -f) and run again under another --run-id, or give %s a folder with room",
		s.outFlag(), s.Out, why, kept, s.outFlag())
}

// noRoomWhy is the system's word of a write refused for want of room (ENOSPC, EDQUOT,
// EFBIG, EROFS) where err holds one, else err.
func noRoomWhy(err error) error {
	var errno syscall.Errno
	if errors.As(err, &errno) {
		return errno
	}
	return err
}

// keptIn says where the rows measured so far are: n of them in file.
func keptIn(n int, file string) string {
	return fmt.Sprintf("the %d row(s) measured before are in %s", n, file)
}

// oneUsage is the usage error every failed rank of this process returned, said once
// (in-process ranks find the same full disk), or err as it is.
func oneUsage(err error) error {
	j, ok := err.(interface{ Unwrap() []error })
	if !ok {
		return err
	}
	var first *UsageError
	for _, e := range j.Unwrap() {
		var u *UsageError
		if !errors.As(e, &u) || first != nil && u.msg != first.msg {
			return err
		}
		if first == nil {
			first = u
		}
	}
	if first == nil {
		return err
	}
	return first
}

// WriteRows writes rows to a new rank file (rank 0 of 1) of runID, closing it; planned is
// the rows the run planned (RankFile), more than len(rows) where it stopped early.
func (s *Session) WriteRows(runID string, rows []results.Row, planned int) (string, error) {
	return s.WriteRankRows(runID, 0, 1, rows, planned)
}

// WriteRankRows writes rows to a new file of runID's rank of n, closing it; planned is the
// rows the rank planned (RankFile). The rows are in hand, not measured one by one, so
// they are made durable thousands at a time (results.Writer.WriteAll): an fsync a row
// made simulate's 100,000 rows take minutes.
func (s *Session) WriteRankRows(runID string, rank, n int, rows []results.Row, planned int) (string, error) {
	w, err := s.RankFile(runID, rank, n, planned)
	if err != nil {
		return "", err
	}
	if err := w.WriteAll(rows); err != nil {
		_ = w.Close()
		return "", err
	}
	return w.Path(), w.Close()
}

// Merge joins the rank files of dir: the one place results are merged (longca merge's
// folder, or a session's run).
func Merge(dir string, o results.MergeOptions) (results.MergeResult, error) {
	return results.Merge(dir, o)
}

// MergeRun merges this session's run into its folder's default merged file (or out).
func (s *Session) MergeRun(out string, parquet bool) (results.MergeResult, error) {
	return Merge(s.Out, results.MergeOptions{Runs: []string{s.RunID}, Out: out, Parquet: parquet})
}

// Interruptible is ctx (Background when nil) cancelled by Ctrl-C, SIGTERM (a batch
// system's time limit) or SIGHUP (the terminal gone): a session stops at the case at
// hand (a case it cuts short is not written), keeping every row written before. A second
// signal takes its usual course and ends the process at once: a rank waiting for a peer
// that is gone (a stopped process, a rendezvous short of a rank) notices the first only
// at --timeout, and the rows are durable as each is written. A stop that takes longer
// than stillStopping says so, once, on stderr.
func Interruptible(ctx context.Context) (context.Context, context.CancelFunc) {
	if ctx == nil {
		ctx = context.Background()
	}
	parent := ctx
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	ended := make(chan struct{})
	var once sync.Once
	end := func() { once.Do(func() { close(ended); stop() }) }
	go func() {
		select {
		case <-ended:
			return
		case <-ctx.Done():
		}
		stop() // the next signal ends the process
		if parent.Err() != nil {
			return // cancelled from above, not by a signal
		}
		select {
		case <-ended:
		case <-time.After(stillStopping):
			fmt.Fprintln(os.Stderr, "longca: interrupted: still stopping (the case at hand, or a peer that is not answering, until --timeout); interrupt again to stop at once, keeping the rows written so far")
		}
	}()
	return ctx, end
}

// stillStopping is how long an interrupted session stops in silence.
const stillStopping = 3 * time.Second
