// Package dl opens shared libraries at run time (dlopen) and resolves their symbols, so
// longca builds and runs its CPU paths on machines without CUDA, NCCL or cuDNN. Callers
// call a resolved symbol through a small C trampoline of their own (cgo cannot call a C
// function pointer directly).
package dl

/*
#cgo LDFLAGS: -ldl
#include <dlfcn.h>
#include <stdlib.h>
*/
import "C"

import (
	"fmt"
	"strings"
	"sync"
	"unsafe"
)

// Library is an opened shared library.
type Library struct {
	Name   string // the name that opened
	handle unsafe.Pointer
	mu     sync.Mutex
	syms   map[string]unsafe.Pointer
}

// Open tries each name in turn (a soname, or a path) and returns the first that opens.
// The error lists every name tried and dlerror's word on the last.
func Open(names ...string) (*Library, error) {
	var last string
	for _, n := range names {
		cn := C.CString(n)
		h := C.dlopen(cn, C.RTLD_NOW|C.RTLD_GLOBAL)
		C.free(unsafe.Pointer(cn))
		if h != nil {
			SignalsOnStack() // a library's constructors may have installed handlers
			return &Library{Name: n, handle: h, syms: map[string]unsafe.Pointer{}}, nil
		}
		if e := C.dlerror(); e != nil {
			last = C.GoString(e)
		}
	}
	return nil, fmt.Errorf("cannot open %s: %s", strings.Join(names, " or "), last)
}

// Sym resolves a symbol, or says which one is missing from which library.
func (l *Library) Sym(name string) (unsafe.Pointer, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if p, ok := l.syms[name]; ok {
		return p, nil
	}
	cn := C.CString(name)
	defer C.free(unsafe.Pointer(cn))
	C.dlerror()
	p := C.dlsym(l.handle, cn)
	if p == nil {
		return nil, fmt.Errorf("%s has no symbol %s", l.Name, name)
	}
	l.syms[name] = p
	return p, nil
}

// Has says whether the library has the symbol.
func (l *Library) Has(name string) bool {
	_, err := l.Sym(name)
	return err == nil
}

// Close closes the library.
func (l *Library) Close() error {
	if C.dlclose(l.handle) != 0 {
		return fmt.Errorf("dlclose %s: %s", l.Name, C.GoString(C.dlerror()))
	}
	return nil
}

// Probe is what the one owner of a library says of it (internal/cuda for libcuda and
// libnvrtc, comm/nccl for libnccl, kernels/cudnn for libcudnn, comm/mpi for libmpi):
// whether it opens here, by which name, the version it reports, the names tried, and
// why not. `longca env` and `longca list` print these, so the names and version codes
// they show are the ones the benchmark itself uses.
type Probe struct {
	Library string   `json:"library"`
	Found   bool     `json:"found"`
	Path    string   `json:"opened,omitempty"`
	Version string   `json:"version,omitempty"`
	Error   string   `json:"error,omitempty"`
	Tried   []string `json:"tried"`
}

// ProbeOpen opens the first of names for a probe of library lib and asks version for
// the version it reports; the library stays open (its owner opens it again anyway).
func ProbeOpen(lib string, names []string, version func(l *Library) (string, error)) Probe {
	p := Probe{Library: lib, Tried: names}
	l, err := Open(names...)
	if err != nil {
		p.Error = err.Error()
		return p
	}
	p.Found, p.Path = true, l.Name
	if v, err := version(l); err != nil {
		p.Error = err.Error()
	} else {
		p.Version = v
	}
	return p
}
