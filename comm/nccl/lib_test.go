package nccl

import (
	"strings"
	"testing"
)

func TestOpenMissingLibrary(t *testing.T) {
	_, err := Open("/nonexistent/dir/libnccl.so.2")
	if err == nil || !strings.Contains(err.Error(), "cannot open /nonexistent/dir/libnccl.so.2") || !strings.Contains(err.Error(), "LD_LIBRARY_PATH") {
		t.Errorf("missing library: %v", err)
	}
	// The default name: on this machine (no NCCL) it must say which library is missing;
	// where NCCL is installed it must load and report a 2.x version.
	l, err := Load()
	switch {
	case err != nil:
		if !strings.Contains(err.Error(), "cannot open libnccl.so.2") {
			t.Errorf("Load: %v", err)
		}
	case l.Version() < 20000 || !strings.HasPrefix(l.VersionString(), "2."):
		t.Errorf("Load found NCCL version %d (%s)", l.Version(), l.VersionString())
	}
}

func TestOpenNotNCCL(t *testing.T) {
	_, err := Open("libc.so.6")
	if err == nil || !strings.Contains(err.Error(), "libc.so.6 has no symbol ncclGetVersion") {
		t.Errorf("libc as NCCL: %v", err)
	}
}

func TestVersionString(t *testing.T) {
	cases := map[int]string{22803: "2.28.3", 21903: "2.19.3", 2804: "2.8.4", 2708: "2.7.8", 30001: "3.0.1"}
	for code, want := range cases {
		if got := VersionString(code); got != want {
			t.Errorf("VersionString(%d) = %q, want %q", code, got, want)
		}
	}
}

func TestFakeLibraryCalls(t *testing.T) {
	l := openFake(t, fakeLib)
	if l.Version() != 22803 || l.VersionString() != "2.28.3" || l.Path() != fakeLib {
		t.Errorf("version %d %q path %q", l.Version(), l.VersionString(), l.Path())
	}
	for sym, want := range map[string]bool{"ncclAlltoAll": true, "ncclCommSplit": true, "ncclNoSuchThing": false} {
		if l.Has(sym) != want {
			t.Errorf("Has(%s) = %v", sym, !want)
		}
	}
	if openFake(t, fakeLibNoA2A).Has("ncclAlltoAll") {
		t.Error("the library without ncclAlltoAll has it")
	}
	// The id crosses the trampoline by value (a 128-byte struct) both ways.
	id, err := l.GetUniqueID()
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(string(id[:]), "fake-nccl-id-") {
		t.Errorf("id = %q", id[:20])
	}
	h, err := l.CommInitRank(1, id, 0)
	if err != nil || h == 0 {
		t.Fatalf("init: %v, %#x", err, h)
	}
	// A result code and what the library says about it become an *Error.
	_, err = l.CommInitRank(1, UniqueID{'x'}, 0)
	ne, ok := err.(*Error)
	if !ok || ne.Code != InvalidArgument || ne.Msg != "fake error string 4" || ne.Op != "ncclCommInitRank" {
		t.Errorf("bad id: %#v", err)
	}
	if n, err := l.CommCount(h); err != nil || n != 1 {
		t.Errorf("count %d %v", n, err)
	}
	if r, err := l.CommUserRank(h); err != nil || r != 0 {
		t.Errorf("rank %d %v", r, err)
	}
	t.Setenv("FAKE_NCCL_ASYNC", "6")
	if r, err := l.CommGetAsyncError(h); err != nil || r != RemoteError {
		t.Errorf("async %v %v", r, err)
	}
	if s := l.LastError(h); s != "fake last error" {
		t.Errorf("last error %q", s)
	}
	// Arguments arrive in the right places: a bad type is refused by the fake.
	err = l.AllReduce(1, 1, 1, DataType(77), OpSum, h, 0)
	if ne, ok := err.(*Error); !ok || ne.Code != InvalidArgument || ne.Last != "fake last error" {
		t.Errorf("bad type: %v", err)
	}
	if err := l.CommDestroy(h); err != nil {
		t.Error(err)
	}
	if got := fakeCounter(t, l, "fake_destroys"); got < 1 {
		t.Errorf("destroys = %d", got)
	}
}
