package results

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// TestWrongColumnTypeIsNotResults: a file with the identity columns and a column of
// Row's under another type (median_ms as text, tflops as an integer) is no results file.
// It was opened, and Rows then failed with an error of no kind, which report and
// selftest merged answered with exit status 1 instead of 2.
func TestWrongColumnTypeIsNotResults(t *testing.T) {
	fields := []arrow.Field{
		{Name: "run_id", Type: arrow.BinaryTypes.String}, {Name: "rank", Type: arrow.PrimitiveTypes.Int64},
		{Name: "status", Type: arrow.BinaryTypes.String}, {Name: "median_ms", Type: arrow.BinaryTypes.String},
	}
	for _, tc := range []struct {
		name  string
		field arrow.Field
	}{
		{"median_ms", arrow.Field{Name: "median_ms", Type: arrow.BinaryTypes.String}},
		{"tflops", arrow.Field{Name: "tflops", Type: arrow.PrimitiveTypes.Int64}},
		{ChecksumColumn, arrow.Field{Name: ChecksumColumn, Type: arrow.PrimitiveTypes.Int64}},
	} {
		s := arrow.NewSchema(append(append([]arrow.Field{}, fields[:3]...), tc.field), nil)
		b := array.NewRecordBuilder(memory.DefaultAllocator, s)
		b.Field(0).(*array.StringBuilder).Append("r")
		b.Field(1).(*array.Int64Builder).Append(0)
		b.Field(2).(*array.StringBuilder).Append("ok")
		switch fb := b.Field(3).(type) {
		case *array.StringBuilder:
			fb.Append("fast")
		case *array.Int64Builder:
			fb.Append(7)
		}
		rec := b.NewRecordBatch()
		path := filepath.Join(t.TempDir(), "x.arrow")
		f, err := os.Create(path)
		if err != nil {
			t.Fatal(err)
		}
		w := ipc.NewWriter(f, ipc.WithSchema(s))
		if err := w.Write(rec); err != nil {
			t.Fatal(err)
		}
		w.Close()
		f.Close()
		rec.Release()
		b.Release()

		_, err = Open(path)
		if !errors.Is(err, ErrNotResults) || !strings.Contains(err.Error(), "column "+tc.name+" has type") {
			t.Errorf("%s of another type: Open gave %v, want ErrNotResults naming the column", tc.name, err)
		}
		if _, err := LoadChecked(path); !errors.Is(err, ErrNotResults) {
			t.Errorf("%s of another type: LoadChecked gave %v, want ErrNotResults", tc.name, err)
		}
	}
}
