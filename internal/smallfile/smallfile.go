// Package smallfile reads the small files a user names on the command line (a length
// distribution, a machine description) without trusting them to be small: a path to
// /dev/zero, a FIFO fed forever or a multi-gigabyte file by mistake is refused once it
// passes the limit, instead of being read whole into memory.
package smallfile

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"syscall"
	"time"
)

// WriterWait is how long Open waits for a FIFO's writer.
var WriterWait = 60 * time.Second

// Open opens path for reading. A FIFO (a named pipe, or the /dev/fd/N of a shell's
// process substitution) waits in open(2) for its writer: that wait is bounded by
// WriterWait, and a FIFO nobody opens for writing is an error naming it instead of a hang
// (the open left behind then stays blocked until the process exits, which a refusal does).
func Open(path string) (*os.File, error) {
	fi, err := os.Stat(path)
	if err != nil || fi.Mode()&os.ModeNamedPipe == 0 {
		return os.Open(path)
	}
	type opened struct {
		f   *os.File
		err error
	}
	ch := make(chan opened, 1)
	go func() {
		f, err := os.Open(path)
		ch <- opened{f, err}
	}()
	select {
	case o := <-ch:
		return o.f, o.err
	case <-time.After(WriterWait):
		go func() { // a writer after all: close what it opened
			if o := <-ch; o.f != nil {
				o.f.Close()
			}
		}()
		return nil, fmt.Errorf("%s: a FIFO that no one opened for writing within %s: start its writer first, or give a regular file", path, WriterWait)
	}
}

// ReaderWait is how long Create waits for a FIFO's reader.
var ReaderWait = 60 * time.Second

// Create creates or truncates path for writing, as os.Create does, except for a FIFO (a
// named pipe, or the /dev/fd/N of a shell's process substitution or a piped stdout): it
// is opened write-only once a reader holds it, waiting at most ReaderWait, and with none an
// error names it. os.Create opens a FIFO read-write, which needs no reader: output that
// fitted the pipe's buffer was lost without a word, and more hung the process.
func Create(path string) (*os.File, error) {
	fi, err := os.Stat(path)
	if err != nil || fi.Mode()&os.ModeNamedPipe == 0 {
		return os.Create(path)
	}
	deadline := time.Now().Add(ReaderWait)
	for {
		// O_NONBLOCK: ENXIO at once while no reader has it open; the file is then
		// pollable, so a full pipe blocks the writing goroutine, not a thread.
		f, err := os.OpenFile(path, os.O_WRONLY|syscall.O_NONBLOCK, 0)
		if !errors.Is(err, syscall.ENXIO) {
			return f, err
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("%s: a named pipe that no one opened for reading within %s: start its reader first, or give a regular file", path, ReaderWait)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Read returns the contents of path, or an error once it holds more than limit bytes.
func Read(path string, limit int64) ([]byte, error) {
	f, err := Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > limit {
		return nil, fmt.Errorf("%s holds more than %d bytes: not the small JSON file expected here", path, limit)
	}
	return b, nil
}

// Kind names, for a message, what a path of mode m that is not a regular file is: "a
// device", "a named pipe", "a socket", "a folder", or "not a regular file".
func Kind(m fs.FileMode) string {
	switch {
	case m&fs.ModeDevice != 0:
		return "a device"
	case m&fs.ModeNamedPipe != 0:
		return "a named pipe"
	case m&fs.ModeSocket != 0:
		return "a socket"
	case m.IsDir():
		return "a folder"
	}
	return "not a regular file"
}
