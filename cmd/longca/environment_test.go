package main

// Tests of the seventh hardening pass (docs/hardening.md): the environment a run lives in.

import (
	"bufio"
	"errors"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/longca/longca/results"
)

// cpTiny is a seconds-long cp sweep on two in-process ranks into out as run r.
func cpTiny(out string, extra ...string) []string {
	return append([]string{"--log-level", "warn", "cp", "--ranks", "2", "--methods", "ring-p2p", "--masks", "causal",
		"--tokens-per-rank", "128", "--heads", "2:2", "--head-dim", "8", "--passes", "fwd", "-w", "0", "-n", "1",
		"--samples", "1", "--baseline", "none", "--timeout", "20s", "--out", out, "--run-id", "r"}, extra...)
}

// An in-process cp whose folder holds one of the run's rank files (an earlier run's, or
// another process's started at the same moment): rank 1 could not create its file and
// returned, and rank 0 waited for it in the next collective for the whole --timeout
// (5 minutes by default), deaf to Ctrl-C and SIGTERM, then exited 1 with two lines. Now
// it is one line, exit 2, at once, and no rank file of the refused run is left behind.
func TestInProcessRankFileClash(t *testing.T) {
	for _, existing := range [][]int{{1}, {0, 1}} {
		out := t.TempDir()
		for _, r := range existing {
			w, err := results.Create(out, "r", r, 2)
			if err != nil {
				t.Fatal(err)
			}
			w.Close()
		}
		args := cpTiny(out)
		start := time.Now()
		_, errOut, code := captureRun(t, args...)
		if took := time.Since(start); took > 10*time.Second {
			t.Errorf("ranks %v there: refused after %v; want at once", existing, took)
		}
		checkUsageError(t, args, code, errOut, "--out "+out, "r.rank-", "give another run id or folder")
		if ents, _ := filepath.Glob(filepath.Join(out, "r.*")); len(ents) != len(existing) {
			t.Errorf("ranks %v there: the folder holds %v after the refusal", existing, ents)
		}
	}
}

// SIGHUP (the terminal gone: an ssh session that dropped) stops a sweep as Ctrl-C does,
// keeping and showing the rows so far, exit 130 (it killed the process: the rank file
// kept its rows, but a run's merge, report and plots were never written).
func TestHangupStopsLikeInterrupt(t *testing.T) {
	dir := t.TempDir()
	errLines, _ := signalAfterTwoCases(t, syscall.SIGHUP, "kernel --kernels ref --masks full,causal --seqlens 256,512,1K,2K "+
		"--heads 2:1 --head-dim 64 --passes fwd,bwd -w 0 -n 1 --out "+dir+" --run-id hup")
	if last := errLines[len(errLines)-1]; !strings.Contains(last, "interrupted after") {
		t.Errorf("last line %q, want the interruption", last)
	}
	rows, _, err := results.ReadRows(filepath.Join(dir, "hup.rank-0-of-1.arrow"))
	if err != nil || len(rows) < 2 {
		t.Errorf("%d rows (%v); want at least the 2 before the signal", len(rows), err)
	}
}

// A rank waiting for a peer that never comes (here the rendezvous of a 2-rank TCP world
// whose rank 1 was never started) heard Ctrl-C but could not act on it before --timeout,
// and a second Ctrl-C (or SIGTERM) was swallowed too: the process sat there for the whole
// timeout (5 minutes by default). The first now says, after a few seconds, that it is
// still stopping and how to stop at once; the second ends the process.
func TestSecondInterruptStopsAtOnce(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Skip("no loopback TCP here:", err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	args := strings.Join(cpTiny(t.TempDir(), "--backend", "tcp"), " ")
	args = strings.Replace(args, "--ranks 2 ", "", 1)
	args = strings.Replace(args, "--timeout 20s", "--timeout 60s", 1)
	cmd := exec.Command(os.Args[0], "-test.run", "^$")
	cmd.Env = append(os.Environ(), longcaChildEnv+"="+args, "OMPI_COMM_WORLD_RANK=0", "OMPI_COMM_WORLD_SIZE=2",
		"MASTER_ADDR=127.0.0.1", "MASTER_PORT="+strconv.Itoa(port), "LONGCA_JOB_ID=second-interrupt", "LONGCA_JOB_TOKEN=t")
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	killer := time.AfterFunc(50*time.Second, func() { cmd.Process.Kill() })
	defer killer.Stop()
	lines := make(chan string, 100)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	time.Sleep(time.Second) // in the rendezvous, waiting for rank 1
	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	said := false
	for wait := time.After(10 * time.Second); !said; {
		select {
		case l, ok := <-lines:
			said = ok && strings.Contains(l, "interrupt again to stop at once")
			if !ok {
				t.Fatal("the process ended at the first interrupt; this test wants it waiting for its peer")
			}
		case <-wait:
			t.Error("10 s after Ctrl-C, nothing said")
			said = true
		}
	}
	// A process started with SIGINT ignored (a script's background job, as this test may
	// be) gets it back ignored once the first is handled: the second is then SIGTERM.
	again := syscall.SIGINT
	if signal.Ignored(os.Interrupt) {
		again = syscall.SIGTERM
	}
	second := time.Now()
	if err := cmd.Process.Signal(again); err != nil {
		t.Fatal(err)
	}
	for range lines {
	}
	err = cmd.Wait()
	took := time.Since(second)
	var ee *exec.ExitError
	if took > 5*time.Second || !errors.As(err, &ee) || ee.Sys().(syscall.WaitStatus).Signal() != again {
		t.Errorf("after the second Ctrl-C: %v, %v later; want the process ended by it at once", err, took.Round(time.Millisecond))
	}
}

// A results folder with no room left (a full disk or quota, `ulimit -f`, a file system
// made read-only) mid-sweep: it exited 1 with Arrow's words ("arrow/ipc: could not write
// message flatbuffer: ... file too large"), and `run` then blamed its masks folder with a
// flag it does not have (--mask-json). Now one line naming --out, how many rows are kept
// where, and the fix; exit 2; the rows before are readable. A merge that cannot be written
// for the same reason is exit 2 as well. Here the limit is the file size (`ulimit -f`,
// which Go turns from SIGXFSZ into EFBIG), so that the test needs no mount.
func TestNoRoomForResults(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "k")
	sweep := "kernel --kernels ref --masks full,causal --seqlens 128,256,512 --heads 1:1 --head-dim 8 --passes fwd,bwd -w 0 -n 1 --out " + out + " --run-id r"
	for _, c := range []struct {
		args, limit string
		wants       []string
	}{
		{sweep, "40", []string{"--out " + out + ": file too large: the ", "row(s) measured before are in " + filepath.Join(out, "r.rank-0-of-1.arrow"), "ulimit -f"}},
		{"merge " + out + " --out " + filepath.Join(dir, "m.arrow"), "4", []string{"file too large", "make room there"}},
		{"run --suite smoke --out " + filepath.Join(dir, "s") + " --run-id s", "40", []string{"--out " + filepath.Join(dir, "s") + ": file too large: the "}},
	} {
		cmd := exec.Command("/bin/sh", "-c", "ulimit -f "+c.limit+" && exec \"$0\" -test.run '^$'", os.Args[0])
		cmd.Env = append(os.Environ(), longcaChildEnv+"="+c.args)
		var stderr strings.Builder
		cmd.Stderr = &stderr
		err := cmd.Run()
		lines := strings.Split(strings.TrimSpace(stderr.String()), "\n")
		last := lines[len(lines)-1]
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 2 {
			t.Errorf("%s under ulimit -f %s: %v, want exit 2; last line %q", c.args, c.limit, err, last)
		}
		for _, w := range c.wants {
			if !strings.Contains(last, w) {
				t.Errorf("%s: last line %q does not say %q", c.args, last, w)
			}
		}
	}
	rows, _, err := results.ReadRows(filepath.Join(out, "r.rank-0-of-1.arrow"))
	if err != nil || len(rows) == 0 || len(rows) >= 12 {
		t.Errorf("%d rows kept (%v); want those written before the limit", len(rows), err)
	}
}

// --out a symbolic link to a folder that is not there said "file exists" (MkdirAll on the
// link), and a relative --out from a current folder deleted under the shell said "no such
// file or directory", the default out/<time> too: each is one line that says what is
// wrong and what to do, exit 2.
func TestOutFolderThatCannotBe(t *testing.T) {
	dir := t.TempDir()
	link := filepath.Join(dir, "results")
	if err := os.Symlink(filepath.Join(dir, "scratch", "results"), link); err != nil {
		t.Fatal(err)
	}
	sweep := []string{"kernel", "--kernels", "ref", "--masks", "causal", "--seqlens", "128", "--heads", "1:1", "--head-dim", "8",
		"--passes", "fwd", "-w", "0", "-n", "1"}
	args := append(sweep, "--out", link)
	_, errOut, code := captureRun(t, args...)
	checkUsageError(t, args, code, errOut, "--out "+link, "symbolic link to "+filepath.Join(dir, "scratch", "results"), "make that folder")
	gone := filepath.Join(dir, "gone")
	if err := os.Mkdir(gone, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Chdir(gone)
	if err := os.Remove(gone); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{sweep, append(sweep, "--out", "rel")} {
		_, errOut, code := captureRun(t, args...)
		checkUsageError(t, args, code, errOut, "the current folder is gone", "cd to one that exists")
	}
}

// An external worker (exec:, torch:*) keeps each problem in a private folder under TMPDIR:
// with TMPDIR missing every case was an error row ("temporary folder: stat ...") and the
// sweep exited 0. It is the environment that is wrong, said once, exit 2, naming TMPDIR.
func TestWorkerTempDirChecked(t *testing.T) {
	w := fakeWorker(t, "ok")
	out := t.TempDir()
	t.Setenv("TMPDIR", filepath.Join(out, "missing"))
	for _, args := range [][]string{
		{"kernel", "--kernels", "exec:" + w, "--masks", "causal", "--seqlens", "128", "--heads", "1:1", "--head-dim", "8",
			"--passes", "fwd", "-w", "0", "-n", "1", "--out", filepath.Join(out, "k")},
		{"simulate", "--calibrate", "torch:flex", "--gpus", "8", "--out", filepath.Join(out, "s")},
	} {
		_, errOut, code := captureRun(t, args...)
		checkUsageError(t, args, code, errOut, "temporary folder cannot be made in "+filepath.Join(out, "missing"), "set TMPDIR")
	}
}

// GOMAXPROCS (Go's, read from the environment, else the CPUs this process may use) sets
// how many cores the CPU reference runs on, and so its rows' times and rates: the rows
// said nothing of it ("settings are data"). Kernel and cp rows of ref record it in
// kernel_versions.
func TestHostThreadsRecorded(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []struct{ args, file string }{
		{"kernel --kernels ref --masks causal --seqlens 128 --heads 1:1 --head-dim 8 --passes fwd -w 0 -n 1 --out " + dir + " --run-id k", "k.rank-0-of-1.arrow"},
		{strings.Replace(strings.Join(cpTiny(dir), " "), "--run-id r", "--run-id c", 1), "c.rank-1-of-2.arrow"},
	} {
		cmd := exec.Command(os.Args[0], "-test.run", "^$")
		cmd.Env = append(os.Environ(), longcaChildEnv+"="+c.args, "GOMAXPROCS=1")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("%s: %v\n%s", c.args, err, out)
		}
		rows, _, err := results.ReadRows(filepath.Join(dir, c.file))
		if err != nil || len(rows) == 0 {
			t.Fatalf("%s: %d rows, %v", c.file, len(rows), err)
		}
		for _, r := range rows {
			if r.KernelVersions != `{"gomaxprocs":"1"}` {
				t.Errorf("%s: %s row's kernel_versions %s; want GOMAXPROCS=1 recorded", c.file, r.Bench, r.KernelVersions)
			}
		}
	}
}

// A TCP world whose rank 0 cannot hold a socket to every rank and the store's to each
// (`ulimit -n` below twice the ranks): rank 0 could not accept its peers, and every rank
// failed after --timeout saying a rank "did not connect". It is refused before the
// rendezvous, one line naming ulimit -n, exit 2.
func TestOpenFilesForTCPWorld(t *testing.T) {
	args := strings.Join(cpTiny(t.TempDir(), "--backend", "tcp"), " ")
	args = strings.Replace(args, "--ranks 2 ", "", 1)
	cmd := exec.Command("/bin/sh", "-c", "ulimit -n 64 && exec \"$0\" -test.run '^$'", os.Args[0])
	cmd.Env = append(os.Environ(), longcaChildEnv+"="+args, "OMPI_COMM_WORLD_RANK=0", "OMPI_COMM_WORLD_SIZE=64",
		"MASTER_ADDR=127.0.0.1", "MASTER_PORT=1", "LONGCA_JOB_ID=open-files", "LONGCA_JOB_TOKEN=t")
	var stderr strings.Builder
	cmd.Stderr = &stderr
	start := time.Now()
	err := cmd.Run()
	msg := strings.TrimSpace(stderr.String())
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 2 || strings.Contains(msg, "\n") || !strings.Contains(msg, "ulimit -n 160") {
		t.Errorf("64 ranks under ulimit -n 64: %v after %v: %q; want one line naming ulimit -n, exit 2", err, time.Since(start).Round(time.Millisecond), msg)
	}
}

// In-process ranks each open a results file: under a low `ulimit -n` some could not, and
// the command exited 1 with a line a rank ("open ...: too many open files"). One line
// naming the limit, exit 2.
func TestOpenFilesForInProcessRanks(t *testing.T) {
	args := strings.Replace(strings.Join(cpTiny(t.TempDir()), " "), "--ranks 2 ", "--ranks 16 ", 1)
	args = strings.Replace(args, "--heads 2:2", "--heads 16:16", 1)
	cmd := exec.Command("/bin/sh", "-c", "ulimit -n 16 && exec \"$0\" -test.run '^$'", os.Args[0])
	cmd.Env = append(os.Environ(), longcaChildEnv+"="+args)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	err := cmd.Run()
	msg := strings.TrimSpace(stderr.String())
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 2 || strings.Contains(msg, "\n") || !strings.Contains(msg, "raise the limit (ulimit -n)") {
		t.Errorf("16 in-process ranks under ulimit -n 16: %v: %q; want one line naming ulimit -n, exit 2", err, msg)
	}
}

// Rank 0 whose store port another process holds: the line named MASTER_PORT, but the exit
// status was 1, where the other launch settings' is 2 (the eleventh pass).
func TestStorePortInUse(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Skipf("no TCP here: %v", err)
	}
	defer ln.Close()
	port := ln.Addr().(*net.TCPAddr).Port
	args := strings.Replace(strings.Join(cpTiny(t.TempDir(), "--backend", "tcp"), " "), "--ranks 2 ", "", 1)
	cmd := exec.Command(os.Args[0], "-test.run", "^$")
	cmd.Env = append(os.Environ(), longcaChildEnv+"="+args, "OMPI_COMM_WORLD_RANK=0", "OMPI_COMM_WORLD_SIZE=2",
		"MASTER_ADDR=127.0.0.1", "MASTER_PORT="+strconv.Itoa(port), "LONGCA_JOB_ID=port-in-use", "LONGCA_JOB_TOKEN=t")
	var stderr strings.Builder
	cmd.Stderr = &stderr
	err = cmd.Run()
	msg := strings.TrimSpace(stderr.String())
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 2 || !strings.Contains(msg, "MASTER_PORT") {
		t.Errorf("rank 0 on a held port: %v: %q; want a line naming MASTER_PORT, exit 2", err, msg)
	}
}
