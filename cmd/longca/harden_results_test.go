package main

// Bad input to the results commands (merge, report, selftest, cp --baseline, simulate's
// result inputs) found by a fuzz pass of the binary: each is one line naming the flag or
// file and the fix, exit status 2, at once.

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// captureWithin is captureRun bounded by d: the fault it guards, unfixed, hangs growing
// to gigabytes, so the test binary stops rather than wait for it.
func captureWithin(t *testing.T, d time.Duration, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	done := make(chan struct{})
	go func() { defer close(done); stdout, stderr, code = captureRun(t, args...) }()
	select {
	case <-done:
		return
	case <-time.After(d):
		panic(strings.Join(args, " ") + ": ran past " + d.String())
	}
}

// selftestFolder writes one selftest rank file of run good (rank 0 of 1) into a new
// folder and merges it: the folder and its merged.arrow.
func selftestFolder(t *testing.T) (dir, merged string) {
	t.Helper()
	dir = filepath.Join(t.TempDir(), "res")
	if _, errOut, code := captureRun(t, "selftest", "results", "--dir", dir, "--run", "good"); code != 0 {
		t.Fatalf("selftest results: exit %d: %s", code, errOut)
	}
	if _, errOut, code := captureRun(t, "merge", dir); code != 0 {
		t.Fatalf("merge: exit %d: %s", code, errOut)
	}
	return dir, filepath.Join(dir, "merged.arrow")
}

// tinyCP are the flags of a CP run of 2 in-process ranks that takes a fraction of a second.
func tinyCP(out string) []string {
	return []string{"cp", "--kernel", "ref", "-w", "0", "-n", "1", "--heads", "2:1", "--head-dim", "16", "--samples", "1",
		"--passes", "fwd", "--masks", "causal", "--methods", "ring-p2p", "--ranks", "2", "--tokens-per-rank", "128", "--out", out}
}

// A folder holding a rank file renamed to rank 0 of 10^9 (over spmd.MaxWorld) holds no
// rank file: every command reading it says so, naming the file, at once (each hung,
// growing to 2-7 GB, listing the missing ranks).
func TestHardenResultsHugeWorldName(t *testing.T) {
	src, _ := selftestFolder(t)
	b, err := os.ReadFile(filepath.Join(src, "good.rank-0-of-1.arrow"))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "good.rank-0-of-1000000000.arrow"), b, 0o644); err != nil {
		t.Fatal(err)
	}
	sim := []string{"--gpus", "8", "--masks", "causal", "--samples", "1", "--out", filepath.Join(t.TempDir(), "sim")}
	for _, args := range [][]string{
		{"merge", dir},
		{"merge", dir, "--allow-missing"},
		{"report", dir},
		append(tinyCP(filepath.Join(t.TempDir(), "cp")), "--baseline", dir),
		append([]string{"simulate", "--kernel-rows", dir}, sim...),
		append([]string{"simulate", "--compare", dir}, sim...),
	} {
		_, errOut, code := captureWithin(t, 30*time.Second, args...)
		checkUsageError(t, args, code, errOut, "good.rank-0-of-1000000000.arrow names 1000000000 ranks")
	}
}

// selftest merged --ranks is bounded by spmd.MaxWorld before the file is read (10^9 hung
// at 6.9 GB); its other bad input (no file, not a results file) and selftest results'
// (--dir that cannot be a folder, empty; --run that is not a run id) are one line, exit 2
// (they exited 1); so is a merge with --allow-missing of a folder of garbage.
func TestHardenResultsSelftestAndMergeExitTwo(t *testing.T) {
	_, merged := selftestFolder(t)
	tmp := t.TempDir()
	file := filepath.Join(tmp, "file")
	if err := os.WriteFile(file, []byte("a file, not a folder"), 0o644); err != nil {
		t.Fatal(err)
	}
	garbage := filepath.Join(tmp, "garbage")
	if err := os.MkdirAll(garbage, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(garbage, "x.rank-0-of-2.arrow"), []byte("junk\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(garbage, "y.rank-0-of-1.arrow"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		args  []string
		wants []string
	}{
		{[]string{"selftest", "merged", "--ranks", "1000000000", merged}, []string{"--ranks 1000000000", "1 to 1048576"}},
		{[]string{"selftest", "merged", "--ranks", "1", filepath.Join(tmp, "nonexist")}, []string{filepath.Join(tmp, "nonexist"), "no such file", "merged results file"}},
		{[]string{"selftest", "merged", "--ranks", "1", file}, []string{file, "not a longca results file", "merged results file"}},
		{[]string{"selftest", "results", "--dir", filepath.Join(file, "x"), "--run", "r"}, []string{"--dir " + filepath.Join(file, "x"), "not a directory"}},
		{[]string{"selftest", "results", "--dir", "", "--run", "r"}, []string{"--dir is empty"}},
		{[]string{"selftest", "results", "--dir", filepath.Join(tmp, "out"), "--run", "a/b"}, []string{"--run", `"a/b"`}},
		{[]string{"merge", garbage, "--allow-missing"}, []string{"none of the 2 rank file(s) in " + garbage, "give a folder"}},
	} {
		_, errOut, code := captureWithin(t, 30*time.Second, c.args...)
		checkUsageError(t, c.args, code, errOut, c.wants...)
	}
	if _, err := os.Stat(filepath.Join(tmp, "out")); err == nil {
		t.Error("selftest results --run a/b left its --dir behind")
	}
}

// cp --baseline of a file or folder without an ok kernel row (a cp run's) is refused up
// front, naming --baseline and what it needs; it was accepted, and the rows then lacked
// kernel_tflops and cp_efficiency.
func TestHardenResultsBaselineNeedsKernelRows(t *testing.T) {
	cpDir := filepath.Join(t.TempDir(), "cp1")
	if _, errOut, code := captureRun(t, append(tinyCP(cpDir), "--baseline", "none")...); code != 0 {
		t.Fatalf("cp: exit %d: %s", code, errOut)
	}
	for _, base := range []string{cpDir, filepath.Join(cpDir, "cp1.merged.arrow")} {
		out := filepath.Join(t.TempDir(), "cp2")
		args := append(tinyCP(out), "--baseline", base)
		_, errOut, code := captureRun(t, args...)
		checkUsageError(t, args, code, errOut, "--baseline "+base, "no ok longca kernel row", "2 rows: 2 cp", "measure or none")
		if _, err := os.Stat(out); err == nil {
			t.Errorf("--baseline %s: --out made before the refusal", base)
		}
	}
}

// report counts a CP case once, not once per rank ("Cases: 1 Rows: 2" for 2 ranks), of
// the rank files, the folder after longca merge, and the merged file alike.
func TestHardenResultsReportCountsCPCaseOnce(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "cp1")
	if _, errOut, code := captureRun(t, append(tinyCP(dir), "--baseline", "none")...); code != 0 {
		t.Fatalf("cp: exit %d: %s", code, errOut)
	}
	check := func(when string, path string) {
		t.Helper()
		out, errOut, code := captureRun(t, "report", path)
		if code != 0 {
			t.Fatalf("report %s (%s): exit %d: %s", path, when, code, errOut)
		}
		if n := strings.Count(out, "# Cases: 1  Rows: 1 "); n != 2 {
			t.Errorf("report %s (%s): %d tables count 1 case in 1 row, want 2 (the kernel table and the CP table):\n%s", path, when, n, out)
		}
	}
	check("rank files", dir)
	if _, errOut, code := captureRun(t, "merge", dir); code != 0 {
		t.Fatalf("merge: exit %d: %s", code, errOut)
	}
	check("after merge", dir)
	check("merged file", filepath.Join(dir, "merged.arrow"))
}

// merge writes only the files it is asked for, and checks only those (a folder named
// merged.parquet beside the merge refused a merge without --parquet); a run given twice
// is refused by name (merge --run good --run good wrote each of its rows twice).
func TestHardenMergeOutputsAndRuns(t *testing.T) {
	dir, merged := selftestFolder(t)
	if err := os.Mkdir(filepath.Join(dir, "merged.parquet"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"merge", dir}, {"merge", dir, "--csv"}} {
		if _, errOut, code := captureRun(t, args...); code != 0 {
			t.Errorf("%v: exit %d: %s", args, code, errOut)
		}
	}
	for _, c := range []struct {
		args  []string
		wants []string
	}{
		{[]string{"merge", dir, "--parquet"}, []string{"merged.parquet is a folder"}},
		{[]string{"merge", dir, "--run", "good", "--run", "good", "--out", merged}, []string{"--run good given twice"}},
	} {
		_, errOut, code := captureRun(t, c.args...)
		checkUsageError(t, c.args, code, errOut, c.wants...)
	}
}
