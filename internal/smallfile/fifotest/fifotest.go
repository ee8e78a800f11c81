// Package fifotest holds the two steps every test of a named pipe takes: make one (or skip
// where the file system has none), and run a call that must not wait on it for good,
// failing the test at once if it does.
package fifotest

import (
	"syscall"
	"testing"
	"time"
)

// Make makes a named pipe at path, or skips the test where none can be made.
func Make(t testing.TB, path string) string {
	t.Helper()
	if err := syscall.Mkfifo(path, 0o600); err != nil {
		t.Skipf("no named pipes here: %v", err)
	}
	return path
}

// Within runs call and returns its error; a call still running after wait fails the test
// (the goroutine is left blocked: the test binary ends with it).
func Within(t testing.TB, what string, wait time.Duration, call func() error) error {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- call() }()
	select {
	case err := <-done:
		return err
	case <-time.After(wait):
		t.Fatalf("%s: still waiting on a named pipe after %v", what, wait)
		return nil
	}
}
