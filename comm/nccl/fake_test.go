package nccl

import (
	_ "embed"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"unsafe"

	"github.com/longca/longca/tensor"
)

//go:embed testdata/fakenccl.c
var fakeSource []byte

// fakeErr says why the fake libraries could not be built; tests that need them fail.
var fakeErr error

// The fake libraries built from testdata/fakenccl.c by TestMain: one with ncclAlltoAll
// (like NCCL 2.28.3), one without (older NCCL, so AllToAll falls back to send/recv).
var fakeLib, fakeLibNoA2A string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "fakenccl")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fakeErr = buildFakes(dir)
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// buildFakes compiles the embedded fake NCCL source (so the test binary works from any
// directory) with the C compiler cgo uses.
func buildFakes(dir string) error {
	src := filepath.Join(dir, "fakenccl.c")
	if err := os.WriteFile(src, fakeSource, 0o644); err != nil {
		return err
	}
	fakeLib = filepath.Join(dir, "libfakenccl.so")
	fakeLibNoA2A = filepath.Join(dir, "libfakenccl-noa2a.so")
	cc := os.Getenv("CC")
	if cc == "" {
		cc = "cc"
	}
	for out, flags := range map[string][]string{fakeLib: {"-DWITH_ALLTOALL"}, fakeLibNoA2A: nil} {
		args := append([]string{"-shared", "-fPIC", "-O1", "-Wl,-Bsymbolic", "-o", out, src, "-lpthread"}, flags...)
		if msg, err := exec.Command(cc, args...).CombinedOutput(); err != nil {
			return fmt.Errorf("building the fake NCCL with %s: %v\n%s", cc, err, msg)
		}
	}
	return nil
}

// fakeCounter reads one of the fake library's int counters (fake_aborts, ...).
func fakeCounter(t *testing.T, lib *Lib, name string) int {
	t.Helper()
	p, err := lib.dl.Sym(name)
	if err != nil {
		t.Fatal(err)
	}
	return int(*(*int32)(p))
}

// hostDev is a host tensor posing as a device tensor: the fake NCCL reads and writes
// host memory.
type hostDev struct{ *tensor.Host }

func (h hostDev) DevicePtr() uintptr { return uintptr(unsafe.Pointer(&h.Data[0])) }

var _ tensor.DeviceBuffer = hostDev{}

func openFake(t *testing.T, path string) *Lib {
	t.Helper()
	if fakeErr != nil {
		t.Fatal(fakeErr)
	}
	l, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// doneStream is a stream on which everything has always finished.
var doneStream = FuncStream{Ptr: 0x5eed, QueryFn: func() (bool, error) { return true, nil }}
