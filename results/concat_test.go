package results

import (
	"math/rand/v2"
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
