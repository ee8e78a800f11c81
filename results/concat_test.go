package results

import (
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// concatColumn joins every column type of the schema as array.Concatenate does: the same
// values, nulls and null counts, of parts cut anywhere (slices at offsets that are not a
// multiple of 8, parts of no rows, of one, of many), with and without nulls.
func TestConcatColumnIsConcatenate(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	rows := make([]Row, 300)
	for i := range rows {
		rows[i] = randomRow(rng, i)
	}
	rec := Record(Schema(nil), rows)
	defer rec.Release()
	for trial := 0; trial < 50; trial++ {
		var cuts []int64
		for at := int64(0); at < rec.NumRows(); {
			n := int64(rng.IntN(3))
			switch rng.IntN(3) {
			case 1:
				n = 1
			case 2:
				n = int64(rng.IntN(70))
			}
			n = min(n, rec.NumRows()-at)
			cuts = append(cuts, at, at+n)
			at += n
		}
		for c, col := range rec.Columns() {
			var parts []arrow.Array
			for i := 0; i < len(cuts); i += 2 {
				parts = append(parts, array.NewSlice(col, cuts[i], cuts[i+1]))
			}
			got, ok := concatColumn(col.DataType(), parts)
			want, err := array.Concatenate(parts, memory.DefaultAllocator)
			for _, p := range parts {
				p.Release()
			}
			if !ok || err != nil {
				t.Fatalf("column %s: joined %v, Concatenate %v", rec.Schema().Field(c).Name, ok, err)
			}
			if !array.Equal(got, want) || got.NullN() != want.NullN() || got.Len() != want.Len() {
				t.Fatalf("column %s, parts %v: joined %v (%d nulls), Concatenate %v (%d nulls)", rec.Schema().Field(c).Name, cuts, got, got.NullN(), want, want.NullN())
			}
			got.Release()
			want.Release()
		}
	}
	// another type, or parts of another type than the column's, are left to Concatenate
	i := array.NewInt32Builder(memory.DefaultAllocator)
	i.Append(1)
	a := i.NewArray()
	defer a.Release()
	i.Release()
	if _, ok := concatColumn(a.DataType(), []arrow.Array{a}); ok {
		t.Error("int32 joined")
	}
	if _, ok := concatColumn(arrow.PrimitiveTypes.Int64, []arrow.Array{a}); ok {
		t.Error("an int32 part joined into an int64 column")
	}
}

// Strings whose characters together pass what a column's 32-bit offsets address (2 GiB:
// a merge's one batch of every row, or a joined run of a file's small batches after one of
// nearly 2 GiB) are refused by join, as array.Concatenate refuses them, not joined with
// their offsets wrapped round to negative ones (a merged file its own reader refuses, a
// panic reading a value). The parts share one buffer of 1 GiB that nothing writes.
func TestJoinRefusesStringsPast2GiB(t *testing.T) {
	const size = 1<<30 + 1 // two of them pass math.MaxInt32
	offs := arrow.Int32Traits.CastToBytes([]int32{0, size})
	d := array.NewData(arrow.BinaryTypes.String, 1, []*memory.Buffer{nil, memory.NewBufferBytes(offs), memory.NewBufferBytes(make([]byte, size))}, nil, 0, 0)
	a := array.MakeFromData(d)
	d.Release()
	defer a.Release()
	s := arrow.NewSchema([]arrow.Field{{Name: "s", Type: arrow.BinaryTypes.String}}, nil)
	b := array.NewRecordBatch(s, []arrow.Array{a}, 1)
	defer b.Release()
	rec, err := join(s, []arrow.RecordBatch{b, b}, 2)
	if err == nil {
		defer rec.Release()
		col := rec.Column(0).(*array.String)
		t.Fatalf("joined 2 strings of %d bytes into one column, offsets %v (valid: %v); want an error", size, col.ValueOffsets(), col.ValidateFull())
	}
	if !strings.Contains(err.Error(), "offset overflow") {
		t.Fatalf("join: %v, want array.Concatenate's offset overflow", err)
	}
}
