package cuda

import (
	"fmt"
	"math"
	"unsafe"
)

/*
#include <stdlib.h>
#include <string.h>
#include <stdint.h>
*/
import "C"

// Device attributes read by Props (CUdevice_attribute values).
const (
	attrClockRate        = 13
	attrMultiprocessors  = 16
	attrL2CacheSize      = 38
	attrCCMajor          = 75
	attrCCMinor          = 76
	attrSharedPerSM      = 81
	attrSharedPerBlockIn = 97
)

// funcAttrMaxDynamicShared is CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES.
const (
	funcAttrNumRegs          = 4
	funcAttrLocalBytes       = 3
	funcAttrMaxDynamicShared = 8
)

// DeviceCount is the number of CUDA devices, or why there are none to ask.
func DeviceCount() (int, error) {
	d, err := driver()
	if err != nil {
		return 0, err
	}
	s := newScratch()
	defer s.free()
	if err := d.call("cuDeviceGetCount", s.ptr(0)); err != nil {
		return 0, err
	}
	return s.i32(0), nil
}

// DriverVersion is the driver's CUDA version, e.g. 13000 for 13.0.
func DriverVersion() (int, error) {
	d, err := driver()
	if err != nil {
		return 0, err
	}
	s := newScratch()
	defer s.free()
	if err := d.call("cuDriverGetVersion", s.ptr(0)); err != nil {
		return 0, err
	}
	return s.i32(0), nil
}

// Props are the properties of one device that longca uses.
type Props struct {
	Index              int
	Name               string
	Major, Minor       int // compute capability
	SMs                int
	L2Bytes            int
	SharedPerBlockOpt  int // the most dynamic shared memory a block may opt into
	SharedPerSM        int
	ClockKHz           int
	TotalMem, FreeMem  int64
	DriverVersionCUDA  int
	computeCapabilityX int
}

// Arch is the NVRTC target for the device: sm_90a on Hopper (for wgmma and setmaxnreg),
// sm_XY otherwise.
func (p Props) Arch() string {
	if p.Major == 9 && p.Minor == 0 {
		return "sm_90a"
	}
	return fmt.Sprintf("sm_%d%d", p.Major, p.Minor)
}

func (p Props) String() string {
	return fmt.Sprintf("%s (sm_%d%d, %d SMs, %.0f GiB)", p.Name, p.Major, p.Minor, p.SMs, float64(p.TotalMem)/(1<<30))
}

// deviceName is the name the driver gives CUdevice dev ("NVIDIA H200").
func deviceName(d *lib, dev uint64) (string, error) {
	name := (*[256]byte)(C.calloc(256, 1))
	defer C.free(unsafe.Pointer(name))
	if err := d.call("cuDeviceGetName", uint64(uintptr(unsafe.Pointer(name))), 256, dev); err != nil {
		return "", err
	}
	return C.GoString((*C.char)(unsafe.Pointer(name))), nil
}

// deviceProps reads the properties of device index (the context must be current for
// the memory figures).
func deviceProps(d *lib, index int) (Props, error) {
	s := newScratch()
	defer s.free()
	p := Props{Index: index}
	if err := d.call("cuDeviceGet", s.ptr(0), uint64(index)); err != nil {
		return p, err
	}
	dev := uint64(s.i32(0))
	var err error
	if p.Name, err = deviceName(d, dev); err != nil {
		return p, err
	}
	for _, a := range []struct {
		attr int
		dst  *int
	}{
		{attrCCMajor, &p.Major}, {attrCCMinor, &p.Minor}, {attrMultiprocessors, &p.SMs},
		{attrL2CacheSize, &p.L2Bytes}, {attrSharedPerBlockIn, &p.SharedPerBlockOpt},
		{attrSharedPerSM, &p.SharedPerSM}, {attrClockRate, &p.ClockKHz},
	} {
		if err := d.call("cuDeviceGetAttribute", s.ptr(1), uint64(a.attr), dev); err != nil {
			return p, err
		}
		*a.dst = s.i32(1)
	}
	if err := d.call("cuDeviceTotalMem_v2", s.ptr(2), dev); err != nil {
		return p, err
	}
	p.TotalMem = int64(s.u64(2))
	return p, nil
}

// Stream is a CUDA stream handle.
type Stream uint64

// Event is a CUDA event handle.
type Event uint64

// Module is a loaded CUDA module.
type Module struct {
	h  uint64
	dv *lib
}

// Function is a kernel of a loaded module.
type Function struct {
	h    uint64
	Name string
	dv   *lib
}

// LoadModule loads a cubin or PTX image into the current context.
func LoadModule(image []byte) (*Module, error) {
	d, err := driver()
	if err != nil {
		return nil, err
	}
	s := newScratch()
	defer s.free()
	img := C.CBytes(append(append([]byte(nil), image...), 0))
	defer C.free(img)
	if err := d.call("cuModuleLoadData", s.ptr(0), uint64(uintptr(img))); err != nil {
		return nil, err
	}
	return &Module{h: s.u64(0), dv: d}, nil
}

// Function looks a kernel up by its (extern "C") name.
func (m *Module) Function(name string) (*Function, error) {
	s := newScratch()
	defer s.free()
	cn, free := cstr(name)
	defer free()
	if err := m.dv.call("cuModuleGetFunction", s.ptr(0), m.h, cn); err != nil {
		return nil, fmt.Errorf("kernel %s: %w", name, err)
	}
	return &Function{h: s.u64(0), Name: name, dv: m.dv}, nil
}

// Unload unloads the module.
func (m *Module) Unload() error { return m.dv.call("cuModuleUnload", m.h) }

// SetMaxDynamicShared lets a launch of f use up to bytes of dynamic shared memory (needed
// above 48 KB).
func (f *Function) SetMaxDynamicShared(bytes int) error {
	if err := f.dv.call("cuFuncSetAttribute", f.h, funcAttrMaxDynamicShared, uint64(bytes)); err != nil {
		return fmt.Errorf("kernel %s: %w", f.Name, err)
	}
	return nil
}

// Registers is the number of registers per thread of f, and LocalBytes its stack frame
// (spills show there).
func (f *Function) Registers() (regs, localBytes int, err error) {
	s := newScratch()
	defer s.free()
	if err := f.dv.call("cuFuncGetAttribute", s.ptr(0), funcAttrNumRegs, f.h); err != nil {
		return 0, 0, err
	}
	if err := f.dv.call("cuFuncGetAttribute", s.ptr(1), funcAttrLocalBytes, f.h); err != nil {
		return 0, 0, err
	}
	return s.i32(0), s.i32(1), nil
}

// Occupancy is the number of blocks of f that fit on one multiprocessor.
func (f *Function) Occupancy(blockThreads, dynShared int) (int, error) {
	s := newScratch()
	defer s.free()
	if err := f.dv.call("cuOccupancyMaxActiveBlocksPerMultiprocessor", s.ptr(0), f.h, uint64(blockThreads), uint64(dynShared)); err != nil {
		return 0, err
	}
	return s.i32(0), nil
}

// Dim3 is a grid or block shape.
type Dim3 struct{ X, Y, Z int }

// packArgs lays kernel arguments out as cuLaunchKernel wants them: an array of pointers,
// each to one argument's bytes. Every argument gets an 8-byte slot, little-endian, so a
// 4-byte parameter reads its low half. Accepted: device buffers (their address),
// uintptr, uint64, int, int32, uint32, float32, float64 (as a C double), and *TensorMap
// (its 128 bytes, 64-byte aligned: a __grid_constant__ parameter).
func packArgs(args []any) (vals *C.uint64_t, ptrs *unsafe.Pointer, free func(), err error) {
	n := max(len(args), 1)
	v := (*[64]C.uint64_t)(C.calloc(C.size_t(n), 8))
	p := (*[64]unsafe.Pointer)(C.calloc(C.size_t(n), 8))
	var maps []unsafe.Pointer
	free = func() {
		C.free(unsafe.Pointer(v))
		C.free(unsafe.Pointer(p))
		for _, m := range maps {
			C.free(m)
		}
	}
	if len(args) > 64 {
		free()
		return nil, nil, nil, fmt.Errorf("cuda: %d kernel arguments, at most 64", len(args))
	}
	for i, a := range args {
		if tm, ok := a.(*TensorMap); ok {
			m := C.aligned_alloc(64, 128)
			C.memcpy(m, unsafe.Pointer(&tm.b[0]), 128)
			maps = append(maps, m)
			p[i] = m
			continue
		}
		var u uint64
		switch x := a.(type) {
		case interface{ DevicePtr() uintptr }:
			u = uint64(x.DevicePtr())
		case uintptr:
			u = uint64(x)
		case uint64:
			u = x
		case int:
			if x < math.MinInt32 || x > math.MaxInt32 {
				free()
				return nil, nil, nil, fmt.Errorf("cuda: kernel argument %d = %d overflows int32", i, x)
			}
			u = uint64(uint32(int32(x)))
		case int32:
			u = uint64(uint32(x))
		case uint32:
			u = uint64(x)
		case float32:
			u = uint64(math.Float32bits(x))
		case float64:
			u = math.Float64bits(x)
		default:
			free()
			return nil, nil, nil, fmt.Errorf("cuda: kernel argument %d has unsupported type %T", i, a)
		}
		v[i] = C.uint64_t(u)
		p[i] = unsafe.Pointer(&v[i])
	}
	return &v[0], &p[0], free, nil
}

// Launch starts f on the stream with dynamic shared memory shared bytes.
func (f *Function) Launch(grid, block Dim3, shared int, stream Stream, args ...any) error {
	_, ptrs, free, err := packArgs(args)
	if err != nil {
		return fmt.Errorf("kernel %s: %w", f.Name, err)
	}
	defer free()
	g, b := fix(grid), fix(block)
	err = f.dv.call("cuLaunchKernel", f.h, uint64(g.X), uint64(g.Y), uint64(g.Z),
		uint64(b.X), uint64(b.Y), uint64(b.Z), uint64(shared), uint64(stream),
		uint64(uintptr(unsafe.Pointer(ptrs))), 0)
	if err != nil {
		return fmt.Errorf("kernel %s grid %v block %v shared %d: %w", f.Name, g, b, shared, err)
	}
	return nil
}

// fix turns zero dimensions into 1.
func fix(d Dim3) Dim3 {
	if d.Y == 0 {
		d.Y = 1
	}
	if d.Z == 0 {
		d.Z = 1
	}
	return d
}
