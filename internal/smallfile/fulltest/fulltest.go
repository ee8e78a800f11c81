// Package fulltest fakes a full disk for tests of what a write leaves behind.
package fulltest

import (
	"io"
	"os"
	"syscall"
)

// Writer passes N bytes on to W, then fails as a full disk does: the write that crosses
// N writes its first bytes and returns ENOSPC, as write(2) does.
type Writer struct {
	W io.Writer
	N int
}

func (f *Writer) Write(p []byte) (int, error) {
	if len(p) <= f.N {
		f.N -= len(p)
		return f.W.Write(p)
	}
	k, _ := f.W.Write(p[:f.N])
	f.N = 0
	return k, &os.PathError{Op: "write", Path: "?", Err: syscall.ENOSPC}
}
