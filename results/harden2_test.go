package results

// Second hardening pass of the binary (docs/hardening.md): what a folder of results that
// cannot be used says.

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/longca/longca/internal/smallfile/fifotest"
)

// A folder none of whose files can be read is a usage error naming them, not an empty
// table (report printed "0 rows" and exited 0); one good file among bad ones still
// loads. A merge refused for missing ranks is ErrMissingRanks (longca merge: exit 2),
// and its text is unchanged.
func TestUnusableFolderIsNamed(t *testing.T) {
	dir := t.TempDir()
	for i, name := range []string{FileName("runA", 0, 2), FileName("runA", 1, 2), FileName("runB", 0, 1), FileName("runC", 0, 1), FileName("runD", 0, 1)} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte("garbage "+strings.Repeat("x", i)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	_, err := LoadChecked(dir)
	if !errors.Is(err, ErrUsage) || !strings.Contains(err.Error(), "none of the folder's 5 results file(s) can be read") ||
		!strings.Contains(err.Error(), FileName("runA", 0, 2)) || !strings.Contains(err.Error(), "and 2 more") {
		t.Errorf("a folder of garbage: %v", err)
	}
	_, err = Merge(dir, MergeOptions{})
	if !errors.Is(err, ErrMissingRanks) || errors.Is(err, ErrUsage) || !strings.HasSuffix(err.Error(), "(pass --allow-missing to merge anyway)") {
		t.Errorf("merge of a folder of garbage: %v; want ErrMissingRanks with the --allow-missing hint last", err)
	}
	writeRanks(t, dir, "good", 1, 2, 0)
	l, err := LoadChecked(dir)
	if err != nil || len(l.Rows) != 2 || len(l.Skipped) != 5 {
		t.Errorf("one good file among the garbage: %d rows, %d skipped, %v", len(l.Rows), len(l.Skipped), err)
	}
}

// A run id is used once: a folder holding the run's merged file, or its rank files of
// another world size, is refused before the run (CheckNewRun); the same size is left to
// Create, which refuses the rank's own file as a usage error (it was a plain "file
// exists", exit 1).
func TestRunIDUsedOnce(t *testing.T) {
	dir := t.TempDir()
	writeRanks(t, dir, "a", 1, 1, 0)
	if err := CheckNewRun(dir, "a", 1, false); err != nil {
		t.Errorf("same size: %v; want it left to Create", err)
	}
	_, err := Create(dir, "a", 0, 1)
	if !errors.Is(err, ErrUsage) || !strings.Contains(err.Error(), "a run id is used once") {
		t.Errorf("Create over rank 0's file: %v; want a usage error", err)
	}
	err = CheckNewRun(dir, "a", 2, false)
	if !errors.Is(err, ErrUsage) || !strings.Contains(err.Error(), "on 1 rank(s), and this run has 2") {
		t.Errorf("another size: %v", err)
	}
	if err := os.WriteFile(MergedPath(dir, "b"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := CheckNewRun(dir, "b", 1, false); !errors.Is(err, ErrUsage) || !strings.Contains(err.Error(), "b.merged.arrow exists") {
		t.Errorf("the run's merged file: %v", err)
	}
	if err := CheckNewRun(dir, "c", 4, false); err != nil {
		t.Errorf("a new run id: %v", err)
	}
	if err := CheckNewRun(filepath.Join(dir, "none"), "c", 4, false); err != nil {
		t.Errorf("a folder not made yet: %v", err)
	}
}

// Tenth hardening pass: a results path that is a FIFO (given by name, a rank file of a
// folder, or a shell's <(...)) is refused at once, not waited on in open(2) for good; a path
// that cannot be read is a usage error (exit 2), as the folder form was.
func TestPipesAndUnreadablePathsAreRefused(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, FileName("runF", 0, 1))
	fifotest.Make(t, fifo)
	for what, call := range map[string]func() error{
		"Open":        func() error { _, err := Open(fifo); return err },
		"LoadChecked": func() error { _, err := LoadChecked(dir); return err },
	} {
		err := fifotest.Within(t, what, 10*time.Second, call)
		if err == nil || !strings.Contains(err.Error(), "not a regular file") && !errors.Is(err, ErrUsage) {
			t.Errorf("%s of a FIFO: %v, want it refused as not a regular file", what, err)
		}
	}
	if _, err := Open(filepath.Join(dir, "gone.arrow")); !errors.Is(err, ErrUsage) || !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a missing file: %v, want a usage error wrapping ErrNotExist", err)
	}
}
