package sim

import (
	"context"
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/longca/longca/kernels"
	"github.com/longca/longca/results"
	"github.com/longca/longca/spmd/cp"
)

// TestMachineFileTrailingData: a machine file with more after its object is refused for
// that; it was refused for "gpus_per_node 0: need at least 1" (the preset was not read),
// which named a field the file did not have. A file of one object, with spaces and CRLF
// line ends after it, is read as before.
func TestMachineFileTrailingData(t *testing.T) {
	for _, b := range []string{`{"preset":"h100-ib"} garbage`, `{"preset":"h100-ib"} {}`, `{"preset":"h100-ib"}]`} {
		_, err := ParseMachine([]byte(b), "m.json")
		if err == nil || !strings.Contains(err.Error(), "more after its JSON object") {
			t.Errorf("%s: %v, want an error naming what follows the object", b, err)
		}
	}
	m, err := ParseMachine([]byte("{\r\n\"preset\": \"h100-ib\"\r\n}\r\n  \n"), "m.json")
	if err != nil || m.GPUsPerNode != MachinePresets["h100-ib"].GPUsPerNode {
		t.Errorf("one object and white space: %+v, %v", m, err)
	}
}

// TestMachineFileKeyTwice: a key given twice, at the top or inside a link, is refused
// naming it: json keeps the last value, and "preset" twice took the first preset for the
// fields and said nothing (the twelfth pass).
func TestMachineFileKeyTwice(t *testing.T) {
	for b, key := range map[string]string{
		`{"preset":"h100-ib","preset":"a100-ib"}`:                                             `"preset"`,
		`{"preset":"h100-ib","intra":{"bandwidth_gbs":360,"bandwidth_gbs":1,"latency_us":3}}`: `"intra.bandwidth_gbs"`,
	} {
		_, err := ParseMachine([]byte(b), "m.json")
		if err == nil || !strings.Contains(err.Error(), key+" is given twice") {
			t.Errorf("%s: %v, want it to name %s given twice", b, err, key)
		}
	}
	if _, err := ParseMachine([]byte(`{"preset":"h100-ib","intra":{"bandwidth_gbs":360,"latency_us":3},"inter":{"bandwidth_gbs":45,"latency_us":8}}`), "m.json"); err != nil {
		t.Errorf("one key in two links is no duplicate: %v", err)
	}
}

// TestMachineFileNamesItsOwnFault: a file without a preset that lacks a field says that a
// preset can give it (it named ranks_per_gpu 0, a field the file does not have). (A file's
// unknown kernel model: TestMachineFileKernelModel in cmd/longca.)
func TestMachineFileNamesItsOwnFault(t *testing.T) {
	_, err := ParseMachine([]byte(`{"gpus_per_node":8}`), "m.json")
	if want := `start it from one: "preset": `; err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("%v, want an error saying %q", err, want)
	}
}

// TestMachineFileNameOneLine: a machine's name from its file is one printable line (a
// newline in it began one of simulate's table lines without its '#'); ESC and CR too.
func TestMachineFileNameOneLine(t *testing.T) {
	for _, n := range []string{`x\ny`, `x\u001b[31m`, `x\rY`} {
		if _, err := ParseMachine([]byte(`{"preset":"h100-ib","name":"`+n+`"}`), "m.json"); err == nil || !strings.Contains(err.Error(), "printable") {
			t.Errorf("name %s: %v, want it refused", n, err)
		}
	}
	if m, err := ParseMachine([]byte(`{"preset":"h100-ib","name":"our cluster, 2026"}`), "m.json"); err != nil || m.Name != "our cluster, 2026" {
		t.Errorf("a plain name: %q, %v", m.Name, err)
	}
}

// TestPortScopeWalksTheWorld: a shared port's scope is walked over the ranks that exist,
// not over its nominal size: a node of 2^20 GPUs of 2^20 ranks each (a scope of 2^40
// ranks) on 64 GPUs spun in the all-to-all's pricing for good. And a GPU's ranks that
// compute alongside a mirrored rank are those of the world: ranks_per_gpu past it prices
// as all 64 ranks on one GPU (it multiplied every kernel by 2^20).
func TestPortScopeWalksTheWorld(t *testing.T) {
	p, docs := problem(t, "full", 64*1024, 64, 64, 128)
	m, _ := cp.New("ulysses")
	run := func(mc Machine) Prediction {
		t.Helper()
		done := make(chan struct{})
		var pr []Prediction
		var err error
		go func() {
			defer close(done)
			_, pr, err = Predict(context.Background(), m, cp.Config{Ranks: 64, Docs: docs}, p, []kernels.Pass{kernels.Fwd}, Options{Machine: mc, Kernel: KernelPresets["fa3-h100"]})
		}()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			t.Fatalf("gpus_per_node %d, ranks_per_gpu %d on 64 ranks: no prediction within 30 s", mc.GPUsPerNode, mc.RanksPerGPU)
		}
		if err != nil {
			t.Fatal(err)
		}
		return pr[0]
	}
	huge := MachinePresets["h100-roce-shared"]
	huge.GPUsPerNode, huge.RanksPerGPU = MaxGPUsPerNode, MaxRanksPerGPU
	got := run(huge)
	all := huge
	all.GPUsPerNode, all.RanksPerGPU = 1, 64 // the same world: every rank on one GPU
	if want := run(all); math.Abs(got.Seconds/want.Seconds-1) > 1e-9 {
		t.Errorf("ranks_per_gpu %d on 64 ranks: %.6g s, want %.6g s (the 64 ranks on one GPU)", huge.RanksPerGPU, got.Seconds, want.Seconds)
	}
}

// TestMachineCountsBounded: gpus_per_node and ranks_per_gpu are held to the largest world
// (ranks_per_gpu 9223372036854775807 was taken, and its port scope overflowed an int).
func TestMachineCountsBounded(t *testing.T) {
	for _, c := range []struct{ file, want string }{
		{`{"preset":"h100-ib","ranks_per_gpu":9223372036854775807}`, "ranks_per_gpu 9223372036854775807: need 1 to 1048576"},
		{`{"preset":"h100-ib","gpus_per_node":1048577}`, "gpus_per_node 1048577: need 1 to 1048576"},
	} {
		if _, err := ParseMachine([]byte(c.file), "m.json"); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", c.file, err, c.want)
		}
	}
	if _, err := ParseMachine([]byte(`{"preset":"h100-ib","gpus_per_node":1048576,"ranks_per_gpu":1048576}`), "m.json"); err != nil {
		t.Errorf("the largest node and GPU: %v", err)
	}
}

// TestMachineRanges: a machine whose numbers would leave a predicted time out of
// time.Duration's range is refused naming the field (a bandwidth of 1e-300 GB/s, a
// compute_scale or step_us of 1e300 wrote rows of -9.2e12 ms, exit 0); every preset is in
// range, and Predict refuses an out-of-range machine too.
func TestMachineRanges(t *testing.T) {
	for name, m := range MachinePresets {
		if err := m.CheckRanges(); err != nil {
			t.Errorf("preset %s: %v", name, err)
		}
	}
	for _, c := range []struct{ file, want string }{
		{`{"preset":"h100-ib","intra":{"bandwidth_gbs":1e-12,"latency_us":3}}`, "intra: bandwidth_gbs 1e-12: give at least 1e-06"},
		{`{"preset":"h100-ib","inter":{"bandwidth_gbs":45,"latency_us":1e300}}`, "inter: latency_us 1e+300: give 0 to 1e+07"},
		{`{"preset":"h100-ib","helpers":{"bandwidth_gbs":1e-300,"launch_us":5}}`, "helpers: bandwidth_gbs 1e-300"},
		{`{"preset":"h100-ib","helpers":{"bandwidth_gbs":2600,"launch_us":1e300}}`, "helpers: launch_us 1e+300"},
		{`{"preset":"h100-ib","compute_scale":1e300}`, "compute_scale 1e+300: give 1e-06 to 1e+06, or 0"},
		{`{"preset":"h100-ib","compute_scale":1e-300}`, "compute_scale 1e-300: give 1e-06 to 1e+06, or 0"},
		{`{"preset":"h100-ib","step_us":1e300}`, "step_us 1e+300"},
		{`{"preset":"h100-ib","step_slice_us":1e8}`, "step_slice_us 1e+08"},
		{`{"preset":"h100-ib","contention":1e300}`, "contention 1e+300"},
	} {
		m, err := ParseMachine([]byte(c.file), "m.json")
		if err != nil {
			t.Fatalf("%s: %v (Validate takes it: cp --links emulates any time a Duration holds)", c.file, err)
		}
		if err := m.CheckRanges(); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", c.file, err, c.want)
		}
		p, docs := problem(t, "causal", 8*256, 8, 2, 16)
		rp, _ := cp.New("ring-p2p")
		if _, _, err := Predict(context.Background(), rp, cp.Config{Ranks: 8, Docs: docs}, p, []kernels.Pass{kernels.Fwd}, Options{Machine: m, Kernel: KernelPresets["fa3-h100"]}); err == nil {
			t.Errorf("%s: predicted", c.file)
		}
	}
}

// TestPredictionPastAYear: a predicted time past a year (kernel rates fitted from rows of
// a far slower kernel, or the slowest links in range with the largest tensors) is a usage
// error, not a row: a time past 292 years wrapped time.Duration to a row of -9.2e12 ms.
// So is one under a nanosecond (a row of 0 ms at +Inf TFLOP/s, which report refused).
func TestPredictionPastAYear(t *testing.T) {
	p, docs := problem(t, "causal", 8*256, 8, 2, 16)
	m, _ := cp.New("ring-p2p")
	for _, launch := range []float64{1e9, 1e12, math.MaxFloat64} {
		_, pr, err := Predict(context.Background(), m, cp.Config{Ranks: 8, Docs: docs}, p, []kernels.Pass{kernels.Fwd},
			Options{Machine: MachinePresets["h100-ib"], Kernel: fixedKernel(launch)})
		if err == nil || !errors.Is(err, results.ErrUsage) || !strings.Contains(err.Error(), "past a year") {
			t.Errorf("kernel calls of %g s: %v (%v), want a usage error saying the time is past a year", launch, err, pr)
		}
	}
	if _, _, err := Predict(context.Background(), m, cp.Config{Ranks: 8, Docs: docs}, p, []kernels.Pass{kernels.Fwd},
		Options{Machine: MachinePresets["h100-ib"], Kernel: fixedKernel(1e6)}); err != nil { // 8 steps: 93 days
		t.Errorf("a prediction inside a year: %v", err)
	}
	// under a nanosecond: a row's time of 0 and an infinite rate (free links, kernel
	// calls of 1e-300 s)
	free := flatMachine(math.MaxFloat64, 0)
	free.Helpers.LaunchUs = 0
	if _, pr, err := Predict(context.Background(), m, cp.Config{Ranks: 8, Docs: docs}, p, []kernels.Pass{kernels.Fwd},
		Options{Machine: free, Kernel: fixedKernel(1e-300)}); err == nil || !errors.Is(err, results.ErrUsage) || !strings.Contains(err.Error(), "under the nanosecond") {
		t.Errorf("kernel calls of 1e-300 s on free links: %v (%+v), want a usage error", err, pr)
	}
}

// TestTensorBytesBounded: a problem whose tensors' byte counts could leave int64 is a
// usage error (heads and a head dim of 2^21 on 2^20 tokens: the counts wrapped, and the
// prediction said 0% exposed communication).
func TestTensorBytesBounded(t *testing.T) {
	p, docs := problem(t, "full", 1<<20, 1<<21, 1<<21, 1<<21)
	m, _ := cp.New("ring-p2p")
	_, pr, err := Predict(context.Background(), m, cp.Config{Ranks: 8, Docs: docs}, p, []kernels.Pass{kernels.Fwd}, Options{Machine: MachinePresets["h100-ib"], Kernel: KernelPresets["fa3-h100"]})
	if err == nil || !errors.Is(err, results.ErrUsage) || !strings.Contains(err.Error(), "past the") {
		t.Errorf("2^20 tokens x 2^21 heads x head dim 2^21: %v (%+v), want a usage error", err, pr)
	}
	// longca's bounds (1024 heads of each kind, head dim 1024, 2G tokens) stay inside
	if b := 4 * float64(1<<31) * 1024 * 1024; b > maxTensorBytes {
		t.Errorf("the largest tensor longca's flags allow, %g bytes, is past %g", b, float64(maxTensorBytes))
	}
}
