package results

import (
	"bufio"
	"bytes"
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/longca/longca/internal/heaptest"
)

// mergeBatchRows makes n random rows of run "mb", rank 0 of 1.
func mergeBatchRows(n int) []Row {
	rng := rand.New(rand.NewPCG(21, 22))
	rows := make([]Row, n)
	for i := range rows {
		rows[i] = randomRow(rng, i)
		rows[i].RunID, rows[i].Rank, rows[i].WorldSize = "mb", 0, 1
	}
	return rows
}

// writeRankFileBatched writes rows into dir as rank 0 of 1 of run "mb" the way Writer
// lays a rank file out (the schema, an empty batch, then batches of rows, the end
// marker), per rows a batch, without Writer's fsync a batch (an older writer's file, or
// one flushed after every row, written fast enough for a benchmark).
func writeRankFileBatched(t testing.TB, dir string, rows []Row, per int) string {
	t.Helper()
	path := filepath.Join(dir, FileName("mb", 0, 1))
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	buf := bufio.NewWriterSize(f, 1<<20)
	s := Schema(map[string]string{MetaRunID: "mb", MetaRank: "0", MetaWorldSize: "1", MetaPlannedRows: strconv.Itoa(len(rows))})
	w := ipc.NewWriter(buf, ipc.WithSchema(s))
	write := func(rs []Row) {
		rec := Record(s, rs)
		defer rec.Release()
		if err := w.Write(rec); err != nil {
			t.Fatal(err)
		}
	}
	write(nil)
	for i := 0; i < len(rows); i += per {
		write(rows[i:min(i+per, len(rows))])
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if err := buf.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	return path
}

// BenchmarkMergeOneRowBatches merges a rank file of 20,000 rows written one row a record
// batch (as Write writes), and the same rows written in one batch, for comparison:
// go test -run '^$' -bench MergeOneRowBatches -benchtime 3x ./results
func BenchmarkMergeOneRowBatches(b *testing.B) {
	rows := mergeBatchRows(20000)
	for _, per := range []int{1, len(rows)} {
		b.Run("per="+strconv.Itoa(per), func(b *testing.B) {
			dir := b.TempDir()
			writeRankFileBatched(b, dir, rows, per)
			out := filepath.Join(b.TempDir(), "merged.arrow")
			cpu0 := heaptest.CPUTime(b)
			b.ResetTimer()
			for b.Loop() {
				res, err := Merge(dir, MergeOptions{Out: out})
				if err != nil || res.Rows != int64(len(rows)) {
					b.Fatalf("merge: %d rows, %v", res.Rows, err)
				}
			}
			b.ReportMetric(float64(heaptest.CPUTime(b)-cpu0)/float64(b.N), "cpu-ns/op")
		})
	}
}

// mergedFileOf merges dir into a file of its own and returns its bytes, its record of the
// rank files' sizes (which differ from layout to layout) left out.
func mergedFileOf(t *testing.T, dir string) []byte {
	t.Helper()
	res, err := Merge(dir, MergeOptions{Out: filepath.Join(t.TempDir(), "merged.arrow")})
	if err != nil {
		t.Fatal(err)
	}
	stripMeta(t, res.Files[0], MetaRankBytes)
	b, err := os.ReadFile(res.Files[0])
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// The merge of a rank file written one row a record batch equals, row for row and
// column for column, byte for byte, the merge of the same rows written in one batch, in
// batches of 7, and of WriteAll's batches; and each equals what arrow-go's reader, batch
// by batch, made of the same files before the reader coalesced them (coalesceBatches off).
// 5000 rows: more than one coalesced batch (coalesceRows), nulls and booleans in some rows
// and not others.
func TestMergeOfOneRowBatchesEqualsOneBatch(t *testing.T) {
	rows := mergeBatchRows(5000)
	layouts := []int{1, len(rows), 7, 0} // 0: Writer.WriteAll
	var want []byte
	for _, per := range layouts {
		dir := t.TempDir()
		if per == 0 {
			w, err := Create(dir, "mb", 0, 1)
			if err != nil {
				t.Fatal(err)
			}
			if err := w.WriteAll(rows); err != nil {
				t.Fatal(err)
			}
			if err := w.Close(); err != nil {
				t.Fatal(err)
			}
		} else {
			writeRankFileBatched(t, dir, rows, per)
		}
		// the rows, every column, in order
		f, err := Open(filepath.Join(dir, FileName("mb", 0, 1)))
		if err != nil {
			t.Fatal(err)
		}
		got, err := f.Rows()
		f.Release()
		if err != nil || !reflect.DeepEqual(got, rows) {
			t.Fatalf("%d rows a batch: read %d rows (%v), want the %d written, in order", per, len(got), err, len(rows))
		}
		merged := mergedFileOf(t, dir)
		m, err := Decode("merged.arrow", merged)
		if err != nil {
			t.Fatal(err)
		}
		back, err := m.Rows()
		m.Release()
		if err != nil || !reflect.DeepEqual(back, rows) {
			t.Fatalf("%d rows a batch: the merged file holds %d rows (%v), want the %d written, in order", per, len(back), err, len(rows))
		}
		coalesceBatches = false
		old := mergedFileOf(t, dir)
		coalesceBatches = true
		if !bytes.Equal(merged, old) {
			t.Fatalf("%d rows a batch: the merged file (%d bytes) differs from arrow-go's batch by batch (%d bytes)", per, len(merged), len(old))
		}
		if want == nil {
			want = merged
		} else if !bytes.Equal(merged, want) {
			t.Fatalf("%d rows a batch: the merged file (%d bytes) differs from that of one row a batch (%d bytes)", per, len(merged), len(want))
		}
	}
}

// FuzzCoalescedDecodeIsArrowGos holds the reader with its coalescer to what arrow-go's
// reader, batch by batch, makes of the same bytes (coalesceBatches off): the same rows,
// or the same error (of a file not longca's, the same kind), the same truncation and the
// same word on checksums, whatever the bytes (rank files of one row a batch and of batches of rows, damaged anyhow).
func FuzzCoalescedDecodeIsArrowGos(f *testing.F) {
	for _, chunk := range []int{0, 3} {
		for _, closed := range []bool{true, false} {
			data, _, _ := writeRowsFile(f, 7, chunk, closed, 9)
			f.Add(data)
		}
	}
	// a file written before row_checksum existed, a row a batch: no checksum stands behind
	// its rows, so only the comparison would see a misread
	dir := f.TempDir()
	data, err := os.ReadFile(writeVersionFile(f, dir, "old", 0, 1, versionRows("old", 0, 1, 9, "v-old"), []string{ChecksumColumn, "device_uuid"}, nil, nil))
	if err != nil {
		f.Fatal(err)
	}
	f.Add(data)
	f.Fuzz(func(t *testing.T, data []byte) {
		type outcome struct {
			rows                  []Row
			err, tail             string
			truncated, unverified bool
		}
		read := func(coalesce bool) (o outcome) {
			coalesceBatches = coalesce
			defer func() { coalesceBatches = true }()
			rows, file, err := decodeRows(data)
			if errors.Is(err, ErrNotResults) { // (checkSchema's words name a column of a map's order)
				return outcome{err: "not results"}
			}
			if err != nil {
				return outcome{err: err.Error()}
			}
			return outcome{rows: rows, tail: file.Tail, truncated: file.Truncated, unverified: file.Unverified}
		}
		if got, want := read(true), read(false); !reflect.DeepEqual(got, want) {
			t.Fatalf("coalesced: %d rows, err %q, truncated %v (%s), unverified %v\narrow-go's: %d rows, err %q, truncated %v (%s), unverified %v",
				len(got.rows), got.err, got.truncated, got.tail, got.unverified, len(want.rows), want.err, want.truncated, want.tail, want.unverified)
		}
	})
}
