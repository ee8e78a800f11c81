package cuda

/*
typedef int (*lc_two_int_ptr_fn)(int *, int *);
static int lc_call_two_int_ptr(void *f, int *a, int *b) { return ((lc_two_int_ptr_fn)f)(a, b); }
*/
import "C"

import (
	"fmt"

	"github.com/longca/longca/internal/dl"
)

// ProbeDriver says whether the CUDA driver (libcuda) opens here, by which name, and the
// CUDA version it supports (cuDriverGetVersion, which needs no cuInit and no device).
func ProbeDriver() dl.Probe {
	return dl.ProbeOpen("libcuda", driverNames, func(l *dl.Library) (string, error) {
		s := newScratch()
		defer s.free()
		code, err := (&lib{name: "cuda", l: l}).raw("cuDriverGetVersion", s.ptr(0))
		if err != nil {
			return "", err
		}
		if code != 0 {
			return "", fmt.Errorf("cuDriverGetVersion returned error %d", code)
		}
		v := s.i32(0)
		return fmt.Sprintf("%d.%d", v/1000, v%1000/10), nil
	})
}

// ProbeNVRTC says whether NVRTC (libnvrtc) opens here from the names longca compiles
// its kernels with, and its version.
func ProbeNVRTC() dl.Probe {
	return dl.ProbeOpen("libnvrtc", nvrtcNames, func(l *dl.Library) (string, error) {
		f, err := l.Sym("nvrtcVersion")
		if err != nil {
			return "", err
		}
		var major, minor C.int
		if rc := C.lc_call_two_int_ptr(f, &major, &minor); rc != 0 {
			return "", fmt.Errorf("nvrtcVersion returned error %d", int(rc))
		}
		return fmt.Sprintf("%d.%d", int(major), int(minor)), nil
	})
}
