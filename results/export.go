package results

import (
	"fmt"
	"io"
	"os"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/csv"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/compress"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
)

// writeVia creates path, lets fn fill it, and closes it, reporting the first error.
func writeVia(path string, fn func(f *os.File) error) error {
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("results: %w", err)
	}
	if err := fn(f); err != nil {
		f.Close()
		return fmt.Errorf("results: writing %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("results: closing %s: %w", path, err)
	}
	return nil
}

// WriteArrowFile writes rec as an Arrow IPC file (random access, with footer).
func WriteArrowFile(path string, rec arrow.RecordBatch) error {
	return writeVia(path, func(f *os.File) error {
		w, err := ipc.NewFileWriter(f, ipc.WithSchema(rec.Schema()))
		if err != nil {
			return err
		}
		if err := w.Write(rec); err != nil {
			return err
		}
		return w.Close()
	})
}

// WriteParquet writes rec as a Parquet file (zstd), keeping the Arrow schema and its
// metadata.
func WriteParquet(path string, rec arrow.RecordBatch) error {
	return writeVia(path, func(f *os.File) error {
		tbl := array.NewTableFromRecords(rec.Schema(), []arrow.RecordBatch{rec})
		defer tbl.Release()
		props := parquet.NewWriterProperties(parquet.WithCompression(compress.Codecs.Zstd))
		// WriteTable closes a writer that is an io.Closer: hide f's Close from it.
		return pqarrow.WriteTable(tbl, struct{ io.Writer }{f}, 64*1024, props, pqarrow.NewArrowWriterProperties(pqarrow.WithStoreSchema()))
	})
}

// WriteCSV writes rec as CSV with a header row; nulls are empty fields.
func WriteCSV(path string, rec arrow.RecordBatch) error {
	return writeVia(path, func(f *os.File) error {
		w := csv.NewWriter(f, rec.Schema(), csv.WithHeader(true), csv.WithNullWriter(""))
		if err := w.Write(rec); err != nil {
			return err
		}
		w.Flush()
		return w.Error()
	})
}
