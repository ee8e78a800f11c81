package smallfile

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"unicode/utf8"
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
	err = Replace(path, func(f *os.File) error { return fill(f) })
	// No temporary file could be made beside a regular file that can itself be written (a
	// folder that admits no new file, read-only or immutable): written in place, as before
	// WriteWhole, rather than refused.
	var ne *noTempError
	if errors.As(err, &ne) && errors.Is(err, fs.ErrPermission) {
		if fi, serr := os.Stat(path); serr == nil && fi.Mode().IsRegular() {
			return overwrite(path, fill, err)
		}
	}
	return err
}

// ErrCutInPlace is in WriteWhole's error where it wrote a file in place (its folder admits
// no temporary file) and the write failed after the file was truncated (a disk or quota
// that filled, ulimit -f): the file no longer holds what it held, unlike every other
// failure of WriteWhole's.
var ErrCutInPlace = errors.New("written in place (its folder admits no temporary file) and cut short")

// overwrite writes the regular file path in place, where no temporary file could be made
// beside it (refused, Replace's error): fill writes into memory first, so a fill that fails
// leaves the file as it was and its error is returned; the file is truncated only once
// there is all of it to write. A file that cannot be opened for writing gets refused (it
// names path); an error writing it (a disk that fills) leaves it cut, as a plain write
// would, and is returned naming it, with ErrCutInPlace.
func overwrite(path string, fill func(io.Writer) error, refused error) error {
	var b bytes.Buffer
	if err := fill(&b); err != nil {
		return err
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_TRUNC, 0)
	if err != nil {
		return refused
	}
	_, err = writeOpened(f, b.Bytes())
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("%w: %s %w", err, path, ErrCutInPlace)
	}
	return nil
}

// writeOpened writes b to the file overwrite opened (a test's seam: a disk that fills
// midway, without changing the test process's own limits).
var writeOpened = func(f *os.File, b []byte) (int, error) { return f.Write(b) }

// noTempError is Replace's error where the temporary file could not be made (its path
// the file meant): WriteWhole then tries the file itself.
type noTempError struct{ err error }

func (e *noTempError) Error() string { return e.err.Error() }
func (e *noTempError) Unwrap() error { return e.err }

// createTemp is os.CreateTemp (a test's seam).
var createTemp = os.CreateTemp

// maxTempBase is the longest name kept whole in a temporary file's (".<name>.tmp-" and
// up to 10 digits within a file name's 255 bytes); a longer one is cut (at a rune's
// start), so that a legal name of up to 255 bytes can be written.
const maxTempBase = 255 - len(".") - len(".tmp-") - 10

// TempPrefix is the start of the name of a temporary file Replace makes for the file name
// base, digits following it: ".<base>.tmp-", base cut to maxTempBase bytes (at a rune's
// start). results' sweep of a killed writer's temporary files knows them by it.
func TempPrefix(base string) string {
	if len(base) > maxTempBase {
		cut := maxTempBase
		for cut > 0 && !utf8.RuneStart(base[cut]) {
			cut--
		}
		base = base[:cut]
	}
	return "." + base + ".tmp-"
}

// Replace writes the regular file path (or nothing yet) whole or not at all: fill writes
// into a temporary file beside it (".<name>.tmp-*"), which is synced, made mode 0644,
// closed and renamed over path only when every step went well (a name too long to add
// ".tmp-" and digits to is cut in the temporary file's: TempPrefix), then the folder is
// synced so the rename itself survives a crash. On any error the temporary file is removed, path
// is left as it was (the old file, or none) and the error names path, not the temporary
// file. The caller decides what may be replaced (WriteWhole: a pipe is written in place;
// results' writer refuses anything but a regular file).
func Replace(path string, fill func(f *os.File) error) (err error) {
	dir, base := filepath.Split(path)
	if dir == "" {
		dir = "."
	}
	f, err := createTemp(dir, TempPrefix(base)+"*") // (CreateTemp puts digits for the '*')
	if err != nil {
		var pe *fs.PathError
		if errors.As(err, &pe) { // the error names the file meant, not the pattern
			pe.Path = path
		}
		return &noTempError{err}
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
