package main

import (
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// simTableCells reads the first table `longca simulate` prints (per-GPU TFLOP/s, each
// method's best mesh): "mask pass heads GPUs method" -> the cell, its "*" kept and its
// "(min-max)" dropped.
func simTableCells(t *testing.T, out string) map[string]string {
	t.Helper()
	spread := regexp.MustCompile(` \([^)]*\)`)
	cells := map[string]string{}
	var methods []string
	for _, l := range strings.Split(out, "\n") {
		switch {
		case methods == nil && strings.HasPrefix(l, "# mask") || strings.HasPrefix(l, "#mask"):
			methods = strings.Fields(l)[5:]
		case methods != nil && strings.HasPrefix(l, " "):
			f := strings.Fields(spread.ReplaceAllString(l, ""))
			if len(f) != 4+len(methods) {
				t.Fatalf("simulate line %q: %d fields for methods %v", l, len(f), methods)
			}
			for i, me := range methods {
				cells[strings.Join(append(f[:4:4], me), " ")] = f[4+i]
			}
		case methods != nil && len(cells) > 0 && l == "#":
			return cells
		}
	}
	t.Fatalf("no table in simulate's output:\n%s", out)
	return nil
}

// `longca report` on `longca simulate`'s folder showed every cell "predicted" (no rate),
// "Rows: 42 ok: 0 unsupported: 5" (counts that do not add up), every average "-", and a
// column per mesh (38). Now simulate's rows are values labelled predictions, grouped as
// simulate's table groups them: the same figure in every cell (each method's best mesh, the
// median over the mask samples), a column per method, and counts that add up; --against
// on them is one line, exit 2; --clocks one line; --plot draws simulate's scaling plots.
// In a folder with measured rows too, those keep the kernel table.
func TestReportOnSimulateRows(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "sim")
	sim := []string{"--log-level", "warn", "simulate", "--gpus", "4,8", "--masks", "causal,causal_document", "--samples", "2",
		"--tokens-per-rank", "1K", "--out", dir, "--run-id", "s"}
	simOut, errOut, code := captureRun(t, sim...)
	if code != 0 {
		t.Fatalf("%v: exit %d: %s", sim, code, errOut)
	}
	want := simTableCells(t, simOut)

	plots := filepath.Join(t.TempDir(), "plots")
	out, errOut, code := captureRun(t, "report", dir, "--plot", plots, "--clocks")
	if code != 0 {
		t.Fatalf("report: exit %d: %s", code, errOut)
	}
	if !strings.Contains(out, "longca simulate's predictions, not measurements: run s (machine h100-ib, kernel model fa3-h100), read from "+dir) {
		t.Errorf("no line says these are simulate's predictions:\n%s", out)
	}
	if !strings.Contains(out, "# --clocks: no row carries an SM clock") || strings.Contains(out, "SM clock range") {
		t.Errorf("--clocks on predictions: want one line, not a table of '-':\n%s", out)
	}
	// the rates table: header, units, data lines up to the first "#"
	var methods []string
	got := map[string]string{}
	inRates := false
	for _, l := range strings.Split(out, "\n") {
		switch {
		case !inRates && len(got) == 0 && strings.HasPrefix(l, "# mask"):
			f := strings.Fields(l)
			if f[1] != "mask" || f[2] != "pass" || f[3] != "heads" || f[4] != "GPUs" || f[5] != "seqlen" {
				t.Fatalf("rates table header %q", l)
			}
			methods, inRates = f[6:], true
		case inRates && strings.HasPrefix(l, "  "):
			f := strings.Fields(l)
			if len(f) != 5+len(methods) {
				t.Fatalf("data line %q: %d fields for %d methods", l, len(f), len(methods))
			}
			for i, me := range methods {
				got[strings.Join(append(f[:4:4], me), " ")] = f[5+i]
			}
		case inRates && l == "#":
			inRates = false
		}
		if strings.HasPrefix(l, "  ") && strings.Contains(l, " predicted") {
			t.Errorf("a data line shows the status predicted instead of a rate: %q", l)
		}
	}
	for _, me := range methods {
		if regexp.MustCompile(`-\d+x\d+`).MatchString(me) { // usp-2x2, loongtrain-4x2-w2: a column per mesh
			t.Errorf("column %s: want one column per method (its best mesh), header %v", me, methods)
		}
	}
	if len(got) != len(want) || len(got) == 0 {
		t.Fatalf("report has %d cells, simulate's table %d:\n%s", len(got), len(want), out)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s: report %q, simulate %q", k, got[k], v)
		}
	}
	m := regexp.MustCompile(`# Cases: (\d+)  Rows: (\d+)((?:  [a-z]+: \d+)+)  Avg TFLOP/s per GPU:`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("no counts line:\n%s", out)
	}
	rows, _ := strconv.Atoi(m[2])
	sum := 0
	for _, c := range regexp.MustCompile(`([a-z]+): (\d+)`).FindAllStringSubmatch(m[3], -1) {
		n, _ := strconv.Atoi(c[2])
		sum += n
	}
	if rows != 84 || sum != rows || !strings.Contains(m[3], "predicted: 84") || m[1] != "8" {
		t.Errorf("counts %q: want 8 cases and 84 rows, all predicted, adding up", m[0])
	}
	if !strings.Contains(out, "plots in "+plots) {
		t.Errorf("no plot line:\n%s", out)
	}
	scaling, _ := filepath.Glob(filepath.Join(plots, "*_scaling.png"))
	if len(scaling) != 4 { // (causal, causal_document) x (fwd, bwd)
		t.Errorf("scaling plots %v, want 4", scaling)
	}

	args := []string{"report", dir, "--against", "balanced"}
	_, errOut, code = captureRun(t, args...)
	checkUsageError(t, args, code, errOut, "--against balanced", "are longca simulate's predictions, not measurements", "--compare")

	// measured rows beside them: the kernel table of the measured only, then the predictions
	k := []string{"--log-level", "warn", "kernel", "--kernels", "ref", "--masks", "causal", "--seqlens", "64", "--heads", "2:1", "--head-dim", "8",
		"-w", "0", "-n", "1", "--passes", "fwd", "--out", dir, "--run-id", "k"}
	if _, errOut, code := captureRun(t, k...); code != 0 {
		t.Fatalf("%v: exit %d: %s", k, code, errOut)
	}
	out, errOut, code = captureRun(t, "report", dir)
	if code != 0 {
		t.Fatalf("report: exit %d: %s", code, errOut)
	}
	for _, w := range []string{"(85 rows in all: 1 measured, 84 of longca simulate's predictions", "# Cases: 1  Rows: 1  ok: 1", "longca simulate's predictions, not measurements: run s ("} {
		if !strings.Contains(out, w) {
			t.Errorf("mixed folder: no %q in:\n%s", w, out)
		}
	}
}

// --clocks over rows that read no SM clock (the CPU, or --gpu-state=false) printed a table
// of "-" in every cell; now one line says why there is none.
func TestReportClocksWithoutClock(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "k")
	args := []string{"--log-level", "warn", "kernel", "--kernels", "ref", "--masks", "causal,full", "--seqlens", "64,128", "--heads", "2:1", "--head-dim", "8",
		"-w", "0", "-n", "1", "--out", dir, "--run-id", "k"}
	if _, errOut, code := captureRun(t, args...); code != 0 {
		t.Fatalf("%v: exit %d: %s", args, code, errOut)
	}
	out, errOut, code := captureRun(t, "report", dir, "--clocks")
	if code != 0 {
		t.Fatalf("report --clocks: exit %d: %s", code, errOut)
	}
	if !strings.Contains(out, "# --clocks: no row carries an SM clock: rows from a CPU, or timed with --gpu-state=false\n") {
		t.Errorf("no one-line answer to --clocks:\n%s", out)
	}
	if strings.Contains(out, "SM clock range") || strings.Contains(out, "(MHz)") {
		t.Errorf("--clocks without clocks still prints the table:\n%s", out)
	}
}
