package main

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/longca/longca/harness"
	"github.com/longca/longca/results"
)

// runCLI runs the app in-process and returns stdout, stderr and the exit status main
// would give.
func runCLI(t *testing.T, args ...string) (string, string, int) {
	t.Helper()
	var out, errb bytes.Buffer
	app := newApp()
	app.Writer, app.ErrWriter = &out, &errb
	err := app.Run(append([]string{"longca", "--log-level", "warn"}, args...))
	if err != nil {
		errb.WriteString(err.Error())
	}
	return out.String(), errb.String(), exitCode(err)
}

// dataLines are the lines that do not start with '#'.
func dataLines(s string) []string {
	var out []string
	for _, l := range strings.Split(strings.TrimRight(s, "\n"), "\n") {
		if l != "" && !strings.HasPrefix(l, "#") {
			out = append(out, l)
		}
	}
	return out
}

func TestDryRunCounts(t *testing.T) {
	for _, c := range []struct {
		args []string
		want int
	}{
		{[]string{"--seqlens", "1K,2K", "--masks", "causal,full,sliding_window", "--heads", "8:2,8:8"}, 3 * 2 * 2 * 2},
		{nil, 12 * 9 * 2 * 2},
		{[]string{"-b", "8K", "-e", "48K", "--step", "8K", "--masks", "causal", "--passes", "fwd"}, 6 * 2},
		{[]string{"-b", "1K", "-e", "64K", "-f", "4", "--masks", "all", "--heads", "64:8", "--passes", "fwd,bwd,fwd+bwd"}, 4 * 14 * 3},
		{[]string{"--seqlens", "512", "--masks", "block_causal_document,causal", "--heads", "8:2", "--passes", "fwd"}, 2},
	} {
		out, errs, code := runCLI(t, append([]string{"kernel", "--dry-run", "--kernels", "ref"}, c.args...)...)
		if code != 0 {
			t.Fatalf("%v: exit %d: %s", c.args, code, errs)
		}
		if got := len(dataLines(out)); got != c.want {
			t.Errorf("%v: %d cases listed, want %d", c.args, got, c.want)
		}
		// the plan's summary, then the run's fit on this machine (TestDryRunSaysTheFit)
		lines := strings.Split(strings.TrimSpace(out), "\n")
		if n := len(lines); n < 2 || !strings.HasPrefix(lines[n-2], "# ") || !strings.Contains(lines[n-2], "cases") || !strings.HasPrefix(lines[n-1], "# ") {
			t.Errorf("%v: last lines %q", c.args, lines[max(n-2, 0):])
		}
	}
}

func TestBadFlagsExit2NamingTheFlag(t *testing.T) {
	tmp := t.TempDir()
	aFile := filepath.Join(tmp, "not-arrow.txt") // a file: no folder can be made under it
	if err := os.WriteFile(aFile, []byte("hello\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		args []string
		flag string
	}{
		{[]string{"kernel", "--heads", "64:7"}, "--heads"},
		{[]string{"kernel", "-b", "1K", "-e", "4K", "-f", "1"}, "-f"},
		{[]string{"kernel", "-b", "4K", "-e", "1K"}, "-e"},
		{[]string{"kernel", "-b", "one"}, "-b"},
		{[]string{"kernel", "--seqlens", "1K", "-b", "1K"}, "--seqlens"},
		{[]string{"kernel", "--masks", "nope"}, "--masks"},
		{[]string{"kernel", "--dtype", "int8"}, "--dtype"},
		{[]string{"kernel", "--passes", "sideways"}, "--passes"},
		{[]string{"kernel", "--kernels", "nope"}, "--kernels"},
		{[]string{"kernel", "-n", "0"}, "-n"},
		{[]string{"kernel", "--head-dim", "0"}, "--head-dim"},
		{[]string{"run", "--suite", "huge"}, "--suite"},
		{[]string{"report", "x", "--pass", "up"}, "--pass"},
		{[]string{"report", "x", "--at", "1.3"}, "--at"},
		{[]string{"report", "x", "--against", "cudnn", "--at", "0"}, "--at"},
		{[]string{"report", "x", "--against", "cudnn", "--at", "-Inf"}, "--at"},
		{[]string{"report", "x", "--pairs"}, "--pairs"},
		{[]string{"merge"}, "merge"},
		{[]string{"kernel", "--check-budget", "-1"}, "--check-budget"},
		{[]string{"cp", "--check-budget", "-1"}, "--check-budget"},
		{[]string{"kernel", "--run-id", "../escape"}, "--run-id"},
		{[]string{"run", "--run-id", "a/b"}, "--run-id"},
		{[]string{"cp", "--run-id", ".."}, "--run-id"},
		{[]string{"kernel", "--out", aFile + "/sub"}, "--out"},
		{[]string{"cp", "--ranks", "2", "--tokens-per-rank", "64", "--heads", "2:1", "--head-dim", "8", "--out", aFile + "/sub"}, "--out"},
		{[]string{"merge", filepath.Join(tmp, "nowhere")}, "nowhere"},
		{[]string{"merge", tmp, "--out", aFile + "/m.arrow"}, "--out"},
		{[]string{"report", aFile}, "not a longca results file"},
		{[]string{"report", tmp, "--plot", aFile + "/p"}, "--plot"},
		{[]string{"kernel", "--kernels", "ref", "--seqlens", "128", "--mask-json", aFile + "/m"}, "--mask-json"},
		{[]string{"selftest", "comm", "--exit-rank", "3"}, "--exit-rank"},
	} {
		_, errs, code := runCLI(t, c.args...)
		checkUsageError(t, c.args, code, errs, c.flag)
	}
}

func TestKernelRowsAndReport(t *testing.T) {
	dir := t.TempDir()
	out, errs, code := runCLI(t, "kernel", "--kernels", "ref", "--seqlens", "128,256", "--masks", "causal,sliding_window",
		"--heads", "2:1", "--head-dim", "8", "-w", "1", "-n", "2", "--out", dir, "--mask-json", filepath.Join(dir, "masks"))
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	if got := len(dataLines(out)); got != 2*2*2 {
		t.Fatalf("table has %d rows:\n%s", got, out)
	}
	rows, f, err := results.ReadRows(filepath.Join(dir, results.FileName(filepath.Base(dir), 0, 1)))
	if err != nil {
		t.Fatal(err)
	}
	if f.Truncated || len(rows) != 8 {
		t.Fatalf("%d rows, truncated %v", len(rows), f.Truncated)
	}
	for _, r := range rows {
		if r.Status != results.StatusOK || r.MedianMs == nil || r.CheckPass == nil || !*r.CheckPass || *r.CheckSeqLen != r.SeqLen ||
			r.Iters != 2 || r.Warmups != 1 || r.Kernel != "ref" || r.Device != "cpu" || r.MaskParams == "" || r.Seed != 42 {
			t.Fatalf("row %+v", r)
		}
	}
	js, _ := filepath.Glob(filepath.Join(dir, "masks", "*.json"))
	if len(js) != 4 {
		t.Fatalf("%d mask JSON files, want 4", len(js))
	}
	b, err := os.ReadFile(filepath.Join(dir, "masks", "sliding_window_256_seed42.json"))
	if err != nil || !strings.Contains(string(b), `"slices"`) || !strings.Contains(string(b), `"seqlen": 256`) {
		t.Fatalf("mask JSON: %v %s", err, b)
	}
}

func TestRunSmokeSuite(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "run1")
	out, errs, code := runCLI(t, "run", "--suite", "smoke", "--out", dir)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	// One table row per (mask, length, pass): 3 masks x 2 lengths x 2 passes.
	data := dataLines(out)
	if len(data) != 12 {
		t.Fatalf("%d table rows:\n%s", len(data), out)
	}
	seen := map[string]bool{}
	for _, l := range data {
		f := strings.Fields(l)
		seen[f[0]+"/"+f[1]+"/"+f[3]] = true
		if f[len(f)-1] == "wrong" || f[len(f)-1] == "error" {
			t.Fatalf("row %q", l)
		}
	}
	if len(seen) != 12 {
		t.Fatalf("rows are not distinct cases: %v", seen)
	}
	if !strings.Contains(out, "# wrote run1.rank-0-of-1.arrow, run1.merged.arrow, run1.report.txt and 6 plots in ") {
		t.Errorf("the files written are not said:\n%s", out)
	}
	for _, p := range []string{"run1.rank-0-of-1.arrow", "run1.merged.arrow", "run1.report.txt", "run1.plots/causal_fwd_4-2.png", "run1.plots/block_causal_document_bwd_4-2.png"} {
		if st, err := os.Stat(filepath.Join(dir, p)); err != nil || st.Size() == 0 {
			t.Errorf("%s: %v", p, err)
		}
	}
	pngs, _ := filepath.Glob(filepath.Join(dir, "run1.plots", "*.png"))
	if len(pngs) != 6 {
		t.Errorf("%d plots, want 6", len(pngs))
	}
	rep, _ := os.ReadFile(filepath.Join(dir, "run1.report.txt"))
	if len(dataLines(string(rep))) != 12 {
		t.Errorf("run1.report.txt:\n%s", rep)
	}
	rows, _, err := results.ReadRows(filepath.Join(dir, "run1.merged.arrow"))
	if err != nil || len(rows) != 12 {
		t.Fatalf("merged: %d rows, %v", len(rows), err)
	}

	// A second run into the same folder keeps its own summaries; the first run's stay.
	// (--no-peers on a suite without peers is said to change nothing)
	if out, errs, code := captureRun(t, "run", "--suite", "smoke", "--out", dir, "--run-id", "run2", "--no-check", "--no-peers", "--parquet"); code != 0 {
		t.Fatalf("second run: exit %d: %s", code, errs)
	} else if !strings.Contains(errs, "--no-peers: only the gpu suite times peers") {
		t.Errorf("run --suite smoke --no-peers: no word that --no-peers changes nothing: %s", errs)
	} else if !strings.Contains(out, "# wrote run2.rank-0-of-1.arrow, run2.merged.arrow, run2.merged.parquet, run2.report.txt and 6 plots") {
		t.Errorf("run --parquet: the Parquet file is not said written:\n%s", out) // (it was left out)
	}
	for _, run := range []string{"run1", "run2"} {
		rows, f, err := results.ReadRows(filepath.Join(dir, run+".merged.arrow"))
		if err != nil || len(rows) != 12 || f.Meta(results.MetaRuns) != run || rows[0].RunID != run {
			t.Errorf("%s.merged.arrow: %d rows, %v", run, len(rows), err)
		}
		if rep, err := os.ReadFile(filepath.Join(dir, run+".report.txt")); err != nil || !strings.Contains(string(rep), "run "+run+",") {
			t.Errorf("%s.report.txt: %v\n%s", run, err, rep)
		}
	}
	if _, errs, code := runCLI(t, "run", "--suite", "smoke", "--out", dir, "--run-id", "run2"); code != 2 || !strings.Contains(errs, "run2") {
		t.Errorf("run2 again: exit %d: %s", code, errs)
	}

	// report and merge read the folder back.
	out, errs, code = runCLI(t, "report", dir, "--pass", "fwd")
	if code != 0 || len(dataLines(out)) != 6 {
		t.Fatalf("report --pass fwd: exit %d %s\n%s", code, errs, out)
	}
	// --against: a kernel of the table, or one clear line naming the flag and the kernels there
	out, errs, code = runCLI(t, "report", dir, "--pass", "fwd", "--against", "nope")
	checkUsageError(t, []string{"report", "--against", "nope"}, code, errs, "--against")
	if !strings.Contains(errs, "ref") {
		t.Errorf("report --against nope names no kernel of the folder: %s", errs)
	}
	out, errs, code = runCLI(t, "report", dir, "--pass", "fwd", "--against", "ref")
	if code != 0 || !strings.Contains(out, "each kernel's TFLOP/s over ref's, on the 6 cases ref ran ok") {
		t.Fatalf("report --against ref: exit %d %s\n%s", code, errs, out)
	}
	// --masks keeps those masks' rows; a mask the folder lacks is one clear line
	out, errs, code = runCLI(t, "report", dir, "--pass", "fwd", "--masks", "causal")
	if code != 0 || !strings.Contains(out, " causal ") || strings.Contains(out, "sliding_window") {
		t.Fatalf("report --masks causal: exit %d %s\n%s", code, errs, out)
	}
	_, errs, code = runCLI(t, "report", dir, "--masks", "causal,nope")
	checkUsageError(t, []string{"report", "--masks", "causal,nope"}, code, errs, "--masks")
	// a mask of MASKS.md the folder lacks (a run cut short) is left out with a warning
	out, errs, code = runCLI(t, "report", dir, "--pass", "fwd", "--masks", "causal,prefix_lm_causal", "--against", "ref")
	if code != 0 || !strings.Contains(errs, "prefix_lm_causal") || !strings.Contains(out, " causal ") {
		t.Fatalf("report --masks causal,prefix_lm_causal: exit %d %s\n%s", code, errs, out)
	}
	out, errs, code = runCLI(t, "merge", dir, "--out", filepath.Join(dir, "again.arrow"), "--csv")
	if code != 0 || !strings.Contains(out, "merged 24 rows of 2 run(s)") {
		t.Fatalf("merge: exit %d %s %s", code, errs, out)
	}
}

func TestMergeCLIMissingRank(t *testing.T) {
	dir := t.TempDir()
	for _, r := range []int{0, 1, 3} {
		w, err := results.Create(dir, "cp1", r, 4)
		if err != nil {
			t.Fatal(err)
		}
		if err := w.Write(results.Row{RunID: "cp1", Rank: int64(r), Status: results.StatusOK}); err != nil {
			t.Fatal(err)
		}
		w.Close()
	}
	_, errs, code := runCLI(t, "merge", dir)
	if code == 0 || !strings.Contains(errs, "rank 2 of 4 missing") {
		t.Fatalf("exit %d: %s", code, errs)
	}
	out, errs, code := runCLI(t, "merge", dir, "--allow-missing")
	if code != 0 || !strings.Contains(out, "missing (--allow-missing): run cp1: rank 2 of 4") {
		t.Fatalf("exit %d: %s %s", code, errs, out)
	}
}

func TestList(t *testing.T) {
	out, errs, code := runCLI(t, "list")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	for _, want := range []string{"# masks", "# kernels", "# cp methods", "block_causal_document", "causal_document_long", "ref", "CPU float64 reference"} {
		if !strings.Contains(out, want) {
			t.Errorf("list lacks %q:\n%s", want, out)
		}
	}
	if n := len(regexp.MustCompile(`(?m)^  [a-z_]+ +kernel(,cp)? `).FindAllString(out, -1)); n != 12 { // a mask's line: name, benches, doc
		t.Errorf("%d kernel masks listed, want 12", n)
	}
}

// TestKernelUnderLauncher runs the sweep as ranks 1 and 0 of 2 (Open MPI's environment):
// each writes its own rank file, only rank 0 prints the table, and merge joins them.
func TestKernelUnderLauncher(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "mpi1")
	t.Setenv("OMPI_COMM_WORLD_SIZE", "2")
	t.Setenv("OMPI_COMM_WORLD_LOCAL_SIZE", "2")
	args := []string{"kernel", "--kernels", "ref", "--seqlens", "128", "--masks", "causal", "--heads", "2:1",
		"--head-dim", "8", "--passes", "fwd", "-w", "0", "-n", "1"}
	t.Setenv("OMPI_COMM_WORLD_RANK", "1")
	t.Setenv("OMPI_COMM_WORLD_LOCAL_RANK", "1")
	if _, errs, code := runCLI(t, args...); code != 2 || errs != "" {
		t.Fatalf("rank 1 without --out under 2 ranks: exit %d %q (rank 0 says it)", code, errs)
	}
	t.Setenv("OMPI_COMM_WORLD_RANK", "0")
	t.Setenv("OMPI_COMM_WORLD_LOCAL_RANK", "0")
	if _, errs, code := runCLI(t, args...); code != 2 || !strings.Contains(errs, "--out") {
		t.Fatalf("rank 0 without --out under 2 ranks: exit %d %s", code, errs)
	}
	for _, r := range []string{"1", "0"} {
		t.Setenv("OMPI_COMM_WORLD_RANK", r)
		t.Setenv("OMPI_COMM_WORLD_LOCAL_RANK", r)
		out, errs, code := runCLI(t, append(args, "--out", dir)...)
		if code != 0 {
			t.Fatalf("rank %s: exit %d %s", r, code, errs)
		}
		if got := len(dataLines(out)); (r == "0") != (got == 1) {
			t.Fatalf("rank %s printed %d table rows", r, got)
		}
	}
	rows, _, err := results.ReadRows(filepath.Join(dir, "mpi1.rank-1-of-2.arrow"))
	if err != nil || len(rows) != 1 || rows[0].Rank != 1 || rows[0].WorldSize != 2 || rows[0].LocalRank != 1 || rows[0].Launcher != "ompi" {
		t.Fatalf("rank 1 rows %+v, %v", rows, err)
	}
	res, err := results.Merge(dir, results.MergeOptions{})
	if err != nil || res.Rows != 2 {
		t.Fatalf("merge: %+v %v", res, err)
	}
}

func TestKernelNoCheck(t *testing.T) {
	dir := t.TempDir()
	_, errs, code := runCLI(t, "kernel", "--kernels", "ref", "--seqlens", "128", "--masks", "full", "--heads", "2:1",
		"--head-dim", "8", "--passes", "fwd,fwd+bwd", "-w", "0", "-n", "3", "--no-check", "--out", dir)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	rows, _, err := results.ReadRows(filepath.Join(dir, results.FileName(filepath.Base(dir), 0, 1)))
	if err != nil || len(rows) != 2 {
		t.Fatalf("%d rows: %v", len(rows), err)
	}
	for _, r := range rows {
		if r.Status != results.StatusOK || r.CheckPass != nil || r.CheckSeqLen != nil || r.MedianMs == nil || r.Iters != 3 {
			t.Fatalf("--no-check row %+v", r)
		}
		if *r.MinMs > *r.MedianMs || *r.MedianMs > *r.MaxMs {
			t.Fatalf("min %v median %v max %v", *r.MinMs, *r.MedianMs, *r.MaxMs)
		}
	}
	if rows[1].Pass != "fwd+bwd" || rows[1].FLOPs != 3.5*rows[0].FLOPs {
		t.Fatalf("fwd+bwd flops %v vs fwd %v", rows[1].FLOPs, rows[0].FLOPs)
	}
}

// checkUsageError asserts how a bad invocation ends: exit status 2 and one line on
// stderr that contains every want (the flag it names, and what is allowed).
func checkUsageError(t *testing.T, args []string, code int, stderr string, wants ...string) {
	t.Helper()
	msg := strings.TrimSpace(stderr)
	if code != 2 {
		t.Errorf("%v: exit %d, want 2 (stderr %q)", args, code, msg)
		return
	}
	if strings.Contains(msg, "\n") {
		t.Errorf("%v: %d error lines, want one:\n%s", args, strings.Count(msg, "\n")+1, msg)
	}
	for _, w := range wants {
		if !strings.Contains(msg, w) {
			t.Errorf("%v: error %q does not mention %q", args, msg, w)
		}
	}
}

// --gpu-state is a flag of every command that times (kernel, sparse, run, cp): off, the
// sweep runs as before; a bad value is a usage error naming it. On this machine (no GPU)
// the columns are null either way.
func TestGPUStateFlag(t *testing.T) {
	dir := t.TempDir()
	_, errs, code := runCLI(t, "kernel", "--kernels", "ref", "--seqlens", "128", "--masks", "full", "--heads", "2:1",
		"--head-dim", "8", "--passes", "fwd", "-w", "0", "-n", "2", "--no-check", "--gpu-state=false", "--out", dir)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	rows, _, err := results.ReadRows(filepath.Join(dir, results.FileName(filepath.Base(dir), 0, 1)))
	if err != nil || len(rows) != 1 || rows[0].Status != results.StatusOK || rows[0].SMClockMHz != nil || rows[0].GPUSamples != nil {
		t.Fatalf("rows %+v: %v", rows, err)
	}
	for _, cmd := range [][]string{{"sparse", "--help"}, {"run", "--help"}, {"cp", "--help"}} {
		out, _, code := runCLI(t, cmd...)
		if code != 0 || !strings.Contains(out, "--gpu-state") {
			t.Errorf("%s: exit %d, no --gpu-state in its help", cmd[0], code)
		}
	}
	if _, errs, code := runCLI(t, "kernel", "--kernels", "ref", "--gpu-state=maybe", "--out", t.TempDir()); code != 2 || !strings.Contains(errs, "gpu-state") {
		t.Errorf("--gpu-state=maybe: exit %d, %q; want 2 naming the flag", code, errs)
	}
}

// --settle is a flag of kernel, sparse, run and cp: a CPU sweep runs with it and its rows keep
// settle_ms null (nothing was timed on a GPU); a negative or over-a-minute value, or one
// without a unit, is a usage error naming the flag, before anything runs.
func TestSettleFlag(t *testing.T) {
	dir := t.TempDir()
	_, errs, code := runCLI(t, "kernel", "--kernels", "ref", "--seqlens", "128", "--masks", "full", "--heads", "2:1",
		"--head-dim", "8", "--passes", "fwd", "-w", "0", "-n", "2", "--no-check", "--settle", "1h0m0s", "--out", dir)
	if code != 2 || !strings.Contains(errs, "--settle 1h0m0s") || strings.Count(strings.TrimSpace(errs), "\n") != 0 {
		t.Errorf("--settle 1h: exit %d, %q; want 2 and one line naming the flag", code, errs)
	}
	for _, bad := range []string{"-1s", "5"} {
		if _, errs, code := runCLI(t, "kernel", "--kernels", "ref", "--settle", bad, "--out", t.TempDir()); code != 2 || !strings.Contains(errs, "settle") {
			t.Errorf("--settle %s: exit %d, %q; want 2 naming the flag", bad, code, errs)
		}
	}
	_, errs, code = captureRun(t, "--log-level", "info", "--log-format", "json", "kernel", "--kernels", "ref", "--seqlens", "128",
		"--masks", "full", "--heads", "2:1", "--head-dim", "8", "--passes", "fwd", "-w", "0", "-n", "2", "--no-check", "--settle", "10ms", "--out", dir)
	if code != 0 || !strings.Contains(errs, `"settle":"10ms"`) { // the sweep's line: the flag reached the session
		t.Fatalf("exit %d, no settle in the sweep's log line: %s", code, errs)
	}
	rows, _, err := results.ReadRows(filepath.Join(dir, results.FileName(filepath.Base(dir), 0, 1)))
	if err != nil || len(rows) != 1 || rows[0].Status != results.StatusOK || rows[0].SettleMs != nil {
		t.Fatalf("rows %+v: %v", rows, err)
	}
	// the default (calls 94 and 97): every command idles 250ms before each GPU case
	_, errs, code = captureRun(t, "--log-level", "info", "--log-format", "json", "kernel", "--kernels", "ref", "--seqlens", "128",
		"--masks", "full", "--heads", "2:1", "--head-dim", "8", "--passes", "fwd", "-w", "0", "-n", "2", "--no-check", "--out", t.TempDir())
	if code != 0 || !strings.Contains(errs, `"settle":"250ms"`) {
		t.Errorf("kernel without --settle: exit %d, want the 250ms default in the sweep's log line: %s", code, errs)
	}
	for _, cmd := range [][]string{{"kernel", "--help"}, {"sparse", "--help"}, {"run", "--help"}, {"cp", "--help"}} {
		out, _, code := runCLI(t, cmd...)
		want := "(default: 250ms)"
		if code != 0 || !strings.Contains(out, "--settle") || !strings.Contains(out, want) {
			t.Errorf("%s: exit %d, want --settle with %q in its help", cmd[0], code, want)
		}
	}
	if _, errs, code := runCLI(t, "run", "--suite", "cpu", "--settle", "-2s", "--out", t.TempDir()); code != 2 || !strings.Contains(errs, "--settle") {
		t.Errorf("run --settle -2s: exit %d, %q; want 2 naming the flag", code, errs)
	}
	if _, errs, code := runCLI(t, "cp", "--ranks", "2", "--kernel", "ref", "--settle", "2m", "--out", t.TempDir()); code != 2 || !strings.Contains(errs, "--settle 2m0s") {
		t.Errorf("cp --settle 2m: exit %d, %q; want 2 naming the flag", code, errs)
	}
	if _, errs, code := runCLI(t, "cp", "--ranks", "2", "--kernel", "ref", "--settle", "40s", "--timeout", "60s", "--out", t.TempDir()); code != 2 || !strings.Contains(errs, "--settle 40s with --timeout 1m0s") {
		t.Errorf("cp --settle 40s --timeout 60s: exit %d, %q; want 2 naming both flags", code, errs)
	}
}

// run --masks: a subset of the suite's masks, so that a suite longer than a job's limit
// splits into runs that merge into one file; a name outside the suite (or none) is exit 2
// naming the flag and the suite's masks, before anything runs.
func TestRunMasksSplitsTheSuite(t *testing.T) {
	dir := t.TempDir()
	for _, bad := range []string{"causal,full", ",", "nonsense"} {
		_, errs, code := runCLI(t, "run", "--suite", "smoke", "--masks", bad, "--out", dir, "--run-id", "bad")
		if code != 2 || !strings.Contains(errs, "--masks") || !strings.Contains(errs, "causal,causal_document,block_causal_document") {
			t.Errorf("--masks %q: exit %d, %q; want 2 naming the flag and the suite's masks", bad, code, errs)
		}
	}
	if files, _ := filepath.Glob(filepath.Join(dir, "bad*")); len(files) != 0 {
		t.Errorf("a refused run wrote %v", files)
	}
	// the two halves, given out of the suite's order, run in its order
	if _, errs, code := runCLI(t, "run", "--suite", "smoke", "--masks", "block_causal_document,causal", "--out", dir, "--run-id", "a", "--no-check"); code != 0 {
		t.Fatalf("first part: exit %d: %s", code, errs)
	}
	if _, errs, code := runCLI(t, "run", "--suite", "smoke", "--masks", "causal_document", "--out", dir, "--run-id", "b", "--no-check"); code != 0 {
		t.Fatalf("second part: exit %d: %s", code, errs)
	}
	whole := t.TempDir() // (apart: the merge below reads every run of dir)
	if _, errs, code := runCLI(t, "run", "--suite", "smoke", "--masks", "all", "--out", whole, "--run-id", "whole", "--no-check"); code != 0 {
		t.Fatalf("--masks all: exit %d: %s", code, errs)
	}
	if rows, _, err := results.ReadRows(filepath.Join(whole, "whole.merged.arrow")); err != nil || len(rows) != 12 {
		t.Fatalf("--masks all: %d rows (%v), want the suite's 12", len(rows), err)
	}
	rows, _, err := results.ReadRows(filepath.Join(dir, "a.merged.arrow"))
	if err != nil || len(rows) != 8 || rows[0].Mask != "causal" || rows[len(rows)-1].Mask != "block_causal_document" {
		t.Fatalf("a: %d rows (%v), want causal's 4 then block_causal_document's 4", len(rows), err)
	}
	merged := filepath.Join(dir, "all.arrow")
	if _, errs, code := runCLI(t, "merge", dir, "--out", merged); code != 0 {
		t.Fatalf("merge: exit %d: %s", code, errs)
	}
	rows, _, err = results.ReadRows(merged)
	seen := map[string]int{}
	for _, r := range rows {
		seen[r.Mask]++
	}
	if err != nil || len(rows) != 12 || seen["causal"] != 4 || seen["causal_document"] != 4 || seen["block_causal_document"] != 4 {
		t.Errorf("merged halves: %d rows %v (%v), want the whole suite's 12", len(rows), seen, err)
	}
}

// scripts/device/run-final.sh's two parts (1: full and causal; 2: the rest) name the GPU
// suite's masks between them, each once, so that the merged parts are the whole suite: a
// mask added to the suite and not to the script would go untimed without a word.
func TestRunFinalPartsCoverTheSuite(t *testing.T) {
	src, err := os.ReadFile(filepath.Join("..", "..", "scripts", "device", "run-final.sh"))
	if err != nil {
		t.Fatal(err)
	}
	parts := regexp.MustCompile(`(?m)^([12])\) set -- --masks ([a-z_,]+) `).FindAllStringSubmatch(string(src), -1)
	if len(parts) != 2 {
		t.Fatalf("found %d parts' --masks in run-final.sh, want 2 (the pattern no longer matches the script?)", len(parts))
	}
	st, err := harness.StandardSuite("gpu")
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]int{}
	for _, p := range parts {
		for _, m := range strings.Split(p[2], ",") {
			seen[m]++
		}
	}
	for _, m := range st.Sweep.Masks {
		if seen[m] != 1 {
			t.Errorf("mask %s is in %d of run-final.sh's parts, want 1", m, seen[m])
		}
		delete(seen, m)
	}
	if len(seen) > 0 {
		t.Errorf("run-final.sh's parts name masks outside the gpu suite: %v", seen)
	}
}
