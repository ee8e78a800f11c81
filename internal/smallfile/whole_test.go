package smallfile

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/longca/longca/internal/smallfile/fifotest"
	"github.com/longca/longca/internal/smallfile/fulltest"
)

// listDir is every name in dir.
func listDir(t *testing.T, dir string) []string {
	t.Helper()
	es, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range es {
		names = append(names, e.Name())
	}
	return names
}

// A disk that fills midway leaves nothing under the file's name (it left 0-byte and cut
// files: run's masks/causal_document_256_seed42.json), an old file as it was, and no
// temporary file; the error is the disk's, naming the file meant.
func TestWriteWholeOnAFullDisk(t *testing.T) {
	dir := t.TempDir()
	body := strings.Repeat("{\"mask\": 1}\n", 100)
	for _, n := range []int{0, 7, len(body) - 1} {
		path := filepath.Join(dir, "new.json")
		err := WriteWhole(path, func(w io.Writer) error {
			_, err := io.WriteString(&fulltest.Writer{W: w, N: n}, body)
			return err
		})
		if !errors.Is(err, syscall.ENOSPC) {
			t.Fatalf("after %d bytes: %v, want the disk's ENOSPC", n, err)
		}
		if _, serr := os.Lstat(path); !os.IsNotExist(serr) {
			t.Errorf("after %d bytes: %s is there (%v); want no file under its name", n, path, serr)
		}
		if names := listDir(t, dir); len(names) != 0 {
			t.Errorf("after %d bytes: %v left in the folder", n, names)
		}
	}
	old := filepath.Join(dir, "old.json")
	if err := os.WriteFile(old, []byte("old"), 0o644); err != nil {
		t.Fatal(err)
	}
	err := WriteWhole(old, func(w io.Writer) error {
		_, err := io.WriteString(&fulltest.Writer{W: w, N: 2}, body)
		return err
	})
	var pe *os.PathError
	if !errors.As(err, &pe) || !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("over an old file: %v", err)
	}
	if b, _ := os.ReadFile(old); string(b) != "old" {
		t.Errorf("the old file holds %q after a failed write; want it as it was", b)
	}
	if names := listDir(t, dir); len(names) != 1 {
		t.Errorf("%v in the folder; want only old.json", names)
	}
	// A folder under the name: an error, and nothing left beside it.
	sub := filepath.Join(dir, "sub")
	if err := os.Mkdir(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(sub, "x"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := WriteWhole(sub, func(w io.Writer) error { _, err := io.WriteString(w, body); return err }); err == nil {
		t.Errorf("writing over a folder: no error")
	}
	if names := listDir(t, dir); len(names) != 2 {
		t.Errorf("%v in the folder after writing over a folder; want old.json and sub", names)
	}
}

// A write that goes well: the whole content, mode 0644, no temporary file; over a
// symbolic link, the file it names (the link stays).
func TestWriteWhole(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "a.json")
	for _, body := range []string{"first, a longer text", "second"} {
		if err := WriteWhole(path, func(w io.Writer) error { _, err := io.WriteString(w, body); return err }); err != nil {
			t.Fatal(err)
		}
		if b, err := os.ReadFile(path); err != nil || string(b) != body {
			t.Errorf("%q, %v; want %q", b, err, body)
		}
	}
	if st, err := os.Stat(path); err != nil || st.Mode().Perm() != 0o644 {
		t.Errorf("mode %v, %v; want 0644", st.Mode(), err)
	}
	link := filepath.Join(dir, "link.json")
	if err := os.Symlink("a.json", link); err != nil {
		t.Fatal(err)
	}
	if err := WriteWhole(link, func(w io.Writer) error { _, err := io.WriteString(w, "through"); return err }); err != nil {
		t.Fatal(err)
	}
	if st, err := os.Lstat(link); err != nil || st.Mode()&os.ModeSymlink == 0 {
		t.Errorf("the link was replaced: %v %v", st.Mode(), err)
	}
	if b, _ := os.ReadFile(path); string(b) != "through" {
		t.Errorf("the link's file holds %q", b)
	}
	if names := listDir(t, dir); len(names) != 2 {
		t.Errorf("%v in the folder; want a.json and link.json", names)
	}
}

// A named pipe is written in place, once its reader comes (a rename would replace it).
func TestWriteWholeNamedPipe(t *testing.T) {
	pipe := fifotest.Make(t, filepath.Join(t.TempDir(), "p"))
	got := make(chan string, 1)
	go func() {
		f, err := os.Open(pipe)
		if err != nil {
			got <- err.Error()
			return
		}
		b, _ := io.ReadAll(f)
		f.Close()
		got <- string(b)
	}()
	err := fifotest.Within(t, "WriteWhole into a named pipe", 20*time.Second, func() error {
		return WriteWhole(pipe, func(w io.Writer) error { _, err := io.WriteString(w, "piped"); return err })
	})
	if err != nil {
		t.Fatal(err)
	}
	if s := <-got; s != "piped" {
		t.Errorf("the reader got %q", s)
	}
	if st, err := os.Lstat(pipe); err != nil || st.Mode()&os.ModeNamedPipe == 0 {
		t.Errorf("the pipe was replaced: %v", err)
	}
}

// A legal name of up to 255 bytes is written: the temporary file's name (".<name>.tmp-"
// and digits) had passed the limit, so a 245-byte name was refused ("file name too long",
// naming the temporary file) where a plain write takes it; the temporary name is cut.
func TestWriteWholeLongName(t *testing.T) {
	dir := t.TempDir()
	for _, n := range []int{maxTempBase - 1, maxTempBase, maxTempBase + 1, 250, 255} {
		name := strings.Repeat("m", n-len(".json")) + ".json"
		if n == 250 { // a rune across the cut
			name = strings.Repeat("m", maxTempBase-1) + "é" + strings.Repeat("m", n-maxTempBase-1-len(".json")) + ".json"
		}
		path := filepath.Join(dir, name)
		if err := WriteWhole(path, func(w io.Writer) error { _, err := io.WriteString(w, "whole"); return err }); err != nil {
			t.Fatalf("%d-byte name: %v", len(name), err)
		}
		if b, err := os.ReadFile(path); err != nil || string(b) != "whole" {
			t.Fatalf("%d-byte name: read %q, %v", len(name), b, err)
		}
		os.Remove(path)
		if left := listDir(t, dir); len(left) != 0 {
			t.Fatalf("%d-byte name: left %v", len(name), left)
		}
	}
}

// refuseTemps makes every temporary file's creation refused (EACCES naming it), as in a
// folder that admits no new file, until the test ends.
func refuseTemps(t *testing.T) {
	old := createTemp
	t.Cleanup(func() { createTemp = old })
	createTemp = func(d, pattern string) (*os.File, error) {
		return nil, &os.PathError{Op: "open", Path: filepath.Join(d, strings.Replace(pattern, "*", "123", 1)), Err: syscall.EACCES}
	}
}

// A folder that admits no new file (read-only, immutable: no temporary file can be made)
// beside a file that can be written: the file is written in place, as before WriteWhole;
// with no file there, the refusal names the file meant, not the temporary file's pattern.
func TestWriteWholeWithoutRoomForATemporaryFile(t *testing.T) {
	dir := t.TempDir()
	refuseTemps(t)
	path := filepath.Join(dir, "x.json")
	if err := os.WriteFile(path, []byte("old"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := WriteWhole(path, func(w io.Writer) error { _, err := io.WriteString(w, "new"); return err }); err != nil {
		t.Fatalf("a writable file in a folder without room for a temporary file: %v", err)
	}
	if b, _ := os.ReadFile(path); string(b) != "new" {
		t.Errorf("wrote %q, want new", b)
	}
	none := filepath.Join(dir, "none.json")
	err := WriteWhole(none, func(w io.Writer) error { _, err := io.WriteString(w, "new"); return err })
	var pe *os.PathError
	if !errors.Is(err, os.ErrPermission) || !errors.As(err, &pe) || pe.Path != none {
		t.Errorf("no file and no temporary file: %v, want a permission error naming %s", err, none)
	}
}

// Written in place for want of a temporary file, a fill that fails leaves the file as it
// was and its error is the one returned: the fallback had truncated the file, kept what
// fill wrote before failing, and returned the refused temporary file's permission error,
// as if nothing had been touched.
func TestWriteWholeInPlaceFillFails(t *testing.T) {
	dir := t.TempDir()
	refuseTemps(t)
	path := filepath.Join(dir, "x.json")
	if err := os.WriteFile(path, []byte("the old file"), 0o644); err != nil {
		t.Fatal(err)
	}
	boom := errors.New("boom")
	err := WriteWhole(path, func(w io.Writer) error {
		if _, err := io.WriteString(w, "half"); err != nil {
			return err
		}
		return boom
	})
	if !errors.Is(err, boom) {
		t.Errorf("fill failed in place: %v, want fill's error", err)
	}
	if b, _ := os.ReadFile(path); string(b) != "the old file" {
		t.Errorf("fill failed in place: the file holds %q, want it as it was", b)
	}
}

// Written in place for want of a temporary file, a write that fails midway (a disk or
// quota that fills after part of it) has cut the file: the error says so (ErrCutInPlace),
// where it read as the plain full disk that leaves a file as it was (masks --out said "not
// written (a file there is left as it was)" over a file cut short). The disk fills through
// writeOpened's seam, after 4096 bytes.
func TestWriteWholeInPlaceWriteFailsSaysCut(t *testing.T) {
	dir := t.TempDir()
	refuseTemps(t)
	path := filepath.Join(dir, "x.json")
	if err := os.WriteFile(path, []byte("the old file"), 0o644); err != nil {
		t.Fatal(err)
	}
	const room = 4096
	old := writeOpened
	t.Cleanup(func() { writeOpened = old })
	writeOpened = func(f *os.File, b []byte) (int, error) {
		n, err := f.Write(b[:min(room, len(b))])
		if err == nil && n < len(b) {
			err = &os.PathError{Op: "write", Path: f.Name(), Err: syscall.ENOSPC}
		}
		return n, err
	}
	err := WriteWhole(path, func(w io.Writer) error {
		_, err := w.Write(make([]byte, 4*room))
		return err
	})
	b, _ := os.ReadFile(path)
	if !errors.Is(err, syscall.ENOSPC) || !errors.Is(err, ErrCutInPlace) || !strings.Contains(err.Error(), path) {
		t.Errorf("in place on a disk that fills: %v (the file now %d bytes), want the write's error naming %s and saying it is cut (ErrCutInPlace)", err, len(b), path)
	}
	if len(b) != room {
		t.Errorf("the file holds %d bytes, want the %d written before the disk filled", len(b), room)
	}
}
