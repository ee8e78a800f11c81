package session

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/longca/longca/harness"
	"github.com/longca/longca/kernels"
	_ "github.com/longca/longca/kernels/ref"
	"github.com/longca/longca/results"
	"github.com/longca/longca/spmd"
	"github.com/longca/longca/tensor"
)

// tinyCP is a CP run of one ring-p2p case on ranks ranks: in-process unless opts names a
// backend.
func tinyCP(t *testing.T, ranks int, opts spmd.Options) CPRun {
	t.Helper()
	sw := harness.CPSweep{Methods: []string{"ring-p2p"}, Masks: []string{"causal"}, SeqLen: 32 * ranks, Heads: []harness.Heads{{Q: 2, KV: 2}},
		HeadDim: 8, DType: tensor.FP32, Passes: []kernels.Pass{kernels.Fwd}, Samples: 1, Seed: 1, Kernel: "ref"}
	cases, err := sw.Cases(ranks)
	if err != nil {
		t.Fatal(err)
	}
	k, err := kernels.New("ref", kernels.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return CPRun{Sweep: sw, Cases: cases, Ranks: ranks, InProcess: opts.Backend == "", Kernel: k, Warmup: 0, Iters: 1, Options: opts}
}

// setClaimHook sets claimHook for the test.
func setClaimHook(t *testing.T, f func(s *Session, rank int, step string)) {
	claimHook = f
	t.Cleanup(func() { claimHook = nil })
}

// rankFiles lists dir's rank files of run x, by name.
func rankFiles(t *testing.T, dir string) []string {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(dir, "x.rank-*"))
	if err != nil {
		t.Fatal(err)
	}
	for i := range m {
		m[i] = filepath.Base(m[i])
	}
	slices.Sort(m)
	return m
}

// allRankFiles names every rank file of run x on n ranks.
func allRankFiles(n int) []string {
	var out []string
	for r := range n {
		out = append(out, results.FileName("x", r, n))
	}
	slices.Sort(out)
	return out
}

// exitCode is err's exit status (ExitCode), 1 without one, 0 for nil.
func exitCodeOf(err error) int {
	var ec interface{ ExitCode() int }
	switch {
	case err == nil:
		return 0
	case errors.As(err, &ec):
		return ec.ExitCode()
	}
	return 1
}

// Two in-process cp runs started at once with one folder and run id: exactly one runs
// and writes every rank's file; the other is refused (exit status 2, said once, naming
// --out and --run-id), and the folder holds no file of it. Each rank created its own file
// by exclusive create, and both runs died (5 of 6 tries, the probe of session 41, F2),
// leaving empty files that kept the run id for good.
func TestCPRunIDRaceOneWins(t *testing.T) {
	const ranks, tries = 4, 12
	for i := range tries {
		dir := filepath.Join(t.TempDir(), "x")
		errs := make([]error, 2)
		start := make(chan struct{})
		var wg sync.WaitGroup
		for j := range 2 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				run := tinyCP(t, ranks, spmd.Options{})
				s := New("cp", dir, "x", spmd.World{Size: 1}, "test", nil, io.Discard, io.Discard)
				<-start
				errs[j] = s.CP(context.Background(), run)
			}()
		}
		close(start)
		wg.Wait()
		won := 0
		for j, err := range errs {
			switch code := exitCodeOf(err); {
			case err == nil:
				won++
			case code != 2 || strings.Contains(err.Error(), "\n") || !strings.Contains(err.Error(), "--run-id or --out"):
				t.Errorf("try %d, run %d: %v (exit %d), want one line naming --run-id or --out, exit 2", i, j, err, code)
			}
		}
		if won != 1 {
			t.Fatalf("try %d: %d runs finished (%v), want exactly one", i, won, errs)
		}
		if got, want := rankFiles(t, dir), allRankFiles(ranks); !slices.Equal(got, want) {
			t.Fatalf("try %d: the folder holds %v, want the winner's %v", i, got, want)
		}
		res, err := results.Merge(dir, results.MergeOptions{Runs: []string{"x"}, Out: filepath.Join(dir, "m.arrow")})
		if err != nil || res.Rows != ranks {
			t.Fatalf("try %d: the winner's files merge to %d rows (%v), want %d", i, res.Rows, err, ranks)
		}
	}
}

// The ordering that failed: run A's rank 0 makes its file, then run B runs whole while A's
// other ranks have not made theirs. B is refused on every rank, having made no file (its
// ranks wait for rank 0's claim); A then writes every rank's file.
func TestCPRunIDLoserMakesNoFile(t *testing.T) {
	const ranks = 4
	dir := t.TempDir()
	a := New("cp", dir, "x", spmd.World{Size: 1}, "test", nil, io.Discard, io.Discard)
	b := New("cp", dir, "x", spmd.World{Size: 1}, "test", nil, io.Discard, io.Discard)
	claimed, bDone := make(chan struct{}), make(chan struct{})
	setClaimHook(t, func(s *Session, rank int, step string) {
		switch {
		case s == a && step == "claimed":
			close(claimed)
		case s == a && step == "create":
			<-bDone
		}
	})
	var aErr error
	aFinished := make(chan struct{})
	go func() {
		defer close(aFinished)
		aErr = a.CP(context.Background(), tinyCP(t, ranks, spmd.Options{}))
	}()
	<-claimed
	bErr := b.CP(context.Background(), tinyCP(t, ranks, spmd.Options{}))
	left := rankFiles(t, dir)
	close(bDone)
	<-aFinished
	if code := exitCodeOf(bErr); code != 2 || !strings.Contains(bErr.Error(), "x.rank-0-of-4.arrow exists") || strings.Contains(bErr.Error(), "\n") {
		t.Errorf("the run that lost: %v (exit %d), want one line saying rank 0's file exists, exit 2", bErr, code)
	}
	if want := []string{results.FileName("x", 0, ranks)}; !slices.Equal(left, want) {
		t.Errorf("when the run that lost returned, the folder held %v: want A's claim %v alone", left, want)
	}
	if aErr != nil {
		t.Errorf("the run that claimed the id: %v", aErr)
	}
	if got, want := rankFiles(t, dir), allRankFiles(ranks); !slices.Equal(got, want) {
		t.Errorf("the folder holds %v, want %v", got, want)
	}
}

// The same over TCP, as ranks of two launched jobs on other hosts sharing the folder would
// be: the ranks of the job that lost learn it from rank 0 through the job's communicator,
// and every one of them refuses (exit status 2, rank 0 saying why) without making a file.
func TestCPRunIDClaimAcrossProcesses(t *testing.T) {
	const ranks = 2
	dir := t.TempDir()
	port := func() int {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer ln.Close()
		return ln.Addr().(*net.TCPAddr).Port
	}
	type job struct {
		name  string
		port  int
		ss    []*Session
		errs  []error
		start chan struct{}
	}
	jobs := []*job{{name: "a", port: port()}, {name: "b", port: port()}}
	owner := map[*Session]*job{}
	for _, j := range jobs {
		j.errs, j.start = make([]error, ranks), make(chan struct{})
		for r := range ranks {
			w := spmd.World{Launcher: "torchrun", Rank: r, Size: ranks, LocalRank: r, LocalSize: ranks,
				MasterAddr: "127.0.0.1", MasterPort: j.port, Job: "cp-claim-" + j.name, Token: spmd.Secret("t")}
			s := New("cp", dir, "x", w, "test", nil, io.Discard, io.Discard)
			j.ss = append(j.ss, s)
			owner[s] = j
		}
	}
	claimed, bDone := make(chan struct{}), make(chan struct{})
	setClaimHook(t, func(s *Session, rank int, step string) {
		switch {
		case owner[s] == jobs[0] && step == "claimed":
			close(claimed)
		case owner[s] == jobs[0] && step == "create":
			<-bDone
		}
	})
	var wg sync.WaitGroup
	runJob := func(j *job) *sync.WaitGroup {
		var jw sync.WaitGroup
		for r := range ranks {
			wg.Add(1)
			jw.Add(1)
			go func() {
				defer wg.Done()
				defer jw.Done()
				j.errs[r] = j.ss[r].CP(context.Background(), tinyCP(t, ranks, spmd.Options{Backend: "tcp", Timeout: 30 * time.Second}))
			}()
		}
		return &jw
	}
	runJob(jobs[0])
	select {
	case <-claimed:
	case <-time.After(30 * time.Second):
		t.Fatal("job a's rank 0 did not claim the run id")
	}
	runJob(jobs[1]).Wait()
	left := rankFiles(t, dir)
	close(bDone)
	wg.Wait()
	for r, err := range jobs[1].errs {
		if code := exitCodeOf(err); code != 2 {
			t.Errorf("job b, rank %d: %v (exit %d), want exit 2", r, err, code)
		}
	}
	if err := jobs[1].errs[0]; err == nil || !strings.Contains(err.Error(), "x.rank-0-of-2.arrow exists") {
		t.Errorf("job b, rank 0: %v, want the claim refused", err)
	}
	if want := []string{results.FileName("x", 0, ranks)}; !slices.Equal(left, want) {
		t.Errorf("when job b returned, the folder held %v: want job a's claim %v alone", left, want)
	}
	for r, err := range jobs[0].errs {
		if err != nil {
			t.Errorf("job a, rank %d: %v", r, err)
		}
	}
	if got, want := rankFiles(t, dir), allRankFiles(ranks); !slices.Equal(got, want) {
		t.Errorf("the folder holds %v, want %v", got, want)
	}
}

// emptyRankFile writes rank's file of run x on n ranks with no row, closed unless open.
func emptyRankFile(t *testing.T, dir string, rank, n int, open bool) {
	t.Helper()
	w, err := results.Create(dir, "x", rank, n)
	if err != nil {
		t.Fatal(err)
	}
	if !open {
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

// A rank that cannot make its file (one there already, from an earlier run) fails the run
// on every rank, and the files the run made are removed: nothing of it is left, rank 0's
// claim included, so the run id is not taken by empty files.
func TestCPRankFileFailureRemovesTheRunsFiles(t *testing.T) {
	const ranks = 4
	dir := t.TempDir()
	s := New("cp", dir, "x", spmd.World{Size: 1}, "test", nil, io.Discard, io.Discard)
	setClaimHook(t, func(_ *Session, rank int, step string) {
		if rank == 2 && step == "create" { // appears after rank 0's look for other ranks' files
			emptyRankFile(t, dir, 2, ranks, false)
		}
	})
	err := s.CP(context.Background(), tinyCP(t, ranks, spmd.Options{}))
	if code := exitCodeOf(err); code != 2 || !strings.Contains(err.Error(), "x.rank-2-of-4.arrow exists") || strings.Contains(err.Error(), "\n") {
		t.Errorf("CP: %v (exit %d), want one line saying rank 2's file exists, exit 2", err, code)
	}
	if got, want := rankFiles(t, dir), []string{results.FileName("x", 2, ranks)}; !slices.Equal(got, want) {
		t.Errorf("the folder holds %v, want only the file that was there %v", got, want)
	}
}

// Rank files of the run's other ranks without rank 0's, closed with no row (what two runs
// that raced for the id left before the claim): rank 0 finds them once it made its file,
// gives the claim up, and the refusal says what they are and how to free the id.
func TestCPRefusesLeftoverRankFiles(t *testing.T) {
	const ranks = 4
	dir := t.TempDir()
	emptyRankFile(t, dir, 1, ranks, false)
	emptyRankFile(t, dir, 3, ranks, false)
	s := New("cp", dir, "x", spmd.World{Size: 1}, "test", nil, io.Discard, io.Discard)
	err := s.CP(context.Background(), tinyCP(t, ranks, spmd.Options{}))
	if code := exitCodeOf(err); code != 2 {
		t.Fatalf("CP: %v (exit %d), want exit 2", err, code)
	}
	for _, want := range []string{"without rank 0's", "x.rank-1-of-4.arrow", "closed with no row", "rm " + dir + "/x.rank-*-of-4.arrow", "--run-id or --out"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("CP: %v\nwant %q in it", err, want)
		}
	}
	if got, want := rankFiles(t, dir), []string{results.FileName("x", 1, ranks), results.FileName("x", 3, ranks)}; !slices.Equal(got, want) {
		t.Errorf("the folder holds %v, want the leftovers %v alone", got, want)
	}
}

// RunFilesNote says what a run's files hold only when it is nothing: closed (leftovers, the
// command that frees the id) or not (perhaps being written); nothing for rows, for a run
// that merged its files, or for no files.
func TestRunFilesNote(t *testing.T) {
	closed, open, openAll, rows, merged, none := t.TempDir(), t.TempDir(), t.TempDir(), t.TempDir(), t.TempDir(), t.TempDir()
	for r := range 2 {
		emptyRankFile(t, closed, r, 2, false)
		emptyRankFile(t, merged, r, 2, false)
	}
	emptyRankFile(t, open, 0, 2, true)
	emptyRankFile(t, open, 1, 2, false)
	emptyRankFile(t, openAll, 0, 2, true)
	if err := os.WriteFile(results.MergedPath(merged, "x"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	w, err := results.Create(rows, "x", 0, 1)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Write(results.Row{RunID: "x", Status: results.StatusOK}); err != nil {
		t.Fatal(err)
	}
	w.Close()
	for _, c := range []struct {
		dir   string
		wants []string
	}{
		{closed, []string{"its 2 rank file(s) there were closed with no row", fmt.Sprintf("rm %s/x.rank-*-of-2.arrow frees the run id", closed)}},
		{open, []string{"its 2 rank file(s) there hold no row yet and 1 of them are not closed", "may be writing them now"}},
		{openAll, []string{"its 1 rank file(s) there hold no row yet and are not closed"}},
		{rows, nil}, {merged, nil}, {none, nil},
	} {
		got := RunFilesNote(c.dir, "x")
		if (got == "") != (c.wants == nil) {
			t.Errorf("%s: note %q, want one with %q", c.dir, got, c.wants)
		}
		for _, w := range c.wants {
			if !strings.Contains(got, w) {
				t.Errorf("%s: note %q, want %q in it", c.dir, got, w)
			}
		}
	}
}
