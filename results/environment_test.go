package results

// Tests of the seventh hardening pass (docs/hardening.md): the environment a run lives in.

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// TestMergeOutReplacesOnlyFiles: a merged file is renamed into place, and a rename
// replaces whatever has the name: as root, `longca merge DIR --out /dev/full` left a
// regular file where the device had been. --out a named pipe, a link to one, or a link to
// nothing is refused before anything is written, and stays what it was; a link to a file
// is written through (the link stays a link).
func TestMergeOutReplacesOnlyFiles(t *testing.T) {
	dir := t.TempDir()
	writeRanks(t, dir, "r", 1, 2, 0)
	other := t.TempDir()
	fifo := filepath.Join(other, "fifo")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Skip("no named pipes here:", err)
	}
	toFifo, dangling := filepath.Join(other, "to-fifo.arrow"), filepath.Join(other, "dangling.arrow")
	if err := os.Symlink(fifo, toFifo); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(other, "nothing", "x.arrow"), dangling); err != nil {
		t.Fatal(err)
	}
	for _, out := range []string{fifo, toFifo, dangling} {
		_, err := Merge(dir, MergeOptions{Out: out})
		if !errors.Is(err, ErrUsage) || strings.Contains(err.Error(), "\n") {
			t.Errorf("--out %s: %v; want one line, a usage error", out, err)
		}
	}
	if st, err := os.Lstat(fifo); err != nil || st.Mode()&os.ModeNamedPipe == 0 {
		t.Errorf("the named pipe is now %v (%v)", st.Mode(), err)
	}
	for _, l := range []string{toFifo, dangling} {
		if st, err := os.Lstat(l); err != nil || st.Mode()&os.ModeSymlink == 0 {
			t.Errorf("the link %s is now %v (%v)", l, st.Mode(), err)
		}
	}
	file, link := filepath.Join(other, "file.arrow"), filepath.Join(other, "latest.arrow")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(file, link); err != nil {
		t.Fatal(err)
	}
	if _, err := Merge(dir, MergeOptions{Out: link}); err != nil {
		t.Fatalf("--out a link to a file: %v", err)
	}
	if st, err := os.Lstat(link); err != nil || st.Mode()&os.ModeSymlink == 0 {
		t.Errorf("the link is now %v (%v); want it kept", st.Mode(), err)
	}
	if f, err := Open(file); err != nil || f.NumRows() != 2 {
		t.Errorf("the file the link names: %v; want the 2 merged rows", err)
	}
}
