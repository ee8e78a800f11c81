package cuda

import (
	"fmt"
	"unsafe"
)

/*
#include <stdlib.h>
*/
import "C"

// NVRTCVersion is the NVRTC library's version (major, minor).
func NVRTCVersion() (int, int, error) {
	n, err := nvrtc()
	if err != nil {
		return 0, 0, err
	}
	s := newScratch()
	defer s.free()
	if err := n.call("nvrtcVersion", s.ptr(0), s.ptr(1)); err != nil {
		return 0, 0, err
	}
	return s.i32(0), s.i32(1), nil
}

// CompileError is a failed NVRTC compilation with the compiler's log.
type CompileError struct {
	Name string
	Err  error
	Log  string
}

func (e *CompileError) Error() string {
	return fmt.Sprintf("nvrtc: compiling %s: %v\n%s", e.Name, e.Err, e.Log)
}

func (e *CompileError) Unwrap() error { return e.Err }

// Compile compiles CUDA C++ source with NVRTC. With a real architecture option
// (-arch=sm_XY or sm_XYa) it returns a cubin, otherwise PTX. The log is returned even on
// success (warnings); a failure is a *CompileError carrying it.
func Compile(src, name string, opts []string) (image []byte, log string, err error) {
	n, err := nvrtc()
	if err != nil {
		return nil, "", err
	}
	s := newScratch()
	defer s.free()
	csrc, f1 := cstr(src)
	defer f1()
	cname, f2 := cstr(name)
	defer f2()
	if err := n.call("nvrtcCreateProgram", s.ptr(0), csrc, cname, 0, 0, 0); err != nil {
		return nil, "", err
	}
	prog := s.u64(0)
	defer n.call("nvrtcDestroyProgram", s.ptr(0)) //nolint:errcheck // cleanup
	copts := (*[64]*C.char)(C.calloc(64, 8))
	defer C.free(unsafe.Pointer(copts))
	if len(opts) > 64 {
		return nil, "", fmt.Errorf("nvrtc: %d options, at most 64", len(opts))
	}
	for i, o := range opts {
		copts[i] = C.CString(o)
		defer C.free(unsafe.Pointer(copts[i]))
	}
	cerr := n.call("nvrtcCompileProgram", prog, uint64(len(opts)), uint64(uintptr(unsafe.Pointer(copts))))
	log = programLog(n, prog)
	if cerr != nil {
		return nil, log, &CompileError{Name: name, Err: cerr, Log: log}
	}
	sizeFn, getFn := "nvrtcGetCUBINSize", "nvrtcGetCUBIN"
	if !realArch(opts) {
		sizeFn, getFn = "nvrtcGetPTXSize", "nvrtcGetPTX"
	}
	if err := n.call(sizeFn, prog, s.ptr(1)); err != nil {
		return nil, log, err
	}
	size := s.u64(1)
	buf := C.malloc(C.size_t(size + 1))
	defer C.free(buf)
	if err := n.call(getFn, prog, uint64(uintptr(buf))); err != nil {
		return nil, log, err
	}
	return C.GoBytes(buf, C.int(size)), log, nil
}

// programLog reads the compiler's log.
func programLog(n *lib, prog uint64) string {
	s := newScratch()
	defer s.free()
	if err := n.call("nvrtcGetProgramLogSize", prog, s.ptr(0)); err != nil {
		return ""
	}
	size := s.u64(0)
	if size <= 1 {
		return ""
	}
	buf := C.malloc(C.size_t(size))
	defer C.free(buf)
	if err := n.call("nvrtcGetProgramLog", prog, uint64(uintptr(buf))); err != nil {
		return ""
	}
	return C.GoString((*C.char)(buf))
}

// realArch says whether the options name a real GPU (sm_XY), for which NVRTC makes a
// cubin, rather than a virtual one (compute_XY), for which it makes only PTX.
func realArch(opts []string) bool {
	for _, o := range opts {
		for _, p := range []string{"-arch=sm_", "--gpu-architecture=sm_", "-arch sm_"} {
			if len(o) >= len(p) && o[:len(p)] == p {
				return true
			}
		}
	}
	return false
}
