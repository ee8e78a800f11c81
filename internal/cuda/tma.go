package cuda

/*
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
*/
import "C"

import (
	"fmt"
	"unsafe"

	"github.com/longca/longca/tensor"
)

// TensorMap is a CUtensorMap: the 128-byte descriptor of a tiled view of a device tensor
// that the Hopper copy engine (TMA) reads. Made by EncodeTiled; passed to a kernel by
// value (a `const __grid_constant__` parameter of 128 bytes, 64-byte aligned).
type TensorMap struct{ b [128]byte }

// Swizzle is how TMA lays a box's rows out in shared memory (CUtensorMapSwizzle).
type Swizzle int

// The swizzle modes: none, or 16-byte chunks XORed by the row within 32-, 64- or 128-byte
// spans (the 128-byte mode is the one wgmma's 128B-swizzle descriptors read).
const (
	SwizzleNone Swizzle = 0
	Swizzle32B  Swizzle = 1
	Swizzle64B  Swizzle = 2
	Swizzle128B Swizzle = 3
)

// tmaType is CUtensorMapDataType of a dtype.
func tmaType(dt tensor.DType) (int, error) {
	switch dt {
	case tensor.FP16:
		return 6, nil // CU_TENSOR_MAP_DATA_TYPE_FLOAT16
	case tensor.FP32:
		return 7, nil
	case tensor.FP64:
		return 8, nil
	case tensor.BF16:
		return 9, nil // CU_TENSOR_MAP_DATA_TYPE_BFLOAT16
	}
	return 0, fmt.Errorf("cuda: no tensor map type for %s", dt)
}

// TileMap describes a tiled view for EncodeTiled. Dims are innermost first (Dims[0] is
// contiguous); Strides are the byte strides of Dims[1:] (multiples of 16); Box is the
// tile copied at once (each at most 256, Box[0] x element size a multiple of 16 bytes
// and, with Swizzle128B, at most 128 bytes). Elements outside the tensor read as zero.
type TileMap struct {
	DType   tensor.DType
	Dims    []uint64
	Strides []uint64
	Box     []uint32
	Swizzle Swizzle
}

// check validates m against the rules of cuTensorMapEncodeTiled, so a mistake is a Go
// error naming the field rather than CUDA_ERROR_INVALID_VALUE.
func (m TileMap) check() error {
	n := len(m.Dims)
	if n < 1 || n > 5 || len(m.Strides) != n-1 || len(m.Box) != n {
		return fmt.Errorf("cuda: tensor map of rank %d with %d strides and %d box dims (want rank 1-5, rank-1 strides)", n, len(m.Strides), len(m.Box))
	}
	es := uint64(m.DType.Size())
	for i, s := range m.Strides {
		if s%16 != 0 || s >= 1<<40 {
			return fmt.Errorf("cuda: tensor map stride %d = %d bytes: must be a multiple of 16 below 2^40", i+1, s)
		}
	}
	for i, b := range m.Box {
		if b == 0 || b > 256 {
			return fmt.Errorf("cuda: tensor map box dim %d = %d: must be 1-256", i, b)
		}
		if m.Dims[i] == 0 || m.Dims[i] >= 1<<32 {
			return fmt.Errorf("cuda: tensor map dim %d = %d: must be 1 to 2^32-1", i, m.Dims[i])
		}
	}
	inner := uint64(m.Box[0]) * es
	if inner%16 != 0 {
		return fmt.Errorf("cuda: tensor map box row of %d bytes: must be a multiple of 16", inner)
	}
	if m.Swizzle == Swizzle128B && inner > 128 || m.Swizzle == Swizzle64B && inner > 64 || m.Swizzle == Swizzle32B && inner > 32 {
		return fmt.Errorf("cuda: tensor map box row of %d bytes is wider than its swizzle span", inner)
	}
	return nil
}

// EncodeTiled makes the tensor map of m over the device memory at ptr (16-byte aligned).
func (g *Device) EncodeTiled(ptr uint64, m TileMap) (*TensorMap, error) {
	if err := m.check(); err != nil {
		return nil, err
	}
	if ptr%16 != 0 {
		return nil, fmt.Errorf("cuda: tensor map address %#x is not 16-byte aligned", ptr)
	}
	ty, err := tmaType(m.DType)
	if err != nil {
		return nil, err
	}
	n := len(m.Dims)
	// C memory for the descriptor (64-byte aligned) and the four arrays it is made from.
	out := C.aligned_alloc(64, 128)
	dims := (*[5]C.uint64_t)(C.calloc(5, 8))
	strides := (*[5]C.uint64_t)(C.calloc(5, 8))
	box := (*[5]C.uint32_t)(C.calloc(5, 4))
	elem := (*[5]C.uint32_t)(C.calloc(5, 4))
	defer func() {
		for _, p := range []unsafe.Pointer{out, unsafe.Pointer(dims), unsafe.Pointer(strides), unsafe.Pointer(box), unsafe.Pointer(elem)} {
			C.free(p)
		}
	}()
	for i := 0; i < n; i++ {
		dims[i] = C.uint64_t(m.Dims[i])
		box[i] = C.uint32_t(m.Box[i])
		elem[i] = 1
	}
	for i, s := range m.Strides {
		strides[i] = C.uint64_t(s)
	}
	const interleaveNone, l2Promote128, oobZero = 0, 2, 0
	err = g.with(func() error {
		return g.dv.call("cuTensorMapEncodeTiled", uint64(uintptr(out)), uint64(ty), uint64(n), ptr,
			uint64(uintptr(unsafe.Pointer(dims))), uint64(uintptr(unsafe.Pointer(strides))),
			uint64(uintptr(unsafe.Pointer(box))), uint64(uintptr(unsafe.Pointer(elem))),
			interleaveNone, uint64(m.Swizzle), l2Promote128, oobZero)
	})
	if err != nil {
		return nil, fmt.Errorf("tensor map %v box %v: %w", m.Dims, m.Box, err)
	}
	t := &TensorMap{}
	C.memcpy(unsafe.Pointer(&t.b[0]), out, 128)
	return t, nil
}
