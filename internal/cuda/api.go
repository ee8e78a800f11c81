// Package cuda is the CUDA driver API and NVRTC, opened at run time with dlopen: longca
// builds with no CUDA headers or libraries, its CPU paths run on machines without a GPU,
// and a missing library or symbol is a Go error that names it.
package cuda

/*
#include <stdint.h>
#include <stdlib.h>

// Every driver and NVRTC entry point used here takes at most 11 arguments, each an
// integer or a pointer (passed in 64-bit slots: SysV x86-64 and AArch64 pass them in
// integer registers or 8-byte stack slots, and a callee declared with fewer or narrower
// parameters reads only what it declares). One trampoline therefore calls them all.
typedef int (*fn12)(uint64_t, uint64_t, uint64_t, uint64_t, uint64_t, uint64_t,
                    uint64_t, uint64_t, uint64_t, uint64_t, uint64_t, uint64_t);
static int call12(void *f, const uint64_t *a) {
	return ((fn12)f)(a[0], a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8], a[9], a[10], a[11]);
}
typedef const char *(*strfn)(int);
static const char *callstr(void *f, int code) { return ((strfn)f)(code); }
*/
import "C"

import (
	"fmt"
	"sync"
	"unsafe"

	"github.com/longca/longca/internal/dl"
)

// Library names tried in order; LONGCA_* paths are not needed on the GPU machine, where
// the driver is on the default path and NVRTC under /usr/local/cuda.
var (
	driverNames = []string{"libcuda.so.1", "libcuda.so"}
	nvrtcNames  = []string{
		"libnvrtc.so.13", "libnvrtc.so.12", "libnvrtc.so",
		"/usr/local/cuda/lib64/libnvrtc.so.13", "/usr/local/cuda/lib64/libnvrtc.so.12",
		"/usr/local/cuda/targets/x86_64-linux/lib/libnvrtc.so.13",
		"/usr/local/cuda/targets/x86_64-linux/lib/libnvrtc.so.12",
		"/usr/local/cuda/lib64/libnvrtc.so",
	}
)

// lib is one opened library and its error-string lookup.
type lib struct {
	name string // "cuda", "nvrtc" or "nvml", as errors name it
	l    *dl.Library
}

// lazyLib is a library opened at its first use, once: the first of names that opens, then
// its init call (none: nil); what it is named in the error when none opens.
type lazyLib struct {
	names      []string
	name, what string
	init       func(*lib) error
	once       sync.Once
	l          *lib
	err        error
}

func (z *lazyLib) get() (*lib, error) {
	z.once.Do(func() {
		l, err := dl.Open(z.names...)
		if err != nil {
			z.err = fmt.Errorf("no %s found: %w", z.what, err)
			return
		}
		z.l = &lib{name: z.name, l: l}
		if z.init != nil {
			if err := z.init(z.l); err != nil {
				z.l, z.err = nil, err
			}
		}
	})
	return z.l, z.err
}

var (
	driverLib = lazyLib{names: driverNames, name: "cuda", what: "CUDA driver", init: func(l *lib) error { return l.call("cuInit", 0) }}
	nvrtcLib  = lazyLib{names: nvrtcNames, name: "nvrtc", what: "NVRTC"}
)

// driver opens libcuda and calls cuInit(0) once.
func driver() (*lib, error) { return driverLib.get() }

// nvrtc opens libnvrtc once.
func nvrtc() (*lib, error) { return nvrtcLib.get() }

// Available says whether a CUDA driver with at least one device is present, or why not.
func Available() error {
	n, err := DeviceCount()
	if err != nil {
		return err
	}
	if n == 0 {
		return fmt.Errorf("CUDA driver found but it reports no devices")
	}
	return nil
}

// raw calls a symbol with up to 12 integer or pointer arguments and returns its status.
func (l *lib) raw(name string, args ...uint64) (int, error) {
	if len(args) > 12 {
		return 0, fmt.Errorf("%s: %s takes %d arguments, the trampoline at most 12", l.name, name, len(args))
	}
	f, err := l.l.Sym(name)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", l.name, err)
	}
	a := (*[12]C.uint64_t)(C.calloc(12, 8))
	defer C.free(unsafe.Pointer(a))
	for i, v := range args {
		a[i] = C.uint64_t(v)
	}
	return int(C.call12(f, &a[0])), nil
}

// call is raw with the status turned into an *Error.
func (l *lib) call(name string, args ...uint64) error {
	code, err := l.raw(name, args...)
	if err != nil {
		return err
	}
	if code != 0 {
		return l.errorFor(name, code)
	}
	return nil
}

// errorFor asks the library itself for the name and message of a status.
func (l *lib) errorFor(fn string, code int) *Error {
	e := &Error{Lib: l.name, Func: fn, Code: code}
	switch l.name {
	case "cuda":
		s := newScratch()
		defer s.free()
		if c, err := l.raw("cuGetErrorName", uint64(code), s.ptr(0)); err == nil && c == 0 {
			e.Name = s.cstring(0)
		}
		if c, err := l.raw("cuGetErrorString", uint64(code), s.ptr(1)); err == nil && c == 0 {
			e.Msg = s.cstring(1)
		}
	case "nvml":
		e.Name = nvmlErrorName(l, code)
	case "nvrtc":
		if f, err := l.l.Sym("nvrtcGetErrorString"); err == nil {
			if p := C.callstr(f, C.int(code)); p != nil {
				e.Name = C.GoString(p)
			}
		}
	}
	return e
}

// scratch is C memory for out-parameters: eight 8-byte slots that cgo's pointer rules
// and the garbage collector leave alone.
type scratch struct{ p *[8]C.uint64_t }

func newScratch() scratch { return scratch{(*[8]C.uint64_t)(C.calloc(8, 8))} }
func (s scratch) free()   { C.free(unsafe.Pointer(s.p)) }

// ptr is the address of slot i, as an argument.
func (s scratch) ptr(i int) uint64 { return uint64(uintptr(unsafe.Pointer(&s.p[i]))) }

// u64, i32 and f32 read slot i as the type the callee wrote.
func (s scratch) u64(i int) uint64 { return uint64(s.p[i]) }
func (s scratch) i32(i int) int    { return int(*(*int32)(unsafe.Pointer(&s.p[i]))) }
func (s scratch) f32(i int) float32 {
	return *(*float32)(unsafe.Pointer(&s.p[i]))
}

// cstring reads slot i as a C string pointer.
func (s scratch) cstring(i int) string {
	p := *(**C.char)(unsafe.Pointer(&s.p[i]))
	if p == nil {
		return ""
	}
	return C.GoString(p)
}

// cstr is C memory holding s; the caller frees it.
func cstr(s string) (uint64, func()) {
	p := C.CString(s)
	return uint64(uintptr(unsafe.Pointer(p))), func() { C.free(unsafe.Pointer(p)) }
}
