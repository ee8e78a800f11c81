package nccl

import (
	"path/filepath"
	"strings"
	"testing"
)

// The probe `longca env` prints reports what the library itself says, from the names
// this package opens it by, and says why not when it cannot open.
func TestProbe(t *testing.T) {
	if fakeErr != nil {
		t.Fatal(fakeErr)
	}
	p := probe(fakeLib)
	if !p.Found || p.Path != fakeLib || p.Version != "2.28.3" || p.Library != "libnccl" || p.Error != "" {
		t.Errorf("probe of the fake: %+v, want found, path %s, version 2.28.3", p, fakeLib)
	}
	missing := filepath.Join(t.TempDir(), "libnccl-missing.so")
	p = probe(missing)
	if p.Found || p.Error == "" || !strings.Contains(p.Error, missing) || len(p.Tried) != 1 {
		t.Errorf("probe of a missing library: %+v, want not found with the name tried", p)
	}
	if d := Probe(); len(d.Tried) != 1 || d.Tried[0] != DefaultLibrary {
		t.Errorf("Probe tries %v, want [%s] (the name Load opens)", d.Tried, DefaultLibrary)
	}
}
