package nccl

import (
	"fmt"
	"os"
	"testing"
	"unsafe"

	"github.com/longca/longca/comm/nccl/ncclfake"
	"github.com/longca/longca/tensor"
)

// fakeErr says why the fake libraries could not be built; tests that need them fail.
var fakeErr error

// The fake libraries built by TestMain (ncclfake.Build): one with ncclAlltoAll (like
// NCCL 2.28.3), one without (older NCCL, so AllToAll falls back to send/recv).
var fakeLib, fakeLibNoA2A string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "fakenccl")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fakeLib, fakeLibNoA2A, fakeErr = ncclfake.Build(dir)
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// fakeCounter reads one of the fake library's int counters (fake_aborts, ...).
func fakeCounter(t *testing.T, lib *Lib, name string) int {
	t.Helper()
	p, err := lib.Symbol(name)
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
