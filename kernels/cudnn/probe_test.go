package cudnn

import (
	"slices"
	"testing"
)

// The probe `longca env` prints decodes the version the library reports, from the names
// Open uses.
func TestProbe(t *testing.T) {
	if fakeErr != nil {
		t.Fatal(fakeErr)
	}
	t.Setenv("FAKE_CUDNN_VERSION", "91400")
	p := probe(fakeLib)
	if !p.Found || p.Path != fakeLib || p.Version != "9.14.0" || p.Library != "libcudnn" {
		t.Errorf("probe of the fake: %+v, want found, path %s, version 9.14.0", p, fakeLib)
	}
	if d := Probe(); !slices.Equal(d.Tried, DefaultLibraries) {
		t.Errorf("Probe tries %v, want DefaultLibraries %v", d.Tried, DefaultLibraries)
	}
}
