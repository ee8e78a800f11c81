package results

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// heapInUse is the live heap after a full collection.
func heapInUse() uint64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// A folder of many one-row rank files is read in memory proportional to its rows: each
// file is decoded, its rows kept compactly, and released before the next. Holding every
// decoded file took about 70 KB a file (2.3 GB for 20,000), whatever its rows; the rows
// returned then still held each file's Arrow buffers (their strings point into them:
// about 5 KB a file here, 1.7 KB with their own strings).
func TestLoadManySmallFilesKeepsRowsNotFiles(t *testing.T) {
	dir := t.TempDir()
	const n = 300
	for i := 0; i < n; i++ {
		writeRanks(t, dir, fmt.Sprintf("r%04d", i), 1, 1, 0)
	}
	before := heapInUse()
	l, err := LoadChecked(dir)
	if err != nil {
		t.Fatal(err)
	}
	held := int64(heapInUse()) - int64(before)
	if len(l.Rows) != n {
		t.Fatalf("%d rows, want %d", len(l.Rows), n)
	}
	if per := held / n; per > 3<<10 {
		t.Fatalf("LoadChecked of %d one-row files holds %d bytes a file (%d in all): its files' decoders, not just its rows", n, per, held)
	}
	runtime.KeepAlive(l)
}

// A rank file written by Write has one row a batch: Open joins them, so that a file of many rows does not
// hold one set of Arrow objects for each (a 150 MB file of 20,000 rows took 1.3 GB).
func TestOpenJoinsARankFilesBatches(t *testing.T) {
	dir := t.TempDir()
	writeRanks(t, dir, "big", 1, 1000, 0)
	f, err := Open(filepath.Join(dir, "big.rank-0-of-1.arrow"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Release()
	if f.NumRows() != 1000 {
		t.Fatalf("%d rows, want 1000", f.NumRows())
	}
	if want := (1000 + compactBatches - 1) / compactBatches; len(f.Batches) > want {
		t.Fatalf("%d batches held for 1000 rows, want at most %d", len(f.Batches), want)
	}
	rows, err := f.Rows()
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range rows {
		if r.Sample != int64(i) {
			t.Fatalf("row %d is sample %d: the joined batches lost the order", i, r.Sample)
		}
	}
}

// Merge's columns are joined as the files come: what it holds before writing is a few
// chunks, not every file's batches; the merged file is the same.
func TestMergeManySmallFilesJoinsColumns(t *testing.T) {
	dir := t.TempDir()
	const n = 600
	for i := 0; i < n; i++ {
		writeRanks(t, dir, fmt.Sprintf("r%04d", i), 1, 1, 0)
	}
	rows := mergeHoldingFewChunks(t, dir, n)
	for i, r := range rows {
		if want := fmt.Sprintf("r%04d", i); r.RunID != want {
			t.Fatalf("row %d is of run %s, want %s", i, r.RunID, want)
		}
	}
}

// mergeHoldingFewChunks collects dir's n one-row files as Merge does, requires what it
// holds to be a few joined chunks (not a batch a file), then merges dir and returns the
// merged rows, n of them.
func mergeHoldingFewChunks(t *testing.T, dir string, n int) []Row {
	t.Helper()
	c, err := collect(dir, nil, func() keeper { return &columnKeeper{} })
	if err != nil {
		t.Fatal(err)
	}
	defer c.release()
	k := c.kept.(*columnKeeper)
	if len(k.gather.joined) > n/compactBatches || len(k.gather.pending) >= compactBatches || k.gather.rows != int64(n) {
		t.Fatalf("%d chunks and %d batches held for %d rows (%d files), want at most %d and %d", len(k.gather.joined), len(k.gather.pending), k.gather.rows, n, n/compactBatches, compactBatches-1)
	}
	res, err := Merge(dir, MergeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	rows, err := Load(res.Files[0])
	if err != nil || len(rows) != n {
		t.Fatalf("merged %d rows (%v), want %d", len(rows), err, n)
	}
	return rows
}

// A folder of more rank files than longca reads of one is refused with one line naming
// the folder, the count and the fix, before any file is opened.
func TestScanRefusesTooManyRankFiles(t *testing.T) {
	dir := t.TempDir()
	old := maxFolderFiles
	maxFolderFiles = 5
	defer func() { maxFolderFiles = old }()
	for i := 0; i < 6; i++ {
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("r.rank-%d-of-6.arrow", i)), []byte("junk"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for name, err := range map[string]error{
		"merge":  func() error { _, err := Merge(dir, MergeOptions{}); return err }(),
		"report": func() error { _, err := LoadChecked(dir); return err }(),
	} {
		if !errors.Is(err, ErrUsage) || !strings.Contains(err.Error(), dir+" holds 6 rank files") || !strings.Contains(err.Error(), "more than the 5") || !strings.Contains(err.Error(), "folders of their own") || strings.Contains(err.Error(), "\n") {
			t.Errorf("%s: %v", name, err)
		}
	}
}

// A folder whose read is estimated at more memory than the host leaves is refused with
// one line naming it, the estimate and the fix, before any file is opened.
func TestCollectRefusesWhatDoesNotFit(t *testing.T) {
	dir := t.TempDir()
	for i := 0; i < 10; i++ {
		writeRanks(t, dir, fmt.Sprintf("r%d", i), 1, 1, 0)
	}
	old := HostBytes
	HostBytes = func() float64 { return 100 << 10 }
	defer func() { HostBytes = old }()
	for name, err := range map[string]error{
		"merge":  func() error { _, err := Merge(dir, MergeOptions{}); return err }(),
		"report": func() error { _, err := LoadChecked(dir); return err }(),
	} {
		if !errors.Is(err, ErrUsage) || !strings.Contains(err.Error(), "reading its 10 rank files") || !strings.Contains(err.Error(), "of memory, more than the 85 KiB") || !strings.Contains(err.Error(), "--run ID") {
			t.Errorf("%s: %v", name, err)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "merged.arrow")); err == nil {
		t.Error("a refused merge wrote its output")
	}
	HostBytes = old
	if _, err := Merge(dir, MergeOptions{}); err != nil {
		t.Fatalf("with the host's memory: %v", err)
	}
}

// An error line over many runs names the first few and a count, not every run.
func TestMergeErrorOfManyRunsIsShort(t *testing.T) {
	dir := t.TempDir()
	const n = 200
	for i := 0; i < n; i++ {
		writeRanks(t, dir, fmt.Sprintf("run%04d", i), 2, 1, 0) // rank 1 of 2 missing in each
	}
	_, err := Merge(dir, MergeOptions{})
	if !errors.Is(err, ErrMissingRanks) || !strings.Contains(err.Error(), "run run0000: rank 1 of 2 missing") || !strings.Contains(err.Error(), "and 190 more") || len(err.Error()) > 2000 {
		t.Fatalf("%d bytes: %.3000v", len(err.Error()), err)
	}
	_, err = Merge(dir, MergeOptions{Runs: []string{"nosuch"}})
	if !errors.Is(err, ErrUsage) || !strings.Contains(err.Error(), "and 190 more (200 runs)") || len(err.Error()) > 2000 {
		t.Fatalf("%d bytes: %.3000v", len(err.Error()), err)
	}
}
