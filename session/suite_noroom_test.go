package session

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/longca/longca/harness"
	"github.com/longca/longca/internal/smallfile"
	"github.com/longca/longca/internal/smallfile/fulltest"
	"github.com/longca/longca/present"
	"github.com/longca/longca/results"
	"github.com/longca/longca/spmd"
)

// fillDiskAt makes run's writes after the sweep find a full disk from the one whose path
// full says on (the writes go through the real smallfile.WriteWhole, their bytes cut
// short); without full, the plots do too.
func fillDiskAt(t *testing.T, full func(path string) bool, plots bool) {
	t.Helper()
	oldWhole, oldPlots := writeWhole, writePlots
	t.Cleanup(func() { writeWhole, writePlots = oldWhole, oldPlots })
	filled := false
	writeWhole = func(path string, fill func(io.Writer) error) error {
		if filled = filled || full(path); !filled {
			return smallfile.WriteWhole(path, fill)
		}
		return smallfile.WriteWhole(path, func(w io.Writer) error { return fill(&fulltest.Writer{W: w, N: 10}) })
	}
	if plots {
		writePlots = func(string, present.Summary) (int, error) {
			return 0, &os.PathError{Op: "write", Path: "x.png", Err: syscall.ENOSPC}
		}
	}
}

// runSmoke runs a part of the smoke suite (8 cases) as `longca run` does, into dir as run r.
func runSmoke(t *testing.T, dir string) (*Session, int, error) {
	t.Helper()
	st, err := harness.StandardSuite("smoke")
	if err != nil {
		t.Fatal(err)
	}
	st.Sweep.Masks = []string{"causal", "causal_document"}
	k := KernelSweep{Sweep: st.Sweep, Build: st.Build, Warmup: st.Warmup, Iters: st.Iters, CheckBudget: st.CheckBudget}
	s := New("kernel", dir, "r", spmd.World{Size: 1, Launcher: "single"}, "dev", nil, io.Discard, io.Discard)
	return s, len(st.Sweep.Cases()), s.Suite(context.Background(), "smoke", k, false)
}

// leftovers is every empty or temporary file under dir.
func leftovers(t *testing.T, dir string) []string {
	t.Helper()
	var bad []string
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		st, err := d.Info()
		if err != nil {
			return err
		}
		if st.Size() == 0 || strings.Contains(d.Name(), ".tmp-") {
			bad = append(bad, p)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return bad
}

// checkNoRoom checks that err is run's usage error (exit 2) for a disk that filled after a
// complete sweep: every row is in, and the line says what to run to finish (wants), not to
// measure again.
func checkNoRoom(t *testing.T, err error, s *Session, cases int, wants, not []string) {
	t.Helper()
	var u *UsageError
	if !errors.As(err, &u) || u.ExitCode() != 2 {
		t.Fatalf("a full disk after the sweep: %v (%T); want a usage error, exit 2", err, err)
	}
	file := filepath.Join(s.Out, "r.rank-0-of-1.arrow")
	msg := err.Error()
	for _, w := range append([]string{"--out " + s.Out + ": no space left on device", "every row is in",
		"all 8 cases were measured and their 8 row(s) are in " + file, "make room"}, wants...) {
		if !strings.Contains(msg, w) {
			t.Errorf("the message does not say %q:\n%s", w, msg)
		}
	}
	for _, w := range append([]string{"run again", "measured before"}, not...) {
		if strings.Contains(msg, w) {
			t.Errorf("the message says %q:\n%s", w, msg)
		}
	}
	rows, _, rerr := results.ReadRows(file)
	if rerr != nil || len(rows) != cases {
		t.Errorf("%s: %d rows (%v); want all %d", file, len(rows), rerr, cases)
	}
	if bad := leftovers(t, s.Out); len(bad) > 0 {
		t.Errorf("empty or temporary files left: %v", bad)
	}
}

// A disk that fills after the sweep measured every case: `run` told the user that "the 8
// row(s) measured before" were kept and to run again under another --run-id, and left a
// 0-byte mask JSON. Now it says every row is in and how to finish (merge, report), exit 2
// still; each file it writes after the sweep is whole or not there.
func TestRunFullDiskAfterTheSweep(t *testing.T) {
	t.Run("masks", func(t *testing.T) {
		dir := filepath.Join(t.TempDir(), "out")
		n := 0
		fillDiskAt(t, func(p string) bool { n++; return n == 3 }, true) // the third mask JSON
		s, cases, err := runSmoke(t, dir)
		merged := filepath.Join(dir, "r.merged.arrow")
		checkNoRoom(t, err, s, cases, []string{
			"not written: the mask JSONs in " + filepath.Join(dir, "masks"), "r.merged.arrow, r.report.txt, r.plots",
			"`longca merge " + dir + " --run r --out " + merged + " && longca report " + merged + " --plot " + filepath.Join(dir, "r.plots") + " > " + filepath.Join(dir, "r.report.txt") + "`",
		}, nil)
		js, _ := filepath.Glob(filepath.Join(dir, "masks", "*"))
		if len(js) != 2 {
			t.Errorf("masks/ holds %v; want the two JSONs written before the disk filled", js)
		}
		for _, j := range js {
			if b, err := os.ReadFile(j); err != nil || !json.Valid(b) {
				t.Errorf("%s is not whole JSON: %v %q", j, err, b)
			}
		}
		if _, err := os.Stat(merged); !os.IsNotExist(err) {
			t.Errorf("%s: %v; want none", merged, err)
		}
	})
	t.Run("report", func(t *testing.T) {
		dir := filepath.Join(t.TempDir(), "out")
		fillDiskAt(t, func(p string) bool { return strings.HasSuffix(p, ".report.txt") }, true)
		s, cases, err := runSmoke(t, dir)
		merged := filepath.Join(dir, "r.merged.arrow")
		checkNoRoom(t, err, s, cases, []string{"not written: r.report.txt, r.plots",
			"`longca report " + merged + " --plot " + filepath.Join(dir, "r.plots") + " > " + filepath.Join(dir, "r.report.txt") + "`"},
			[]string{"longca merge", "mask JSONs"})
		if rows, _, err := results.ReadRows(merged); err != nil || len(rows) != cases {
			t.Errorf("%s: %d rows, %v", merged, len(rows), err)
		}
		if _, err := os.Stat(filepath.Join(dir, "r.report.txt")); !os.IsNotExist(err) {
			t.Errorf("r.report.txt: %v; want none (not a cut one)", err)
		}
	})
	t.Run("plots", func(t *testing.T) {
		dir := filepath.Join(t.TempDir(), "out")
		fillDiskAt(t, func(string) bool { return false }, true)
		s, cases, err := runSmoke(t, dir)
		checkNoRoom(t, err, s, cases, []string{"not written: r.plots",
			"`longca report " + filepath.Join(dir, "r.merged.arrow") + " --plot " + filepath.Join(dir, "r.plots") + "`"},
			[]string{"longca merge", "> "})
		if b, err := os.ReadFile(filepath.Join(dir, "r.report.txt")); err != nil || !strings.Contains(string(b), "run r,") {
			t.Errorf("r.report.txt: %v\n%s", err, b)
		}
	})
}

// A sweep stopped early (Ctrl-C, a worker failure) and then a full disk: the rows measured
// are named as such, with both ways on: measure again, or finish with these rows.
func TestRunFullDiskAfterAStoppedSweep(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "o u t")
	s := New("kernel", dir, "r", spmd.World{Size: 1}, "dev", nil, io.Discard, io.Discard)
	a := afterSweep{s: s, rows: 4, cases: 12, file: filepath.Join(dir, "r.rank-0-of-1.arrow"), stopped: context.Canceled,
		merged: results.MergedPath(dir, "r")}
	err := a.noRoom(&os.PathError{Op: "write", Path: "x", Err: syscall.EDQUOT}, wroteMasks)
	var u *UsageError
	if !errors.As(err, &u) {
		t.Fatalf("%v (%T); want a usage error", err, err)
	}
	for _, w := range []string{"the 4 row(s) measured before are in " + a.file + " (4 of 12 cases: stopped early: interrupted)",
		"not written: r.merged.arrow, r.report.txt, r.plots", "run again under another --run-id",
		"`longca merge '" + dir + "' --run r --out '" + a.merged + "' && longca report '" + a.merged + "'"} {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("the message does not say %q:\n%s", w, err)
		}
	}
	if strings.Contains(err.Error(), "every row is in") {
		t.Errorf("a stopped sweep's message says every row is in:\n%s", err)
	}
	other := errors.New("something else")
	if got := a.noRoom(other, wroteMasks); got != other {
		t.Errorf("an error other than no room: %v; want it as it was", got)
	}
}
