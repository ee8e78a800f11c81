package results

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// writeForeign writes one row of schema s (its columns filled by fill) as an Arrow IPC
// file (file true) or stream.
func writeForeign(t *testing.T, s *arrow.Schema, file bool, fill func(b *array.RecordBuilder)) string {
	t.Helper()
	b := array.NewRecordBuilder(memory.DefaultAllocator, s)
	defer b.Release()
	fill(b)
	rec := b.NewRecordBatch()
	defer rec.Release()
	path := filepath.Join(t.TempDir(), "foreign.arrow")
	if file {
		if err := WriteArrowFile(path, rec); err != nil {
			t.Fatal(err)
		}
		return path
	}
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	w := ipc.NewWriter(f, ipc.WithSchema(s))
	if err := w.Write(rec); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestForeignFileMessages: another program's Arrow file is refused in one plain line: it
// said "not a longca results file: not a longca results file" (the schema check's
// reason and ErrNotResults each said it), and a nested column "not written by longca
// (<nil>)".
func TestForeignFileMessages(t *testing.T) {
	other := arrow.NewSchema([]arrow.Field{{Name: "x", Type: arrow.PrimitiveTypes.Int64}}, nil)
	nested := arrow.NewSchema([]arrow.Field{{Name: "l", Type: arrow.ListOf(arrow.PrimitiveTypes.Int64)}}, nil)
	for _, file := range []bool{true, false} {
		p := writeForeign(t, other, file, func(b *array.RecordBuilder) { b.Field(0).(*array.Int64Builder).Append(1) })
		_, err := Open(p)
		if err == nil || strings.Count(err.Error(), "not a longca results file") != 1 {
			t.Errorf("another schema (file %v): %v, want \"not a longca results file\" once", file, err)
		}
		p = writeForeign(t, nested, file, func(b *array.RecordBuilder) {
			lb := b.Field(0).(*array.ListBuilder)
			lb.Append(true)
			lb.ValueBuilder().(*array.Int64Builder).Append(3)
		})
		_, err = Open(p)
		if err == nil || !strings.Contains(err.Error(), "a nested column: not written by longca") || strings.Contains(err.Error(), "<nil>") {
			t.Errorf("a nested column (file %v): %v, want it named without \"<nil>\"", file, err)
		}
	}
}
