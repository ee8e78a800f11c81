package results

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/csv"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/compress"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"

	"github.com/longca/longca/internal/smallfile"
)

// writeVia writes path atomically: fn fills a temporary file in path's folder, which is
// synced and renamed over path only when everything went well. A writer killed midway,
// or a full disk, leaves path as it was (the old file, or none) and no partial file
// under its name; the temporary file is removed on error. It is locked (lockTemp) while it
// exists, so that a later merge can tell one a killed writer left (removeStaleTemps).
func writeVia(path string, fn func(f *os.File) error) (err error) {
	path, err = fileTarget(path)
	if err != nil {
		return err
	}
	var lock *os.File
	err = smallfile.Replace(path, func(f *os.File) error {
		lock = lockTemp(f.Name())
		return fn(f)
	})
	if lock != nil {
		lock.Close() // (the file is renamed or removed by now)
	}
	if err == nil {
		return nil
	}
	err = fmt.Errorf("results: writing %s: %w", path, err)
	switch {
	case Unwritable(err):
		return usageErr{fmt.Errorf("%w (choose a folder you can write, e.g. --out elsewhere)", err)}
	case NoRoom(err):
		return usageErr{fmt.Errorf("%w (make room there, or give --out a folder with room)", err)}
	}
	return err
}

// Unwritable says whether err is a write refused for where it goes, not for room: no
// permission, a read-only file system, no such folder.
func Unwritable(err error) bool {
	return errors.Is(err, fs.ErrPermission) || errors.Is(err, syscall.EROFS) || errors.Is(err, fs.ErrNotExist)
}

// fileTarget is where writeVia may put path: path itself when it is a regular file or
// nothing, the file a symbolic link names, and a usage error (ErrUsage) for anything
// else. The rename replaces whatever is there: as root, `longca merge DIR --out
// /dev/full` left a regular file where the device had been.
func fileTarget(path string) (string, error) {
	st, err := os.Lstat(path)
	if err != nil || st.Mode().IsRegular() {
		return path, nil
	}
	if st.Mode()&fs.ModeSymlink != 0 {
		target, err := filepath.EvalSymlinks(path)
		if err != nil {
			return "", Usagef("results: %s is a symbolic link to nothing (%v): give a file name, or create the file it names", path, cleanErr(err))
		}
		return fileTarget(target)
	}
	return "", Usagef("results: %s is %s, and writing there would replace it: give a file name", path, smallfile.Kind(st.Mode()))
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
