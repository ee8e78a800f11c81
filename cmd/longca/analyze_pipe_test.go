package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// analyze.py piped into a reader that stops early (`| head -3`) ends quietly, as a
// command-line tool does: it printed a Python traceback of BrokenPipeError (the s44-D probe).
func TestAnalyzeIntoAClosedPipeIsQuiet(t *testing.T) {
	py := pandasPython(t)
	dir := filepath.Join(t.TempDir(), "run")
	args := []string{"--log-level", "warn", "kernel", "--kernels", "ref", "--masks", "causal,full", "--seqlens", "64,128", "--heads", "2:1",
		"--head-dim", "8", "--passes", "fwd", "-w", "0", "-n", "1", "--out", dir}
	if _, errOut, code := captureRun(t, args...); code != 0 {
		t.Fatalf("%v: exit %d: %s", args, code, errOut)
	}
	if _, errOut, code := captureRun(t, "merge", dir, "--csv"); code != 0 {
		t.Fatalf("merge: exit %d: %s", code, errOut)
	}
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	r.Close() // the reader is gone before the first line
	noArrow := "import runpy, sys; sys.modules['pyarrow'] = None; sys.argv = sys.argv[1:]; runpy.run_path(sys.argv[0], run_name='__main__')"
	cmd := exec.Command(py, "-c", noArrow, filepath.Join("..", "..", "examples", "analyze.py"), filepath.Join(dir, "merged.arrow"))
	var e bytes.Buffer
	cmd.Stdout, cmd.Stderr = w, &e
	err = cmd.Run()
	w.Close()
	if _, ok := err.(*exec.ExitError); err != nil && !ok {
		t.Fatal(err)
	}
	if strings.Contains(e.String(), "Traceback") || strings.Contains(e.String(), "BrokenPipeError") {
		t.Errorf("analyze.py into a closed pipe (exit %v) printed:\n%s", err, e.String())
	}
}
