//go:build mpi

package mpi

/*
#cgo pkg-config: ompi-c
#include "lc_mpi.h"
*/
import "C"

import (
	"fmt"
	"strings"
	"sync"
	"unsafe"

	"github.com/longca/longca/tensor"
)

// Available says whether this binary was built with MPI (the mpi build tag).
func Available() bool { return true }

// mu serialises every MPI call: goroutines move between threads, and the library may
// give less than MPI_THREAD_MULTIPLE.
var mu sync.Mutex

var (
	initOnce sync.Once
	initErr  error
)

// Init initialises MPI once per process (MPI_Init_thread, errors returned).
func Init() error {
	initOnce.Do(func() {
		var provided C.int
		mu.Lock()
		rc := C.lc_init(&provided)
		mu.Unlock()
		if rc != C.MPI_SUCCESS {
			initErr = fmt.Errorf("mpi: MPI_Init_thread: %s", errString(rc))
		} else if provided < C.lc_thread_serialized() {
			initErr = fmt.Errorf("mpi: the library gives thread level %d, below MPI_THREAD_SERIALIZED", int(provided))
		}
	})
	return initErr
}

// LibraryVersion is MPI_Get_library_version's first line.
func LibraryVersion() string {
	buf := (*C.char)(C.malloc(C.size_t(C.lc_max_version())))
	defer C.free(unsafe.Pointer(buf))
	var n C.int
	mu.Lock()
	C.lc_version(buf, &n)
	mu.Unlock()
	s := C.GoStringN(buf, n)
	s, _, _ = strings.Cut(s, "\n")
	return strings.TrimSpace(s)
}

func errString(rc C.int) string {
	buf := (*C.char)(C.malloc(C.MPI_MAX_ERROR_STRING))
	defer C.free(unsafe.Pointer(buf))
	var n C.int
	C.MPI_Error_string(rc, buf, &n)
	return fmt.Sprintf("%s (code %d)", C.GoStringN(buf, n), int(rc))
}

func check(what string, rc C.int) error {
	if rc == C.MPI_SUCCESS {
		return nil
	}
	return fmt.Errorf("mpi: %s: %s", what, errString(rc))
}

// mpiType is the MPI type code (for lc_type) and element count for a tensor's data.
func mpiType(dt tensor.DType) C.int {
	switch dt {
	case tensor.FP32:
		return 1
	case tensor.FP64:
		return 2
	case tensor.BF16, tensor.FP16:
		return 3
	}
	return 0
}

// Abort ends every rank of the job (MPI_Abort on the world): for a rank that timed out
// while the others may be stuck inside MPI.
func Abort(code int) {
	C.MPI_Abort(C.lc_world(), C.int(code))
}

// Finalize ends MPI in this process; call it once, after every communicator is closed.
func Finalize() error {
	mu.Lock()
	defer mu.Unlock()
	return check("MPI_Finalize", C.MPI_Finalize())
}
