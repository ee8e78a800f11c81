package main

import (
	"bytes"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/longca/longca/internal/smallfile/fifotest"
)

// Outputs that are named pipes reach their reader whole, whether the reader comes first or
// late: masks --out and --png, small and over a pipe's buffer. Opened read-write (the
// eleventh pass), a small output was written into the pipe before its reader came and lost
// with the last close; a large one waited for a reader that might never come.
func TestOutputsIntoNamedPipes(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []struct {
		seqlen string
		flag   string
		check  func([]byte) bool
	}{
		{"4M", "--out", func(b []byte) bool { return len(b) > 1<<16 && json.Valid(b) }},
		{"1K", "--out", func(b []byte) bool { return len(b) > 0 && json.Valid(b) }},
		{"1K", "--png", func(b []byte) bool { return bytes.HasPrefix(b, []byte("\x89PNG")) }},
	} {
		pipe := fifotest.Make(t, filepath.Join(dir, "out"+c.seqlen+c.flag[2:]))
		got := make(chan []byte, 1)
		go func() {
			time.Sleep(300 * time.Millisecond) // the reader comes late
			f, err := os.Open(pipe)
			if err != nil {
				got <- nil
				return
			}
			b, _ := io.ReadAll(f)
			f.Close()
			got <- b
		}()
		var code int
		var errOut string
		fifotest.Within(t, "masks "+c.flag+" into a named pipe", 60*time.Second, func() error {
			_, errOut, code = captureRun(t, "masks", "--mask", "causal_document", "--seqlen", c.seqlen, c.flag, pipe)
			return nil
		})
		if code != 0 {
			t.Fatalf("masks %s PIPE: exit %d: %s", c.flag, code, errOut)
		}
		select {
		case b := <-got:
			if !c.check(b) {
				t.Errorf("masks --seqlen %s %s PIPE: the reader got %d bytes, not the whole output", c.seqlen, c.flag, len(b))
			}
		case <-time.After(20 * time.Second):
			t.Errorf("masks --seqlen %s %s PIPE: the reader got nothing (the output was written before it came, and lost)", c.seqlen, c.flag)
		}
	}
}
