package dataset

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"

	"github.com/longca/longca/internal/smallfile"
	"github.com/longca/longca/results"
)

// LoadCounts reads real documents' token counts: from a Parquet file (.parquet) or an
// Arrow IPC file (.arrow, .feather, .ipc), the integer column of that name; from any
// other file, one integer a line (blank lines and # comments are skipped; a column given
// is refused). Counts of 0 are skipped; negative counts are an error.
func LoadCounts(path, column string) (*Empirical, error) {
	var (
		counts []int
		err    error
	)
	switch strings.ToLower(filepath.Ext(path)) {
	case ".parquet":
		counts, err = guarded(path, "Parquet", func() ([]int, error) { return parquetCounts(path, column) })
	case ".arrow", ".feather", ".ipc":
		counts, err = guarded(path, "Arrow IPC", func() ([]int, error) { return arrowCounts(path, column) })
	default:
		if column != "" { // (it was ignored without a word)
			return nil, fmt.Errorf("dataset: %s: a column (%s) names one of a parquet or arrow file's; a text file holds one count a line", path, column)
		}
		counts, err = textCounts(path)
	}
	if err != nil {
		return nil, err
	}
	if len(counts) == 0 {
		return nil, fmt.Errorf("dataset: %s: no positive token counts", path)
	}
	return NewCounts(fileName(path), counts), nil
}

// NewCounts is the source of documents of the given token counts (each positive), named
// name: what LoadCounts makes of a file of that name holding them. Its ID hashes the
// counts, so two files of the same counts are one source.
func NewCounts(name string, counts []int) *Empirical {
	return &Empirical{Name: name, ID: "counts:" + name + "@" + countsHash(counts), Counts: counts}
}

// guarded runs a binary reader, whose libraries index a damaged file's offsets without
// checking them all (a flipped byte of an Arrow footer panicked in arrow-go's flatbuffers
// code): a panic becomes an error naming the file, not a stack trace.
func guarded(path, kind string, read func() ([]int, error)) (counts []int, err error) {
	defer func() {
		if p := recover(); p != nil {
			counts, err = nil, fmt.Errorf("dataset: %s: a damaged %s file (reading it failed: %v)", path, kind, p)
		}
	}()
	return read()
}

// textCounts reads one integer a line: at most maxCounts of them, from at most
// maxCountsFile bytes (a pipe fed forever stops there). A UTF-8 byte-order mark before the
// first line is skipped (a file saved by Notepad was refused as "\ufeff100", the mark
// invisible); a line longer than maxCountsLine is refused naming it, unless its comment
// starts within that (the rest of the comment is skipped).
func textCounts(path string) ([]int, error) {
	f, err := smallfile.Open(path)
	if err != nil {
		return nil, fmt.Errorf("dataset: %w", err)
	}
	defer f.Close()
	// The counts gather in chunks of fixed size, joined once at the end, and each line is
	// read as bytes: appending to one slice and a string a line peaked at about four times
	// the final slice near the bound (630 MB for 2^24 counts), now about twice.
	var chunks [][]int
	cur := make([]int, 0, countsChunk)
	total := 0
	r := &io.LimitedReader{R: f, N: maxCountsFile + 1}
	overSize := func() error {
		return fmt.Errorf("dataset: %s holds more than the %d bytes a counts file may: give one count a line, %d counts at most", path, maxCountsFile, maxCounts)
	}
	br := bufio.NewReaderSize(r, maxCountsLine)
	seen := false // a line with a value before this one
	for line := 1; ; line++ {
		b, err := br.ReadSlice('\n')
		long := errors.Is(err, bufio.ErrBufferFull)
		if err != nil && !long && err != io.EOF {
			return nil, fmt.Errorf("dataset: %s:%d: %w", path, line, err)
		}
		if line == 1 {
			if bytes.HasPrefix(b, []byte("\xff\xfe")) || bytes.HasPrefix(b, []byte("\xfe\xff")) {
				return nil, fmt.Errorf("dataset: %s is UTF-16 text (it starts with a UTF-16 byte-order mark): save it as UTF-8 or ASCII, one count a line", path)
			}
			b = bytes.TrimPrefix(b, utf8BOM)
		}
		if i := bytes.IndexByte(b, '#'); i >= 0 {
			b = b[:i]
		} else if long {
			if r.N <= 0 { // (the file's bound reached inside the line)
				return nil, overSize()
			}
			return nil, fmt.Errorf("dataset: %s:%d: a line of more than %d bytes (%s): give one count a line (a # starts a comment)", path, line, maxCountsLine, quoteCut(b))
		}
		if t := bytes.TrimSpace(b); len(t) > 0 {
			v, ok := digits(t)
			if !ok {
				if r.N <= 0 { // (a line cut at the bound)
					return nil, overSize()
				}
				return nil, notACount(path, line, t, !seen)
			}
			seen = true
			if v > 0 {
				if total >= maxCounts {
					return nil, tooManyCounts(path)
				}
				if len(cur) == cap(cur) {
					chunks, cur = append(chunks, cur), make([]int, 0, countsChunk)
				}
				cur = append(cur, v)
				total++
			}
		}
		for errors.Is(err, bufio.ErrBufferFull) { // the rest of a long comment
			_, err = br.ReadSlice('\n')
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("dataset: %s:%d: %w", path, line, err)
		}
	}
	if r.N <= 0 {
		return nil, overSize()
	}
	counts := make([]int, 0, total)
	for _, c := range append(chunks, cur) {
		counts = append(counts, c...)
	}
	return counts, nil
}

// maxCountsLine bounds a line of a text counts file (and is its reader's buffer): a count
// is a few digits, and a longer line is refused naming it (bufio.Scanner's "token too
// long" named neither the line nor the fix).
const maxCountsLine = 64 << 10

// utf8BOM is the byte-order mark some editors write at the start of a UTF-8 file.
var utf8BOM = []byte("\xef\xbb\xbf")

// notACount is the error of a line t (its comment and spaces cut) that holds no count,
// with a hint where it looks like a CSV line, a number written with separators, or
// (first: no count before it) a header.
func notACount(path string, line int, t []byte, first bool) error {
	hint := "one non-negative integer a line"
	switch {
	case !isText(t):
		hint = "binary, not text: a Parquet or Arrow file is read as one by its name's .parquet or .arrow, with --column"
	case thousands(t):
		hint = "write a count without separators: 1000, not 1,000; or, of a CSV file, give the column of counts alone"
	case bytes.ContainsAny(t, ",;\t"):
		hint = "one integer a line: of a CSV or TSV file give the column of counts alone (its header commented out with #), or the file as .parquet or .arrow with --column"
	case first && (t[0] == '_' || t[0] == '"' || 'a' <= t[0]|0x20 && t[0]|0x20 <= 'z'):
		hint = "one integer a line: a header line? start it with # to comment it out"
	}
	size := ""
	if len(t) > 80 {
		size = fmt.Sprintf(" (%d bytes)", len(t))
	}
	return fmt.Errorf("dataset: %s:%d: %s%s is not a token count (%s)", path, line, quoteCut(t), size, hint)
}

// thousands says whether t is a number written with thousands separators (1,000 or
// 12,345,678: one to three digits, then groups of three): a CSV line of numbers, such as
// "17,2048" (a document's id and its count), is not one, and is told of CSV files (it was
// told to write its count "without separators").
func thousands(t []byte) bool {
	groups := bytes.Split(t, []byte(","))
	if len(groups) < 2 || len(groups[0]) < 1 || len(groups[0]) > 3 {
		return false
	}
	for i, g := range groups {
		if len(bytes.Trim(g, "0123456789")) != 0 || i > 0 && len(g) != 3 {
			return false
		}
	}
	return true
}

// isText says whether b is UTF-8 with no control characters but tabs.
func isText(b []byte) bool {
	for _, r := range string(b) {
		if r == utf8.RuneError || r < 0x20 && r != '\t' || r == 0x7f {
			return false
		}
	}
	return true
}

// quoteCut quotes b for a message, cut to about 80 characters (at a character's start)
// with "..." after it: a 60,000-byte line was echoed whole into a one-line error, and
// /dev/urandom's into a screenful of escapes.
func quoteCut(b []byte) string {
	const most = 80
	if len(b) <= 2*most { // (quoted at most 4 characters a byte: no more than needed)
		if q := strconv.Quote(string(b)); len(q) <= most+2 {
			return q
		}
	}
	n := min(len(b)-1, most)
	for ; n > 1; n-- {
		if utf8.RuneStart(b[n]) && len(strconv.Quote(string(b[:n]))) <= most+2 {
			break
		}
	}
	return strconv.Quote(string(b[:n])) + "..."
}

// countsChunk is how many counts textCounts gathers before it starts another chunk.
const countsChunk = 1 << 16

// digits reads a non-negative decimal integer (an optional +, then digits, as
// strconv.Atoi takes them) without making a string; false for anything else or one
// past the int's range.
func digits(b []byte) (int, bool) {
	if len(b) > 0 && b[0] == '+' {
		b = b[1:]
	}
	if len(b) == 0 {
		return 0, false
	}
	v := 0
	for _, c := range b {
		if c < '0' || c > '9' || v > (math.MaxInt-int(c-'0'))/10 {
			return 0, false
		}
		v = v*10 + int(c-'0')
	}
	return v, true
}

// A counts file's bounds: the bytes of an Arrow or a text file, and what an Arrow file's
// compressed batches or a Parquet file's column may inflate to (a file that also holds
// the documents' text may not fit, and is told to hold the lengths alone); and the counts
// (a Parquet file's rows) any file may give: as many as the documents one packed sequence
// may hold (MaxDocs, 128 MiB of ints), for a few KB of Parquet can hold billions of rows
// of one value. A random sample of a larger corpus's counts draws the same lengths. A
// damaged inflated length or row count is refused by these bounds before anything is
// allocated for it.
var (
	maxCountsFile     int64 = 1 << 30
	maxCountsInflated int64 = 1 << 30
	maxCounts               = MaxDocs
)

// openFooterFile opens a binary counts file, which is read by its footer: a regular file
// only (kind names its format in the error, "an Arrow").
func openFooterFile(path, kind string) (*os.File, os.FileInfo, error) {
	f, err := smallfile.Open(path)
	if err != nil {
		return nil, nil, fmt.Errorf("dataset: %w", err)
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, nil, fmt.Errorf("dataset: %w", err)
	}
	if !fi.Mode().IsRegular() {
		f.Close()
		return nil, nil, fmt.Errorf("dataset: %s is %s: %s file is read by its footer: give a regular file", path, smallfile.Kind(fi.Mode()), kind)
	}
	return f, fi, nil
}

// appendColumn is appendCounts of one batch's column of a file, its error naming the file
// and the column (past maxCounts, tooManyCounts).
func appendColumn(counts []int, col arrow.Array, path, column string) ([]int, error) {
	counts, err := appendCounts(counts, col)
	if errors.Is(err, errTooManyCounts) {
		return nil, tooManyCounts(path)
	}
	if err != nil {
		return nil, fmt.Errorf("dataset: %s: column %q: %w", path, column, err)
	}
	return counts, nil
}

// tooManyCounts is the error of a file that holds more than maxCounts counts.
func tooManyCounts(path string) error {
	return fmt.Errorf("dataset: %s holds more than the %d token counts a counts file may: give a random sample of its documents' counts", path, maxCounts)
}

// arrowCounts reads the column from every record batch of an Arrow IPC file.
func arrowCounts(path, column string) ([]int, error) {
	f, fi, err := openFooterFile(path, "an Arrow")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if fi.Size() > maxCountsFile {
		return nil, fmt.Errorf("dataset: %s holds %d bytes, more than the %d a counts file may: write the length column alone", path, fi.Size(), maxCountsFile)
	}
	data := make([]byte, fi.Size())
	if _, err := io.ReadFull(f, data); err != nil {
		return nil, fmt.Errorf("dataset: %s: %w", path, err)
	}
	// an Arrow IPC stream (pyarrow.ipc.new_stream, polars' write_ipc_stream, a longca rank
	// file) opens with a message's continuation token, not the file format's magic: it is
	// another format, not a damaged file (it was refused as "without its closing magic (cut
	// short?)")
	if len(data) >= 8 && !bytes.HasPrefix(data, []byte("ARROW1")) && binary.LittleEndian.Uint32(data) == 0xffffffff {
		return nil, fmt.Errorf("dataset: %s is an Arrow IPC stream, not an Arrow IPC file: write it in the file format (pyarrow.ipc.new_file or pyarrow.feather.write_feather, polars' write_ipc) or as Parquet; of longca's rank files, give the merged file of longca merge", path)
	}
	// arrow-go trusts the file's metadata: a damaged vector length allocates what it says
	// (a flipped byte of a footer asked for 375 GB), so the metadata is verified first
	if err := results.VerifyArrowFile(data, maxCountsInflated); err != nil {
		return nil, fmt.Errorf("dataset: %s: not an Arrow IPC file longca can read: %w", path, err)
	}
	r, err := ipc.NewMappedFileReader(data, ipc.WithAllocator(memory.DefaultAllocator), // (its buffers point into data: no copy)
		ipc.WithMetadataSizeLimit(fi.Size()), ipc.WithBodySizeLimit(fi.Size()))
	if err != nil {
		return nil, fmt.Errorf("dataset: %s: not an Arrow IPC file: %w", path, err)
	}
	defer r.Close()
	idx, err := columnIndex(path, r.Schema(), column)
	if err != nil {
		return nil, err
	}
	var counts []int
	for i := 0; i < r.NumRecords(); i++ {
		rec, err := r.RecordBatch(i)
		if err != nil {
			return nil, fmt.Errorf("dataset: %s: record batch %d: %w", path, i, err)
		}
		if counts, err = appendColumn(counts, rec.Column(idx), path, column); err != nil {
			return nil, err
		}
	}
	return counts, nil
}

// parquetCounts reads the column of a Parquet file, and only it, a batch at a time. A
// column's pages may inflate far past the file (150 million rows of one value ZSTD and
// dictionary encoded are 93 KB): its rows and its inflated bytes are bounded by the
// footer's metadata before any are read.
func parquetCounts(path, column string) ([]int, error) {
	f, _, err := openFooterFile(path, "a Parquet")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	pf, err := file.NewParquetReader(f)
	if err != nil {
		return nil, fmt.Errorf("dataset: %s: not a Parquet file: %w", path, err)
	}
	fr, err := pqarrow.NewFileReader(pf, pqarrow.ArrowReadProperties{BatchSize: parquetBatch}, memory.DefaultAllocator)
	if err != nil {
		return nil, fmt.Errorf("dataset: %s: not a Parquet file: %w", path, err)
	}
	fields := make([]arrow.Field, len(fr.Manifest.Fields)) // (the manifest's order is the schema's)
	for i, f := range fr.Manifest.Fields {
		fields[i] = *f.Field
	}
	idx, err := columnIndex(path, arrow.NewSchema(fields, nil), column)
	if err != nil {
		return nil, err
	}
	field := fr.Manifest.Fields[idx]
	if !field.IsLeaf() || !countType(field.Field.Type) {
		return nil, fmt.Errorf("dataset: %s: column %q: type %s is not an integer type", path, column, field.Field.Type)
	}
	var rows, inflated int64
	for i := 0; i < pf.NumRowGroups(); i++ {
		rg := pf.MetaData().RowGroup(i)
		cc, err := rg.ColumnChunk(field.ColIndex)
		if err != nil {
			return nil, fmt.Errorf("dataset: %s: not a Parquet file: %w", path, err)
		}
		n, size := rg.NumRows(), cc.TotalUncompressedSize()
		if n < 0 || size < 0 {
			return nil, fmt.Errorf("dataset: %s: a damaged Parquet file (row group %d: %d rows, %d bytes)", path, i, n, size)
		}
		if n > int64(maxCounts)-rows {
			return nil, fmt.Errorf("dataset: %s holds more than the %d rows a counts file may: give a random sample of its documents' counts", path, maxCounts)
		}
		if size > maxCountsInflated-inflated {
			return nil, fmt.Errorf("dataset: %s: column %q inflates to more than the %d bytes a counts file may: give one integer length a document", path, column, maxCountsInflated)
		}
		rows, inflated = rows+n, inflated+size
	}
	rr, err := fr.GetRecordReader(context.Background(), []int{field.ColIndex}, nil)
	if err != nil {
		return nil, fmt.Errorf("dataset: %s: not a Parquet file: %w", path, err)
	}
	defer rr.Release()
	counts := make([]int, 0, rows)
	for rr.Next() {
		if counts, err = appendColumn(counts, rr.RecordBatch().Column(0), path, column); err != nil {
			return nil, err
		}
	}
	if err := rr.Err(); err != nil {
		return nil, fmt.Errorf("dataset: %s: column %q: %w", path, column, err)
	}
	return counts, nil
}

// parquetBatch is the rows a Parquet column is read in at a time.
const parquetBatch = 1 << 20

// countType says whether valueGetter reads a column of type t.
func countType(t arrow.DataType) bool {
	switch t.ID() {
	case arrow.INT8, arrow.INT16, arrow.INT32, arrow.INT64, arrow.UINT8, arrow.UINT16, arrow.UINT32, arrow.UINT64, arrow.FLOAT32, arrow.FLOAT64:
		return true
	}
	return false
}

// columnIndex finds the column by name, or names the ones there are.
func columnIndex(path string, s *arrow.Schema, column string) (int, error) {
	var names []string
	for i, f := range s.Fields() {
		if f.Name == column {
			return i, nil
		}
		names = append(names, f.Name)
	}
	if column == "" {
		return 0, fmt.Errorf("dataset: %s: name the column of token counts (--column); the file has: %s", path, strings.Join(names, ", "))
	}
	return 0, fmt.Errorf("dataset: %s has no column %q; it has: %s", path, column, strings.Join(names, ", "))
}

// appendCounts appends an integer (or integral floating-point) column's non-null,
// positive values.
func appendCounts(counts []int, col arrow.Array) ([]int, error) {
	get, err := valueGetter(col)
	if err != nil {
		return nil, err
	}
	for i := 0; i < col.Len(); i++ {
		if col.IsNull(i) {
			continue
		}
		v, ok := get(i)
		if !ok || v < 0 {
			return nil, fmt.Errorf("row %d is not a non-negative integer token count", i)
		}
		if v > 0 {
			if len(counts) >= maxCounts {
				return nil, errTooManyCounts
			}
			counts = append(counts, int(v))
		}
	}
	return counts, nil
}

// errTooManyCounts is appendCounts' error past maxCounts (its caller names the file).
var errTooManyCounts = errors.New("too many counts")

// valueGetter returns a reader of row i as an int64 for the numeric column types.
func valueGetter(col arrow.Array) (func(int) (int64, bool), error) {
	switch a := col.(type) {
	case *array.Int64:
		return func(i int) (int64, bool) { return a.Value(i), true }, nil
	case *array.Int32:
		return func(i int) (int64, bool) { return int64(a.Value(i)), true }, nil
	case *array.Int16:
		return func(i int) (int64, bool) { return int64(a.Value(i)), true }, nil
	case *array.Int8:
		return func(i int) (int64, bool) { return int64(a.Value(i)), true }, nil
	case *array.Uint64:
		return func(i int) (int64, bool) { v := a.Value(i); return int64(v), v <= math.MaxInt64 }, nil
	case *array.Uint32:
		return func(i int) (int64, bool) { return int64(a.Value(i)), true }, nil
	case *array.Uint16:
		return func(i int) (int64, bool) { return int64(a.Value(i)), true }, nil
	case *array.Uint8:
		return func(i int) (int64, bool) { return int64(a.Value(i)), true }, nil
	case *array.Float64:
		return func(i int) (int64, bool) { return floatCount(a.Value(i)) }, nil
	case *array.Float32:
		return func(i int) (int64, bool) { return floatCount(float64(a.Value(i))) }, nil
	}
	return nil, fmt.Errorf("type %s is not an integer type", col.DataType())
}

func floatCount(v float64) (int64, bool) {
	if v != math.Trunc(v) || math.IsInf(v, 0) || v > 1<<53 {
		return 0, false
	}
	return int64(v), true
}
