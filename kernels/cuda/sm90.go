package cuda

import (
	"fmt"
	"math"

	"github.com/longca/longca/internal/cuda"
	"github.com/longca/longca/kernels"
)

// tmaKey identifies a tensor map: the tensor's address and the view's shape.
type tmaKey struct {
	ptr        uint64
	rows, cols int // rows of the sequence, heads x head dim
	heads      int
	box        int
}

// headMap is the tensor map of a [rows, heads, d] tensor read in boxes of boxRows rows
// of one head and 64 columns (one 128-byte swizzled chunk), cached by address and shape
// so a timed call only launches.
func (k *Kernel) headMap(b *cuda.Buffer, rows, heads, d, boxRows int) (*cuda.TensorMap, error) {
	key := tmaKey{ptr: uint64(b.DevicePtr()), rows: rows, cols: heads * d, heads: heads, box: boxRows}
	k.mu.Lock()
	m, ok := k.maps[key]
	k.mu.Unlock()
	if ok {
		return m, nil
	}
	es := uint64(b.DType().Size())
	m, err := k.dev.EncodeTiled(key.ptr, cuda.TileMap{
		DType:   b.DType(),
		Dims:    []uint64{uint64(d), uint64(heads), uint64(rows)},
		Strides: []uint64{uint64(d) * es, uint64(heads*d) * es},
		Box:     []uint32{64, 1, uint32(boxRows)},
		Swizzle: cuda.Swizzle128B,
	})
	if err != nil {
		return nil, err
	}
	k.mu.Lock()
	if len(k.maps) > 256 { // buffers come and go across a sweep: keep the cache small
		clear(k.maps)
	}
	k.maps[key] = m
	k.mu.Unlock()
	return m, nil
}

// forward90 launches the Hopper forward: bs are q, k, v, out, lse.
func (k *Kernel) forward90(p kernels.Problem, bs []*cuda.Buffer, dl *deviceList) error {
	d := p.HeadDim
	if p.HeadsQ > 1<<16 || dl.w.RowTiles > 65535 {
		return fmt.Errorf("cuda: grid of %d heads x %d row tiles is too large", p.HeadsQ, dl.w.RowTiles)
	}
	tq, err := k.headMap(bs[0], p.Mask.SeqQ, p.HeadsQ, d, k.fwd.qTile)
	if err != nil {
		return err
	}
	tk, err := k.headMap(bs[1], p.Mask.SeqK, p.HeadsKV, d, k.fwd.kTile)
	if err != nil {
		return err
	}
	tv, err := k.headMap(bs[2], p.Mask.SeqK, p.HeadsKV, d, k.fwd.kTile)
	if err != nil {
		return err
	}
	shared := k.fwd.shared(d)
	f, err := k.function(fmt.Sprintf("%s_%s_d%d", k.fwd.fn, dtypeName(p.DType), d), shared)
	if err != nil {
		return err
	}
	scaleLog2 := float32(p.SoftmaxScale() * math.Log2E)
	args := append([]any{tq, tk, tv, bs[3], bs[4], p.Mask.SeqQ, p.Mask.SeqK, p.HeadsQ, p.HeadsKV, scaleLog2}, dl.args()...)
	return k.dev.Do(func() error {
		return f.Launch(cuda.Dim3{X: p.HeadsQ, Y: dl.w.RowTiles}, cuda.Dim3{X: k.fwd.threads}, shared, k.dev.Stream(), args...)
	})
}
