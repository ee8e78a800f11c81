package tensor

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
)

// Host is a tensor in host memory, kept in its element type's own bits, so that what
// a kernel reads on the CPU is exactly what a GPU kernel would read.
type Host struct {
	dt    DType
	shape []int
	Data  []byte
}

var _ Tensor = (*Host)(nil)

// NewHost allocates a zeroed host tensor.
func NewHost(dt DType, shape ...int) *Host {
	return &Host{dt: dt, shape: append([]int(nil), shape...), Data: make([]byte, Numel(shape)*dt.Size())}
}

func (h *Host) DType() DType   { return h.dt }
func (h *Host) Shape() []int   { return h.shape }
func (h *Host) Numel() int     { return Numel(h.shape) }
func (h *Host) Bytes() int64   { return int64(len(h.Data)) }
func (h *Host) String() string { return fmt.Sprintf("host %s%v", h.dt, h.shape) }

// At reads element i as a float64.
func (h *Host) At(i int) float64 {
	switch h.dt {
	case BF16:
		return float64(BF16Float(binary.LittleEndian.Uint16(h.Data[2*i:])))
	case FP16:
		return float64(FP16Float(binary.LittleEndian.Uint16(h.Data[2*i:])))
	case FP32:
		return float64(math.Float32frombits(binary.LittleEndian.Uint32(h.Data[4*i:])))
	case FP64:
		return math.Float64frombits(binary.LittleEndian.Uint64(h.Data[8*i:]))
	}
	panic("tensor: bad dtype")
}

// Set writes v, rounded to the tensor's element type, at element i.
func (h *Host) Set(i int, v float64) {
	switch h.dt {
	case BF16:
		binary.LittleEndian.PutUint16(h.Data[2*i:], BF16Bits(float32(v)))
	case FP16:
		binary.LittleEndian.PutUint16(h.Data[2*i:], FP16Bits(float32(v)))
	case FP32:
		binary.LittleEndian.PutUint32(h.Data[4*i:], math.Float32bits(float32(v)))
	case FP64:
		binary.LittleEndian.PutUint64(h.Data[8*i:], math.Float64bits(v))
	default:
		panic("tensor: bad dtype")
	}
}

// Float64s returns every element as float64.
func (h *Host) Float64s() []float64 {
	out := make([]float64, h.Numel())
	for i := range out {
		out[i] = h.At(i)
	}
	return out
}

// SetFloat64s writes every element from vals (rounded to the element type).
func (h *Host) SetFloat64s(vals []float64) {
	if len(vals) != h.Numel() {
		panic(fmt.Sprintf("tensor: %d values for %d elements", len(vals), h.Numel()))
	}
	for i, v := range vals {
		h.Set(i, v)
	}
}

// Rows returns the rows [start, end) along the first dimension, sharing memory.
func (h *Host) Rows(start, end int) *Host {
	row := Numel(h.shape[1:]) * h.dt.Size()
	shape := append([]int{end - start}, h.shape[1:]...)
	return &Host{dt: h.dt, shape: shape, Data: h.Data[start*row : end*row]}
}

// Clone copies the tensor.
func (h *Host) Clone() *Host {
	return &Host{dt: h.dt, shape: append([]int(nil), h.shape...), Data: append([]byte(nil), h.Data...)}
}

// Reshape returns a view with another shape of the same element count.
func (h *Host) Reshape(shape ...int) *Host {
	if Numel(shape) != h.Numel() {
		panic(fmt.Sprintf("tensor: reshape %v to %v", h.shape, shape))
	}
	return &Host{dt: h.dt, shape: append([]int(nil), shape...), Data: h.Data}
}

// FillNormal fills h with standard normal values from rng, scaled by std.
func (h *Host) FillNormal(rng *rand.Rand, std float64) {
	for i := 0; i < h.Numel(); i++ {
		h.Set(i, rng.NormFloat64()*std)
	}
}

// Fill sets every element to v.
func (h *Host) Fill(v float64) {
	for i := 0; i < h.Numel(); i++ {
		h.Set(i, v)
	}
}
