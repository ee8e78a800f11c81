package cudnn

/*
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

// The cuDNN entry points longca calls, one trampoline per C signature (cgo cannot call a
// function pointer directly). Handles and descriptors travel as uintptr_t so Go never
// holds a C pointer it did not allocate; enums travel as int, which is their ABI.
static size_t cudnn_size_void(void* f) { return ((size_t (*)(void))f)(); }
static const char* cudnn_str_int(void* f, int s) { return ((const char* (*)(int))f)(s); }
static const char* cudnn_str_void(void* f) { return ((const char* (*)(void))f)(); }
static void cudnn_last_error(void* f, char* buf, size_t n) { ((void (*)(char*, size_t))f)(buf, n); }
static int cudnn_out_ptr(void* f, uintptr_t* out) { return ((int (*)(void**))f)((void**)out); }
static int cudnn_ptr(void* f, uintptr_t p) { return ((int (*)(void*))f)((void*)p); }
static int cudnn_ptr_ptr(void* f, uintptr_t a, uintptr_t b) {
	return ((int (*)(void*, void*))f)((void*)a, (void*)b);
}
static int cudnn_ptr3(void* f, uintptr_t a, uintptr_t b, uintptr_t c) {
	return ((int (*)(void*, void*, void*))f)((void*)a, (void*)b, (void*)c);
}
static int cudnn_create_desc(void* f, int type, uintptr_t* out) {
	return ((int (*)(int, void**))f)(type, (void**)out);
}
static int cudnn_set_attr(void* f, uintptr_t d, int name, int type, int64_t n, const void* v) {
	return ((int (*)(void*, int, int, int64_t, const void*))f)((void*)d, name, type, n, v);
}
static int cudnn_get_attr(void* f, uintptr_t d, int name, int type, int64_t req, int64_t* n, void* v) {
	return ((int (*)(void*, int, int, int64_t, int64_t*, void*))f)((void*)d, name, type, req, n, v);
}
*/
import "C"

import (
	"fmt"
	"strconv"
	"unsafe"

	"github.com/longca/longca/internal/dl"
)

// DefaultLibraries are the names dlopen tries: cuDNN 9's soname, then the Debian/Ubuntu
// path the GPU machine has it at.
var DefaultLibraries = []string{"libcudnn.so.9", "/usr/lib/x86_64-linux-gnu/libcudnn.so.9"}

// MinVersion is the oldest cuDNN longca drives: 9.6 brought ragged (packed) tensors with
// grouped-query attention and bottom-right causal masks of any length, which the
// document masks and the context-parallel pieces need.
const MinVersion = 90600

// SDPAOpVersion is the first cuDNN with the SDPA forward operation
// (CUDNN_BACKEND_OPERATION_SDPA_FWD_DESCRIPTOR) usable for longca's full mask.
const SDPAOpVersion = 91301

// Lib is an opened cuDNN library with its entry points resolved.
type Lib struct {
	dl      *dl.Library
	version int

	getVersion, getErrorString, getLastError                     unsafe.Pointer
	create, destroy, setStream                                   unsafe.Pointer
	createDesc, destroyDesc, finalize, setAttr, getAttr, execute unsafe.Pointer
}

// required are the entry points every cuDNN 9 exports.
var required = []string{
	"cudnnGetVersion", "cudnnGetErrorString", "cudnnCreate", "cudnnDestroy", "cudnnSetStream",
	"cudnnBackendCreateDescriptor", "cudnnBackendDestroyDescriptor", "cudnnBackendFinalize",
	"cudnnBackendSetAttribute", "cudnnBackendGetAttribute", "cudnnBackendExecute",
}

// Open opens cuDNN from the first of names that loads (DefaultLibraries when none are
// given) and resolves its entry points. cudnnGetLastErrorString is optional (cuDNN 9.0
// on): without it errors carry only the status.
func Open(names ...string) (*Lib, error) {
	if len(names) == 0 {
		names = DefaultLibraries
	}
	l, err := dl.Open(names...)
	if err != nil {
		return nil, fmt.Errorf("cudnn: %w (install cuDNN 9, or put the folder holding libcudnn.so.9 on LD_LIBRARY_PATH)", err)
	}
	lib := &Lib{dl: l}
	ptrs := []*unsafe.Pointer{&lib.getVersion, &lib.getErrorString, &lib.create, &lib.destroy, &lib.setStream,
		&lib.createDesc, &lib.destroyDesc, &lib.finalize, &lib.setAttr, &lib.getAttr, &lib.execute}
	for i, name := range required {
		p, err := l.Sym(name)
		if err != nil {
			l.Close()
			return nil, fmt.Errorf("cudnn: %w: not cuDNN 9 with the backend API", err)
		}
		*ptrs[i] = p
	}
	lib.getLastError, _ = l.Sym("cudnnGetLastErrorString")
	lib.version = int(C.cudnn_size_void(lib.getVersion))
	return lib, nil
}

// Path is the name the library was opened by.
func (l *Lib) Path() string { return l.dl.Name }

// Version is cudnnGetVersion (91400 for 9.14.0).
func (l *Lib) Version() int { return l.version }

// VersionString is the version as major.minor.patch.
func (l *Lib) VersionString() string { return VersionString(l.version) }

// VersionString decodes a cuDNN 9 version code: major*10000 + minor*100 + patch.
func VersionString(v int) string {
	if v < 10000 { // cuDNN 8 coded major*1000 + minor*100 + patch
		return fmt.Sprintf("%d.%d.%d", v/1000, v%1000/100, v%100)
	}
	return fmt.Sprintf("%d.%d.%d", v/10000, v%10000/100, v%100)
}

// CheckVersion says why this cuDNN cannot serve longca, or nil.
func (l *Lib) CheckVersion() error {
	switch v := l.version; {
	case v < MinVersion:
		return fmt.Errorf("cudnn %s is too old: longca needs cuDNN %s or later (ragged GQA tensors and bottom-right masks)", VersionString(v), VersionString(MinVersion))
	case v == 91000 || v == 91001:
		return fmt.Errorf("cudnn %s has known wrong results in fused attention (NVIDIA: use 9.10.2 or later)", VersionString(v))
	}
	return nil
}

// Error is a failed cuDNN call: the status with cuDNN's own name for it and, where the
// library has cudnnGetLastErrorString, its explanation.
type Error struct {
	Op      string // what was being done, e.g. "finalize execution plan"
	Status  int    // cudnnStatus_t
	Name    string // cudnnGetErrorString
	Detail  string // cudnnGetLastErrorString
	Version int    // the library's version
}

func (e *Error) Error() string {
	s := fmt.Sprintf("cudnn %s: %s: %s (%d)", VersionString(e.Version), e.Op, e.Name, e.Status)
	if e.Detail != "" {
		s += ": " + e.Detail
	}
	return s
}

// NotSupported says whether cuDNN refused the request as unsupported (status 3000-3999).
func (e *Error) NotSupported() bool { return status(e.Status).category() == statusNotSupported }

// OutOfMemory says whether cuDNN failed to allocate device memory.
func (e *Error) OutOfMemory() bool { return status(e.Status) == statusDeviceAlloc }

// check turns a status into an *Error, or nil.
func (l *Lib) check(op string, st C.int) error {
	if st == 0 {
		return nil
	}
	e := &Error{Op: op, Status: int(st), Version: l.version}
	if p := C.cudnn_str_int(l.getErrorString, st); p != nil {
		e.Name = C.GoString(p)
	}
	if e.Name == "" {
		e.Name = "status " + strconv.Itoa(int(st))
	}
	e.Detail = l.lastError()
	return e
}

// lastError is cudnnGetLastErrorString, or "" where the library lacks it. cuDNN keeps
// the message per thread: callers hold their OS thread (runtime.LockOSThread) from the
// failing call to here.
func (l *Lib) lastError() string {
	if l.getLastError == nil {
		return ""
	}
	const n = 4096
	buf := (*C.char)(C.calloc(n, 1))
	defer C.free(unsafe.Pointer(buf))
	C.cudnn_last_error(l.getLastError, buf, n)
	return C.GoString(buf)
}

// ErrorString is cudnnGetErrorString(st).
func (l *Lib) ErrorString(st int) string {
	return C.GoString(C.cudnn_str_int(l.getErrorString, C.int(st)))
}

// NewHandle is cudnnCreate: a handle on the device whose context is current on the
// calling thread.
func (l *Lib) NewHandle() (uintptr, error) {
	var h C.uintptr_t
	if err := l.check("cudnnCreate", C.cudnn_out_ptr(l.create, &h)); err != nil {
		return 0, err
	}
	return uintptr(h), nil
}

// DestroyHandle is cudnnDestroy.
func (l *Lib) DestroyHandle(h uintptr) error {
	return l.check("cudnnDestroy", C.cudnn_ptr(l.destroy, C.uintptr_t(h)))
}

// SetStream is cudnnSetStream: the handle's work goes on stream (a CUstream).
func (l *Lib) SetStream(h, stream uintptr) error {
	return l.check("cudnnSetStream", C.cudnn_ptr_ptr(l.setStream, C.uintptr_t(h), C.uintptr_t(stream)))
}

// desc is a cudnnBackendDescriptor_t.
type desc uintptr

func (l *Lib) createDescriptor(t descType) (desc, error) {
	var d C.uintptr_t
	if err := l.check("create "+t.String()+" descriptor", C.cudnn_create_desc(l.createDesc, C.int(t), &d)); err != nil {
		return 0, err
	}
	return desc(d), nil
}

func (l *Lib) destroyDescriptor(d desc) {
	if d != 0 {
		C.cudnn_ptr(l.destroyDesc, C.uintptr_t(d)) // nothing to do about a failure here
	}
}

func (l *Lib) finalizeDescriptor(d desc, what string) error {
	return l.check("finalize "+what, C.cudnn_ptr(l.finalize, C.uintptr_t(d)))
}

// setRaw is cudnnBackendSetAttribute with n elements at p (Go memory without Go
// pointers, or C memory).
func (l *Lib) setRaw(d desc, name attrName, t attrType, n int, p unsafe.Pointer, what string) error {
	st := C.cudnn_set_attr(l.setAttr, C.uintptr_t(d), C.int(name), C.int(t), C.int64_t(n), p)
	if st != 0 {
		return l.check(fmt.Sprintf("set attribute %d of %s", int(name), what), st)
	}
	return nil
}

// getRaw is cudnnBackendGetAttribute: up to req elements into p; it returns the count.
func (l *Lib) getRaw(d desc, name attrName, t attrType, req int, p unsafe.Pointer, what string) (int, error) {
	var n C.int64_t
	st := C.cudnn_get_attr(l.getAttr, C.uintptr_t(d), C.int(name), C.int(t), C.int64_t(req), &n, p)
	if st != 0 {
		return 0, l.check(fmt.Sprintf("get attribute %d of %s", int(name), what), st)
	}
	return int(n), nil
}

// executeRaw is cudnnBackendExecute.
func (l *Lib) executeRaw(h uintptr, plan, pack desc) error {
	return l.check("execute", C.cudnn_ptr3(l.execute, C.uintptr_t(h), C.uintptr_t(plan), C.uintptr_t(pack)))
}

// cmem is C memory that cuDNN may keep pointers into (the by-value scalars a variant pack
// points at are read when the plan executes).
type cmem struct {
	p unsafe.Pointer
	n int
}

func newCMem(n int) cmem { return cmem{C.calloc(C.size_t(max(n, 1)), 1), n} }

func (m cmem) free() { C.free(m.p) }

// ptr points at byte i; addr is its address as a value to hand to cuDNN.
func (m cmem) ptr(i int) unsafe.Pointer { return unsafe.Add(m.p, i) }
func (m cmem) addr(i int) uintptr       { return uintptr(m.ptr(i)) }

// callCString calls a `const char *f(void)`: the tests read the fake library's
// descriptors through it (test files cannot use cgo).
func callCString(f unsafe.Pointer) string { return C.GoString(C.cudnn_str_void(f)) }

// cString is a Go string of the NUL-terminated bytes at p.
func cString(p unsafe.Pointer) string { return C.GoString((*C.char)(p)) }

func itoa(v int64) string { return strconv.FormatInt(v, 10) }
