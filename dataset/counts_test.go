package dataset

import (
	"bytes"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/compress"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"

	"github.com/longca/longca/internal/smallfile"
	"github.com/longca/longca/internal/smallfile/fifotest"
)

// record builds a two-column batch: doc (string) and tokens (int32, with a null row).
func record(t *testing.T) arrow.RecordBatch {
	t.Helper()
	schema := arrow.NewSchema([]arrow.Field{
		{Name: "doc", Type: arrow.BinaryTypes.String},
		{Name: "tokens", Type: arrow.PrimitiveTypes.Int32, Nullable: true},
	}, nil)
	b := array.NewRecordBuilder(memory.DefaultAllocator, schema)
	defer b.Release()
	b.Field(0).(*array.StringBuilder).AppendValues([]string{"a", "b", "c", "d", "e"}, nil)
	b.Field(1).(*array.Int32Builder).AppendValues([]int32{812, 0, 4096, 7, 99}, []bool{true, true, true, true, false})
	return b.NewRecordBatch()
}

func writeArrow(t *testing.T, path string, opts ...ipc.Option) {
	rec := record(t)
	defer rec.Release()
	writeBatches(t, path, []arrow.RecordBatch{rec, rec}, opts...) // two batches
}

// writeBatches writes an Arrow IPC file of the batches (of one schema), with opts.
func writeBatches(t *testing.T, path string, recs []arrow.RecordBatch, opts ...ipc.Option) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	w, err := ipc.NewFileWriter(f, append([]ipc.Option{ipc.WithSchema(recs[0].Schema())}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	for _, rec := range recs {
		if err := w.Write(rec); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
}

func writeParquet(t *testing.T, path string) {
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rec := record(t)
	defer rec.Release()
	tbl := array.NewTableFromRecords(rec.Schema(), []arrow.RecordBatch{rec, rec})
	defer tbl.Release()
	if err := pqarrow.WriteTable(tbl, f, 1024, nil, pqarrow.DefaultWriterProps()); err != nil {
		t.Fatal(err)
	}
}

func TestLoadCounts(t *testing.T) {
	dir := t.TempDir()
	text := filepath.Join(dir, "counts.txt")
	if err := os.WriteFile(text, []byte("# token counts\n812\n\n0\n4096 # a long one\n  7\n812\n4096\n7\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	arrowPath := filepath.Join(dir, "docs.arrow")
	writeArrow(t, arrowPath)
	pq := filepath.Join(dir, "docs.parquet")
	writeParquet(t, pq)

	want := []int{812, 4096, 7, 812, 4096, 7} // zeros and nulls skipped
	for _, p := range []string{text, arrowPath, pq} {
		column := "tokens"
		if p == text { // a text file has no columns (a column given is refused)
			column = ""
		}
		e, err := LoadCounts(p, column)
		if err != nil {
			t.Fatalf("LoadCounts(%s): %v", p, err)
		}
		if !equalInts(e.Counts, want) {
			t.Errorf("LoadCounts(%s) = %v, want %v", filepath.Base(p), e.Counts, want)
		}
		docs := Pack(e, 10000, NewRand(1))
		for _, n := range docs[:len(docs)-1] {
			if n != 812 && n != 4096 && n != 7 {
				t.Errorf("%s: packed a length %d not in the file", filepath.Base(p), n)
			}
		}
	}
}

func TestLoadCountsErrors(t *testing.T) {
	dir := t.TempDir()
	arrowPath := filepath.Join(dir, "docs.arrow")
	writeArrow(t, arrowPath)
	pq := filepath.Join(dir, "docs.parquet")
	writeParquet(t, pq)
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	cases := []struct {
		path, column string
		want         []string
	}{
		{arrowPath, "length", []string{`no column "length"`, "doc, tokens"}},
		{pq, "length", []string{`no column "length"`, "doc, tokens"}},
		{pq, "", []string{"--column", "doc, tokens"}},
		{arrowPath, "doc", []string{`column "doc"`, "not an integer"}},
		{write("bad.txt", "12\nabc\n"), "", []string{"bad.txt:2", `"abc"`}},
		{write("neg.txt", "12\n-3\n"), "", []string{"neg.txt:2"}},
		{write("empty.txt", "# nothing\n0\n"), "", []string{"no positive token counts"}},
		{write("fake.parquet", "not parquet"), "tokens", []string{"fake.parquet", "not a Parquet file"}},
		{write("fake.arrow", "not arrow"), "tokens", []string{"fake.arrow", "not an Arrow IPC file"}},
		{filepath.Join(dir, "missing.txt"), "", []string{"missing.txt"}},
	}
	for _, c := range cases {
		_, err := LoadCounts(c.path, c.column)
		if err == nil {
			t.Errorf("LoadCounts(%s, %q) succeeded", filepath.Base(c.path), c.column)
			continue
		}
		for _, w := range c.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("LoadCounts(%s, %q) err = %v, want it to contain %q", filepath.Base(c.path), c.column, err, w)
			}
		}
	}
}

// A --counts FIFO waits for its writer (one started after the read is fine), and one that
// no one opens for writing is an error naming it after smallfile.WriterWait instead of a
// hang in open(2) (the audit of 2026-12-04).
func TestCountsFIFO(t *testing.T) {
	path := filepath.Join(t.TempDir(), "fifo")
	fifotest.Make(t, path)
	go func() { // the writer comes later than the reader
		time.Sleep(200 * time.Millisecond)
		if f, err := os.OpenFile(path, os.O_WRONLY, 0); err == nil {
			f.WriteString("7\n9\n")
			f.Close()
		}
	}()
	e, err := LoadCounts(path, "")
	if err != nil || len(e.Counts) != 2 {
		t.Errorf("a FIFO whose writer starts later: %v, %v", e, err)
	}
	saved := smallfile.WriterWait
	smallfile.WriterWait = 300 * time.Millisecond
	defer func() { smallfile.WriterWait = saved }()
	err = fifotest.Within(t, "LoadCounts", 10*time.Second, func() error { _, err := LoadCounts(path, ""); return err })
	if err == nil || !strings.Contains(err.Error(), "no one opened for writing") {
		t.Errorf("a FIFO with no writer: %v, want an error naming it", err)
	}
}

// A damaged Arrow or Parquet --counts file is an error naming it, never a panic: the tenth
// hardening pass found one flipped byte of an Arrow footer panicking in arrow-go's
// flatbuffers code (a stack trace, exit 2 as if a usage error) and one of a Parquet page
// panicking in arrow's table validation. Every byte of both files is flipped in turn, two
// ways.
func TestDamagedCountFilesAreErrors(t *testing.T) {
	dir := t.TempDir()
	saved := maxCountsInflated
	maxCountsInflated = 1 << 20 // a flipped inflated length asks for up to 4 GiB here
	defer func() { maxCountsInflated = saved }()
	for _, name := range []string{"c.arrow", "lz4.arrow", "zstd.arrow", "c.parquet"} {
		good := filepath.Join(dir, name)
		switch name {
		case "c.arrow":
			writeArrow(t, good)
		case "lz4.arrow": // pyarrow's feather files are LZ4 by default
			writeArrow(t, good, ipc.WithLZ4())
		case "zstd.arrow":
			writeArrow(t, good, ipc.WithZstd())
		default:
			writeParquet(t, good)
		}
		if e, err := LoadCounts(good, "tokens"); err != nil || len(e.Counts) != 6 {
			t.Fatalf("%s undamaged: %v, %v", name, e, err)
		}
		data, err := os.ReadFile(good)
		if err != nil {
			t.Fatal(err)
		}
		t0 := time.Now()
		bad := filepath.Join(dir, "bad-"+name)
		panics, refused, inflates := 0, 0, 0
		for off := range data {
			for _, flip := range []func(byte) byte{func(b byte) byte { return b ^ 0xff }, func(byte) byte { return 1 }} {
				d := append([]byte(nil), data...)
				if d[off] = flip(d[off]); d[off] == data[off] {
					continue
				}
				if err := os.WriteFile(bad, d, 0o600); err != nil {
					t.Fatal(err)
				}
				func() {
					defer func() {
						if p := recover(); p != nil {
							panics++
							if panics <= 3 {
								t.Errorf("%s, byte %d flipped: panic %v", name, off, p)
							}
						}
					}()
					if _, err := LoadCounts(bad, "tokens"); err != nil {
						refused++
						if strings.Contains(err.Error(), "inflate") {
							inflates++
						}
						if !strings.Contains(err.Error(), bad) {
							t.Errorf("%s, byte %d flipped: %v does not name the file", name, off, err)
						}
					}
				}()
			}
		}
		t.Logf("%s: %d bytes, %d refused, %s", name, len(data), refused, time.Since(t0))
		if panics > 0 || refused == 0 {
			t.Errorf("%s (%d bytes): %d panics, %d damaged versions refused", name, len(data), panics, refused)
		}
		// a compressed buffer's inflated length flipped is refused by the bound, unallocated
		if compressed := strings.Contains(name, "lz4") || strings.Contains(name, "zstd"); compressed && inflates == 0 {
			t.Errorf("%s: no damaged version was refused for its inflated length", name)
		}
	}
}

// writeMixed writes a counts file as a tokenizer's export has it: the lengths beside a
// list<int32> of token ids, a struct of metadata and a dictionary-encoded source column.
func writeMixed(t *testing.T, path string, opts ...ipc.Option) {
	t.Helper()
	mem := memory.DefaultAllocator
	dictType := &arrow.DictionaryType{IndexType: arrow.PrimitiveTypes.Int8, ValueType: arrow.BinaryTypes.String}
	schema := arrow.NewSchema([]arrow.Field{
		{Name: "length", Type: arrow.PrimitiveTypes.Int64},
		{Name: "input_ids", Type: arrow.ListOf(arrow.PrimitiveTypes.Int32)},
		{Name: "meta", Type: arrow.StructOf(arrow.Field{Name: "lang", Type: arrow.BinaryTypes.String}, arrow.Field{Name: "score", Type: arrow.PrimitiveTypes.Float32})},
		{Name: "source", Type: dictType},
	}, nil)
	b := array.NewRecordBuilder(mem, schema)
	defer b.Release()
	for i, n := range []int64{3, 5, 2} {
		b.Field(0).(*array.Int64Builder).Append(n)
		lb := b.Field(1).(*array.ListBuilder)
		lb.Append(true)
		for j := int64(0); j < n; j++ {
			lb.ValueBuilder().(*array.Int32Builder).Append(int32(j))
		}
		sb := b.Field(2).(*array.StructBuilder)
		sb.Append(true)
		sb.FieldBuilder(0).(*array.StringBuilder).Append("en")
		sb.FieldBuilder(1).(*array.Float32Builder).Append(float32(i))
		if err := b.Field(3).(*array.BinaryDictionaryBuilder).AppendString([]string{"web", "books", "web"}[i]); err != nil {
			t.Fatal(err)
		}
	}
	rec := b.NewRecordBatch()
	defer rec.Release()
	writeBatches(t, path, []arrow.RecordBatch{rec}, opts...)
}

// A counts column beside nested and dictionary-encoded columns reads, compressed or not
// (the metadata verifier first refused such files as "damaged": a reviewer of the tenth
// pass), and such a file damaged byte by byte is refused, never a panic.
func TestCountsBesideNestedColumns(t *testing.T) {
	dir := t.TempDir()
	saved := maxCountsInflated
	maxCountsInflated = 1 << 20
	defer func() { maxCountsInflated = saved }()
	for _, c := range []struct {
		name string
		opts []ipc.Option
	}{{"mixed.arrow", nil}, {"mixed-lz4.arrow", []ipc.Option{ipc.WithLZ4()}}} {
		path := filepath.Join(dir, c.name)
		writeMixed(t, path, c.opts...)
		e, err := LoadCounts(path, "length")
		if err != nil || len(e.Counts) != 3 || e.Counts[0] != 3 || e.Counts[1] != 5 || e.Counts[2] != 2 {
			t.Fatalf("%s: %v, %v; want the counts 3 5 2", c.name, e, err)
		}
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		bad := filepath.Join(dir, "bad-"+c.name)
		for off := range data {
			d := append([]byte(nil), data...)
			d[off] ^= 0xff
			if err := os.WriteFile(bad, d, 0o600); err != nil {
				t.Fatal(err)
			}
			func() {
				defer func() {
					if p := recover(); p != nil {
						t.Fatalf("%s, byte %d flipped: panic %v", c.name, off, p)
					}
				}()
				if _, err := LoadCounts(bad, "length"); err != nil && !strings.Contains(err.Error(), bad) {
					t.Errorf("%s, byte %d flipped: %v does not name the file", c.name, off, err)
				}
			}()
		}
	}
}

// writeLengths writes a Parquet file (ZSTD and dictionary encoded) of rows of lengths
// 100, 101, ... beside a doc column of a thousand bytes a row, in row groups of perGroup
// rows.
func writeLengths(t *testing.T, path string, rows, perGroup int) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	schema := arrow.NewSchema([]arrow.Field{
		{Name: "doc", Type: arrow.BinaryTypes.String},
		{Name: "len", Type: arrow.PrimitiveTypes.Int64},
	}, nil)
	props := parquet.NewWriterProperties(parquet.WithCompression(compress.Codecs.Zstd), parquet.WithDictionaryDefault(true),
		parquet.WithMaxRowGroupLength(int64(perGroup)))
	w, err := pqarrow.NewFileWriter(schema, f, props, pqarrow.DefaultWriterProps())
	if err != nil {
		t.Fatal(err)
	}
	b := array.NewRecordBuilder(memory.DefaultAllocator, schema)
	defer b.Release()
	text := strings.Repeat("a", 1000)
	for i := range rows {
		b.Field(0).(*array.StringBuilder).Append(strconv.Itoa(i) + text)
		b.Field(1).(*array.Int64Builder).Append(int64(100 + i))
	}
	rec := b.NewRecordBatch()
	defer rec.Release()
	if err := w.Write(rec); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
}

// A Parquet column's rows are bounded by the footer before any is decoded, and only the
// named column is read: a file of 93 KB, 150 million rows of one length, took 6.7 GB (the
// review of the thirty-eighth session). Here the bounds are lowered to a small file's.
func TestParquetCountsBounded(t *testing.T) {
	dir := t.TempDir()
	savedCounts, savedInflated := maxCounts, maxCountsInflated
	defer func() { maxCounts, maxCountsInflated = savedCounts, savedInflated }()
	maxCounts, maxCountsInflated = 3000, 64<<10 // the doc column inflates to 3 MB
	pq := filepath.Join(dir, "lengths.parquet")
	writeLengths(t, pq, 3000, 1000)
	if e, err := LoadCounts(pq, "len"); err != nil || len(e.Counts) != 3000 {
		t.Fatalf("3000 rows under a bound of 3000: %v (read the doc column too?)", err)
	}
	if _, err := LoadCounts(pq, "doc"); err == nil || !strings.Contains(err.Error(), "not an integer type") {
		t.Errorf("the doc column: %v, want it refused for its type before it is read", err)
	}
	maxCounts = 2999
	_, err := LoadCounts(pq, "len")
	if err == nil || !strings.Contains(err.Error(), "more than the 2999 rows a counts file may") || !strings.Contains(err.Error(), pq) {
		t.Errorf("3000 rows over a bound of 2999: %v", err)
	}
	maxCounts, maxCountsInflated = 3000, 1<<10 // the length column alone inflates past it
	if _, err := LoadCounts(pq, "len"); err == nil || !strings.Contains(err.Error(), "inflates to more than the 1024 bytes") {
		t.Errorf("a column over the inflated bound: %v", err)
	}
}

// A text or Arrow counts file is bounded too: its counts at the same bound as a Parquet
// file's rows, and a text file's bytes (blank lines and comments hold no counts); a pipe
// fed forever stops at either (`--counts <(yes 1)` grew past 3 GB: the review of the
// thirty-eighth session).
func TestCountsBounded(t *testing.T) {
	dir := t.TempDir()
	savedCounts, savedFile := maxCounts, maxCountsFile
	defer func() { maxCounts, maxCountsFile = savedCounts, savedFile }()
	maxCounts, maxCountsFile = 1000, 64<<10
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	if e, err := LoadCounts(write("ok.txt", strings.Repeat("7\n0\n", 1000)), ""); err != nil || len(e.Counts) != 1000 {
		t.Errorf("1000 counts under a bound of 1000: %v", err)
	}
	for _, c := range []struct{ path, want string }{
		{write("many.txt", strings.Repeat("7\n", 1001)), "more than the 1000 token counts a counts file may"},
		{write("blank.txt", strings.Repeat("\n", 64<<10+1)), "more than the 65536 bytes a counts file may"},
		{write("cut.txt", strings.Repeat("\n", 64<<10)+"+1\n"), "more than the 65536 bytes"}, // cut at "+", no count
	} {
		if _, err := LoadCounts(c.path, ""); err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), c.path) {
			t.Errorf("%s: %v, want %q", filepath.Base(c.path), err, c.want)
		}
	}
	for _, line := range []string{"7\n", "\n"} {
		fifo := fifotest.Make(t, filepath.Join(dir, "fifo"))
		go func() { // writes until the reader closes its end
			f, err := os.OpenFile(fifo, os.O_WRONLY, 0)
			if err != nil {
				return
			}
			defer f.Close()
			chunk := []byte(strings.Repeat(line, 512))
			for {
				if _, err := f.Write(chunk); err != nil {
					return
				}
			}
		}()
		err := fifotest.Within(t, "LoadCounts", 10*time.Second, func() error { _, err := LoadCounts(fifo, ""); return err })
		if err == nil || !strings.Contains(err.Error(), "a counts file may") {
			t.Errorf("a pipe of %q forever: %v, want it refused at a bound", line, err)
		}
		os.Remove(fifo)
	}
	maxCounts = 5
	arrowPath := filepath.Join(dir, "docs.arrow")
	writeArrow(t, arrowPath) // 6 counts
	if _, err := LoadCounts(arrowPath, "tokens"); err == nil || !strings.Contains(err.Error(), "more than the 5 token counts") {
		t.Errorf("6 Arrow counts over a bound of 5: %v", err)
	}
}

// A text counts file is read without a string a line and gathered in chunks joined once:
// appending to one slice peaked at about four times the final slice near the 2^24 bound
// (630 MB for 128 MiB of counts). What is allocated for a million counts stays within
// about twice their slice (the chunks and the joined slice), plus the scanner.
func TestTextCountsAllocateTwiceTheirSlice(t *testing.T) {
	const n = 1 << 20
	p := filepath.Join(t.TempDir(), "counts.txt")
	if err := os.WriteFile(p, bytes.Repeat([]byte("1234\n"), n), 0o644); err != nil {
		t.Fatal(err)
	}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	counts, err := textCounts(p)
	runtime.ReadMemStats(&after)
	if err != nil || len(counts) != n || counts[n-1] != 1234 {
		t.Fatalf("%d counts, err %v", len(counts), err)
	}
	final := float64(n * 8)
	if got := float64(after.TotalAlloc - before.TotalAlloc); got > 2.3*final {
		t.Errorf("reading %d counts allocated %.1f MB, %.2fx their %.1f MB slice; want at most 2.3x", n, got/1e6, got/final, final/1e6)
	}
}

// An Arrow IPC stream (pyarrow.ipc.new_stream, polars' write_ipc_stream, a longca rank
// file) is another format than the Arrow IPC file --counts reads: it is refused naming
// the format and how to write the file, not as a damaged file "without its closing magic
// (cut short?)".
func TestArrowStreamCountsNamedAStream(t *testing.T) {
	p := filepath.Join(t.TempDir(), "docs.arrow")
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	rec := record(t)
	defer rec.Release()
	w := ipc.NewWriter(f, ipc.WithSchema(rec.Schema()))
	if err := w.Write(rec); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	_, err = LoadCounts(p, "tokens")
	if err == nil {
		t.Fatal("LoadCounts of an Arrow IPC stream succeeded")
	}
	for _, want := range []string{"docs.arrow", "Arrow IPC stream", "new_file", "Parquet"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("err = %v, want it to contain %q", err, want)
		}
	}
	if strings.Contains(err.Error(), "cut short") || strings.Contains(err.Error(), "damaged") {
		t.Errorf("err = %v: a stream is not a damaged file", err)
	}
}
