package session

import (
	"bytes"
	"strings"
	"testing"

	"github.com/longca/longca/internal/cuda"
	"github.com/longca/longca/results"
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

// A CP sweep's kernel-alone row is logged with the SM clock it was timed at where that was
// read (eff sets it against the method's), and without the field where it was not.
func TestLogBaselineClock(t *testing.T) {
	var buf bytes.Buffer
	log := zerolog.New(&buf)
	row := results.Row{Kernel: "cuda", Mask: "full", SeqLen: 8192, Pass: "fwd", Status: results.StatusOK, TFLOPs: results.Ptr(582.25)}
	logBaseline(&log, row)
	if strings.Contains(buf.String(), "sm_clock_mhz") || !strings.Contains(buf.String(), `"tflops":582.25`) {
		t.Fatalf("no readings: %s", buf.String())
	}
	if strings.Contains(buf.String(), "settle_ms") {
		t.Fatalf("settle_ms without a settle: %s", buf.String())
	}
	buf.Reset()
	row.SMClockMHz, row.ClockEvents, row.SettleMs = results.Ptr(1637.5), "sw_power_cap", results.Ptr(250.0)
	logBaseline(&log, row)
	for _, want := range []string{`"sm_clock_mhz":1637.5`, `"clock_events":"sw_power_cap"`, `"settle_ms":250`, `"message":"kernel baseline"`} {
		if !strings.Contains(buf.String(), want) {
			t.Errorf("baseline log lacks %s: %s", want, buf.String())
		}
	}
}

// A CP row's progress line carries its settle where one was kept (scripts read it: call 97),
// and no field where none was.
func TestLogCPRowSettle(t *testing.T) {
	var buf bytes.Buffer
	log := zerolog.New(&buf)
	s := &Session{Log: &log}
	row := results.Row{Method: "balanced", Mask: "full", HeadsQ: 64, HeadsKV: 8, Pass: "fwd", Status: results.StatusOK}
	s.logCPRow(0, 1, row, -1)
	if strings.Contains(buf.String(), "settle_ms") {
		t.Fatalf("settle_ms without a settle: %s", buf.String())
	}
	buf.Reset()
	row.SettleMs = results.Ptr(250.0)
	s.logCPRow(0, 1, row, -1)
	if !strings.Contains(buf.String(), `"settle_ms":250`) || !strings.Contains(buf.String(), `"message":"cp"`) {
		t.Fatalf("cp line lacks the settle: %s", buf.String())
	}
}
