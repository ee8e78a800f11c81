//go:build gpu

package cuda

import (
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/longca/longca/tensor"
)

func openGPU(t *testing.T) *Device {
	t.Helper()
	g, err := Open(0)
	if err != nil {
		t.Fatalf("this test needs a GPU: %v", err)
	}
	return g
}

func TestDeviceRoundTripPoisonPeak(t *testing.T) {
	g := openGPU(t)
	t.Logf("%s, driver %d", g.Props, g.DriverVersionCUDA)
	if ma, mi, err := NVRTCVersion(); err != nil {
		t.Fatal(err)
	} else {
		t.Logf("NVRTC %d.%d", ma, mi)
	}
	g.ResetPeak()
	base := g.PeakMemory()
	rng := rand.New(rand.NewPCG(3, 4))
	for _, dt := range []tensor.DType{tensor.BF16, tensor.FP16, tensor.FP32, tensor.FP64} {
		h := tensor.NewHost(dt, 1000, 3)
		h.FillNormal(rng, 1)
		b, err := g.Alloc(dt, 1000, 3)
		if err != nil {
			t.Fatal(err)
		}
		if err := g.CopyIn(b, h); err != nil {
			t.Fatal(err)
		}
		back := tensor.NewHost(dt, 1000, 3)
		if err := g.CopyOut(back, b); err != nil {
			t.Fatal(err)
		}
		for i := range h.Data {
			if h.Data[i] != back.Data[i] {
				t.Fatalf("%s: byte %d differs after the round trip", dt, i)
			}
		}
		if err := g.Poison(b); err != nil {
			t.Fatal(err)
		}
		if err := g.CopyOut(back, b); err != nil {
			t.Fatal(err)
		}
		for i := 0; i < back.Numel(); i++ {
			if !math.IsNaN(back.At(i)) {
				t.Fatalf("%s: element %d = %v after Poison", dt, i, back.At(i))
			}
		}
		if got := g.PeakMemory() - base; got < b.Bytes() {
			t.Fatalf("peak grew by %d, allocated %d", got, b.Bytes())
		}
		g.Free(b)
	}
	if _, err := g.Alloc(tensor.BF16, 1<<62); err == nil {
		t.Fatal("an impossible allocation succeeded")
	} else {
		t.Logf("impossible allocation: %v", err)
	}
}

func TestFillNormalAndTime(t *testing.T) {
	g := openGPU(t)
	const n = 1 << 22
	b, err := g.Alloc(tensor.BF16, n)
	if err != nil {
		t.Fatal(err)
	}
	defer g.Free(b)
	d, err := g.Time(func() error { return g.FillNormal(b, 42, 2) })
	if err != nil {
		t.Fatal(err)
	}
	if d <= 0 {
		t.Fatalf("fill took %v", d)
	}
	h := tensor.NewHost(tensor.BF16, n)
	if err := g.CopyOut(h, b); err != nil {
		t.Fatal(err)
	}
	var s, s2 float64
	for i := 0; i < n; i++ {
		v := h.At(i)
		s += v
		s2 += v * v
	}
	mean, std := s/n, math.Sqrt(s2/n-(s/n)*(s/n))
	t.Logf("fill of %d bf16 in %v: mean %.4f std %.4f", n, d, mean, std)
	if math.Abs(mean) > 0.01 || math.Abs(std-2) > 0.02 {
		t.Fatalf("mean %v std %v, want 0 and 2", mean, std)
	}
	if err := g.FlushCache(); err != nil {
		t.Fatal(err)
	}
	if err := g.Sync(); err != nil {
		t.Fatal(err)
	}
}

func TestCompileErrorCarriesLog(t *testing.T) {
	g := openGPU(t)
	_, _, err := Compile("extern \"C\" __global__ void f() { int x = ; }", "broken.cu", g.Options())
	ce, ok := err.(*CompileError)
	if !ok || ce.Log == "" {
		t.Fatalf("broken source: %v", err)
	}
	t.Logf("expected compile error: %v", err)
}

// The UUID of the GPU this process opened reads as nvidia-smi's: GPU- and 32 hex digits,
// not all zero.
func TestDeviceUUID(t *testing.T) {
	openGPU(t)
	u, err := DeviceUUID(0)
	if err != nil {
		t.Fatal(err)
	}
	if len(u) != 40 || !strings.HasPrefix(u, "GPU-") && !strings.HasPrefix(u, "MIG-") || u[4:] == FormatUUID("GPU", [16]byte{})[4:] {
		t.Fatalf("DeviceUUID(0) = %q", u)
	}
	t.Logf("device 0: %s", u)
}

// NVML on the GPU this process opened: the bus id resolves, a reading is plausible.
func TestMonitorReads(t *testing.T) {
	openGPU(t)
	bus, err := PCIBusID(0)
	if err != nil {
		t.Fatal(err)
	}
	m, err := NewMonitor(0)
	if err != nil {
		t.Fatalf("NVML on %s: %v", bus, err)
	}
	defer m.Close()
	s, err := m.Sample()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("PCI %s: SM %d MHz, %d mW (instant %v), %d C, reasons %#x", bus, s.SMClockMHz, s.PowerMW, m.Instant, s.TempC, s.Reasons)
	if s.SMClockMHz < 100 || s.SMClockMHz > 5000 || s.PowerMW == 0 || s.TempC == 0 || s.TempC > 120 {
		t.Fatalf("implausible reading %+v", s)
	}
}
