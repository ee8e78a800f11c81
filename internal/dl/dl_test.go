package dl

import (
	"strings"
	"testing"
)

func TestOpenLibcAndMissing(t *testing.T) {
	l, err := Open("libnot-there.so.9", "libc.so.6")
	if err != nil {
		t.Fatal(err)
	}
	if l.Name != "libc.so.6" {
		t.Fatalf("opened %s", l.Name)
	}
	if !l.Has("strlen") {
		t.Fatal("libc has no strlen")
	}
	if _, err := l.Sym("no_such_symbol_xyz"); err == nil || !strings.Contains(err.Error(), "no_such_symbol_xyz") {
		t.Fatalf("missing symbol error %v", err)
	}
	if _, err := Open("libcuda-not-here.so.1"); err == nil || !strings.Contains(err.Error(), "libcuda-not-here.so.1") {
		t.Fatalf("missing library error %v", err)
	}
}
