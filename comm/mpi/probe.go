package mpi

/*
#include <stdlib.h>
static int lc_mpi_probe_version(void *f, char *buf, int *n) { return ((int (*)(char *, int *))f)(buf, n); }
*/
import "C"

import (
	"fmt"
	"strings"
	"unsafe"

	"github.com/longca/longca/internal/dl"
)

// Libraries are the MPI libraries a probe tries: Open MPI 4/5's soname, MPICH's, the
// unversioned name.
var Libraries = []string{"libmpi.so.40", "libmpi.so.12", "libmpi.so"}

// Probe says whether an MPI library opens here and which (MPI_Get_library_version,
// which MPI allows before MPI_Init), with or without the mpi build tag.
func Probe() dl.Probe {
	return dl.ProbeOpen("libmpi", Libraries, func(l *dl.Library) (string, error) {
		f, err := l.Sym("MPI_Get_library_version")
		if err != nil {
			return "", err
		}
		buf := (*C.char)(C.malloc(8192)) // MPI_MAX_LIBRARY_VERSION_STRING is at most 8192
		defer C.free(unsafe.Pointer(buf))
		var n C.int
		if rc := C.lc_mpi_probe_version(f, buf, &n); rc != 0 {
			return "", fmt.Errorf("MPI_Get_library_version returned error %d", int(rc))
		}
		s, _, _ := strings.Cut(C.GoStringN(buf, n), "\n")
		s, _, _ = strings.Cut(s, ", package")
		return strings.TrimSpace(s), nil
	})
}
