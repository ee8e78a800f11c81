package cp

import (
	"fmt"

	"github.com/longca/longca/tensor"
)

// The CP methods rearrange and accumulate on host tensors. A device kernel needs device
// versions of these few operations.

func asHost(name string, t tensor.Tensor) (*tensor.Host, error) {
	h, ok := t.(*tensor.Host)
	if !ok {
		return nil, fmt.Errorf("cp: %s is %T: the CP methods work on host tensors only so far", name, t)
	}
	return h, nil
}

// hosts converts tensors, naming the first that is not a host tensor.
func hosts(names []string, ts ...tensor.Tensor) ([]*tensor.Host, error) {
	out := make([]*tensor.Host, len(ts))
	for i, t := range ts {
		h, err := asHost(names[i], t)
		if err != nil {
			return nil, err
		}
		out[i] = h
	}
	return out, nil
}

// headsOut splits x [T, H, D] into u row blocks for an all-to-all: block j holds all T
// tokens of the j-th group of H/u heads, or, when replicate is set (H < u), of head
// j*H/u alone: [u*T, max(H/u, 1), D].
func headsOut(x *tensor.Host, u int, replicate bool) *tensor.Host {
	sh := x.Shape()
	t, h, d := sh[0], sh[1], sh[2]
	hu := h / u
	if replicate {
		hu = 1
	}
	es := x.DType().Size()
	out := tensor.NewHost(x.DType(), u*t, hu, d)
	row := hu * d * es
	for j := range u {
		h0 := j * hu
		if replicate {
			h0 = j * h / u
		}
		for i := range t {
			src := (i*h + h0) * d * es
			dst := (j*t + i) * row
			copy(out.Data[dst:dst+row], x.Data[src:src+row])
		}
	}
	return out
}

// headsIn is the inverse of headsOut after the all-to-all back: in [u*T, hu, D] holds in
// block j this rank's tokens for head group j; it writes them into x [T, H, D]. With
// replicate, the u/H replicas of a head are summed (the gradients of a replicated head).
func headsIn(in, x *tensor.Host, u int, replicate bool) {
	sh := x.Shape()
	t, h, d := sh[0], sh[1], sh[2]
	if !replicate {
		hu := h / u
		es := x.DType().Size()
		row := hu * d * es
		for j := range u {
			for i := range t {
				src := (j*t + i) * row
				dst := (i*h + j*hu) * d * es
				copy(x.Data[dst:dst+row], in.Data[src:src+row])
			}
		}
		return
	}
	acc := make([]float64, x.Numel())
	for j := range u {
		hh := j * h / u
		for i := range t {
			for e := range d {
				acc[(i*h+hh)*d+e] += in.At((j*t+i)*d + e)
			}
		}
	}
	x.SetFloat64s(acc)
}

// lseOut rearranges lse [hu, u*T] (this rank's heads over the group's tokens) into u row
// blocks [u*hu, T]: block s holds the columns of rank s's tokens. After the all-to-all
// the received [u*hu, T] is this rank's [H, T] directly.
func lseOut(l *tensor.Host, u int) *tensor.Host {
	sh := l.Shape()
	hu, n := sh[0], sh[1]
	t := n / u
	es := l.DType().Size()
	out := tensor.NewHost(l.DType(), u*hu, t)
	row := t * es
	for s := range u {
		for h := range hu {
			src := (h*n + s*t) * es
			dst := (s*hu + h) * row
			copy(out.Data[dst:dst+row], l.Data[src:src+row])
		}
	}
	return out
}

// addInto adds src into acc elementwise.
func addInto(acc []float64, src *tensor.Host) {
	for i := range acc {
		acc[i] += src.At(i)
	}
}

// convert writes src's values into dst (rounding to dst's dtype).
func convert(dst, src *tensor.Host) error {
	if dst.Numel() != src.Numel() {
		return fmt.Errorf("cp: copy of %v into %v", src.Shape(), dst.Shape())
	}
	if dst.DType() == src.DType() {
		copy(dst.Data, src.Data)
		return nil
	}
	for i := range dst.Numel() {
		dst.Set(i, src.At(i))
	}
	return nil
}
