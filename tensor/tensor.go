// Package tensor holds the element types, the Tensor interface shared by kernels and
// communicators, host tensors stored in their own bit layout, and the Device interface
// that allocates, copies and times on a backend (the CPU here, CUDA in internal/cuda).
package tensor

import (
	"fmt"
	"math"
	"strings"
	"time"
)

// DType is an element type.
type DType uint8

// The element types longca stores.
const (
	BF16 DType = iota + 1
	FP16
	FP32
	FP64
)

// Size is the element size in bytes.
func (d DType) Size() int {
	switch d {
	case BF16, FP16:
		return 2
	case FP32:
		return 4
	case FP64:
		return 8
	}
	return 0
}

func (d DType) String() string {
	switch d {
	case BF16:
		return "bf16"
	case FP16:
		return "fp16"
	case FP32:
		return "fp32"
	case FP64:
		return "fp64"
	}
	return fmt.Sprintf("dtype(%d)", uint8(d))
}

// ParseDType reads bf16, fp16, fp32 or fp64.
func ParseDType(s string) (DType, error) {
	switch strings.ToLower(s) {
	case "bf16", "bfloat16":
		return BF16, nil
	case "fp16", "half", "float16":
		return FP16, nil
	case "fp32", "float32", "float":
		return FP32, nil
	case "fp64", "float64", "double":
		return FP64, nil
	}
	return 0, fmt.Errorf("unknown dtype %q: use bf16, fp16, fp32 or fp64", s)
}

// Tensor is a dense row-major array on some device. Attention tensors use the packed
// layout [tokens, heads, head_dim]; LSE is [heads, tokens] in fp32.
type Tensor interface {
	DType() DType
	Shape() []int
	Numel() int
	Bytes() int64
}

// Numel multiplies a shape out.
func Numel(shape []int) int {
	n := 1
	for _, s := range shape {
		n *= s
	}
	return n
}

// Device allocates tensors, moves them to and from the host, and times work with its own
// clock. The CPU implements it in this package; CUDA in internal/cuda.
type Device interface {
	Name() string
	Alloc(dt DType, shape ...int) (Tensor, error)
	Free(t Tensor)
	CopyIn(dst Tensor, src *Host) error
	CopyOut(dst *Host, src Tensor) error
	// Poison fills t with NaN so that unwritten outputs are caught by the check.
	Poison(t Tensor) error
	// Time runs fn once and returns the time the device spent, measured by its own clock
	// (events on a GPU, the wall clock on the CPU).
	Time(fn func() error) (time.Duration, error)
	// FlushCache evicts the last-level cache between timed repetitions.
	FlushCache() error
	// PeakMemory is the most memory held at once since the last ResetPeak, in bytes.
	PeakMemory() int64
	ResetPeak()
}

// BF16Bits rounds f to the nearest bfloat16 (ties to even) and returns its bits.
func BF16Bits(f float32) uint16 {
	b := math.Float32bits(f)
	if f != f { // keep NaN a NaN
		return uint16(b>>16) | 0x40
	}
	b += 0x7fff + (b>>16)&1
	return uint16(b >> 16)
}

// BF16Float converts bfloat16 bits to float32.
func BF16Float(h uint16) float32 { return math.Float32frombits(uint32(h) << 16) }

// FP16Bits rounds f to the nearest IEEE half (ties to even) and returns its bits.
func FP16Bits(f float32) uint16 {
	b := math.Float32bits(f)
	sign := uint16(b>>16) & 0x8000
	exp := int((b>>23)&0xff) - 127 + 15
	man := b & 0x7fffff
	switch {
	case (b>>23)&0xff == 0xff: // inf or NaN
		if man != 0 {
			return sign | 0x7e00
		}
		return sign | 0x7c00
	case exp >= 0x1f:
		return sign | 0x7c00
	case exp <= 0:
		if exp < -10 {
			return sign
		}
		man |= 0x800000
		shift := uint(14 - exp)
		half := uint32(1) << (shift - 1)
		r := man >> shift
		rem := man & ((1 << shift) - 1)
		if rem > half || (rem == half && r&1 == 1) {
			r++
		}
		return sign | uint16(r)
	}
	r := uint32(exp)<<10 | man>>13
	rem := man & 0x1fff
	if rem > 0x1000 || (rem == 0x1000 && r&1 == 1) {
		r++ // may carry into the exponent, which is the right rounding
	}
	return sign | uint16(r)
}

// FP16Float converts IEEE half bits to float32.
func FP16Float(h uint16) float32 {
	sign := uint32(h&0x8000) << 16
	exp := uint32(h>>10) & 0x1f
	man := uint32(h & 0x3ff)
	switch {
	case exp == 0x1f:
		return math.Float32frombits(sign | 0x7f800000 | man<<13)
	case exp == 0:
		if man == 0 {
			return math.Float32frombits(sign)
		}
		f := float32(man) / 1024 / 16384 // 2^-14 * man/1024
		if sign != 0 {
			return -f
		}
		return f
	}
	return math.Float32frombits(sign | (exp+127-15)<<23 | man<<13)
}

// Round returns v rounded to dtype d, as a float64.
func Round(d DType, v float64) float64 {
	switch d {
	case BF16:
		return float64(BF16Float(BF16Bits(float32(v))))
	case FP16:
		return float64(FP16Float(FP16Bits(float32(v))))
	case FP32:
		return float64(float32(v))
	}
	return v
}

// DeviceBuffer is implemented by tensors in accelerator memory: the raw device address,
// so that libraries called through cgo (NCCL, cuDNN) can be handed the buffer.
type DeviceBuffer interface {
	Tensor
	DevicePtr() uintptr
}
