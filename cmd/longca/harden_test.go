package main

import (
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/longca/longca/harness"
	"github.com/longca/longca/kernels"
	"github.com/longca/longca/session"
)

// A file named where a small JSON file is expected (--dist, --machine, --links) is read
// up to a bound, not whole: /dev/zero ran the process out of memory. A file over the
// bound is one line naming the flag, exit status 2.
func TestSmallFileFlagsAreBounded(t *testing.T) {
	big := filepath.Join(t.TempDir(), "big.json")
	if err := os.WriteFile(big, []byte(strings.Repeat(" ", 5<<20)+"{}"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		{"data", "--seqlen", "16K", "--dist", big},
		{"simulate", "--gpus", "8", "--machine", big},
		{"cp", "--dry-run", "--links", big},
	} {
		_, errOut, code := captureRun(t, args...)
		checkUsageError(t, args, code, errOut, "--"+strings.TrimPrefix(args[len(args)-2], "--"), "holds more than")
	}
}

// A folder that cannot be used as asked is bad input, exit status 2 with the fix named:
// merge with a rank missing (it exited 1), report of a folder whose only file is not
// results (it printed an empty table and exited 0).
func TestUnusableFoldersExitTwo(t *testing.T) {
	missing, garbage := t.TempDir(), t.TempDir()
	if _, _, code := captureRun(t, "kernel", "--kernels", "ref", "--masks", "causal", "--seqlens", "128", "--heads", "1:1",
		"--head-dim", "8", "--passes", "fwd", "-w", "0", "-n", "1", "--out", missing); code != 0 {
		t.Fatalf("kernel run: exit %d", code)
	}
	// The run's one file, renamed as rank 0 of 2 of a run of its own id: rank 1 is missing.
	ents, _ := filepath.Glob(filepath.Join(missing, "*.rank-0-of-1.arrow"))
	if len(ents) != 1 {
		t.Fatalf("rank files: %v", ents)
	}
	id := filepath.Base(missing)
	if err := os.Rename(ents[0], filepath.Join(missing, id+".rank-0-of-2.arrow")); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(garbage, "x.rank-0-of-1.arrow"), []byte("#!/bin/sh\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		args  []string
		wants []string
	}{
		{[]string{"merge", missing}, []string{"of 2 missing", "--allow-missing"}},
		{[]string{"merge", garbage}, []string{"rank 0 of 1 missing", "not a longca results file", "--allow-missing"}},
		{[]string{"report", garbage}, []string{"report " + garbage, "none of the folder's 1 results file(s) can be read", "x.rank-0-of-1.arrow"}},
	} {
		_, errOut, code := captureRun(t, c.args...)
		checkUsageError(t, c.args, code, errOut, c.wants...)
	}
}

// A results folder that holds the run id already is bad input, said before any work
// with the fix (another run id or folder): the same rank's file (it was "file exists",
// exit 1), and the run on another number of ranks (cp --ranks 2 wrote beside a 1-rank
// run of the same id, and the run's merge then left one of them out).
func TestRunIDReusedExitsTwo(t *testing.T) {
	out := t.TempDir()
	kernel := []string{"kernel", "--kernels", "ref", "--masks", "causal", "--seqlens", "128", "--heads", "1:1",
		"--head-dim", "8", "--passes", "fwd", "-w", "0", "-n", "1", "--out", out, "--run-id", "r1"}
	if _, errOut, code := captureRun(t, kernel...); code != 0 {
		t.Fatalf("first run: exit %d: %s", code, errOut)
	}
	cp := []string{"cp", "--ranks", "2", "--methods", "ring-p2p", "--masks", "causal", "--tokens-per-rank", "128", "--heads", "2:2",
		"--head-dim", "8", "--passes", "fwd", "-w", "0", "-n", "1", "--samples", "1", "--baseline", "none", "--out", out, "--run-id", "r1"}
	for _, c := range []struct {
		args  []string
		wants []string
	}{
		{kernel, []string{"--out " + out, "r1.rank-0-of-1.arrow exists", "give another run id or folder"}},
		{cp, []string{"--out " + out, "on 1 rank(s), and this run has 2", "give another run id or folder"}},
	} {
		_, errOut, code := captureRun(t, c.args...)
		checkUsageError(t, c.args, code, errOut, c.wants...)
	}
	if ents, _ := filepath.Glob(filepath.Join(out, "r1.*")); len(ents) != 1 {
		t.Errorf("the folder holds %v; want the first run's one file", ents)
	}
}

// A flag that does nothing where it is given is said, not ignored; a dry run checks the
// flags the run would (--on-worker-crash nope: exit 0 with --dry-run, 2 without).
func TestIgnoredFlagsAreSaid(t *testing.T) {
	for _, c := range []struct {
		args  []string
		wants []string
	}{
		{[]string{"kernel", "--dry-run", "--on-worker-crash", "nope"}, []string{"--on-worker-crash \"nope\": use restart or stop"}},
		{[]string{"kernel", "--dry-run", "--column", "tokens"}, []string{"--column tokens without --counts"}},
		{[]string{"cp", "--dry-run", "--column", "tokens"}, []string{"--column tokens without --counts"}},
		{[]string{"data", "--seqlen", "16K", "--column", "tokens"}, []string{"--column tokens without --counts"}},
		// (the audit of 2026-12-04: each of these was ignored without a word)
		{[]string{"kernel", "--dry-run", "--kernels", "ref", "--variant", "cuda=sm90"}, []string{"--variant", "names kernel cuda, which this run does not have (ref)"}},
		{[]string{"kernel", "--dry-run", "-b", "1K", "-e", "8K", "-f", "4", "--step", "1K"}, []string{"-f 4 and --step 1K both given"}},
		// a step past int64 is too large, not "give a positive size" (the eleventh pass)
		{[]string{"kernel", "--dry-run", "-b", "1K", "-e", "2G", "--step", "9223372036854775807"}, []string{`--step: size "9223372036854775807" is too large`}},
		{[]string{"kernel", "--dry-run", "--seqlens", "1K", "-f", "4"}, []string{"-f 4 without -b"}},
		{[]string{"sparse", "--dry-run", "-f", "4"}, []string{"-f 4 without -b"}},
		{[]string{"sparse", "--dry-run", "--seqlens", "512", "--block", "1000"}, []string{"--block/--avg-block 1000 is longer than the sequence length 512"}},
		{[]string{"data", "--seqlen", "16K", "--counts", countsText(t), "--column", "tokens"}, []string{"--counts/--column", "a text file holds one count a line"}},
		// (left by the fourth pass, mended in the ninth session)
		{[]string{"list", "--on-worker-crash", "nope"}, []string{"--on-worker-crash \"nope\": use restart or stop"}},
		// (the probe of 2026-12-06: listed, exit 0, as simulate without --calibrate refused it)
		{[]string{"list", "--variant", "nope"}, []string{"--variant", `has no variant "nope"`}},
		// (the same probe: masks without --mask lists them, and only --seqlen was refused;
		// --png, --out, --format json and the mask's own flags were ignored, exit 0)
		{[]string{"masks", "--seqlen", "1K"}, []string{"--seqlen given without --mask"}},
		{[]string{"masks", "--png", filepath.Join(t.TempDir(), "m.png")}, []string{"--png given without --mask", "drop --png"}},
		{[]string{"masks", "--format", "json"}, []string{"--format given without --mask"}},
		{[]string{"masks", "--window", "64"}, []string{"--window given without --mask"}},
		// (the thirteenth session's fuzz pass: cp accepted it, exit 0; a negative mesh flag was
		// a warning that it changes nothing, then the error: two lines)
		{[]string{"cp", "--dry-run", "--on-worker-crash", "x"}, []string{"--on-worker-crash \"x\": use restart or stop"}},
		{[]string{"cp", "--dry-run", "--methods", "ring-p2p", "--ulysses", "-1"}, []string{"--ulysses -1 --ring 0 --windows 0: must not be negative"}},
		{[]string{"cp", "--dry-run", "--methods", "ring-p2p", "--cp-block", "-1"}, []string{"--cp-block -1: give a whole number of tokens"}},
		{[]string{"cp", "--dry-run", "--methods", "ring-p2p", "--cp-stages", "-1"}, []string{"--cp-block 0 --cp-stages -1"}},
		{[]string{"masks", "--mask", "sliding_window", "--seqlen", "4K", "--window", "1x"}, []string{"--window 1x: give a whole number of tokens"}},
	} {
		_, errOut, code := captureRun(t, c.args...)
		checkUsageError(t, c.args, code, errOut, c.wants...)
	}
}

// A dry run builds each case's mask: one too big to build is refused first (a
// block-sparse mask of 1-token blocks over 64K tokens ran the process out of memory;
// the run itself was refused by its estimate).
func TestDryRunMaskIsEstimated(t *testing.T) {
	for _, extra := range [][]string{{"--dry-run"}, {"--out", t.TempDir()}} {
		args := append([]string{"sparse", "--seqlens", "64K", "--block", "1", "--ratios", "0.2", "--heads", "1:1", "--head-dim", "8",
			"--kernels", "ref", "-n", "1", "-w", "0"}, extra...)
		_, errOut, code := captureRun(t, args...)
		checkUsageError(t, args, code, errOut, "block_sparse_uniform b=1", "of host memory")
	}
}

// simulate's memory estimate counts the sequence itself (sim.SequenceBytes): 8 GPUs of
// a 1G-token document mask ran out of memory under an estimate without it.
func TestSimulateCountsTheSequence(t *testing.T) {
	withMachine(t, 4<<30)
	args := []string{"simulate", "--gpus", "8", "--seqlen", "1G", "--masks", "causal_document_long", "--methods", "ring-p2p",
		"--passes", "fwd", "--out", t.TempDir()}
	_, errOut, code := captureRun(t, args...)
	checkUsageError(t, args, code, errOut, "--gpus 8: simulating 8 ranks of 1G tokens needs about")
}

// A command that takes no arguments refuses one: urfave/cli stops reading flags at the
// first argument, so `cp x --dry-run` ran a whole sweep (--dry-run unread) and
// `simulate x --gpus 8` the default GPU counts; masks, env and list ignored it.
func TestNoArgumentsWhereNoneAreTaken(t *testing.T) {
	for _, args := range [][]string{
		{"cp", "x", "--dry-run"}, {"simulate", "x", "--gpus", "8"}, {"data", "x", "--seqlen", "1K"},
		{"masks", "x"}, {"env", "x"}, {"list", "x"}, {"kernel", "x"}, {"sparse", "x"}, {"run", "x"},
		{"selftest", "comm", "x"},
	} {
		_, errOut, code := captureRun(t, args...)
		cmd := strings.Join(args[:len(args)-1], " ")
		if args[0] != "selftest" {
			cmd = args[0]
		}
		checkUsageError(t, args, code, errOut, cmd+` takes no arguments (got "x"`)
	}
	// a command of commands: an unknown one is a usage error too (urfave/cli: "No help
	// topic for 'nope'", exit 3)
	args := []string{"selftest", "nope"}
	_, errOut, code := captureRun(t, args...)
	checkUsageError(t, args, code, errOut, `selftest: unknown command "nope"`)
	// and so is a help topic that names no command (the eleventh pass: exit 3). Each in its
	// own process: urfave/cli's help command is one value shared by every app, and a second
	// help in one process grew without bound (a process of longca runs one command).
	for _, args := range []string{"help nope", "kernel help nope", "selftest help nope"} {
		cmd := exec.Command(os.Args[0], "-test.run", "^$")
		cmd.Env = append(os.Environ(), longcaChildEnv+"="+args)
		var stderr strings.Builder
		cmd.Stderr = &stderr
		err := cmd.Run()
		var ee *exec.ExitError
		code := 0
		if errors.As(err, &ee) {
			code = ee.ExitCode()
		}
		checkUsageError(t, strings.Fields(args), code, stderr.String(), `help: no command 'nope'`)
	}
}

// The time estimate counts the sequence too: a length that fits in a large host's memory
// but whose every case would take hours is refused at once, naming --seqlen (it was
// estimated as if it were 8K tokens, and --gpus 8 --seqlen 1G ran for minutes; balanced's
// dispatch was quadratic in the blocks a rank holds). With --tokens-per-rank, that flag.
func TestSimulateTimeCountsTheSequence(t *testing.T) {
	withMachine(t, 1<<52)
	for _, c := range []struct{ size []string }{
		{[]string{"--seqlen", "256G"}},
		{[]string{"--tokens-per-rank", "32G"}},
	} {
		args := append([]string{"simulate", "--gpus", "8", "--masks", "full", "--methods", "ring-p2p", "--passes", "fwd", "--out", t.TempDir()}, c.size...)
		_, errOut, code := captureRun(t, args...)
		checkUsageError(t, args, code, errOut, c.size[0]+" "+c.size[1]+": simulating 8 ranks of 256G tokens would take about")
	}
}

// A dry run's planning is bounded in time too: it grows as ranks x tokens (the zigzag
// layout gives every document pieces on every ring rank; 8192 ranks took 40 s), so a
// world that fits in a large host's memory but would plan for most of an hour is refused
// at once naming --ranks (it ran, saying nothing). The estimate covers the measured runs
// (cp --dry-run, default methods and masks, 8K tokens a rank) without doubling them.
func TestCPDryRunPlanningIsBounded(t *testing.T) {
	for _, m := range []struct {
		ranks, cases int
		seconds      float64
	}{{2048, 96, 3.76}, {4096, 104, 12.3}, {8192, 112, 39.4}} {
		est := harness.CPPlanSeconds(m.ranks, m.ranks*8192, m.cases)
		if est < m.seconds || est > 2*m.seconds {
			t.Errorf("%d ranks: planning estimated at %.1f s, measured %.1f s", m.ranks, est, m.seconds)
		}
	}
	withMachine(t, 1<<52)
	args := []string{"cp", "--dry-run", "--ranks", "65536"}
	_, errOut, code := captureRun(t, args...)
	checkUsageError(t, args, code, errOut, "--ranks 65536, --tokens-per-rank 8K: planning 65536 ranks of a 512M-token sequence for")
	if !strings.Contains(errOut, "the limit is 10 minutes") {
		t.Errorf("%v: %q does not say the limit", args, errOut)
	}
}

// Very short documents at a long sequence are refused before any is drawn, one line naming
// --max-doc, exit 2 (the audit of 2026-12-04: --max-doc 1 at --seqlen 1G took 9.7 GB and
// ran on; a 256M mask of one-token documents 6.9 GB).
func TestShortDocumentsAreBounded(t *testing.T) {
	for _, args := range [][]string{
		{"data", "--seqlen", "1G", "--samples", "1", "--max-doc", "1"},
		{"masks", "--mask", "causal_document", "--seqlen", "256M", "--max-doc", "1", "--out", t.TempDir()},
		{"simulate", "--gpus", "1024", "--tokens-per-rank", "128K", "--masks", "causal_document", "--max-doc", "1",
			"--methods", "ring-p2p", "--passes", "fwd", "--samples", "1", "--out", t.TempDir()},
	} {
		_, errOut, code := captureRun(t, args...)
		checkUsageError(t, args, code, errOut, "--max-doc", "one sequence may hold")
	}
}

// --baseline FILE is read before any rank starts: a file that is not results is one line,
// exit 2, and no rank file is written (it was read by every rank after the sweep began:
// exit 1, the line once per rank, empty rank files left).
func TestBaselineFileReadUpFront(t *testing.T) {
	junk := filepath.Join(t.TempDir(), "junk.bin")
	if err := os.WriteFile(junk, []byte("not an arrow file at all"), 0o644); err != nil {
		t.Fatal(err)
	}
	out := t.TempDir()
	args := []string{"cp", "--kernel", "ref", "-w", "0", "-n", "1", "--heads", "2:1", "--head-dim", "16", "--samples", "1",
		"--passes", "fwd", "--masks", "causal", "--methods", "ring-p2p", "--ranks", "2", "--tokens-per-rank", "128",
		"--baseline", junk, "--out", out}
	_, errOut, code := captureRun(t, args...)
	checkUsageError(t, args, code, errOut, "--baseline "+junk, "not a longca results file")
	if ents, _ := os.ReadDir(out); len(ents) != 0 {
		t.Errorf("%d entries written to --out before the refusal", len(ents))
	}
}

// A list flag with an empty item or an item twice is refused by name (the audit: "--kernels ,"
// ran the default kernel, "--masks causal,causal" ran its cases twice and wrote their
// rows twice, "--seqlens 128,,256" dropped the empty item).
func TestListFlagsItemsOnce(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"kernel", "--kernels", ",", "--dry-run"}, `--kernels ",": an empty item`},
		{[]string{"kernel", "--seqlens", "128,,256", "--dry-run"}, `--seqlens "128,,256": an empty item`},
		{[]string{"kernel", "--masks", "causal,causal", "--dry-run"}, "causal given twice"},
		{[]string{"run", "--suite", "smoke", "--masks", "causal,causal", "--out", t.TempDir()}, `--masks "causal,causal": causal given twice`},
		{[]string{"sparse", "--block", ",", "--dry-run"}, `--block ",": an empty item`},
		{[]string{"cp", "--cp-ulysses", "1,1", "--dry-run"}, "1 given twice"},
		{[]string{"simulate", "--gpus", "8,8"}, "8 given twice"},
		// (the probe of 2026-12-06: an empty --avg-block was taken as not given, and
		// "--avg-block 128,128" and "--calibrate-seqlens 128,128" ran their cases twice)
		{[]string{"sparse", "--avg-block", "", "--dry-run"}, `--avg-block "": an empty item`},
		{[]string{"sparse", "--avg-block", "128,128", "--dry-run"}, "128 given twice"},
		{[]string{"simulate", "--gpus", "8", "--calibrate", "ref", "--calibrate-seqlens", "128,128", "--out", t.TempDir()}, `--calibrate-seqlens "128,128": 128 given twice`},
	} {
		_, errOut, code := captureRun(t, c.args...)
		checkUsageError(t, c.args, code, errOut, c.want)
	}
}

// countsText is a --counts text file of three counts in a test's folder.
func countsText(t *testing.T) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "counts.txt")
	if err := os.WriteFile(p, []byte("100\n200\n300\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// A command refused after it made its --out folder (simulate checks a mask's documents once
// the sweep is laid out) leaves no empty folder behind: the folders it made go, deepest
// first, while a folder that was there before stays (the fourth pass had left them: 44 empty
// simulate-* folders had piled up under cmd/longca/out from this package's own tests).
func TestRefusedRunLeavesNoEmptyFolder(t *testing.T) {
	dir := t.TempDir()
	made := filepath.Join(dir, "a", "b")
	args := []string{"simulate", "--out", made, "--max-doc", "1", "--seqlen", "1G"}
	_, errOut, code := captureRun(t, args...)
	checkUsageError(t, args, code, errOut, "--max-doc 1")
	if _, err := os.Stat(filepath.Join(dir, "a")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("%v: the folders it made are still there (%v)", args, err)
	}
	there := filepath.Join(dir, "there")
	if err := os.Mkdir(there, 0o755); err != nil {
		t.Fatal(err)
	}
	args = []string{"simulate", "--out", there, "--max-doc", "1", "--seqlen", "1G"}
	_, errOut, code = captureRun(t, args...)
	checkUsageError(t, args, code, errOut, "--max-doc 1")
	if _, err := os.Stat(there); err != nil {
		t.Errorf("%v: the folder that was there before is gone: %v", args, err)
	}
}

// A kernel or a launch that cannot run here is bad input, one line naming the flag or the
// variable and the fix, exit 2 (the thirteenth session's fuzz pass: each exited 1, or 0
// with a run of unsupported rows): cp --kernel cuda without a GPU, run --suite gpu without
// one, and a 2-rank launch across nodes without MASTER_ADDR.
func TestCannotRunHereExitsTwo(t *testing.T) {
	if session.DefaultKernel(kernels.Options{}) == "cuda" {
		t.Skip("a GPU answers here: the no-GPU refusals cannot be seen (the launch case runs in TestLaunchErrorExitsTwo)")
	}
	out := t.TempDir()
	for _, c := range []struct {
		args  []string
		wants []string
	}{
		{[]string{"cp", "--kernel", "cuda", "--tokens-per-rank", "256", "--heads", "2:2", "--head-dim", "8", "--out", out}, []string{"--kernel cuda cannot run here", "use --kernel ref"}},
		{[]string{"run", "--suite", "gpu", "--out", out}, []string{"--suite gpu: no GPU here", "use --suite cpu"}},
	} {
		_, errOut, code := captureRun(t, c.args...)
		checkUsageError(t, c.args, code, errOut, c.wants...)
	}
}

func TestLaunchErrorExitsTwo(t *testing.T) {
	t.Setenv("OMPI_COMM_WORLD_RANK", "0")
	t.Setenv("OMPI_COMM_WORLD_SIZE", "2")
	t.Setenv("OMPI_COMM_WORLD_LOCAL_SIZE", "1")
	t.Setenv("MASTER_ADDR", "")
	os.Unsetenv("MASTER_ADDR")
	for _, backend := range []string{"tcp", "auto"} {
		// auto is MPI where the binary has it (built with the mpi tag, as CI builds it):
		// MPI's world of one then disagrees with the environment's two, the other launch error
		args := []string{"cp", "--masks", "causal", "--methods", "ring-p2p", "--tokens-per-rank", "256", "--heads", "2:2", "--head-dim", "8",
			"-n", "1", "-w", "0", "--baseline", "none", "--backend", backend, "--out", t.TempDir()}
		_, errOut, code := captureRun(t, args...)
		if backend == "tcp" || !strings.Contains(errOut, "MPI says") {
			checkUsageError(t, args, code, errOut, "MASTER_ADDR is not set", "set it to rank 0's host")
		} else {
			checkUsageError(t, args, code, errOut, "MPI says rank 0 of 1 but the ompi environment says 0 of 2", "--backend tcp")
		}
	}
}
