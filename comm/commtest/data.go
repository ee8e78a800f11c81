package commtest

import (
	"fmt"

	"github.com/longca/longca/tensor"
)

// dtypes are the element types every data-moving collective is run with.
var dtypes = []tensor.DType{tensor.FP32, tensor.FP64, tensor.BF16, tensor.FP16}

// reduceTypes are the element types reductions are run with.
var reduceTypes = []tensor.DType{tensor.FP32, tensor.FP64, tensor.BF16}

// rows is the number of rows per rank block; cols the row length.
const (
	rows = 3
	cols = 5
)

// fill makes a [n*rows, cols] tensor with element i of block p set to f(p, i).
func fill(dt tensor.DType, blocks int, f func(p, i int) float64) *tensor.Host {
	h := tensor.NewHost(dt, blocks*rows, cols)
	per := rows * cols
	for p := range blocks {
		for i := range per {
			h.Set(p*per+i, f(p, i))
		}
	}
	return h
}

// check compares every element of block p of h with f(p, i).
func check(what string, h *tensor.Host, blocks int, f func(p, i int) float64) error {
	per := h.Numel() / blocks
	for p := range blocks {
		for i := range per {
			if got, want := h.At(p*per+i), f(p, i); got != want {
				return fmt.Errorf("%s: block %d element %d = %v, want %v", what, p, i, got, want)
			}
		}
	}
	return nil
}

// a2aValue is what rank src puts in the block for rank dst: distinct per (src, dst, i)
// and an integer below 256, exact in bf16 and fp16 for up to 8 ranks.
func a2aValue(src, dst, i int) float64 { return float64(((src*8+dst)*4+i%4)%256) - 100 }

// sumValue is rank r's element i in reductions: sums over 8 ranks stay below 256.
func sumValue(r, i int) float64 { return float64(r+1) + float64(i%8) }

// maxValue is rank r's element i for the max reduction.
func maxValue(r, i int) float64 { return float64((r*7+i*3)%11) - 5 }
