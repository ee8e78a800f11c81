package results

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
)

// liveRow is row i of run id's rank r of n.
func liveRow(id string, r, n, i int) Row {
	return Row{RunID: id, Rank: int64(r), WorldSize: int64(n), Sample: int64(i), Mask: "causal",
		SeqLen: int64(256 * (i + 1)), FLOPs: 1, Status: StatusOK, TFLOPs: Ptr(1.5)}
}

// writeLive writes rows [from, to) of w's file.
func writeLive(t *testing.T, w *Writer, id string, r, n, from, to int) {
	t.Helper()
	for i := from; i < to; i++ {
		if err := w.Write(liveRow(id, r, n, i)); err != nil {
			t.Fatal(err)
		}
	}
}

// TestMergedWhileWritingIsPassedOver (probe s41 F1): `longca merge DIR` run while a run
// was writing made DIR/merged.arrow of the rows so far, marked truncated; after the run
// finished, report DIR still read it (5 of 12 rows) and said the writer "was cut short".
// The merged file records its rank files' sizes, and a folder's merged file whose rank
// file has grown since is passed over for the rank files (all the rows, none truncated),
// saying so; given by name it is read as it is, saying it is out of date, and the writer
// that went on is not called cut short. A merge made after the run stands for the folder.
func TestMergedWhileWritingIsPassedOver(t *testing.T) {
	dir := t.TempDir()
	w, err := Create(dir, "live", 0, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	writeLive(t, w, "live", 0, 1, 0, 2)
	res, err := Merge(dir, MergeOptions{})
	if err != nil || res.Rows != 2 || len(res.Truncated) != 1 {
		t.Fatalf("merge while writing: %+v, %v; want 2 rows and the rank file truncated", res, err)
	}
	if _, ok := res.Recent[res.Truncated[0]]; !ok {
		t.Errorf("merge while writing: Recent %v lacks %q, written an instant ago", res.Recent, res.Truncated[0])
	}
	merged := res.Files[0]

	// While nothing more is written, the merged file stands for the folder.
	l, err := LoadChecked(dir)
	if err != nil || len(l.Rows) != 2 || l.Stale != "" || len(l.Truncated) != 1 {
		t.Fatalf("report of the folder just merged: %d rows, stale %q, truncated %q, %v; want the merged file's 2 rows, truncated", len(l.Rows), l.Stale, l.Truncated, err)
	}
	if _, ok := l.Recent[l.Truncated[0]]; !ok {
		t.Errorf("report of the folder just merged: Recent %v lacks %q", l.Recent, l.Truncated[0])
	}

	writeLive(t, w, "live", 0, 1, 2, 5)
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	l, err = LoadChecked(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(l.Rows) != 5 || len(l.Truncated) != 0 {
		t.Errorf("report of the folder after the run finished: %d rows, truncated %q; want the rank file's 5 rows, none truncated", len(l.Rows), l.Truncated)
	}
	for _, want := range []string{merged, "out of date", "run live: rank 0 of 1 is ", "longca merge " + dir} {
		if !strings.Contains(l.Stale, want) {
			t.Errorf("report of the folder after the run finished: Stale %q lacks %q", l.Stale, want)
		}
	}

	l, err = LoadChecked(merged)
	if err != nil || len(l.Rows) != 2 || len(l.Truncated) != 0 || !strings.Contains(l.Stale, "out of date") {
		t.Errorf("report of the stale merged file by name: %d rows, truncated %q, stale %q, %v; want its 2 rows, said out of date, its writer not called cut short", len(l.Rows), l.Truncated, l.Stale, err)
	}

	if _, err := Merge(dir, MergeOptions{}); err != nil {
		t.Fatal(err)
	}
	l, err = LoadChecked(dir)
	if err != nil || len(l.Rows) != 5 || l.Stale != "" || len(l.Truncated) != 0 || len(l.Skipped) != 0 {
		t.Errorf("report after merging again: %d rows, stale %q, truncated %q, skipped %q, %v; want the merged file's 5 rows", len(l.Rows), l.Stale, l.Truncated, l.Skipped, err)
	}
}

// TestMergedFileAndRankChanges: a rank file that appeared since a merge with
// --allow-missing makes the merged file out of date; a rank file deleted since does not
// (the merged file holds its rows); a rank file of another run is the older rule's (the
// merged file lacks the run).
func TestMergedFileAndRankChanges(t *testing.T) {
	dir := t.TempDir()
	writeRanks(t, dir, "r", 3, 2, 0, 1)
	if _, err := Merge(dir, MergeOptions{AllowMissing: true}); err != nil {
		t.Fatal(err)
	}
	os.Remove(filepath.Join(dir, FileName("r", 0, 3)))
	if l, err := LoadChecked(dir); err != nil || len(l.Rows) != 4 || l.Stale != "" {
		t.Errorf("rank 0 deleted after the merge: %d rows, stale %q, %v; want the merged file's 4 rows", len(l.Rows), l.Stale, err)
	}
	writeRanks(t, dir, "r", 3, 2, 2)
	l, err := LoadChecked(dir)
	if err != nil || len(l.Rows) != 4 || !strings.Contains(l.Stale, "run r: rank 2 of 3 was written since") {
		t.Errorf("rank 2 written after the merge: %d rows, stale %q, %v; want the rank files' 4 rows (ranks 1, 2) and rank 2 named", len(l.Rows), l.Stale, err)
	}
}

// TestMergedFileWithoutSizes: a merged file of an older longca records no sizes; it is
// passed over when a rank file of its runs was written after it, and read otherwise.
func TestMergedFileWithoutSizes(t *testing.T) {
	dir := t.TempDir()
	w, err := Create(dir, "old", 0, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	writeLive(t, w, "old", 0, 1, 0, 2)
	res, err := Merge(dir, MergeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	merged := res.Files[0]
	stripMeta(t, merged, MetaRankBytes)
	writeLive(t, w, "old", 0, 1, 2, 4)
	w.Close()
	rank := filepath.Join(dir, FileName("old", 0, 1))
	past := time.Now().Add(-time.Hour)
	os.Chtimes(rank, past, past) // written before the merged file
	if l, err := LoadChecked(dir); err != nil || len(l.Rows) != 2 || l.Stale != "" {
		t.Errorf("older merged file, newer than its rank file: %d rows, stale %q, %v; want its 2 rows", len(l.Rows), l.Stale, err)
	}
	os.Chtimes(merged, past.Add(-time.Minute), past.Add(-time.Minute))
	l, err := LoadChecked(dir)
	if err != nil || len(l.Rows) != 4 || !strings.Contains(l.Stale, "records no rank file sizes") || !strings.Contains(l.Stale, "run old: rank 0 of 1 was written after it") {
		t.Errorf("older merged file, older than its rank file: %d rows, stale %q, %v; want the rank file's 4 rows, and why", len(l.Rows), l.Stale, err)
	}
}

// stripMeta rewrites the Arrow file at path without the metadata key (as a longca before
// it wrote the file).
func stripMeta(t *testing.T, path, key string) {
	t.Helper()
	f, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Release()
	md := f.Schema.Metadata()
	keep := map[string]string{}
	for i, k := range md.Keys() {
		if k != key {
			keep[k] = md.Values()[i]
		}
	}
	rec, err := concat(f.Schema, keep, f.Batches, f.NumRows())
	if err != nil {
		t.Fatal(err)
	}
	defer rec.Release()
	if err := WriteArrowFile(path, rec); err != nil {
		t.Fatal(err)
	}
}

// TestTruncatedWriterRecentOrCutShort: a rank file without its end marker written to an
// instant ago may be a writer still going (Recent, with its age); one untouched for longer
// than RecentWrite was cut short. Merge, a folder's report (from the rank files, and from a
// merged file), and a rank file given by name say the same.
func TestTruncatedWriterRecentOrCutShort(t *testing.T) {
	dir := t.TempDir()
	w, err := Create(dir, "t", 0, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	writeLive(t, w, "t", 0, 1, 0, 2)
	rank := filepath.Join(dir, FileName("t", 0, 1))
	line := "run t: rank 0 of 1"
	for _, c := range []struct {
		age    time.Duration
		recent bool
	}{{0, true}, {RecentWrite - time.Minute, true}, {RecentWrite + time.Minute, false}} {
		when := time.Now().Add(-c.age)
		if err := os.Chtimes(rank, when, when); err != nil {
			t.Fatal(err)
		}
		os.Remove(filepath.Join(dir, "merged.arrow"))
		l, err := LoadChecked(dir)
		if _, ok := l.Recent[line]; err != nil || !slices.Contains(l.Truncated, line) || ok != c.recent {
			t.Errorf("rank file last written %s ago, read from the folder: truncated %q, recent %v, %v; want recent %v", c.age, l.Truncated, l.Recent, err, c.recent)
		}
		res, err := Merge(dir, MergeOptions{})
		if _, ok := res.Recent[line]; err != nil || ok != c.recent {
			t.Errorf("rank file last written %s ago, merged: recent %v, %v; want %v", c.age, res.Recent, err, c.recent)
		}
		l, err = LoadChecked(dir) // through the merged file
		if _, ok := l.Recent[line]; err != nil || l.Stale != "" || !slices.Contains(l.Truncated, line) || ok != c.recent {
			t.Errorf("rank file last written %s ago, read through merged.arrow: truncated %q, recent %v, stale %q, %v; want recent %v", c.age, l.Truncated, l.Recent, l.Stale, err, c.recent)
		}
		l, err = LoadChecked(rank)
		if err != nil || len(l.Truncated) != 1 {
			t.Fatalf("rank file by name: truncated %q, %v", l.Truncated, err)
		}
		if _, ok := l.Recent[l.Truncated[0]]; ok != c.recent {
			t.Errorf("rank file last written %s ago, by name: recent %v; want %v", c.age, l.Recent, c.recent)
		}
	}
}

// TestMergeRemovesStaleTempFiles (probe s41 F9): a merge killed with SIGKILL mid-write left
// ".merged.arrow.tmp-N" (and .parquet, .csv) files that no later merge removed. A merge
// removes those of the names it writes (whether or not it writes the export this time)
// that no process holds locked and that are older than tempGrace; a fresh one, one a live
// writer holds, and files of other names are left.
func TestMergeRemovesStaleTempFiles(t *testing.T) {
	dir := t.TempDir()
	writeRanks(t, dir, "a", 1, 2, 0)
	old := time.Now().Add(-2 * tempGrace)
	mk := func(name string, aged bool) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte("partial"), 0o600); err != nil {
			t.Fatal(err)
		}
		if aged {
			os.Chtimes(p, old, old)
		}
		return p
	}
	gone := []string{mk(".merged.arrow.tmp-1234", true), mk(".merged.csv.tmp-99", true), mk(".merged.parquet.tmp-7", true), mk(mergeProbe+"42", true)}
	kept := []string{
		mk(".merged.arrow.tmp-555", false), // a writer may have made it an instant ago
		mk(".merged.arrow.tmp-x1", true),   // not a name os.CreateTemp makes
		mk(".other.arrow.tmp-1", true),     // another file's
		mk(".merged.arrow.tmp-", true),
	}
	held := mk(".merged.csv.tmp-8", true) // a live writer's: locked
	lock, err := os.Open(held)
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		t.Skipf("no flock on this file system: %v", err)
	}
	kept = append(kept, held)
	if _, err := Merge(dir, MergeOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, p := range gone {
		if _, err := os.Stat(p); err == nil {
			t.Errorf("%s (a killed writer's, %s old) is still there after a merge", filepath.Base(p), 2*tempGrace)
		}
	}
	for _, p := range kept {
		if _, err := os.Stat(p); err != nil {
			t.Errorf("%s was removed by a merge: %v", filepath.Base(p), err)
		}
	}
}

// TestWriteViaLocksItsTempFile: while writeVia's fill runs, its temporary file is locked
// (a merge beside it leaves it, however old), and nothing is left after.
func TestWriteViaLocksItsTempFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "merged.csv")
	var tmp string
	err := writeVia(path, func(f *os.File) error {
		tmp = f.Name()
		old := time.Now().Add(-2 * tempGrace)
		os.Chtimes(tmp, old, old)
		if removed := removeStaleTemps(path); len(removed) != 0 {
			t.Errorf("a live write's temporary file was removed: %q", removed)
		}
		_, err := f.WriteString("x\n")
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(tmp); err == nil {
		t.Errorf("%s left after the write", tmp)
	}
	if b, err := os.ReadFile(path); err != nil || string(b) != "x\n" {
		t.Errorf("%s holds %q, %v", path, b, err)
	}
}

// TestRankBytesIsDocumented: the merged file's record of its rank files' sizes is in the
// metadata table of docs/results-format.md.
func TestRankBytesIsDocumented(t *testing.T) {
	b, err := os.ReadFile("../docs/results-format.md")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), "| `"+MetaRankBytes+"` |") {
		t.Errorf("metadata key %s has no row in docs/results-format.md", MetaRankBytes)
	}
}

// TestRemoveStaleTempsOfLongNames: a killed writer's temporary file of a name over 239 bytes
// (smallfile.Replace cuts the name in its temporary file's, so ".tmp-" and digits fit in
// 255 bytes) is removed as a shorter name's is; it was not known as the name's, so it stayed
// through every later merge.
func TestRemoveStaleTempsOfLongNames(t *testing.T) {
	dir := t.TempDir()
	for _, n := range []int{200, 239, 240, 250, 255} {
		path := filepath.Join(dir, strings.Repeat("m", n-len(".arrow"))+".arrow")
		var tmp string
		err := writeVia(path, func(f *os.File) error {
			tmp = f.Name()
			return errors.New("killed")
		})
		if err == nil || tmp == "" {
			t.Fatalf("%d-byte name: no temporary file made: %v", n, err)
		}
		// what a SIGKILL leaves: the temporary file, unlocked, older than tempGrace
		if err := os.WriteFile(tmp, []byte("partial"), 0o600); err != nil {
			t.Fatal(err)
		}
		old := time.Now().Add(-2 * tempGrace)
		os.Chtimes(tmp, old, old)
		if removed := removeStaleTemps(path); len(removed) != 1 || removed[0] != tmp {
			t.Errorf("%d-byte name: removed %q, want its killed writer's %s", n, removed, filepath.Base(tmp))
		}
		os.Remove(tmp)
	}
}
