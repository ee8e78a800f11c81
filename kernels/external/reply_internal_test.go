package external

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/longca/longca/internal/smallfile/fifotest"
	"github.com/longca/longca/tensor"
)

// A time reply whose figures a time.Duration cannot hold is refused, naming the field:
// the tenth hardening pass wrote 1e300 ms as an ok row of -9.2e12 ms and 5e-324 ms as one
// of 0 ms.
func TestTimeReplyOutsideADuration(t *testing.T) {
	id := int64(7)
	reply := func(median float64) *reply {
		lo, hi := median, median
		return &reply{ID: &id, Status: statusOK, MedianMs: &median, MinMs: &lo, MaxMs: &hi, MeanMs: &median}
	}
	for _, v := range []float64{1e300, 9.3e12, 1e10, 5e-324, 1e-300, 1e-7} {
		err := reply(v).check("time", id)
		if err == nil || !strings.Contains(err.Error(), "median_ms") {
			t.Errorf("median_ms %g: %v, want a refusal naming median_ms", v, err)
		}
	}
	for _, v := range []float64{1e-6, 0.013, 5000, 1e9} {
		if err := reply(v).check("time", id); err != nil {
			t.Errorf("median_ms %g: %v, want it taken", v, err)
		}
	}
}

// A worker's output that is a FIFO is an error at once, not a wait in open(2) for a writer
// that never comes (past --worker-timeout and the first SIGINT: the tenth hardening pass).
func TestNPYOutputFIFOIsRefused(t *testing.T) {
	path := filepath.Join(t.TempDir(), "out.npy")
	fifotest.Make(t, path)
	h := tensor.NewHost(tensor.FP32, 2, 2)
	err := fifotest.Within(t, "ReadNPYInto", 10*time.Second, func() error { return ReadNPYInto(path, h) })
	if err == nil || !strings.Contains(err.Error(), "a named pipe, not a regular file") {
		t.Errorf("a FIFO output: %v, want an error naming it a named pipe", err)
	}
	if err := ReadNPYInto(os.DevNull, h); err == nil || !strings.Contains(err.Error(), "a device, not a regular file") {
		t.Errorf("%s as an output: %v, want an error naming a device", os.DevNull, err)
	}
}
