package results

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// writeChunkedFile writes rows random rows as rank 0 of 1 of run "dmg" with WriteAll,
// chunk rows a call (a record batch each), and returns the file's bytes, the rows, and
// where each batch of rows starts (then the end). closed false leaves the stream without
// its end marker, as a killed writer does.
func writeChunkedFile(t testing.TB, rows, chunk int, closed bool) ([]byte, []Row, []int) {
	return writeRowsFile(t, rows, chunk, closed, 8)
}

// WriteAll writes a record batch for each writeRows rows, not one a row: the file of 300
// rows is a tenth of the size of Write's row by row, reads back row for row, and merges
// into the same merged file, byte for byte, as Write's file of the same rows does.
func TestWriteAllWritesBatchesOfRows(t *testing.T) {
	rows := writeAllRows(300)
	dirOf := func(all bool) (string, []byte) {
		dir := t.TempDir()
		w, err := Create(dir, "wa", 0, 1)
		if err != nil {
			t.Fatal(err)
		}
		if all {
			err = w.WriteAll(rows)
		}
		for i := 0; !all && err == nil && i < len(rows); i++ {
			err = w.Write(rows[i])
		}
		if err != nil {
			t.Fatal(err)
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(w.Path())
		if err != nil {
			t.Fatal(err)
		}
		return dir, b
	}
	rowDir, byRow := dirOf(false)
	allDir, byAll := dirOf(true)
	if len(byAll)*5 > len(byRow) {
		t.Errorf("WriteAll's file is %d bytes, Write's %d: not batches of rows", len(byAll), len(byRow))
	}
	for _, b := range [][]byte{byRow, byAll} {
		got, f, err := decodeRows(b)
		if err != nil || f.Truncated || !reflect.DeepEqual(got, rows) {
			t.Fatalf("read back %d rows, err %v; want the %d written", len(got), err, len(rows))
		}
	}
	if _, f, _ := decodeRows(byAll); f.read != 3 {
		t.Errorf("WriteAll's file has %d batches, want 3: the empty one, one of writeRows rows and one of the rest", f.read)
	}
	merged := func(dir string) []byte {
		res, err := Merge(dir, MergeOptions{})
		if err != nil {
			t.Fatal(err)
		}
		stripMeta(t, res.Files[0], MetaRankBytes) // (the rank files' sizes, which differ)
		b, err := os.ReadFile(res.Files[0])
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	if a, b := merged(rowDir), merged(allDir); !bytes.Equal(a, b) {
		t.Fatalf("the merged file of WriteAll's rank file (%d bytes) differs from Write's (%d bytes)", len(b), len(a))
	}
}

// batchLengths are where the row counts of the record batch message at pos of data lie:
// the batch's length and each column's (field node) length and null count.
func batchLengths(t *testing.T, data []byte, pos int) (length int, nodes []int) {
	t.Helper()
	metaLen := int(binary.LittleEndian.Uint32(data[pos+4:]))
	meta := data[pos+8 : pos+8+metaLen]
	v := fbVerifier{b: meta}
	root, err := v.u32(0)
	if err != nil {
		t.Fatal(err)
	}
	m, err := v.table(root)
	if err != nil {
		t.Fatal(err)
	}
	h, ok, err := v.subtable(m, msgHeader)
	if err != nil || !ok {
		t.Fatalf("no header: %v", err)
	}
	at, err := v.field(h, 0, 8) // RecordBatch.length
	if err != nil || at == 0 {
		t.Fatalf("no batch length: %v", err)
	}
	vec, err := v.ref(h, batchNodes)
	if err != nil || vec == 0 {
		t.Fatalf("no field nodes: %v", err)
	}
	n, err := v.vector(vec, 16)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < n; i++ {
		nodes = append(nodes, pos+8+vec+4+16*i)
	}
	return pos + 8 + at, nodes
}

// setRows rewrites the batch at pos of data to claim rows rows: its length and every
// column's, null counts cut to them, buffers and body left as they are. A file so edited
// is consistent in every length but its buffers': a damaged or hostile batch length.
func setRows(t *testing.T, data []byte, pos, rows int) []byte {
	t.Helper()
	out := append([]byte(nil), data...)
	length, nodes := batchLengths(t, out, pos)
	binary.LittleEndian.PutUint64(out[length:], uint64(rows))
	for _, at := range nodes {
		binary.LittleEndian.PutUint64(out[at:], uint64(rows))
		if nulls := binary.LittleEndian.Uint64(out[at+8:]); nulls > uint64(rows) {
			binary.LittleEndian.PutUint64(out[at+8:], uint64(rows))
		}
	}
	return out
}

// A rank file whose batch of rows claims fewer rows than it holds (its length and every
// column's lowered together: the rows' checksums still pass) or more is refused as
// damaged, by Open naming the file, by Merge (the rank then missing: exit status 2), and
// the rows of an intact file so written read back. Before batches of rows were accepted,
// a rank file held one row a batch for this; without the check of the buffers' lengths
// (exactBuffers), the lowered counts read as a file of fewer rows.
func TestRankBatchLengthMustMatchItsBuffers(t *testing.T) {
	for _, size := range []int{2, 8, 9, 300} {
		data, want, starts := writeChunkedFile(t, size, size, true)
		if got, _, err := decodeRows(data); err != nil || !reflect.DeepEqual(got, want) {
			t.Fatalf("%d rows in one batch: read %d, %v", size, len(got), err)
		}
		for _, rows := range []int{size - 1, size / 2, 1, 0, size + 1, 2 * size} {
			if rows == size {
				continue
			}
			bad := setRows(t, data, starts[0], rows)
			dir := t.TempDir()
			path := filepath.Join(dir, FileName("dmg", 0, 1))
			if err := os.WriteFile(path, bad, 0o644); err != nil {
				t.Fatal(err)
			}
			f, err := Open(path)
			if err == nil {
				n := f.NumRows()
				f.Release()
				t.Fatalf("a batch of %d rows claiming %d: read %d rows silently", size, rows, n)
			}
			if !errors.Is(err, ErrDamaged) || !strings.Contains(err.Error(), path) || strings.Contains(err.Error(), "\n") {
				t.Fatalf("a batch of %d rows claiming %d: %v; want one line naming %s, damaged", size, rows, err, path)
			}
			_, err = Merge(dir, MergeOptions{})
			if !errors.Is(err, ErrMissingRanks) || !strings.Contains(err.Error(), path) {
				t.Fatalf("merge of a batch of %d rows claiming %d: %v; want the rank missing, the file named", size, rows, err)
			}
		}
	}
}

// Rank files written one row a batch by earlier longca versions (Write's, and WriteAll's
// slices of a chunk, whose first row's 8-byte columns were written with their chunk's
// padding: up to 64 bytes for one row) still read, as the tests' version files do.
func TestOneRowBatchesWithPaddingStillRead(t *testing.T) {
	rows := versionRows("pad", 0, 1, 5, "old")
	dir := t.TempDir()
	path := writeVersionFile(t, dir, "pad", 0, 1, rows, nil, nil, nil)
	got, f, err := ReadRows(path)
	if err != nil || f.read != len(rows)+1 || len(got) != len(rows) {
		t.Fatalf("read %d rows, err %v", len(got), err)
	}
	for i := range rows {
		if got[i].Sample != rows[i].Sample || got[i].SeqLen != rows[i].SeqLen {
			t.Fatalf("row %d: %+v", i, got[i])
		}
	}
}

// TestFlippedBytesOfBatchesOfRows is TestFlippedBytesAreDetected for a rank file of
// batches of rows (WriteAll's, two of 3): each flip is refused, or reads
// every row exactly, or, in a file without its end marker, reads as one cut before its
// last batch. Every byte of the last batch is flipped, every third elsewhere.
func TestFlippedBytesOfBatchesOfRows(t *testing.T) {
	for _, closed := range []bool{true, false} {
		data, want, starts := writeChunkedFile(t, 6, 3, closed)
		flipEveryByte(t, fmt.Sprintf("closed %v", closed), data, want, want[:3], starts, closed)
	}
}

// A writer of batches of rows killed at any byte leaves the rows of its whole batches
// readable, as a file cut short.
func TestBatchesOfRowsTruncatedAtEveryByte(t *testing.T) {
	data, want, starts := writeChunkedFile(t, 6, 3, false)
	for n := starts[0]; n <= len(data); n++ {
		rows, f, err := decodeRows(data[:n])
		if err != nil {
			t.Fatalf("cut at %d: %v", n, err)
		}
		done := 0
		for b := 1; b < len(starts) && starts[b] <= n; b++ {
			done = 3 * b
		}
		if len(rows) != done || done > 0 && !reflect.DeepEqual(rows, want[:done]) || !f.Truncated {
			t.Fatalf("cut at %d: %d rows (truncated %v), want %d", n, len(rows), f.Truncated, done)
		}
	}
}

// A rank file's batches of rows (compactBatches rows or more: WriteAll's) are each kept
// as a batch of its own when read (as compact as a joined one), not joined with others,
// and between them small batches are still joined in order.
func TestOpenKeepsBatchesOfRows(t *testing.T) {
	rows := writeAllRows(2*syncRows + 5)
	w, err := Create(t.TempDir(), "wa", 0, 1)
	if err != nil {
		t.Fatal(err)
	}
	for _, part := range [][]Row{rows[:2], rows[2 : 2+2*syncRows], rows[2+2*syncRows : 3+2*syncRows]} {
		if err := w.WriteAll(part); err != nil {
			t.Fatal(err)
		}
	}
	for _, r := range rows[3+2*syncRows:] {
		if err := w.Write(r); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	f, err := Open(w.Path())
	if err != nil {
		t.Fatal(err)
	}
	defer f.Release()
	var sizes []int64
	for _, b := range f.Batches {
		sizes = append(sizes, b.NumRows())
	}
	want := []int64{2}
	for range 2 * syncRows / writeRows {
		want = append(want, writeRows)
	}
	if want = append(want, 3); !reflect.DeepEqual(sizes, want) {
		t.Fatalf("batches of %v rows held, want %v", sizes, want)
	}
	got, err := f.Rows()
	if err != nil || !reflect.DeepEqual(got, rows) {
		t.Fatalf("read back %d rows (%v), want the %d written in order", len(got), err, len(rows))
	}
}

// FuzzDecodeBatchesOfRows is FuzzDecode from rank files of batches of rows (WriteAll's):
// no input makes Decode or the row decoding panic or allocate without bound.
func FuzzDecodeBatchesOfRows(f *testing.F) {
	closed, _, _ := writeChunkedFile(f, 5, 3, true)
	open, _, _ := writeChunkedFile(f, 5, 3, false)
	f.Add(closed)
	f.Add(open)
	f.Fuzz(func(t *testing.T, data []byte) {
		rows, f, err := decodeRows(data)
		if err == nil && f != nil && int64(len(rows)) > int64(len(data)) {
			t.Fatalf("%d rows from %d bytes", len(rows), len(data))
		}
	})
}
