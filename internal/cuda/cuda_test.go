package cuda

import (
	"errors"
	"math"
	"strings"
	"testing"
	"unsafe"

	"github.com/longca/longca/tensor"
)

// On a machine without a driver, Open and Available fail with an error that names the
// library; with one, they succeed. Either way nothing panics.
func TestOpenWithoutDriverFailsCleanly(t *testing.T) {
	err := Available()
	if err == nil {
		t.Log("a CUDA driver is present: checking that device 0 opens")
		g, err := Open(0)
		if err != nil {
			t.Fatal(err)
		}
		if g.SMs <= 0 || g.Major <= 0 {
			t.Fatalf("props %+v", g.Props)
		}
		return
	}
	if !strings.Contains(err.Error(), "libcuda.so.1") {
		t.Fatalf("error does not name the library: %v", err)
	}
	if _, err2 := Open(0); err2 == nil || err2.Error() != err.Error() {
		t.Fatalf("Open(0) = %v, want %v", err2, err)
	}
	if _, err := Open(-1); err == nil {
		t.Fatal("Open(-1) succeeded")
	}
}

func TestErrorText(t *testing.T) {
	for _, c := range []struct {
		e    Error
		want string
	}{
		{Error{Lib: "cuda", Func: "cuMemAlloc_v2", Code: 2, Name: "CUDA_ERROR_OUT_OF_MEMORY", Msg: "out of memory"},
			"cuda: cuMemAlloc_v2 failed: CUDA_ERROR_OUT_OF_MEMORY (out of memory)"},
		{Error{Lib: "nvrtc", Func: "nvrtcCompileProgram", Code: 6, Name: "NVRTC_ERROR_COMPILATION"},
			"nvrtc: nvrtcCompileProgram failed: NVRTC_ERROR_COMPILATION"},
		{Error{Lib: "cuda", Func: "cuInit", Code: 100}, "cuda: cuInit failed: status 100"},
	} {
		if got := c.e.Error(); got != c.want {
			t.Errorf("got %q want %q", got, c.want)
		}
	}
	oom := &Error{Lib: "cuda", Code: 2}
	if !oom.OutOfMemory() || (&Error{Lib: "nvrtc", Code: 2}).OutOfMemory() {
		t.Fatal("OutOfMemory misclassifies")
	}
	ce := &CompileError{Name: "x.cu", Err: &Error{Lib: "nvrtc", Func: "nvrtcCompileProgram", Code: 6}, Log: "x.cu(3): error: bad"}
	var e *Error
	if !errors.As(ce, &e) || !strings.Contains(ce.Error(), "x.cu(3): error: bad") {
		t.Fatalf("compile error %v", ce)
	}
}

// The argument block holds each argument in its own 8-byte slot, low bytes first.
func TestPackArgs(t *testing.T) {
	b := &Buffer{ptr: 0xdeadbeef00}
	vals, ptrs, free, err := packArgs([]any{b, int(-3), float32(1.5), uint64(1 << 40), int32(7)})
	if err != nil {
		t.Fatal(err)
	}
	defer free()
	v := unsafe.Slice((*uint64)(unsafe.Pointer(vals)), 5)
	p := unsafe.Slice((*unsafe.Pointer)(unsafe.Pointer(ptrs)), 5)
	if v[0] != 0xdeadbeef00 || int32(uint32(v[1])) != -3 || math.Float32frombits(uint32(v[2])) != 1.5 || v[3] != 1<<40 || v[4] != 7 {
		t.Fatalf("slots %x", v)
	}
	for i := range p {
		if *(*uint64)(p[i]) != v[i] {
			t.Fatalf("pointer %d does not point at its slot", i)
		}
	}
	if _, _, _, err := packArgs([]any{"x"}); err == nil {
		t.Fatal("a string argument was accepted")
	}
	if _, _, _, err := packArgs([]any{int(1) << 40}); err == nil {
		t.Fatal("an int overflowing int32 was accepted")
	}
}

func TestNaNPatternIsNaN(t *testing.T) {
	for _, dt := range []tensor.DType{tensor.BF16, tensor.FP16, tensor.FP32, tensor.FP64} {
		w, p := nanPattern(dt)
		h := tensor.NewHost(dt, 4)
		for i := 0; i < len(h.Data); i += w {
			for j := 0; j < w; j++ {
				h.Data[i+j] = byte(p >> (8 * j))
			}
		}
		for i := 0; i < 4; i++ {
			if v := h.At(i); !math.IsNaN(v) {
				t.Fatalf("%s: pattern %x reads %v", dt, p, v)
			}
		}
	}
}

func TestRealArch(t *testing.T) {
	if !realArch([]string{"-std=c++17", "-arch=sm_90a"}) || realArch([]string{"-arch=compute_90"}) {
		t.Fatal("realArch")
	}
	if (Props{Major: 9, Minor: 0}).Arch() != "sm_90a" || (Props{Major: 8, Minor: 6}).Arch() != "sm_86" {
		t.Fatal("Arch")
	}
}

func TestCacheKeyDependsOnEverything(t *testing.T) {
	a := CacheKey("src", []string{"-arch=sm_90a"}, "H200")
	for _, b := range []string{
		CacheKey("src2", []string{"-arch=sm_90a"}, "H200"),
		CacheKey("src", []string{"-arch=sm_80"}, "H200"),
		CacheKey("src", []string{"-arch=sm_90a"}, "H100"),
	} {
		if a == b {
			t.Fatal("cache key ignores an input")
		}
	}
	if a != CacheKey("src", []string{"-arch=sm_90a"}, "H200") {
		t.Fatal("cache key not deterministic")
	}
}

// A tensor map travels by value: its argument slot points to a 64-byte-aligned copy of
// its 128 bytes, and the slots around it are unaffected.
func TestPackArgsTensorMap(t *testing.T) {
	tm := &TensorMap{}
	for i := range tm.b {
		tm.b[i] = byte(i + 1)
	}
	_, ptrs, free, err := packArgs([]any{int32(5), tm, float32(2)})
	if err != nil {
		t.Fatal(err)
	}
	defer free()
	slots := unsafe.Slice(ptrs, 3)
	if uintptr(slots[1])%64 != 0 {
		t.Fatalf("tensor map copy at %p is not 64-byte aligned", slots[1])
	}
	got := unsafe.Slice((*byte)(slots[1]), 128)
	for i := range got {
		if got[i] != byte(i+1) {
			t.Fatalf("byte %d of the tensor map is %d", i, got[i])
		}
	}
	if *(*int32)(slots[0]) != 5 || *(*float32)(slots[2]) != 2 {
		t.Fatal("neighbouring arguments changed")
	}
}

func TestTileMapRules(t *testing.T) {
	ok := TileMap{DType: tensor.BF16, Dims: []uint64{128, 8, 4096}, Strides: []uint64{256, 2048}, Box: []uint32{64, 1, 128}, Swizzle: Swizzle128B}
	if err := ok.check(); err != nil {
		t.Fatalf("a valid map: %v", err)
	}
	for name, m := range map[string]TileMap{
		"stride not a multiple of 16": {DType: tensor.BF16, Dims: []uint64{7, 3}, Strides: []uint64{14}, Box: []uint32{8, 1}},
		"box over 256":                {DType: tensor.BF16, Dims: []uint64{128, 4096}, Strides: []uint64{256}, Box: []uint32{64, 512}},
		"row wider than its swizzle":  {DType: tensor.BF16, Dims: []uint64{128, 4096}, Strides: []uint64{256}, Box: []uint32{128, 64}, Swizzle: Swizzle128B},
		"missing strides":             {DType: tensor.BF16, Dims: []uint64{128, 4096}, Box: []uint32{64, 64}},
		"row not 16 bytes":            {DType: tensor.FP32, Dims: []uint64{128, 4096}, Strides: []uint64{512}, Box: []uint32{2, 64}},
	} {
		if err := m.check(); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

// Without a driver NewMonitor fails with the driver's error (it reads the PCI bus id
// first), and nvml, without NVML, names libnvidia-ml; with them, a reading's figures are
// plausible. Nothing panics either way.
func TestMonitorWithoutNVML(t *testing.T) {
	m, err := NewMonitor(0)
	if err == nil {
		defer m.Close()
		s, err := m.Sample()
		if err != nil {
			t.Fatal(err)
		}
		if s.SMClockMHz == 0 || s.SMClockMHz > 5000 || s.TempC > 120 {
			t.Fatalf("implausible reading %+v", s)
		}
		m.Close()
		if _, err := m.Sample(); err == nil {
			t.Fatal("a closed monitor was read")
		}
		return
	}
	if Available() != nil && !strings.Contains(err.Error(), "libcuda.so.1") {
		t.Fatalf("NewMonitor without a driver: %v, want the driver's error", err)
	}
	if _, nerr := nvml(); nerr != nil && !strings.Contains(nerr.Error(), "libnvidia-ml.so.1") {
		t.Fatalf("nvml without NVML: %v, want the library named", nerr)
	}
}

// nvmlFieldValue's layout as nvml.h has it (fieldId, scopeId, timestamp, latencyUsec,
// valueType, nvmlReturn, value: 40 bytes, the value at 32) and its power by value type.
func TestFieldValueMilliwatts(t *testing.T) {
	if n := unsafe.Sizeof(nvmlFieldValue{}); n != 40 {
		t.Fatalf("nvmlFieldValue is %d bytes, want 40", n)
	}
	set := func(typ, ret uint32, v uint64) *nvmlFieldValue {
		fv := new(nvmlFieldValue)
		b := (*[40]byte)(unsafe.Pointer(fv))
		*(*uint32)(unsafe.Pointer(&b[24])), *(*uint32)(unsafe.Pointer(&b[28])), *(*uint64)(unsafe.Pointer(&b[32])) = typ, ret, v
		return fv
	}
	for _, c := range []struct {
		typ, ret uint32
		v        uint64
		want     uint32
		ok       bool
	}{
		{1, 0, 612345, 612345, true},                     // unsigned int
		{5, 0, 700000, 700000, true},                     // signed int
		{3, 0, 655000, 655000, true},                     // unsigned long long
		{0, 0, math.Float64bits(650000.5), 650000, true}, // double
		{1, 3, 612345, 0, false},                         // the field's own status: not supported
		{7, 0, 1, 0, false},                              // a type NVML does not give power in
	} {
		got, ok := set(c.typ, c.ret, c.v).milliwatts()
		if got != c.want || ok != c.ok {
			t.Errorf("type %d status %d value %#x: %d %v, want %d %v", c.typ, c.ret, c.v, got, ok, c.want, c.ok)
		}
	}
}

// TestFormatUUID: a CUuuid's bytes as nvidia-smi prints them.
func TestFormatUUID(t *testing.T) {
	u := [16]byte{0x5b, 0x7e, 0xa7, 0xb3, 0x9a, 0x6c, 0x1f, 0x84, 0x0d, 0x3a, 0x6e, 0x2c, 0x42, 0xf1, 0xb7, 0xa0}
	if got, want := FormatUUID("GPU", u), "GPU-5b7ea7b3-9a6c-1f84-0d3a-6e2c42f1b7a0"; got != want {
		t.Fatalf("FormatUUID = %s, want %s", got, want)
	}
	if got, want := FormatUUID("MIG", u), "MIG-5b7ea7b3-9a6c-1f84-0d3a-6e2c42f1b7a0"; got != want {
		t.Fatalf("FormatUUID = %s, want %s", got, want)
	}
}
