package results

import (
	"encoding/binary"
	"fmt"
	"hash/crc64"
	"math"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// ChecksumColumn is the last column of every file: per row, the CRC-64 (ECMA) of every
// other column of the row (its name and type, whether it is null, and its value), in
// schema order. It is computed from the columns a file has, so it covers columns added after
// this one was introduced, and merge carries it unchanged, but for rows it gives columns
// their file lacked (a file of an older longca: conform), whose checksum it checks and
// then computes anew.
const ChecksumColumn = "row_checksum"

var crcTable = crc64.MakeTable(crc64.ECMA)

// rowChecksums computes the checksum of every row of rec from its columns other than
// ChecksumColumn. rec must have been validated (validateBatch): the arrays are read
// without bounds checks of their own.
func rowChecksums(rec arrow.RecordBatch) ([]uint64, error) {
	n := int(rec.NumRows())
	sums := make([]uint64, n)
	var buf []byte
	fields := rec.Schema().Fields()
	names := make([]string, len(fields)) // (made once a batch, not once a value)
	for c, f := range fields {
		names[c] = f.Name + " " + f.Type.String()
	}
	for i := 0; i < n; i++ {
		buf = buf[:0]
		for c, f := range fields {
			if f.Name == ChecksumColumn {
				continue
			}
			var err error
			if buf, err = appendValueBytes(buf, names[c], rec.Column(c), i); err != nil {
				return nil, err
			}
		}
		sums[i] = crc64.Checksum(buf, crcTable)
	}
	return sums, nil
}

// appendValueBytes appends the canonical bytes of row i of column a, named name (with
// its type).
func appendValueBytes(buf []byte, name string, a arrow.Array, i int) ([]byte, error) {
	buf = binary.LittleEndian.AppendUint32(buf, uint32(len(name)))
	buf = append(buf, name...)
	if a.IsNull(i) {
		return append(buf, 0), nil
	}
	buf = append(buf, 1)
	switch a := a.(type) {
	case *array.String:
		v := a.Value(i)
		buf = binary.LittleEndian.AppendUint32(buf, uint32(len(v)))
		return append(buf, v...), nil
	case *array.Int64:
		return binary.LittleEndian.AppendUint64(buf, uint64(a.Value(i))), nil
	case *array.Uint64:
		return binary.LittleEndian.AppendUint64(buf, a.Value(i)), nil
	case *array.Float64:
		return binary.LittleEndian.AppendUint64(buf, math.Float64bits(a.Value(i))), nil
	case *array.Timestamp:
		return binary.LittleEndian.AppendUint64(buf, uint64(a.Value(i))), nil
	case *array.Boolean:
		if a.Value(i) {
			return append(buf, 1), nil
		}
		return append(buf, 0), nil
	}
	return nil, fmt.Errorf("column %s has type %s, which results files do not use", name, a.DataType())
}

// withChecksums returns rec with its ChecksumColumn filled (rec's own is replaced).
func withChecksums(rec arrow.RecordBatch) (arrow.RecordBatch, error) {
	sums, err := rowChecksums(rec)
	if err != nil {
		return nil, err
	}
	b := array.NewUint64Builder(memory.DefaultAllocator)
	defer b.Release()
	b.AppendValues(sums, nil)
	col := b.NewArray()
	defer col.Release()
	idx := rec.Schema().FieldIndices(ChecksumColumn)
	if len(idx) != 1 {
		return nil, fmt.Errorf("results: schema has %d %s columns, want 1", len(idx), ChecksumColumn)
	}
	cols := make([]arrow.Array, rec.NumCols())
	copy(cols, rec.Columns())
	cols[idx[0]] = col
	return array.NewRecordBatch(rec.Schema(), cols, rec.NumRows()), nil
}

// verifyChecksums compares every row's stored checksum with its columns. A batch
// without the checksum column (a file written before it existed) is not verified:
// ok is false, err nil.
func verifyChecksums(rec arrow.RecordBatch) (verified bool, err error) {
	idx := rec.Schema().FieldIndices(ChecksumColumn)
	if len(idx) == 0 {
		return false, nil
	}
	stored, isU64 := rec.Column(idx[0]).(*array.Uint64)
	if len(idx) > 1 || !isU64 {
		return false, fmt.Errorf("the %s column is not one uint64 column", ChecksumColumn)
	}
	sums, err := rowChecksums(rec)
	if err != nil {
		return false, err
	}
	for i, s := range sums {
		if stored.IsNull(i) {
			return false, fmt.Errorf("row %d has no checksum", i)
		}
		if stored.Value(i) != s {
			return false, fmt.Errorf("row %d fails its checksum (stored %016x, computed %016x): the file is damaged", i, stored.Value(i), s)
		}
	}
	return true, nil
}
