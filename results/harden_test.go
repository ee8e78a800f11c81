package results

// Tests of issue 23, items 7 to 13: merged and exported files.

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestWritesAreAtomic (item 7): while a merged or exported file is being written, its
// name still holds the old file (a kill then leaves it whole; the issue: a 6-byte
// merged.arrow); a write that fails midway (a full disk) leaves the old file and no
// temporary file behind.
func TestWritesAreAtomic(t *testing.T) {
	dir := t.TempDir()
	writeRanks(t, dir, "runA", 2, 3, 0, 1)
	res, err := Merge(dir, MergeOptions{Parquet: true, CSV: true})
	if err != nil {
		t.Fatal(err)
	}
	for _, path := range res.Files {
		good, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		err = writeVia(path, func(f *os.File) error {
			f.Write([]byte("ARROW1"))
			if now, _ := os.ReadFile(path); !bytes.Equal(now, good) {
				t.Errorf("%s: mid-write, its name holds %d bytes, not the old file's %d", path, len(now), len(good))
			}
			return syscall.ENOSPC
		})
		if !errors.Is(err, syscall.ENOSPC) {
			t.Errorf("%s: a failing write returned %v", path, err)
		}
		if now, _ := os.ReadFile(path); !bytes.Equal(now, good) {
			t.Errorf("%s: after a failed write it holds %d bytes, not the old file's %d", path, len(now), len(good))
		}
	}
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		if strings.Contains(e.Name(), ".tmp-") {
			t.Errorf("a failed write left %s", e.Name())
		}
	}
	if _, err := Open(res.Files[0]); err != nil {
		t.Errorf("the merged file after failed rewrites: %v", err)
	}
}

// TestMergeRefusesToOverwriteInputs (item 8): --out named like any rank file, or that is
// one of the inputs under another name, is refused before anything is written (the
// issue: `merge o --out o/c.rank-0-of-2.arrow` replaced rank 0's file).
func TestMergeRefusesToOverwriteInputs(t *testing.T) {
	dir := t.TempDir()
	writeRanks(t, dir, "c", 2, 3, 0, 1)
	rank0 := filepath.Join(dir, FileName("c", 0, 2))
	before, _ := os.ReadFile(rank0)
	link := filepath.Join(dir, "alias.arrow")
	if err := os.Symlink(rank0, link); err != nil {
		t.Fatal(err)
	}
	for _, out := range []string{rank0, filepath.Join(dir, FileName("other", 3, 4)), link} {
		_, err := Merge(dir, MergeOptions{Out: out})
		if !errors.Is(err, ErrUsage) || !strings.Contains(err.Error(), "--out") {
			t.Errorf("--out %s: %v; want it refused", out, err)
		}
	}
	if after, _ := os.ReadFile(rank0); !bytes.Equal(before, after) {
		t.Error("rank 0's file changed")
	}
}

// TestRunsKeepTheirMergedFiles (item 9): two runs in one folder merged by run id keep
// both merged files; a folder whose merged.arrow lacks a run whose rank files are there
// is read from the rank files, saying so (the issue: report showed 2 rows of 4).
func TestRunsKeepTheirMergedFiles(t *testing.T) {
	dir := t.TempDir()
	writeRanks(t, dir, "r1", 2, 1, 0, 1)
	if _, err := Merge(dir, MergeOptions{Runs: []string{"r1"}}); err != nil { // a stale merged.arrow of r1
		t.Fatal(err)
	}
	writeRanks(t, dir, "r2", 2, 1, 0, 1)
	for _, run := range []string{"r1", "r2"} {
		res, err := Merge(dir, MergeOptions{Runs: []string{run}, Out: MergedPath(dir, run)})
		if err != nil || res.Rows != 2 || filepath.Base(res.Files[0]) != run+".merged.arrow" {
			t.Fatalf("merge of %s: %+v, %v", run, res, err)
		}
	}
	l, err := LoadChecked(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(l.Rows) != 4 || !strings.Contains(strings.Join(l.Skipped, ";"), "lacks run(s) r2") {
		t.Errorf("folder with a merged.arrow of r1 only: %d rows, skipped %q; want 4 rows and the reason", len(l.Rows), l.Skipped)
	}
}

// TestMergeIgnoresStrayRunFiles (item 10): a stray file named like another run's rank
// file (a copy, renamed) does not break a plain merge of the folder's real run (the
// issue: exit 1, "rank 0 of 1 missing"); asked for by --run, it is still an error.
func TestMergeIgnoresStrayRunFiles(t *testing.T) {
	dir := t.TempDir()
	writeRanks(t, dir, "real", 2, 3, 0, 1)
	b, _ := os.ReadFile(filepath.Join(dir, FileName("real", 0, 2)))
	if err := os.WriteFile(filepath.Join(dir, FileName("stray", 0, 1)), b, 0o644); err != nil {
		t.Fatal(err)
	}
	res, err := Merge(dir, MergeOptions{})
	if err != nil || res.Rows != 6 || len(res.Runs) != 1 || res.Runs[0] != "real" || !strings.Contains(strings.Join(res.Skipped, ";"), FileName("stray", 0, 1)) {
		t.Errorf("merge with a stray file: %+v, %v; want run real merged and the stray skipped", res, err)
	}
	if _, err := Merge(dir, MergeOptions{Runs: []string{"stray"}}); err == nil {
		t.Error("merge --run stray succeeded")
	}
}

// TestOpenRejectsForeignBytesFirst (item 11): a 3 GB file that is not Arrow is refused
// from its first bytes, at once (the issue: report read all 3.1 GB, 11 s, first).
func TestOpenRejectsForeignBytesFirst(t *testing.T) {
	path := filepath.Join(t.TempDir(), FileName("x", 0, 1))
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString("#!/bin/sh\necho not arrow\n")
	if err := f.Truncate(3 << 30); err != nil { // sparse: no disk used
		t.Fatal(err)
	}
	f.Close()
	start := time.Now()
	_, err = Open(path)
	if !errors.Is(err, ErrNotResults) || !strings.Contains(err.Error(), "first bytes") {
		t.Errorf("Open of a 3 GB shell script: %v", err)
	}
	if el := time.Since(start); el > 500*time.Millisecond {
		t.Errorf("took %s to refuse it", el)
	}
}

// TestRequestErrorsAreUsage (item 12): an empty folder (merge and report), a run the
// folder does not hold, and an output folder that cannot be written are ErrUsage (exit
// status 2 at the CLI), and no merge reads its inputs before finding the output bad.
func TestRequestErrorsAreUsage(t *testing.T) {
	empty := t.TempDir()
	dir := t.TempDir()
	writeRanks(t, dir, "a", 1, 1, 0)
	_, errLoad := LoadChecked(empty)
	_, errNoRun := Merge(dir, MergeOptions{Runs: []string{"nosuch"}})
	_, errMerge := Merge(empty, MergeOptions{})
	_, errNoDir := Merge(dir, MergeOptions{Out: filepath.Join(dir, "no", "such", "m.arrow")})
	_, errRO := Merge(dir, MergeOptions{Out: "/sys/m.arrow"}) // read-only even for root
	for name, err := range map[string]error{"report EMPTYDIR": errLoad, "merge EMPTYDIR": errMerge, "merge --run nosuch": errNoRun, "merge --out in a missing folder": errNoDir, "merge --out in a read-only folder": errRO} {
		if !errors.Is(err, ErrUsage) {
			t.Errorf("%s: %v; want a usage error", name, err)
		}
	}
	if !strings.Contains(errNoRun.Error(), "a (1 of 1 ranks)") {
		t.Errorf("merge --run nosuch does not list the runs: %v", errNoRun)
	}
}

// TestNullabilityIsDocumented (item 13): a column's row in docs/results-format.md says
// *null* exactly when the schema lets it be null (the issue: device_index).
func TestNullabilityIsDocumented(t *testing.T) {
	b, err := os.ReadFile("../docs/results-format.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, fd := range Schema(nil).Fields() {
		m := regexp.MustCompile("(?m)^\\| `" + regexp.QuoteMeta(fd.Name) + "` \\| ([^|]*)\\|").FindSubmatch(b)
		if m == nil {
			continue // TestEveryColumnIsDocumented says so
		}
		if says := strings.Contains(string(m[1]), "*null*"); says != fd.Nullable {
			t.Errorf("column %s: the docs give type %q, the schema has nullable=%v", fd.Name, strings.TrimSpace(string(m[1])), fd.Nullable)
		}
	}
}
