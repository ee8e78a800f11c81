package smallfile

import (
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
)

// WriteWhole writes path whole or not at all: fill writes into a temporary file beside
// path (".<name>.tmp-*"), which is synced, closed and renamed over path only when every
// step went well. On any error, the temporary file is removed and path is left as it was
// (the old file, or none): a disk that filled midway had left 0-byte and partial files
// under their own names (run's masks/*.json, report and plots). The file is mode 0644.
//
// A path that is not a regular file or nothing (a named pipe, a device) is written in
// place through Create, as before: a rename would replace it. A symbolic link's target is
// written; a link to nothing is written through, as os.Create does.
func WriteWhole(path string, fill func(io.Writer) error) (err error) {
	if fi, serr := os.Stat(path); serr == nil && !fi.Mode().IsRegular() {
		return writeInPlace(path, fill)
	}
	if fi, lerr := os.Lstat(path); lerr == nil && fi.Mode()&fs.ModeSymlink != 0 {
		target, rerr := filepath.EvalSymlinks(path)
		if rerr != nil {
			return writeInPlace(path, fill) // a link to nothing: the file it names is made
		}
		path = target
	}
	return Replace(path, func(f *os.File) error { return fill(f) })
}

// Replace writes the regular file path (or nothing yet) whole or not at all: fill writes
// into a temporary file beside it (".<name>.tmp-*"), which is synced, made mode 0644,
// closed and renamed over path only when every step went well, then the folder is synced
// so the rename itself survives a crash. On any error the temporary file is removed, path
// is left as it was (the old file, or none) and the error names path, not the temporary
// file. The caller decides what may be replaced (WriteWhole: a pipe is written in place;
// results' writer refuses anything but a regular file).
func Replace(path string, fill func(f *os.File) error) (err error) {
	dir, base := filepath.Split(path)
	if dir == "" {
		dir = "."
	}
	f, err := os.CreateTemp(dir, "."+base+".tmp-*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	defer func() {
		if err != nil {
			f.Close() // (a second Close only says it was closed)
			os.Remove(tmp)
			var pe *fs.PathError
			if errors.As(err, &pe) && pe.Path == tmp { // the error names the file meant
				pe.Path = path
			}
		}
	}()
	if err := fill(f); err != nil {
		return err
	}
	if err := f.Sync(); err != nil {
		return err
	}
	if err := f.Chmod(0o644); err != nil {
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		return err
	}
	if d, err := os.Open(dir); err == nil { // the rename itself survives a crash
		d.Sync()
		d.Close()
	}
	return nil
}

// writeInPlace is WriteWhole's way for a path that is no regular file: fill writes
// straight into it (Create's).
func writeInPlace(path string, fill func(io.Writer) error) error {
	f, err := Create(path)
	if err != nil {
		return err
	}
	if err := fill(f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
