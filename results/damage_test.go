package results

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// writeTestFile writes rows random rows as rank 0 of 1 of run "dmg", a record batch a row
// (Write), and returns the file's bytes, the rows, and the offset where each row's batch
// starts (then the end). closed false leaves the stream without its end marker, as a
// killed writer does.
func writeTestFile(t testing.TB, rows int, closed bool) ([]byte, []Row, []int) {
	return writeRowsFile(t, rows, 0, closed, 7)
}

// writeRowsFile is writeTestFile with chunk rows a WriteAll call (a record batch each;
// 0: Write, a batch a row), the rows drawn from seed; starts are where each batch starts.
func writeRowsFile(t testing.TB, rows, chunk int, closed bool, seed uint64) ([]byte, []Row, []int) {
	t.Helper()
	rng := rand.New(rand.NewPCG(seed, seed))
	var want []Row
	for i := 0; i < rows; i++ {
		r := randomRow(rng, i)
		r.RunID, r.Rank, r.WorldSize = "dmg", 0, 1
		want = append(want, r)
	}
	var batches [][]Row
	for i := 0; i < rows; i += max(chunk, 1) {
		batches = append(batches, want[i:min(i+max(chunk, 1), rows)])
	}
	b, starts := writeBatchesFile(t, batches, chunk == 0, closed)
	return b, want, starts
}

// writeBatchesFile writes a rank file (run dmg, rank 0 of 1) of the batches given, each by
// one WriteAll (single: each batch's one row by Write), closed or left as a killed writer
// leaves it, and returns its bytes and where each batch starts (then the end).
func writeBatchesFile(t testing.TB, batches [][]Row, single, closed bool) ([]byte, []int) {
	t.Helper()
	dir := t.TempDir()
	w, err := Create(dir, "dmg", 0, 1)
	if err != nil {
		t.Fatal(err)
	}
	size := func() int {
		st, err := os.Stat(w.Path())
		if err != nil {
			t.Fatal(err)
		}
		return int(st.Size())
	}
	starts := []int{size()}
	for _, rows := range batches {
		if single {
			err = w.Write(rows[0])
		} else {
			err = w.WriteAll(rows)
		}
		if err != nil {
			t.Fatal(err)
		}
		starts = append(starts, size())
	}
	if closed {
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
	}
	b, err := os.ReadFile(w.Path())
	if err != nil {
		t.Fatal(err)
	}
	return b, starts
}

// decodeRows decodes a file's bytes into rows, or returns the error.
func decodeRows(data []byte) ([]Row, *File, error) {
	f, err := Decode("t.arrow", data)
	if err != nil {
		return nil, nil, err
	}
	defer f.Release()
	rows, err := f.Rows()
	return rows, f, err
}

// TestFlippedBytesAreDetected flips bytes of a rank file, closed and as a killed writer
// leaves it, and of a merged file, one at a time (every byte of the last batch, every
// third byte elsewhere, to stay fast). Each damaged file must be refused as damaged or
// not longca's, or read back exactly; only a flip inside the last row's batch of an
// unclosed file may read as a file truncated before that row. Nothing may panic.
func TestFlippedBytesAreDetected(t *testing.T) {
	for _, kind := range []string{"closed", "killed", "merged"} {
		closed := kind != "killed"
		data, want, starts := writeTestFile(t, 3, closed)
		if kind == "merged" {
			data, want = mergedOf(t, data)
		}
		flipEveryByte(t, kind, data, want, want[:len(want)-1], starts, closed)
	}
}

// flipEveryByte flips each byte of a results file's data (every third before its last
// batch, every one of the last), one at a time, and requires each flip to be refused as
// damaged (or not results), to read every row exactly (want), or, in a file not closed
// (closed false) whose flip is in its last batch, to read as one cut before it (torn,
// marked truncated); nothing may read other rows silently, and at least a twelfth of the
// flips must be refused. starts are the offsets where its batches start.
func flipEveryByte(t *testing.T, label string, data []byte, want, torn []Row, starts []int, closed bool) {
	t.Helper()
	lastStart := starts[len(starts)-2]
	stats := map[string]int{}
	for pos := range data {
		if pos%3 != 0 && pos < lastStart {
			continue
		}
		bad := append([]byte(nil), data...)
		bad[pos] ^= byte(1 + pos%255)
		rows, f, err := decodeRows(bad)
		switch {
		case err != nil:
			if !errors.Is(err, ErrDamaged) && !errors.Is(err, ErrNotResults) {
				t.Fatalf("%s: flip at %d: error %v is neither damaged nor not-results", label, pos, err)
			}
			stats["refused"]++
		case reflect.DeepEqual(rows, want):
			stats["intact"]++
		case !closed && f.Truncated && pos >= lastStart && reflect.DeepEqual(rows, torn):
			stats["torn last batch"]++
		default:
			t.Fatalf("%s: flip at byte %d of %d (batches start at %v): read %d rows silently (truncated %v)", label, pos, len(data), starts, len(rows), f.Truncated)
		}
	}
	t.Logf("%s, %d bytes: %v", label, len(data), stats)
	if stats["refused"] < len(data)/12 {
		t.Errorf("%s: only %d flips were refused", label, stats["refused"])
	}
}

// TestTruncatedAtEveryByte: a writer killed at any byte leaves a readable prefix of
// its rows, never an error that loses the rows before the torn one.
func TestTruncatedAtEveryByte(t *testing.T) {
	data, want, starts := writeTestFile(t, 3, false)
	for n := starts[0]; n <= len(data); n++ {
		rows, f, err := decodeRows(data[:n])
		if err != nil {
			t.Fatalf("cut at %d: %v", n, err)
		}
		done := 0
		for done < len(want) && starts[done+1] <= n {
			done++
		}
		if len(rows) != done || done > 0 && !reflect.DeepEqual(rows, want[:done]) || !f.Truncated {
			t.Fatalf("cut at %d: %d rows (truncated %v), want %d", n, len(rows), f.Truncated, done)
		}
	}
}

// FuzzDecode: no input makes Decode or the row decoding panic or allocate without
// bound. Run it longer with go test -run '^$' -fuzz FuzzDecode -fuzzminimizetime 2s
// ./results. testdata/fuzz/FuzzDecode keeps inputs that crashed the reader before it
// verified the metadata: oom-* (a flipped FlatBuffers vector length: arrow-go asked for
// 25 GB) and panic-* (a flipped batch length: the row decoding indexed past a buffer).
func FuzzDecode(f *testing.F) {
	closed, _, _ := writeTestFile(f, 2, true)
	open, _, _ := writeTestFile(f, 2, false)
	f.Add(closed)
	f.Add(open)
	f.Add(mergedBytes(f))
	f.Add([]byte("ARROW1\x00\x00"))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, data []byte) {
		rows, f, err := decodeRows(data)
		if err == nil && f != nil && int64(len(rows)) > int64(len(data)) {
			t.Fatalf("%d rows from %d bytes", len(rows), len(data))
		}
	})
}

// mergedOf merges a rank file's bytes (rank 0 of 1 of run dmg) and returns the merged
// file's bytes and rows.
func mergedOf(t *testing.T, rank []byte) ([]byte, []Row) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, FileName("dmg", 0, 1)), rank, 0o644); err != nil {
		t.Fatal(err)
	}
	res, err := Merge(dir, MergeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(res.Files[0])
	if err != nil {
		t.Fatal(err)
	}
	rows, _, err := decodeRows(b)
	if err != nil || len(rows) != 3 {
		t.Fatalf("merged file: %d rows, %v", len(rows), err)
	}
	return b, rows
}

// mergedBytes is a merged Arrow IPC file of two ranks.
func mergedBytes(t testing.TB) []byte {
	dir := t.TempDir()
	for r := 0; r < 2; r++ {
		w, err := Create(dir, "m", r, 2)
		if err != nil {
			t.Fatal(err)
		}
		if err := w.Write(Row{RunID: "m", Rank: int64(r), WorldSize: 2, Status: StatusOK, Mask: "causal"}); err != nil {
			t.Fatal(err)
		}
		w.Close()
	}
	res, err := Merge(dir, MergeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(res.Files[0])
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestMergeSkipsBadFiles: in one folder, a damaged rank file, a file that is not Arrow,
// a valid file of another run renamed to a missing rank, and a stray file of another
// world size are each skipped with a warning naming them; the good files merge when
// --allow-missing is given, the merged file's metadata names what was skipped, and a
// second run in the folder is not blocked by them.
func TestMergeSkipsBadFiles(t *testing.T) {
	dir := t.TempDir()
	writeRanks(t, dir, "runA", 5, 2, 0, 1)
	writeRanks(t, dir, "runB", 2, 3, 0, 1)
	writeRanks(t, dir, "other", 5, 1, 3)
	// rank 2: damaged (a flipped byte in its second row's batch)
	damaged := filepath.Join(dir, FileName("runA", 2, 5))
	writeRanks(t, dir, "runA", 5, 2, 2)
	b, err := os.ReadFile(damaged)
	if err != nil {
		t.Fatal(err)
	}
	// Flip a byte of the last row's mask value: a fixed offset from the end lands in
	// padding or a null column's bytes, which no checksum covers, as columns are added.
	at := bytes.LastIndex(b, []byte("causal"))
	if at < 0 {
		t.Fatal("no mask value in the file to damage")
	}
	b[at] ^= 0x55
	if err := os.WriteFile(damaged, b, 0o644); err != nil {
		t.Fatal(err)
	}
	// rank 3: another run's file, renamed
	if err := os.Rename(filepath.Join(dir, FileName("other", 3, 5)), filepath.Join(dir, FileName("runA", 3, 5))); err != nil {
		t.Fatal(err)
	}
	// rank 4: not Arrow at all; and a stray file of another world size
	if err := os.WriteFile(filepath.Join(dir, FileName("runA", 4, 5)), []byte("#!/bin/sh\necho hello\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	stray := t.TempDir() // Create refuses a rank file beside another size's (TestCreateYieldsToARunOfAnotherSize)
	writeRanks(t, stray, "runA", 7, 1, 6)
	if err := os.Rename(filepath.Join(stray, FileName("runA", 6, 7)), filepath.Join(dir, FileName("runA", 6, 7))); err != nil {
		t.Fatal(err)
	}

	_, err = Merge(dir, MergeOptions{})
	if err == nil || !strings.Contains(err.Error(), "ranks 2-4 of 5 missing") || !strings.Contains(err.Error(), FileName("runA", 2, 5)) {
		t.Fatalf("merge without --allow-missing: %v", err)
	}
	res, err := Merge(dir, MergeOptions{AllowMissing: true})
	if err != nil {
		t.Fatal(err)
	}
	if res.Rows != 2*2+2*3 {
		t.Errorf("merged %d rows, want 10", res.Rows)
	}
	skipped := strings.Join(res.Skipped, "\n")
	for _, want := range []string{FileName("runA", 2, 5) + ": damaged", FileName("runA", 3, 5) + ": its run id", FileName("runA", 4, 5) + ": its first bytes", FileName("runA", 6, 7)} {
		if !strings.Contains(skipped, want) {
			t.Errorf("skipped list does not name %q:\n%s", want, skipped)
		}
	}
	f, err := Open(res.Files[0])
	if err != nil {
		t.Fatal(err)
	}
	defer f.Release()
	if !strings.Contains(f.Meta(MetaSkipped), FileName("runA", 2, 5)) || !strings.Contains(f.Meta(MetaMissing), "ranks 2-4 of 5") {
		t.Errorf("merged metadata: skipped %q, missing %q", f.Meta(MetaSkipped), f.Meta(MetaMissing))
	}
	// The complete run merges alone without --allow-missing.
	if res, err := Merge(dir, MergeOptions{Runs: []string{"runB"}, Out: filepath.Join(dir, "b.arrow")}); err != nil || res.Rows != 6 {
		t.Errorf("runB alone: %+v, %v", res, err)
	}
	// report reads the folder, skipping the same files.
	os.Remove(filepath.Join(dir, "merged.arrow"))
	l, err := LoadChecked(dir)
	if err != nil || len(l.Rows) != 10 || len(l.Skipped) != 4 {
		t.Errorf("load: %d rows, skipped %v, %v", len(l.Rows), l.Skipped, err)
	}
}

// A merged file records its row count: a file whose batches hold fewer rows than that
// (a damaged batch length, as a byte flip made in the flip test) is damaged, not short.
func TestMergedRowCountIsChecked(t *testing.T) {
	dir := t.TempDir()
	writeRanks(t, dir, "runA", 2, 3, 0, 1)
	res, err := Merge(dir, MergeOptions{Runs: []string{"runA"}})
	if err != nil {
		t.Fatal(err)
	}
	f, err := Open(res.Files[0])
	if err != nil {
		t.Fatal(err)
	}
	if f.Meta(MetaRows) != "6" {
		t.Fatalf("merged file records %q rows, want 6", f.Meta(MetaRows))
	}
	f.Release()
	// the same rows under metadata claiming one more
	rows, err := Load(res.Files[0])
	if err != nil {
		t.Fatal(err)
	}
	rec := Record(Schema(map[string]string{MetaRows: "7", MetaSchemaVersion: SchemaVersion}), rows)
	defer rec.Release()
	bad := filepath.Join(t.TempDir(), "short.arrow")
	if err := WriteArrowFile(bad, rec); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(bad); !errors.Is(err, ErrDamaged) || !strings.Contains(err.Error(), "6 rows read where the file records 7") {
		t.Fatalf("a file short of its recorded rows: %v", err)
	}
}

// A file whose writer stopped before the end marker is read with its finished rows, and
// LoadChecked says so, given the file, its folder, or the folder's merged file (report said
// nothing of the cut; merge did).
func TestLoadCheckedSaysTruncated(t *testing.T) {
	b, want, _ := writeTestFile(t, 5, false)
	dir := t.TempDir()
	path := filepath.Join(dir, FileName("dmg", 0, 1))
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{path, dir} {
		l, err := LoadChecked(p)
		if err != nil || len(l.Rows) != len(want) || len(l.Truncated) != 1 {
			t.Fatalf("LoadChecked(%s): %d rows (want %d), truncated %q, %v", p, len(l.Rows), len(want), l.Truncated, err)
		}
	}
	if _, err := Merge(dir, MergeOptions{}); err != nil {
		t.Fatal(err)
	}
	l, err := LoadChecked(dir) // now its merged.arrow, which records the cut rank file
	if err != nil || len(l.Rows) != len(want) || len(l.Truncated) != 1 || !strings.Contains(l.Truncated[0], "rank 0 of 1") {
		t.Fatalf("merged folder: %d rows, truncated %q, %v", len(l.Rows), l.Truncated, err)
	}
	whole, _, _ := writeTestFile(t, 5, true)
	if err := os.WriteFile(path, whole, 0o644); err != nil {
		t.Fatal(err)
	}
	if l, err := LoadChecked(path); err != nil || len(l.Truncated) != 0 {
		t.Fatalf("closed file: truncated %q, %v", l.Truncated, err)
	}
}
