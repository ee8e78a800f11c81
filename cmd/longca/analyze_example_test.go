package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// pandasPython is a python that imports pandas (LONGCA_TEST_PYTHON, python3, /usr/bin/python3,
// as scripts/test.sh looks); the test is skipped, saying what to install, where none does
// (CI installs python3-pandas).
func pandasPython(t *testing.T) string {
	t.Helper()
	for _, p := range []string{os.Getenv("LONGCA_TEST_PYTHON"), "python3", "/usr/bin/python3"} {
		if p != "" && exec.Command(p, "-c", "import pandas").Run() == nil {
			return p
		}
	}
	t.Skip("no python with pandas here (apt-get install python3-pandas): examples/analyze.py needs it")
	return ""
}

// runAnalyze runs examples/analyze.py on args as on a machine without pyarrow (Debian's:
// pandas, no pyarrow), whether or not this one has it.
func runAnalyze(t *testing.T, py string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	noArrow := "import runpy, sys; sys.modules['pyarrow'] = None; sys.argv = sys.argv[1:]; runpy.run_path(sys.argv[0], run_name='__main__')"
	cmd := exec.Command(py, append([]string{"-c", noArrow, filepath.Join("..", "..", "examples", "analyze.py")}, args...)...)
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	err := cmd.Run()
	if x, ok := err.(*exec.ExitError); ok {
		return o.String(), e.String(), x.ExitCode()
	} else if err != nil {
		t.Fatalf("analyze.py %v: %v", args, err)
	}
	return o.String(), e.String(), 0
}

// analyze.py given a run's own merged file (<run>.merged.arrow, what `longca run` writes and
// its docstring's usage names) where pyarrow is missing said to write the CSV with `longca
// merge DIR --csv`, which writes DIR/merged.csv: the same error again. Its hint now names a
// command that writes the CSV it looks for, and the folder's merged.csv serves too (that
// run's rows only); a row found in two CSVs of one folder counts once.
func TestAnalyzeWithoutPyarrowHint(t *testing.T) {
	py := pandasPython(t)
	dir := filepath.Join(t.TempDir(), "run")
	for _, id := range []string{"r", "other"} {
		args := []string{"--log-level", "warn", "kernel", "--kernels", "ref", "--masks", "causal,full", "--seqlens", "64,128", "--heads", "2:1",
			"--head-dim", "8", "--passes", "fwd", "-w", "0", "-n", "1", "--out", dir, "--run-id", id}
		if _, errOut, code := captureRun(t, args...); code != 0 {
			t.Fatalf("%v: exit %d: %s", args, code, errOut)
		}
	}
	arrow := filepath.Join(dir, "r.merged.arrow") // as `longca run` leaves it
	if _, errOut, code := captureRun(t, "merge", dir, "--run", "r", "--out", arrow); code != 0 {
		t.Fatalf("merge: exit %d: %s", code, errOut)
	}

	_, errOut, code := runAnalyze(t, py, arrow)
	msg := strings.TrimSpace(errOut)
	if code != 2 || strings.Contains(msg, "\n") {
		t.Fatalf("analyze.py %s without pyarrow or CSV: exit %d, want 2 and one line:\n%s", arrow, code, msg)
	}
	m := regexp.MustCompile("`(longca merge [^`]*)`").FindStringSubmatch(msg)
	if m == nil {
		t.Fatalf("no longca merge command in the hint: %s", msg)
	}
	hint := strings.Fields(m[1])[1:]
	if _, errOut, code := captureRun(t, hint...); code != 0 {
		t.Fatalf("the hint's %q: exit %d: %s", m[1], code, errOut)
	}
	out, errOut, code := runAnalyze(t, py, arrow)
	if code != 0 || !strings.Contains(out, ": 4 rows (read with pandas and the CSV export)") {
		t.Fatalf("after the hint's %q: exit %d: %s%s", m[1], code, out, errOut)
	}

	// without that CSV, the folder's merged.csv (both runs) gives run r's rows
	if err := os.Remove(filepath.Join(dir, "r.merged.csv")); err != nil {
		t.Fatal(err)
	}
	if _, errOut, code := captureRun(t, "merge", dir, "--csv"); code != 0 {
		t.Fatalf("merge --csv: exit %d: %s", code, errOut)
	}
	out, errOut, code = runAnalyze(t, py, arrow)
	if code != 0 || !strings.Contains(out, ": 4 rows (read with pandas and the CSV export)") || !strings.Contains(errOut, "run r's 4 rows read from "+filepath.Join(dir, "merged.csv")) {
		t.Fatalf("with %s/merged.csv: exit %d: %s%s", dir, code, out, errOut)
	}

	// the folder holding merged.csv (r and other) and r.merged.csv: each row once
	if _, errOut, code := captureRun(t, hint...); code != 0 {
		t.Fatalf("%q: exit %d: %s", m[1], code, errOut)
	}
	out, errOut, code = runAnalyze(t, py, dir)
	if code != 0 || !strings.Contains(out, ": 8 rows (read with pandas and the CSV export)") {
		t.Fatalf("analyze.py %s (merged.csv and r.merged.csv): exit %d, want 8 rows: %s%s", dir, code, out, errOut)
	}
}
