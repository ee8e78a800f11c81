package cudnn

import (
	"fmt"
	"math"
)

// The operation graphs are first written as plain Go values (graph, tensor, op): what
// cuDNN is to be told, in the order it is told, with no library in sight. lower.go turns
// a graph into backend descriptors; the tests read graphs directly and, through the fake
// library, the descriptors made from them.

// binding says where a non-virtual tensor's data lives at execution.
type binding int

const (
	bindNone      binding = iota // virtual: no memory
	bindScalar                   // by value: a host pointer to the value
	bindWorkspace                // longca's part of the workspace, at tensor.wsOffset
	bindQ
	bindK
	bindV
	bindO
	bindStats
	bindDO
	bindDQ
	bindDK
	bindDV
	bindSeqQ     // int32 [b] query lengths
	bindSeqKV    // int32 [b] key lengths
	bindOffQ     // int64 [b+1] ragged offsets of Q, O, dO, dQ
	bindOffKV    // int64 [b+1] ragged offsets of K, V, dK, dV
	bindOffStats // int64 [b+1] ragged offsets of the stats
	bindCount
)

var bindingNames = [...]string{"virtual", "scalar", "workspace", "Q", "K", "V", "O", "stats", "dO", "dQ", "dK", "dV",
	"seq_q", "seq_kv", "offsets_q", "offsets_kv", "offsets_stats"}

func (b binding) String() string {
	if int(b) < len(bindingNames) {
		return bindingNames[b]
	}
	return fmt.Sprintf("binding(%d)", int(b))
}

// operand is one tensor of a graph.
type operand struct {
	uid     int64
	name    string
	dt      dataType
	dims    []int64
	strides []int64
	virtual bool
	byValue bool
	// value is a by-value scalar's bits (a float32 or an int32 in the low 4 bytes).
	value  uint32
	ragged *operand
	bind   binding
	// wsOffset is where a bindWorkspace tensor starts in the workspace, and wsBytes its size.
	wsOffset, wsBytes int64
}

// opKind is the backend operation an op becomes.
type opKind int

const (
	opMatmul opKind = iota
	opPointwise
	opReduction
	opReshape
	opSDPAForward
)

func (k opKind) String() string {
	return [...]string{"matmul", "pointwise", "reduction", "reshape", "sdpa_fwd"}[k]
}

// op is one operation of a graph.
type op struct {
	kind opKind
	name string
	// pw is a pointwise op's mode, red a reduction's operator.
	pw  pointwiseMode
	red reductionOp
	// comp is the compute type (matmul, pointwise, reduction).
	comp dataType
	// axis is a GEN_INDEX op's axis.
	axis int64
	// in are the inputs: pointwise x, b, t; matmul a, b; reduction and reshape x;
	// sdpa q, k, v, scale.
	in []*operand
	// out are the outputs: y (or c); sdpa o, stats.
	out []*operand
	// mOverride, nOverride, kOverride are a matmul's per-batch GEMM sizes (nil: none).
	mOverride, nOverride, kOverride *operand
}

// graph is an operation graph: its tensors (in creation order; a ragged-offset tensor
// comes before the tensors that use it) and its ops in the order cuDNN receives them.
type graph struct {
	name    string
	tensors []*operand
	ops     []*op
	// workspace is the bytes of longca's part of the workspace (before cuDNN's).
	workspace int64
}

func (g *graph) add(t *operand) *operand {
	t.uid = int64(len(g.tensors) + 1)
	g.tensors = append(g.tensors, t)
	return t
}

// input adds a non-virtual tensor bound to user memory.
func (g *graph) input(name string, dt dataType, dims, strides []int64, bind binding) *operand {
	return g.add(&operand{name: name, dt: dt, dims: dims, strides: strides, bind: bind})
}

// virt adds a virtual tensor.
func (g *graph) virt(name string, dt dataType, dims, strides []int64) *operand {
	return g.add(&operand{name: name, dt: dt, dims: dims, strides: strides, virtual: true})
}

// scalarF32 adds a by-value float scalar (dims and strides of four ones, as the
// frontend expands fused scalars to the rank of the other operands).
func (g *graph) scalarF32(name string, v float32) *operand {
	return g.add(&operand{name: name, dt: dtFloat, dims: ones4(), strides: ones4(), byValue: true,
		value: math.Float32bits(v), bind: bindScalar})
}

// scalarI32 adds a by-value int32 scalar.
func (g *graph) scalarI32(name string, v int32) *operand {
	return g.add(&operand{name: name, dt: dtInt32, dims: ones4(), strides: ones4(), byValue: true,
		value: uint32(v), bind: bindScalar})
}

// workspaceTensor adds a non-virtual tensor that lives in longca's part of the workspace
// (256-byte aligned).
func (g *graph) workspaceTensor(name string, dt dataType, dims, strides []int64, bytes int64) *operand {
	t := g.add(&operand{name: name, dt: dt, dims: dims, strides: strides, bind: bindWorkspace,
		wsOffset: g.workspace, wsBytes: bytes})
	g.workspace += (bytes + 255) / 256 * 256
	return t
}

func ones4() []int64 { return []int64{1, 1, 1, 1} }

// broadcast is the shape of a pointwise op's output: the per-axis maximum of its inputs.
func broadcast(in []*operand) []int64 {
	var out []int64
	for _, t := range in {
		if len(t.dims) > len(out) {
			out = append(out, make([]int64, len(t.dims)-len(out))...)
		}
		for i, d := range t.dims {
			out[i] = max(out[i], d)
		}
	}
	return out
}

// stridesFor is a pointwise output's strides: those of the first input of its shape.
func stridesFor(dims []int64, in []*operand) []int64 {
	for _, t := range in {
		if equal(t.dims, dims) {
			return append([]int64(nil), t.strides...)
		}
	}
	return rowMajor(dims)
}

func equal(a, b []int64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// rowMajor is the packed row-major strides of dims.
func rowMajor(dims []int64) []int64 {
	s := make([]int64, len(dims))
	n := int64(1)
	for i := len(dims) - 1; i >= 0; i-- {
		s[i] = n
		n *= dims[i]
	}
	return s
}

// pointwise adds a pointwise op whose output is a new virtual tensor of type dt.
func (g *graph) pointwise(name string, mode pointwiseMode, comp, dt dataType, in ...*operand) *operand {
	dims := broadcast(in)
	y := g.virt(name+"::y", dt, dims, stridesFor(dims, in))
	g.pointwiseTo(name, mode, comp, y, in...)
	return y
}

// pointwiseTo adds a pointwise op writing y.
func (g *graph) pointwiseTo(name string, mode pointwiseMode, comp dataType, y *operand, in ...*operand) {
	g.ops = append(g.ops, &op{kind: opPointwise, name: name, pw: mode, comp: comp, axis: -1, in: in, out: []*operand{y}})
}

// genIndex adds a GEN_INDEX op over x's shape along axis, output int32.
func (g *graph) genIndex(name string, x *operand, axis int64, comp dataType) *operand {
	y := g.virt(name+"::y", dtInt32, x.dims, x.strides)
	g.ops = append(g.ops, &op{kind: opPointwise, name: name, pw: pwGenIndex, comp: comp, axis: axis, in: []*operand{x}, out: []*operand{y}})
	return y
}

// reduceTo adds a reduction of x into y (float compute).
func (g *graph) reduceTo(name string, mode reductionOp, x, y *operand) {
	g.ops = append(g.ops, &op{kind: opReduction, name: name, red: mode, comp: dtFloat, in: []*operand{x}, out: []*operand{y}})
}

// matmulTo adds c = a @ b (float compute) with optional per-batch M, N, K sizes.
func (g *graph) matmulTo(name string, a, b, c, m, n, k *operand) {
	g.ops = append(g.ops, &op{kind: opMatmul, name: name, comp: dtFloat, in: []*operand{a, b}, out: []*operand{c},
		mOverride: m, nOverride: n, kOverride: k})
}

// reshape adds a reshape of x into a new virtual tensor.
func (g *graph) reshape(name string, x *operand, dt dataType, dims, strides []int64) *operand {
	y := g.virt(name+"::y", dt, dims, strides)
	g.ops = append(g.ops, &op{kind: opReshape, name: name, in: []*operand{x}, out: []*operand{y}})
	return y
}

// find returns the graph's tensor named name (tests).
func (g *graph) find(name string) *operand {
	for _, t := range g.tensors {
		if t.name == name {
			return t
		}
	}
	return nil
}

// bound lists the non-virtual tensors: the variant pack's entries.
func (g *graph) bound() []*operand {
	var out []*operand
	for _, t := range g.tensors {
		if !t.virtual {
			out = append(out, t)
		}
	}
	return out
}

// String lists the graph's ops, one a line (for build logs and tests).
func (g *graph) String() string {
	s := fmt.Sprintf("graph %s: %d tensors, %d ops, %d workspace bytes\n", g.name, len(g.tensors), len(g.ops), g.workspace)
	for _, o := range g.ops {
		s += "  " + o.String() + "\n"
	}
	return s
}

func (o *op) String() string {
	names := func(ts []*operand) string {
		s := ""
		for i, t := range ts {
			if i > 0 {
				s += ","
			}
			s += t.name
		}
		return s
	}
	kind := o.kind.String()
	if o.kind == opPointwise {
		kind = o.pw.String()
	}
	if o.kind == opReduction {
		kind = map[reductionOp]string{reduceAdd: "reduce_add", reduceMax: "reduce_max"}[o.red]
	}
	return fmt.Sprintf("%-22s %-14s (%s) -> %s", o.name, kind, names(o.in), names(o.out))
}
