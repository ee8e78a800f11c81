package session

import (
	"bytes"
	"strings"
	"testing"

	"github.com/longca/longca/internal/cuda"
	"github.com/rs/zerolog"
)

// The sweep's GPU sampler: without a driver or NVML (this machine, CI) every read fails and
// one warning says why, however many cases ask; with them reads succeed. Closed, it reads
// nothing; closed unopened, it opens nothing. No panic either way.
func TestGPUSamplerWarnsOnce(t *testing.T) {
	var buf bytes.Buffer
	log := zerolog.New(&buf)
	read, closeFn := gpuSampler(true, 0, &log)
	_, err := read()
	if cuda.Available() == nil && err == nil {
		t.Log("a GPU and NVML are here: the reads succeed")
		if _, err := read(); err != nil {
			t.Fatal(err)
		}
	} else {
		if err == nil {
			t.Fatal("read without a driver succeeded")
		}
		for range 3 {
			if _, err := read(); err == nil {
				t.Fatal("a later read without a driver succeeded")
			}
		}
		if n := strings.Count(buf.String(), "are not read"); n != 1 {
			t.Fatalf("%d warnings, want one:\n%s", n, buf.String())
		}
	}
	closeFn()
	if _, err := read(); err == nil {
		t.Error("read after close succeeded")
	}

	buf.Reset()
	read, closeFn = gpuSampler(true, 0, &log)
	closeFn() // never read: nothing opened
	if _, err := read(); err == nil || buf.Len() != 0 {
		t.Errorf("closed unopened: read %v, log %q; want an error and no warning", err, buf.String())
	}

	if read, closeFn := gpuSampler(false, 0, &log); read != nil { // --gpu-state=false
		t.Error("a sampler made while off")
	} else {
		closeFn()
	}
}
