package results

// Tests of the seventh hardening pass (docs/hardening.md): the environment a run lives in.

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/longca/longca/internal/smallfile/fifotest"
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
	fifotest.Make(t, fifo)
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

// TestCreateYieldsToARunOfAnotherSize: two runs of one id on different numbers of ranks,
// started at once into one folder, both passed CheckNewRun and both wrote; the merge then
// kept one run's rows and left the other's out. The rank file created second sees the
// other run's and is refused (a usage error), leaving nothing behind; a rank of the same
// run is not refused for its peers' files.
func TestCreateYieldsToARunOfAnotherSize(t *testing.T) {
	dir := t.TempDir()
	if err := CheckNewRun(dir, "r", 2, true); err != nil { // the 2-rank run checks first...
		t.Fatal(err)
	}
	writeRanks(t, dir, "r", 1, 1, 0) // ...then the 1-rank run starts and writes
	_, err := Create(dir, "r", 0, 2)
	if !errors.Is(err, ErrUsage) || !strings.Contains(err.Error(), "on 1 rank(s), and this run has 2") {
		t.Errorf("Create of rank 0 of 2 beside a 1-rank run of the id: %v; want it refused", err)
	}
	if _, err := os.Stat(filepath.Join(dir, FileName("r", 0, 2))); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the refused rank file is there (%v)", err)
	}
	writeRanks(t, dir, "s", 2, 1, 1)
	w, err := Create(dir, "s", 0, 2)
	if err != nil {
		t.Fatalf("rank 0 beside its peer's file: %v", err)
	}
	w.Close()
}
