package session

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/longca/longca/comm"
	"github.com/longca/longca/internal/textcut"
	"github.com/longca/longca/results"
	"github.com/longca/longca/tensor"
)

// Of two runs started at once with one results folder and run id (two jobs given the
// same --out), exactly one may write: every rank creating its own file by exclusive
// create left each run holding some ranks' files and refused on the others, so both died
// (exit 2) and their empty files kept the id for good. A run of several ranks therefore
// claims its id first: rank 0 creates its rank file (an exclusive create, atomic on a local
// disk and on the shared file systems of a cluster), the ranks agree over the world's
// communicator on whether it won, and only then does every other rank create its own. The
// run that lost is refused on every rank before any of its ranks made a file; a run whose
// other ranks could not create theirs removes the files it made (they hold no row) and is
// refused on every rank too. The agreements are the communicator's all-reduce, so ranks on
// other hosts sharing the folder (a multi-node job) are held to it as in-process ranks are.

// claimHook, when set (tests), is called by every rank of a run at the steps of
// claimRankFile: "claim" and "claimed", rank 0 before and after its exclusive create;
// "create", any other rank before its own. A test orders the ranks of two runs with it.
var claimHook func(s *Session, rank int, step string)

// claimRankFile creates this rank's file of the session's run, rank 0's first (the run's
// claim to its id), then, once the ranks agreed that it won, every other rank's. Every rank
// calls it (its agreements are collectives) and fails when any rank did (agreeOnFiles):
// with a usage error (exit status 2) where the folder holds the run id already. planned is
// the rows each rank plans (RankFile).
func (s *Session) claimRankFile(cm comm.Comm, planned int) (*results.Writer, error) {
	rank, n := cm.Rank(), cm.Size()
	step := func(name string) {
		if claimHook != nil {
			claimHook(s, rank, name)
		}
	}
	var w *results.Writer
	var err error
	if rank == 0 {
		step("claim")
		w, err = s.claimRunID(n, planned)
		step("claimed")
	}
	if err = agreeOnFiles(cm, err); err != nil {
		discardFile(w)
		return nil, err
	}
	if rank != 0 {
		step("create")
		w, err = s.RankFile(s.RunID, rank, n, planned)
	}
	if err = agreeOnFiles(cm, err); err != nil {
		discardFile(w) // rank 0's claim too: the run id is free again
		return nil, err
	}
	return w, nil
}

// claimRunID is rank 0's claim to the run id for a run of n ranks: its rank file, made by
// exclusive create. A file already there is a usage error saying that another run holds
// the id (what its files hold, RunFilesNote); so are files of the run's other ranks without
// rank 0's (left by an earlier run: a live run of this id and size holds rank 0's), the
// claim then given up. planned is the rows rank 0 plans (RankFile).
func (s *Session) claimRunID(n, planned int) (*results.Writer, error) {
	path := filepath.Join(s.Out, results.FileName(s.RunID, 0, n))
	w, err := s.RankFile(s.RunID, 0, n, planned)
	if err != nil {
		if _, serr := os.Lstat(path); serr == nil && errors.Is(err, results.ErrUsage) {
			return nil, Usagef("%s %s: run %s has rank files there already: %s exists (another run holds the run id, perhaps one started at the same time%s): give another --run-id or %s (a run id is used once; nothing is overwritten)",
				s.outFlag(), s.Out, s.RunID, path, withNote("; ", RunFilesNote(s.Out, s.RunID)), s.outFlag())
		}
		return nil, err
	}
	if others := rankFilesOf(s.Out, s.RunID, n); len(others) > 0 {
		discardFile(w)
		return nil, Usagef("%s %s: run %s has rank files there already, without rank 0's: %s (left by an earlier run%s): give another --run-id or %s (a run id is used once; nothing is overwritten)",
			s.outFlag(), s.Out, s.RunID, firstPaths(others, 3), withNote("; ", RunFilesNote(s.Out, s.RunID)), s.outFlag())
	}
	return w, nil
}

// rankFilesOf lists dir's rank files of run runID on n ranks other than rank 0's.
func rankFilesOf(dir, runID string, n int) []string {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil
	}
	var out []string
	for _, e := range ents {
		if id, r, size, ok := results.ParseFileName(e.Name()); ok && id == runID && size == n && r != 0 {
			out = append(out, filepath.Join(dir, e.Name()))
		}
	}
	return out
}

// firstPaths names up to k paths, and how many more.
func firstPaths(paths []string, k int) string {
	if len(paths) <= k {
		return strings.Join(paths, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(paths[:k], ", "), len(paths)-k)
}

// discardFile closes and removes a rank file this process has just made (it holds no
// row): a run refused after its files were made leaves none behind.
func discardFile(w *results.Writer) {
	if w == nil {
		return
	}
	_ = w.Close()
	_ = os.Remove(w.Path())
}

// noteFiles and noteFileBytes bound what RunFilesNote reads: a run of more files, or with a
// file this large (rows), gets no note.
const (
	noteFiles     = 256
	noteFileBytes = 1 << 20
)

// RunFilesNote says, for a refusal naming run runID's files in dir, what they hold when it
// is nothing: rank files closed with no row (a run that stopped before its first row left
// them, and nothing is lost by removing them, the command to do so named), or without a
// row yet and not closed (a run may be writing them now). Empty when a file holds rows,
// cannot be read, or there are too many to read.
func RunFilesNote(dir, runID string) string {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return ""
	}
	var files []string
	sizes := map[int]bool{}
	for _, e := range ents {
		if e.Name() == runID+".merged.arrow" { // (the refusal names it: the run merged its files)
			return ""
		}
		if id, _, size, ok := results.ParseFileName(e.Name()); ok && id == runID && e.Type().IsRegular() {
			files = append(files, filepath.Join(dir, e.Name()))
			sizes[size] = true
		}
	}
	if len(files) == 0 || len(files) > noteFiles {
		return ""
	}
	open := 0
	for _, p := range files {
		if st, err := os.Stat(p); err != nil || st.Size() > noteFileBytes {
			return ""
		}
		f, err := results.Open(p)
		if err != nil {
			return ""
		}
		rows, truncated := f.NumRows(), f.Truncated
		f.Release()
		if rows > 0 {
			return ""
		}
		if truncated {
			open++
		}
	}
	if open > 0 {
		which := "are not closed"
		if open < len(files) {
			which = fmt.Sprintf("%d of them are not closed", open)
		}
		return fmt.Sprintf("its %d rank file(s) there hold no row yet and %s: a run may be writing them now, or one was killed before its first row", len(files), which)
	}
	of := "*"
	if len(sizes) == 1 {
		for n := range sizes {
			of = fmt.Sprint(n)
		}
	}
	return fmt.Sprintf("its %d rank file(s) there were closed with no row, as a run that stopped before its first row (refused, failed or interrupted) leaves them: removing them loses nothing, and rm %s/%s.rank-*-of-%s.arrow frees the run id",
		len(files), shellWord(dir), runID, of)
}

// ShellWord is path as one word of a shell command line (quoted where it must be).
func ShellWord(path string) string { return shellWord(path) }

// withNote is note after sep, or nothing when there is no note.
func withNote(sep, note string) string {
	if note == "" {
		return ""
	}
	return sep + note
}

// maxFileText bounds the failure text the ranks share (a rank file's path is at most a few
// KB).
const maxFileText = 16 << 10

// agreeOnFiles is every rank's report of its attempt at its rank file (err: nil when it
// made it, or had none to make) through two all-reduces over the world: nil on every rank
// when every rank succeeded; else every rank that failed returns its own failure, and every
// other rank a *peerFileError with the text of one that failed (a usage error before any
// other, then the lowest rank) and its exit status. A usage failure is said as a usage
// error (exit status 2).
//
// The second all-reduce, which shares the text, may be cut short where a rank that
// returned first ends the world (an in-process rank returning an error aborts its peers;
// a process exits): every rank knows from the first which rank failed and how, and a
// rank's own failure is said as it is, so that the failure is never lost to the abort.
func agreeOnFiles(cm comm.Comm, err error) error {
	n, me := cm.Size(), cm.Rank()
	code, text := 0, ""
	if err != nil {
		code, text = 1, err.Error()
		var u *UsageError
		switch {
		case errors.As(err, &u):
			code, text = 2, u.msg
		case errors.Is(err, results.ErrUsage):
			code = 2
		}
		text = textcut.Prefix(text, maxFileText) // (at a character boundary)
		if code == 2 {
			err = &UsageError{msg: text} // (one type on every rank: said once, oneUsage)
		}
	}
	// the key picks one failing rank on every rank: the highest code, then the lowest rank
	v := tensor.NewHost(tensor.FP64, 2)
	if code > 0 {
		v.Set(0, float64(code*n+n-1-me))
		v.Set(1, float64(len(text)))
	}
	if aerr := cm.AllReduce(v, comm.Max); aerr != nil {
		if err != nil {
			return err
		}
		return fmt.Errorf("agreeing on the results files: %w", aerr)
	}
	key, size := int(v.At(0)), int(v.At(1))
	if key == 0 {
		return nil
	}
	code, root := key/n, n-1-key%n
	shared, aerr := comm.ShareText(cm, root, text, size)
	if err != nil {
		return err
	}
	if aerr != nil {
		return &peerFileError{rank: root, usage: code == 2,
			text: fmt.Sprintf("rank %d could not make its results file (its reason did not reach this rank: %v)", root, aerr)}
	}
	return &peerFileError{rank: root, text: shared, usage: code == 2}
}

// peerFileError is a rank's failure to make its results file (or rank 0's claim lost), as
// every other rank returns it: the command exits as that rank does, and where the ranks
// are in one process the failure is said once (dropPeerFileErrors).
type peerFileError struct {
	rank  int
	text  string
	usage bool
}

func (e *peerFileError) Error() string {
	if e.usage {
		return "longca: " + e.text
	}
	return fmt.Sprintf("rank %d: %s", e.rank, e.text)
}

// ExitCode is 2 when the failing rank's was a usage error, else 1 (urfave/cli's ExitCoder:
// a launched rank other than 0 then exits silently with rank 0's status).
func (e *peerFileError) ExitCode() int {
	if e.usage {
		return 2
	}
	return 1
}

// dropPeerFileErrors leaves out of the in-process ranks' joined errors those that only
// echo another rank's failure to make its file (peerFileError), so that it is said once.
func dropPeerFileErrors(err error) error {
	j, ok := err.(interface{ Unwrap() []error })
	if !ok {
		return err
	}
	var own []error
	for _, e := range j.Unwrap() {
		if !errors.As(e, new(*peerFileError)) {
			own = append(own, e)
		}
	}
	if len(own) == 0 || len(own) == len(j.Unwrap()) {
		return err
	}
	return errors.Join(own...)
}
