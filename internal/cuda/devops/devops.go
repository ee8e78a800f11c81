// Package devops holds small general device kernels besides attention, used by the
// context-parallel methods (spmd/cp) and the device mover of comm/local: strided row
// copies (the head rearrangements around a Ulysses all-to-all), the sum of replicated heads, fp32 accumulation, dtype conversion and the
// log-sum-exp merge. They are CUDA C compiled at run time by NVRTC (internal/cuda) and
// launched on a stream the caller names.
package devops

import (
	"fmt"
	"math"
	"sync"

	"github.com/longca/longca/internal/cuda"
	"github.com/longca/longca/tensor"
)

// Source is the CUDA C of the helper kernels (for tests that compile it alone).
func Source() string { return source }

// Ops are the helper kernels loaded on one device, launching on one stream.
type Ops struct {
	g      *cuda.Device
	stream cuda.Stream
	mod    *cuda.Module

	mu   sync.Mutex
	fns  map[string]*cuda.Function
	runs runsModule // the batched row kernels (runs.go), compiled on first use
}

// New compiles (or loads from the NVRTC cache) the helper kernels for g; they launch on
// stream. A compilation failure is a *cuda.CompileError carrying NVRTC's log.
func New(g *cuda.Device, stream cuda.Stream) (*Ops, error) {
	m, err := g.LoadSource(source, "longca_cp_ops.cu")
	if err != nil {
		return nil, fmt.Errorf("devops: %w", err)
	}
	return &Ops{g: g, stream: stream, mod: m, fns: map[string]*cuda.Function{}}, nil
}

// Device is the device the kernels run on.
func (o *Ops) Device() *cuda.Device { return o.g }

// Stream is the stream the kernels launch on.
func (o *Ops) Stream() cuda.Stream { return o.stream }

func (o *Ops) fn(name string) (*cuda.Function, error) { return o.fnIn(o.mod, name) }

// fnIn is the named entry of mod (this package's modules: names are unique across them),
// looked up once.
func (o *Ops) fnIn(mod *cuda.Module, name string) (*cuda.Function, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if f, ok := o.fns[name]; ok {
		return f, nil
	}
	var f *cuda.Function
	err := o.g.Do(func() error {
		var err error
		f, err = mod.Function(name)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("devops: %w", err)
	}
	o.fns[name] = f
	return f, nil
}

// launch runs a grid-stride kernel over n elements.
func (o *Ops) launch(name string, n int64, args ...any) error {
	if n == 0 {
		return nil
	}
	if err := checkArgs(name, args); err != nil {
		return err
	}
	f, err := o.fn(name)
	if err != nil {
		return err
	}
	blocks := int(max(1, min(int64(o.g.SMs*8), (n+255)/256)))
	return o.g.Do(func() error { return f.Launch(cuda.Dim3{X: blocks}, cuda.Dim3{X: 256}, 0, o.stream, args...) })
}

func dev(name string, t tensor.Tensor) (*cuda.Buffer, error) {
	b, ok := t.(*cuda.Buffer)
	if !ok {
		return nil, fmt.Errorf("devops: %s is %T, not a device tensor", name, t)
	}
	return b, nil
}

// suffix is a dtype's kernel-name suffix.
func suffix(dt tensor.DType) (string, error) {
	switch dt {
	case tensor.BF16:
		return "bf16", nil
	case tensor.FP16:
		return "fp16", nil
	case tensor.FP32:
		return "fp32", nil
	}
	return "", fmt.Errorf("devops: no kernels for %s", dt)
}

// CopyRows copies rows of rowBytes: row i from src at srcOff + i*srcStride to dst at
// dstOff + i*dstStride (all in bytes, multiples of 2).
func (o *Ops) CopyRows(dst, src tensor.Tensor, rows int, rowBytes, dstOff, dstStride, srcOff, srcStride int64) error {
	d, err := dev("destination", dst)
	if err != nil {
		return err
	}
	s, err := dev("source", src)
	if err != nil {
		return err
	}
	for _, v := range []int64{rowBytes, dstOff, dstStride, srcOff, srcStride} {
		if v%2 != 0 || v < 0 {
			return fmt.Errorf("devops: row copy with odd or negative byte count %d", v)
		}
	}
	if rows > 0 && (dstOff+int64(rows-1)*dstStride+rowBytes > d.Bytes() || srcOff+int64(rows-1)*srcStride+rowBytes > s.Bytes()) {
		return fmt.Errorf("devops: %d rows of %d bytes outside %d-byte destination or %d-byte source", rows, rowBytes, d.Bytes(), s.Bytes())
	}
	w := rowBytes / 2
	return o.launch("copy_rows", int64(rows)*w, d, s, uint64(rows), uint64(w), uint64(dstOff/2), uint64(dstStride/2), uint64(srcOff/2), uint64(srcStride/2))
}

// HeadsSum writes into x [t, h, d] the sum of the head replicas in in [u*t, 1, d]
// (block j holds head j*h/u).
func (o *Ops) HeadsSum(x, in tensor.Tensor, u int) error {
	xb, err := dev("x", x)
	if err != nil {
		return err
	}
	ib, err := dev("in", in)
	if err != nil {
		return err
	}
	sh := xb.Shape()
	if len(sh) != 3 || xb.DType() != ib.DType() || ib.Numel() != u*sh[0]*sh[2] {
		return fmt.Errorf("devops: head sum of %s%v into %s%v over %d", ib.DType(), ib.Shape(), xb.DType(), sh, u)
	}
	sf, err := suffix(xb.DType())
	if err != nil {
		return err
	}
	return o.launch("heads_sum_"+sf, int64(xb.Numel()), xb, ib, uint64(sh[0]), sh[1], sh[2], u)
}

// Accumulate adds src (bf16, fp16 or fp32) into the fp32 dst.
func (o *Ops) Accumulate(dst, src tensor.Tensor) error {
	d, err := dev("accumulator", dst)
	if err != nil {
		return err
	}
	if d.DType() != tensor.FP32 {
		return fmt.Errorf("devops: accumulating into %s%v (want fp32)", d.DType(), d.Shape())
	}
	return o.Add(dst, dst, src)
}

// Add writes a + b (computed in fp32) into dst, rounding to dst's dtype; any of bf16,
// fp16 and fp32 for each, the same element count. dst may be a or b.
func (o *Ops) Add(dst, a, b tensor.Tensor) error {
	bs, err := devs([]string{"sum", "first addend", "second addend"}, dst, a, b)
	if err != nil {
		return err
	}
	n := bs[0].Numel()
	if bs[1].Numel() != n || bs[2].Numel() != n {
		return fmt.Errorf("devops: adding %s%v and %s%v into %s%v (want the same size)", bs[1].DType(), bs[1].Shape(), bs[2].DType(), bs[2].Shape(), bs[0].DType(), bs[0].Shape())
	}
	name, err := tripleName("add", bs[1], bs[2], bs[0])
	if err != nil {
		return err
	}
	return o.launch(name, chunks(int64(n)), bs[0], bs[1], bs[2], uint64(n), vec(bs...))
}

// chunks is the number of threads of an 8-elements-per-thread pass over n elements.
func chunks(n int64) int64 { return (n + 7) / 8 }

// vec is the kernels' vec argument: 1 when every buffer starts 16-byte aligned (device
// allocations do; a view at an offset may not), so 8 elements move as 16-byte words.
func vec(bs ...*cuda.Buffer) int {
	for _, b := range bs {
		if b.DevicePtr()%16 != 0 {
			return 0
		}
	}
	return 1
}

// devs converts tensors to device buffers, naming the first that is not one.
func devs(names []string, ts ...tensor.Tensor) ([]*cuda.Buffer, error) {
	bs := make([]*cuda.Buffer, len(ts))
	for i, t := range ts {
		b, err := dev(names[i], t)
		if err != nil {
			return nil, err
		}
		bs[i] = b
	}
	return bs, nil
}

// tripleName is kernel's name for its operands' dtypes: kernel_A_B_D.
func tripleName(kernel string, a, b, d *cuda.Buffer) (string, error) {
	name := kernel
	for _, x := range []*cuda.Buffer{a, b, d} {
		sf, err := suffix(x.DType())
		if err != nil {
			return "", err
		}
		name += "_" + sf
	}
	return name, nil
}

// Max sets the fp32 dst to the elementwise max of dst and src.
func (o *Ops) Max(dst, src tensor.Tensor) error {
	d, err := dev("destination", dst)
	if err != nil {
		return err
	}
	s, err := dev("source", src)
	if err != nil {
		return err
	}
	if d.DType() != tensor.FP32 || s.DType() != tensor.FP32 || d.Numel() != s.Numel() {
		return fmt.Errorf("devops: max of %s%v into %s%v (want fp32, same size)", s.DType(), s.Shape(), d.DType(), d.Shape())
	}
	return o.launch("max_fp32", int64(d.Numel()), d, s, uint64(d.Numel()))
}

// Convert writes src into dst, rounding: same dtype (a copy), fp32 to bf16/fp16, or
// bf16/fp16 to fp32.
func (o *Ops) Convert(dst, src tensor.Tensor) error {
	d, err := dev("destination", dst)
	if err != nil {
		return err
	}
	s, err := dev("source", src)
	if err != nil {
		return err
	}
	if d.Numel() != s.Numel() {
		return fmt.Errorf("devops: converting %v into %v", s.Shape(), d.Shape())
	}
	if d.DType() == s.DType() {
		return o.g.CopyOn(o.stream, d, 0, s, 0, s.Bytes())
	}
	sd, err := suffix(s.DType())
	if err != nil {
		return err
	}
	dd, err := suffix(d.DType())
	if err != nil {
		return err
	}
	if sd != "fp32" && dd != "fp32" {
		return fmt.Errorf("devops: no conversion from %s to %s", s.DType(), d.DType())
	}
	return o.launch("cvt_"+sd+"_"+dd, chunks(int64(d.Numel())), d, s, uint64(d.Numel()), vec(d, s))
}

// Fill sets every element of t to v (by a memset of v's bits in t's dtype).
func (o *Ops) Fill(t tensor.Tensor, v float64) error {
	b, err := dev("tensor", t)
	if err != nil {
		return err
	}
	switch b.DType() {
	case tensor.BF16:
		return o.g.MemsetOn(o.stream, b, 2, uint32(tensor.BF16Bits(float32(v))))
	case tensor.FP16:
		return o.g.MemsetOn(o.stream, b, 2, uint32(tensor.FP16Bits(float32(v))))
	case tensor.FP32:
		return o.g.MemsetOn(o.stream, b, 4, math.Float32bits(float32(v)))
	}
	return fmt.Errorf("devops: no fill for %s", b.DType())
}

// Merge writes into dst [t, h, d] and ldst [h, t] (fp32) the log-sum-exp merge of the
// partial results a (lse la) and b (lse lb) of the same queries over disjoint keys: the
// operands in bf16, fp16 or fp32 each, the arithmetic in fp32. dst may be a (merging
// into an accumulator in place); ldst must be a buffer of its own (not la or lb). A row
// with lse -inf on one side takes the other side whole (without reading the empty one;
// in place, it is not touched), and on both sides is out 0, lse -inf.
func (o *Ops) Merge(dst, ldst, a, la, b, lb tensor.Tensor) error {
	bs, err := devs([]string{"merged out", "merged lse", "first out", "first lse", "second out", "second lse"}, dst, ldst, a, la, b, lb)
	if err != nil {
		return err
	}
	sh := bs[0].Shape()
	bad := len(sh) != 3
	for _, i := range []int{1, 3, 5} {
		bad = bad || bs[i].DType() != tensor.FP32 || (!bad && bs[i].Numel() != sh[0]*sh[1])
	}
	for _, i := range []int{2, 4} {
		bad = bad || bs[i].Numel() != bs[0].Numel()
	}
	if bad {
		return fmt.Errorf("devops: merge of out %s%v (lse %s%v) and %s%v (lse %s%v) into %s%v (lse %s%v)",
			bs[2].DType(), bs[2].Shape(), bs[3].DType(), bs[3].Shape(), bs[4].DType(), bs[4].Shape(), bs[5].DType(), bs[5].Shape(),
			bs[0].DType(), sh, bs[1].DType(), bs[1].Shape())
	}
	if overlaps(bs[1], bs[3]) || overlaps(bs[1], bs[5]) || overlaps(bs[0], bs[4]) || (overlaps(bs[0], bs[2]) && (bs[0].DevicePtr() != bs[2].DevicePtr() || bs[0].DType() != bs[2].DType())) {
		return fmt.Errorf("devops: merge whose lse output overlaps an input lse, or whose out overlaps an input other than in place")
	}
	name, err := tripleName("merge", bs[2], bs[4], bs[0])
	if err != nil {
		return err
	}
	v := vec(bs...)
	if sh[2]%8 != 0 {
		v = 0
	}
	return o.launch(name, int64(sh[0])*int64(sh[1])*chunks(int64(sh[2])), bs[0], bs[1], bs[2], bs[3], bs[4], bs[5], sh[0], sh[1], sh[2], v)
}

// overlaps says whether two buffers share bytes.
func overlaps(x, y *cuda.Buffer) bool {
	a, b := x.DevicePtr(), y.DevicePtr()
	return a < b+uintptr(y.Bytes()) && b < a+uintptr(x.Bytes())
}
