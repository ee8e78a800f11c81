package smallfile

import (
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/longca/longca/internal/smallfile/fifotest"
)

func TestRead(t *testing.T) {
	dir := t.TempDir()
	small := filepath.Join(dir, "small.json")
	if err := os.WriteFile(small, []byte(`{"a": 1}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if b, err := Read(small, 8); err != nil || string(b) != `{"a": 1}` {
		t.Errorf("a file of exactly the limit: %q, %v", b, err)
	}
	if _, err := Read(small, 7); err == nil || !strings.Contains(err.Error(), "more than 7 bytes") {
		t.Errorf("a file over the limit: %v, want an error naming the limit", err)
	}
	// An endless file ends at the limit, not in an out-of-memory crash.
	if _, err := Read("/dev/zero", 1<<20); err == nil || !strings.Contains(err.Error(), "/dev/zero holds more than") {
		t.Errorf("/dev/zero: %v, want an error naming it", err)
	}
	if _, err := Read(filepath.Join(dir, "none"), 8); !os.IsNotExist(err) {
		t.Errorf("a missing file: %v, want a not-exist error", err)
	}
}

// TestCreateNamedPipe: a named pipe with no reader is refused after ReaderWait, naming it
// (os.Create had opened it read-write: small output was lost unread, large output hung);
// with a reader, everything written reaches it; a regular path is created as os.Create does.
func TestCreateNamedPipe(t *testing.T) {
	dir := t.TempDir()
	defer func(w time.Duration) { ReaderWait = w }(ReaderWait)
	ReaderWait = 200 * time.Millisecond
	pipe := fifotest.Make(t, filepath.Join(dir, "out.json"))
	err := fifotest.Within(t, "Create with no reader", 10*time.Second, func() error {
		f, err := Create(pipe)
		if f != nil {
			f.Close()
		}
		return err
	})
	if err == nil || !strings.Contains(err.Error(), pipe) || !strings.Contains(err.Error(), "no one opened for reading") {
		t.Fatalf("a named pipe with no reader: %v, want an error naming it", err)
	}

	ReaderWait = 10 * time.Second
	payload := strings.Repeat("longca ", 40000) // 280 KB: more than a pipe's buffer
	got := make(chan string, 1)
	go func() {
		r, err := os.Open(pipe) // waits for the writer
		if err != nil {
			got <- "open: " + err.Error()
			return
		}
		b, _ := io.ReadAll(r)
		r.Close()
		got <- string(b)
	}()
	err = fifotest.Within(t, "Create and write with a reader", 20*time.Second, func() error {
		f, err := Create(pipe)
		if err != nil {
			return err
		}
		if _, err := f.WriteString(payload); err != nil {
			f.Close()
			return err
		}
		return f.Close()
	})
	if err != nil {
		t.Fatalf("a named pipe with a reader: %v", err)
	}
	if s := <-got; s != payload {
		t.Fatalf("the reader got %d bytes, want %d", len(s), len(payload))
	}

	plain := filepath.Join(dir, "plain.json")
	os.WriteFile(plain, []byte("old contents"), 0o644)
	f, err := Create(plain)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString("new")
	f.Close()
	if b, _ := os.ReadFile(plain); string(b) != "new" {
		t.Errorf("a regular file: %q after Create and a write, want it truncated to %q", b, "new")
	}
}
