package results

import (
	"fmt"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/bitutil"
)

// identityColumns must be in every results file, with these types: a file without them
// is not longca's (and every decoded row costs at least their bytes on disk, which bounds
// what decoding a damaged file may allocate).
var identityColumns = map[string]arrow.DataType{
	"run_id": arrow.BinaryTypes.String,
	"rank":   arrow.PrimitiveTypes.Int64,
	"status": arrow.BinaryTypes.String,
}

// checkSchema refuses a schema that results files never have (its callers wrap the error
// in ErrNotResults, which says "not a longca results file"): a column type the codec
// does not write, a column of Row's (or ChecksumColumn) of another type than the codec
// gives it, a column name given twice, or missing identity columns.
func checkSchema(s *arrow.Schema) error {
	if s == nil {
		return fmt.Errorf("no schema")
	}
	seen := make(map[string]bool, len(s.Fields()))
	for _, f := range s.Fields() {
		// (merge and report match columns by name: a file's columns differ from version to
		// version, and a name given twice would say two things)
		if seen[f.Name] {
			return fmt.Errorf("column %s appears twice", f.Name)
		}
		seen[f.Name] = true
		switch f.Type.ID() {
		case arrow.STRING, arrow.INT64, arrow.UINT64, arrow.FLOAT64, arrow.BOOL, arrow.TIMESTAMP:
		default:
			return fmt.Errorf("column %s has type %s, which results files do not use", f.Name, f.Type)
		}
		// (Rows refused such a column only when a row was decoded, as an error of no
		// kind: report and selftest merged exited 1 on another program's file.)
		if want, ok := columnTypes[f.Name]; ok && !arrow.TypeEqual(f.Type, want) {
			return fmt.Errorf("column %s has type %s where results files have %s", f.Name, f.Type, want)
		}
	}
	for name, typ := range identityColumns {
		idx := s.FieldIndices(name)
		if len(idx) != 1 || !arrow.TypeEqual(s.Field(idx[0]).Type, typ) {
			return fmt.Errorf("no %s column of type %s", name, typ)
		}
	}
	return nil
}

// validateBatch checks that every column of rec holds as many values as the batch has
// rows, and that its buffers are long enough for them, so that reading any value is
// in bounds. It reads no value but the string offsets.
func validateBatch(rec arrow.RecordBatch) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("malformed batch: %v", p)
		}
	}()
	n := rec.NumRows()
	if n < 0 {
		return fmt.Errorf("batch claims %d rows", n)
	}
	if int(rec.NumCols()) != len(rec.Schema().Fields()) {
		return fmt.Errorf("batch has %d columns, its schema %d", rec.NumCols(), len(rec.Schema().Fields()))
	}
	for c, col := range rec.Columns() {
		name := rec.Schema().Field(c).Name
		if int64(col.Len()) != n {
			return fmt.Errorf("column %s holds %d values in a batch of %d rows", name, col.Len(), n)
		}
		if err := validateArray(col); err != nil {
			return fmt.Errorf("column %s: %w", name, err)
		}
	}
	return nil
}

func validateArray(a arrow.Array) error {
	d := a.Data()
	off, n := d.Offset(), d.Len()
	if off < 0 || n < 0 {
		return fmt.Errorf("offset %d, length %d", off, n)
	}
	end := off + n
	bufs := d.Buffers()
	size := func(i int) int {
		if i >= len(bufs) || bufs[i] == nil {
			return 0
		}
		return bufs[i].Len()
	}
	bitmapBytes := (end + 7) / 8
	// The stored null count is held to the bitmap: arrow-go takes a negative one as
	// unknown and counts the bitmap when asked (a panic where there is none: merge's
	// concatColumn), and writes a column whose count is its length with every bit cleared
	// (a merge wrote values as nulls). Counting is a popcount over the bitmap's bytes.
	if d.NullN() < 0 {
		return fmt.Errorf("a null count of %d", d.NullN())
	}
	if d.NullN() > 0 && size(0) < bitmapBytes {
		return fmt.Errorf("%d nulls but a validity bitmap of %d bytes for %d values", d.NullN(), size(0), n)
	}
	if d.NullN() > n {
		return fmt.Errorf("%d nulls in %d values", d.NullN(), n)
	}
	if d.NullN() > 0 {
		if zeros := n - bitutil.CountSetBits(bufs[0].Bytes(), off, n); zeros != d.NullN() {
			return fmt.Errorf("a null count of %d where its validity bitmap marks %d of %d values null", d.NullN(), zeros, n)
		}
	}
	switch a := a.(type) {
	case *array.String:
		if n == 0 {
			return nil
		}
		if size(1) < 4*(end+1) {
			return fmt.Errorf("offsets buffer of %d bytes for %d strings", size(1), n)
		}
		return a.ValidateFull()
	case *array.Boolean:
		if size(1) < bitmapBytes {
			return fmt.Errorf("values bitmap of %d bytes for %d values", size(1), n)
		}
	case *array.Int64, *array.Uint64, *array.Float64, *array.Timestamp:
		if size(1) < 8*end {
			return fmt.Errorf("values buffer of %d bytes for %d values", size(1), n)
		}
	default:
		return fmt.Errorf("type %s is not read", a.DataType())
	}
	return nil
}

// columnTypes is the type of every column the codec writes, by name.
var columnTypes = func() map[string]arrow.DataType {
	m := map[string]arrow.DataType{ChecksumColumn: arrow.PrimitiveTypes.Uint64}
	for _, c := range columns {
		m[c.name] = c.typ
	}
	return m
}()

// exactBuffers holds a validated batch of a rank file to buffers sized for its rows, as
// arrow-go's IPC writer writes them (Writer's, and the tests' slices): a string column's
// offsets 4 bytes a value and one more, its characters ending where its last offset says
// (it cuts both to the values written), an 8-byte column's values and a bitmap (of one
// bit a value) at least what the rows need and at most that padded to 64 bytes (it sends
// a buffer's padding up to there). Every results file has string columns (run_id,
// status: checkSchema), so a batch's row count is said three times over: in its length,
// in every column's length (validateBatch), and exactly in those columns' buffer
// lengths, which lie apart in the metadata. A damaged length (a flipped byte, or a
// batch's and its columns' lengths lowered together) then cannot drop rows silently,
// which the rows' checksums alone would not see; a rank file once had to hold one row a
// batch for that, and files so written meet this too.
func exactBuffers(rec arrow.RecordBatch) error {
	n := int(rec.NumRows())
	for c, col := range rec.Columns() {
		if err := exactArray(col, n); err != nil {
			return fmt.Errorf("column %s has %v for its %d rows: the batch's length is not its buffers'", rec.Schema().Field(c).Name, err, n)
		}
	}
	return nil
}

func exactArray(a arrow.Array, n int) error {
	d := a.Data()
	bufs := d.Buffers()
	size := func(i int) int {
		if i >= len(bufs) || bufs[i] == nil {
			return 0
		}
		return bufs[i].Len()
	}
	upTo64 := func(what string, i, need int) error {
		if s := size(i); s < need || s > (need+63)&^63 {
			return fmt.Errorf("a %s of %d bytes", what, s)
		}
		return nil
	}
	if d.Offset() != 0 {
		return fmt.Errorf("offset %d", d.Offset())
	}
	if d.NullN() > 0 {
		if err := upTo64("validity bitmap", 0, (n+7)/8); err != nil {
			return err
		}
	}
	switch a := a.(type) {
	case *array.String:
		if n == 0 {
			return nil
		}
		if s := size(1); s != 4*(n+1) {
			return fmt.Errorf("an offsets buffer of %d bytes", s)
		}
		if s, end := size(2), int(a.ValueOffsets()[n]); s != end { // (validated: n+1 offsets)
			return fmt.Errorf("%d bytes of characters where its last offset is %d", s, end)
		}
	case *array.Boolean:
		return upTo64("values bitmap", 1, (n+7)/8)
	case *array.Int64, *array.Uint64, *array.Float64, *array.Timestamp:
		return upTo64("values buffer", 1, 8*n)
	default:
		return fmt.Errorf("type %s, which results files do not use", a.DataType())
	}
	return nil
}
