// Package smallfile reads the small files a user names on the command line (a length
// distribution, a machine description) without trusting them to be small: a path to
// /dev/zero, a FIFO fed forever or a multi-gigabyte file by mistake is refused once it
// passes the limit, instead of being read whole into memory.
package smallfile

import (
	"fmt"
	"io"
	"os"
	"syscall"
)

// Open opens path for reading without waiting for a writer: a FIFO (a named pipe, or the
// /dev/fd/N of a shell's process substitution) is opened non-blocking, so that one with
// no writer reads as empty instead of hanging in open(2); its reads still wait for data.
func Open(path string) (*os.File, error) {
	if fi, err := os.Stat(path); err == nil && fi.Mode()&os.ModeNamedPipe != 0 {
		return os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	}
	return os.Open(path)
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
