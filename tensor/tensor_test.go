package tensor

import (
	"math"
	"math/rand/v2"
	"testing"
)

// bf16 and fp16 rounding is round-to-nearest-even: check against a brute-force nearest
// representable value found by scanning every 16-bit pattern near the input.
func nearest(f float32, decode func(uint16) float32) float32 {
	best, bestErr := float32(0), math.Inf(1)
	for b := 0; b < 1<<16; b++ {
		v := decode(uint16(b))
		if v != v || math.IsInf(float64(v), 0) {
			continue
		}
		e := math.Abs(float64(v) - float64(f))
		if e < bestErr || (e == bestErr && lowBitEven(uint16(b)) && !lowBitEven(bits(best, decode))) {
			best, bestErr = v, e
		}
	}
	return best
}

func lowBitEven(b uint16) bool { return b&1 == 0 }

func bits(v float32, decode func(uint16) float32) uint16 {
	for b := 0; b < 1<<16; b++ {
		if decode(uint16(b)) == v {
			return uint16(b)
		}
	}
	return 0
}

func TestRoundingIsNearestEven(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	for i := 0; i < 200; i++ {
		f := float32(rng.NormFloat64() * math.Pow(10, float64(rng.IntN(6)-3)))
		if got, want := BF16Float(BF16Bits(f)), nearest(f, BF16Float); got != want {
			t.Fatalf("bf16(%g) = %g, nearest %g", f, got, want)
		}
		if math.Abs(float64(f)) < 60000 {
			if got, want := FP16Float(FP16Bits(f)), nearest(f, FP16Float); got != want {
				t.Fatalf("fp16(%g) = %g, nearest %g", f, got, want)
			}
		}
	}
	if v := BF16Float(BF16Bits(float32(math.NaN()))); v == v {
		t.Fatal("bf16 NaN is not NaN")
	}
	if v := FP16Float(FP16Bits(1e6)); !math.IsInf(float64(v), 1) {
		t.Fatalf("fp16 overflow gives %g, want +Inf", v)
	}
}

func TestHostRoundTripAndViews(t *testing.T) {
	for _, dt := range []DType{BF16, FP16, FP32, FP64} {
		h := NewHost(dt, 4, 3)
		for i := 0; i < h.Numel(); i++ {
			h.Set(i, float64(i)-5.5)
		}
		for i := 0; i < h.Numel(); i++ {
			if h.At(i) != float64(i)-5.5 {
				t.Fatalf("%s: element %d = %g", dt, i, h.At(i))
			}
		}
		r := h.Rows(1, 3)
		if r.Shape()[0] != 2 || r.At(0) != h.At(3) {
			t.Fatalf("%s: rows view wrong", dt)
		}
		r.Set(0, 7)
		if h.At(3) != 7 {
			t.Fatalf("%s: rows view does not share memory", dt)
		}
		if c := h.Clone(); &c.Data[0] == &h.Data[0] {
			t.Fatalf("%s: clone shares memory", dt)
		}
	}
	if _, err := ParseDType("int8"); err == nil {
		t.Fatal("int8 parsed")
	}
}

func TestCPUDevicePeakAndPoison(t *testing.T) {
	var c CPU
	a, _ := c.Alloc(FP32, 100)
	b, _ := c.Alloc(FP32, 50)
	c.Free(a)
	if c.PeakMemory() != 600 {
		t.Fatalf("peak %d, want 600", c.PeakMemory())
	}
	c.ResetPeak()
	if c.PeakMemory() != 200 {
		t.Fatalf("peak after reset %d, want 200 (what is live)", c.PeakMemory())
	}
	if err := c.Poison(b); err != nil {
		t.Fatal(err)
	}
	if v := b.(*Host).At(3); v == v {
		t.Fatal("poison did not write NaN")
	}
}
