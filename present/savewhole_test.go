package present

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// cutCanvas writes part of a PNG, then fails as a full disk does.
type cutCanvas struct{}

func (cutCanvas) WriteTo(w io.Writer) (int64, error) {
	n, err := w.Write([]byte("\x89PNG\r\n\x1a\n part of a plot"))
	if err != nil {
		return int64(n), err
	}
	return int64(n), &os.PathError{Op: "write", Path: "?", Err: syscall.ENOSPC}
}

// A plot cut short by a full disk leaves no file under its name, and an older plot of
// that name as it was (run's and report's plots were written in place: a cut PNG stayed).
func TestPlotWholeOrNotAtAll(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "causal_fwd_4-2.png")
	if err := saveTo(cutCanvas{}, path); !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("saveTo on a full disk: %v, want ENOSPC", err)
	}
	if es, _ := os.ReadDir(dir); len(es) != 0 {
		t.Errorf("%d file(s) left in the plots folder (%s ...); want none", len(es), es[0].Name())
	}
	if err := os.WriteFile(path, []byte("old plot"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := saveTo(cutCanvas{}, path); err == nil {
		t.Fatal("no error")
	}
	if b, _ := os.ReadFile(path); string(b) != "old plot" {
		t.Errorf("the older plot holds %q; want it as it was", b)
	}
}
