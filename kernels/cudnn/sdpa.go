package cudnn

import (
	"fmt"
	"math"
)

// The SDPA graphs, written after reading how cudnn-frontend (v1.x, for cuDNN 9.14)
// builds them: the forward as the SDPA forward operation or as the composite graph
// (matmul, scale, masks, softmax with stats, matmul), the backward as the composite
// graph (dO.O row sums, the recomputed probabilities from the stats, the three
// gradient matmuls, per-head reductions for grouped-query attention and an fp32 dQ
// accumulator). The backend recognises these patterns and fuses them into one kernel,
// so the order of the ops, their compute types and the types and strides of the
// virtual tensors follow the frontend's choices.

// alignment is the diagonal a band is measured from.
type alignment uint8

const (
	topLeft     alignment = iota // row i, column j: j - i
	bottomRight                  // j - i - (s_kv - s_q), per batch entry
)

func (a alignment) String() string {
	if a == bottomRight {
		return "bottom-right"
	}
	return "top-left"
}

// bounds are a mask's diagonal bounds in cuDNN's terms: with d = j - i measured from the
// alignment's diagonal, a pair is kept when d <= R (Right set) and d > -L (Left set).
type bounds struct {
	Align       alignment
	Right, Left bool
	R, L        int64
}

func (b bounds) String() string {
	s := "full"
	if b.Right {
		s = fmt.Sprintf("right %d", b.R)
	}
	if b.Left {
		if b.Right {
			s += ","
		} else {
			s = ""
		}
		s += fmt.Sprintf("left %d", b.L)
	}
	if b.Right || b.Left {
		s += " " + b.Align.String()
	}
	return s
}

// spec is one graph to build: everything the plan depends on.
type spec struct {
	backward bool
	// unified builds the forward as the SDPA operation (dense, no mask).
	unified bool
	io      dataType
	// b batch entries (pieces), heads, the largest lengths, head dim.
	b, hq, hk, sq, sk, d int64
	// ragged lays tensors out packed (THD) with per-entry offsets and lengths (the
	// padding mask); otherwise one dense [sq, h, d] entry.
	ragged bool
	// totalQ and totalKV size longca's ragged fp32 workspace tensors (tokens).
	totalQ, totalKV int64
	mask            bounds
	scale           float32
	version         int
}

func (s spec) String() string {
	pass := "fwd"
	if s.backward {
		pass = "bwd"
	}
	impl := "composite"
	if s.unified {
		impl = "sdpa-op"
	}
	layout := "dense"
	if s.ragged {
		layout = fmt.Sprintf("ragged b=%d", s.b)
	}
	return fmt.Sprintf("%s %s %s %s hq=%d hk=%d sq=%d sk=%d d=%d mask=%s", pass, impl, s.io, layout, s.hq, s.hk, s.sq, s.sk, s.d, s.mask)
}

// validate applies the limits cudnn-frontend checks before it builds these graphs, so
// that a case cuDNN cannot run is refused with a reason rather than a failed finalize.
func (s spec) validate() error {
	v := VersionString(s.version)
	switch {
	case s.d%8 != 0 || s.d > 256:
		return fmt.Errorf("cudnn %s: head dim %d (a multiple of 8 up to 256)", v, s.d)
	case s.hk <= 0 || s.hq%s.hk != 0:
		return fmt.Errorf("cudnn %s: %d query heads do not group over %d KV heads", v, s.hq, s.hk)
	case s.backward && s.sq == 1 && s.sk == 1:
		return fmt.Errorf("cudnn %s: backward of s_q = s_kv = 1 is not supported", v)
	case s.unified && (s.ragged || s.mask.Right || s.mask.Left || s.backward):
		return fmt.Errorf("cudnn %s: the SDPA operation serves only the dense full forward here", v)
	case s.unified && s.version < SDPAOpVersion:
		return fmt.Errorf("cudnn %s: the SDPA forward operation needs cuDNN %s", v, VersionString(SDPAOpVersion))
	case !s.ragged && s.mask.Right && s.mask.Align == bottomRight && s.sq > s.sk:
		return fmt.Errorf("cudnn %s: a bottom-right mask with s_q %d > s_kv %d needs the padded layout", v, s.sq, s.sk)
	case !s.ragged && s.mask.Left && s.sq > s.sk:
		return fmt.Errorf("cudnn %s: a sliding window with s_q %d > s_kv %d needs the padded layout", v, s.sq, s.sk)
	case s.mask.Right && s.mask.R < 0:
		return fmt.Errorf("cudnn %s: right bound %d must not be negative", v, s.mask.R)
	case s.mask.Left && s.mask.L <= 0:
		return fmt.Errorf("cudnn %s: left bound %d must be positive", v, s.mask.L)
	case s.version == 91400 && s.mask.Left && !s.mask.Right && s.sk > 1024:
		return fmt.Errorf("cudnn 9.14.0: a sliding window without a causal bound over more than 1024 keys is wrong in this version (NVIDIA: use 9.14.1)")
	}
	return nil
}

// negInf is the value masked scores take: -inf, or the lowest float before 9.10 (as the
// frontend does).
func (s spec) negInf() float32 {
	if s.version < 91000 {
		return -math.MaxFloat32
	}
	return float32(math.Inf(-1))
}

// layout is the tensors' shapes and strides for a spec.
type layout struct {
	qDims, qStr, kvDims, kvStr, ktDims, ktStr, statsDims, statsStr []int64
	sDims, sStr, sTDims, sTStr                                     []int64
}

func (s spec) layout() layout {
	b, hq, hk, sq, sk, d := s.b, s.hq, s.hk, s.sq, s.sk, s.d
	l := layout{
		qDims: []int64{b, hq, sq, d}, qStr: []int64{sq * hq * d, d, hq * d, 1},
		kvDims: []int64{b, hk, sk, d}, kvStr: []int64{sk * hk * d, d, hk * d, 1},
		ktDims: []int64{b, hk, d, sk}, ktStr: []int64{sk * hk * d, d, 1, hk * d},
		statsDims: []int64{b, hq, sq, 1}, statsStr: []int64{hq * sq, sq, 1, 1},
		sDims: []int64{b, hq, sq, sk}, sStr: []int64{hq * sq * sk, sq * sk, sk, 1},
		sTDims: []int64{b, hq, sk, sq}, sTStr: []int64{hq * sq * sk, sq * sk, 1, sk},
	}
	if s.ragged {
		l.statsStr = []int64{sq * hq, 1, hq, 1} // packed [tokens, heads]
	}
	return l
}

// raggedInputs are the offsets and lengths tensors of a ragged graph.
type raggedInputs struct {
	offQ, offKV, offStats, seqQ, seqKV *operand
}

func (g *graph) raggedInputs(s spec) raggedInputs {
	if !s.ragged {
		return raggedInputs{}
	}
	off := []int64{s.b + 1, 1, 1, 1}
	seq := []int64{s.b, 1, 1, 1}
	return raggedInputs{
		offQ:     g.input("offsets_q", dtInt64, off, ones4(), bindOffQ),
		offKV:    g.input("offsets_kv", dtInt64, off, ones4(), bindOffKV),
		offStats: g.input("offsets_stats", dtInt64, off, ones4(), bindOffStats),
		seqQ:     g.input("seq_q", dtInt32, seq, ones4(), bindSeqQ),
		seqKV:    g.input("seq_kv", dtInt32, seq, ones4(), bindSeqKV),
	}
}

// buildGraph builds the graph of s.
func buildGraph(s spec) (*graph, error) {
	if err := s.validate(); err != nil {
		return nil, err
	}
	switch {
	case s.unified:
		return unifiedForward(s), nil
	case s.backward:
		return compositeBackward(s), nil
	}
	return compositeForward(s), nil
}

// unifiedForward is the forward as one SDPA operation: Q, K (not transposed), V, a
// by-value scale; O and the stats.
func unifiedForward(s spec) *graph {
	g := &graph{name: "sdpa_fwd_op"}
	l := s.layout()
	q := g.input("Q", s.io, l.qDims, l.qStr, bindQ)
	k := g.input("K", s.io, l.kvDims, l.kvStr, bindK)
	v := g.input("V", s.io, l.kvDims, l.kvStr, bindV)
	o := g.input("O", s.io, l.qDims, l.qStr, bindO)
	stats := g.input("Stats", dtFloat, l.statsDims, l.statsStr, bindStats)
	scale := g.scalarF32("attn_scale", s.scale)
	g.ops = append(g.ops, &op{kind: opSDPAForward, name: "sdpa_fwd", in: []*operand{q, k, v, scale}, out: []*operand{o, stats}})
	return g
}

// compositeForward: S = Q K^T, scaled, masked; softmax with stats = max + log(sum exp)
// (the natural-log LSE of the scaled scores); O = P V with P in the I/O type.
func compositeForward(s spec) *graph {
	g := &graph{name: "sdpa_fwd"}
	l := s.layout()
	r := g.raggedInputs(s)
	q := g.input("Q", s.io, l.qDims, l.qStr, bindQ)
	kt := g.input("K", s.io, l.ktDims, l.ktStr, bindK)
	v := g.input("V", s.io, l.kvDims, l.kvStr, bindV)
	o := g.input("O", s.io, l.qDims, l.qStr, bindO)
	stats := g.input("Stats", dtFloat, l.statsDims, l.statsStr, bindStats)
	q.ragged, kt.ragged, v.ragged, o.ragged, stats.ragged = r.offQ, r.offKV, r.offKV, r.offQ, r.offStats
	scale := g.scalarF32("attn_scale", s.scale)

	sc := g.virt("bmm1::y", dtFloat, l.sDims, l.sStr)
	g.matmulTo("bmm1", q, kt, sc, r.seqQ, r.seqKV, nil)
	x := g.pointwise("attn_scale", pwMul, dtFloat, dtFloat, sc, scale)
	if s.ragged {
		x = g.paddingMask(s, x, r)
	}
	x = g.bandMask(s, x, r)

	m := g.virt("softmax::max", dtFloat, l.statsDims, []int64{s.hq * s.sq, s.sq, 1, 1})
	g.reduceTo("softmax::max", reduceMax, x, m)
	z := g.pointwise("softmax::sub", pwSub, dtFloat, dtFloat, x, m)
	e := g.pointwise("softmax::exp", pwExp, dtFloat, dtFloat, z)
	sum := g.virt("softmax::sum", dtFloat, l.statsDims, []int64{s.hq * s.sq, s.sq, 1, 1})
	g.reduceTo("softmax::sum", reduceAdd, e, sum)
	lg := g.pointwise("softmax::log", pwLog, dtFloat, dtFloat, sum)
	g.pointwiseTo("softmax::stats", pwAdd, dtFloat, stats, m, lg)
	p := g.pointwise("softmax::div", pwDiv, dtFloat, s.io, e, sum)

	g.matmulTo("bmm2", p, v, o, r.seqQ, nil, r.seqKV)
	return g
}

// paddingMask keeps the scores of rows below seq_q and columns below seq_kv of each
// batch entry.
func (g *graph) paddingMask(s spec, x *operand, r raggedInputs) *operand {
	return g.paddingMaskNamed("padding", s, x, r)
}

func (g *graph) paddingMaskNamed(name string, s spec, x *operand, r raggedInputs) *operand {
	row := g.genIndex(name+"::row", x, 2, dtInt32)
	col := g.genIndex(name+"::col", x, 3, dtInt32)
	rm := g.pointwise(name+"::row<sq", pwCmpLT, dtBoolean, dtBoolean, row, r.seqQ)
	cm := g.pointwise(name+"::col<skv", pwCmpLT, dtBoolean, dtBoolean, col, r.seqKV)
	both := g.pointwise(name+"::and", pwLogicalAnd, dtBoolean, dtBoolean, rm, cm)
	return g.pointwise(name+"::select", pwBinarySelect, dtFloat, dtFloat, x, g.scalarF32(name+"::-inf", s.negInf()), both)
}

// bandMask applies the diagonal bounds: the right bound as row (+ s_kv - s_q) (+ R) >=
// col, then the left bound as col + L (- s_kv + s_q) > row, each a GEN_INDEX pair, the
// shifts, a comparison and a select of -inf.
func (g *graph) bandMask(s spec, x *operand, r raggedInputs) *operand {
	b := s.mask
	if b.Right {
		row := g.genIndex("right::row", x, 2, dtFloat)
		col := g.genIndex("right::col", x, 3, dtFloat)
		if b.Align == bottomRight {
			skv, sq := r.seqKV, r.seqQ
			if !s.ragged {
				skv, sq = g.scalarI32("right::s_kv", int32(s.sk)), g.scalarI32("right::s_q", int32(s.sq))
			}
			row = g.pointwise("right::row+skv", pwAdd, dtInt32, dtInt32, row, skv)
			row = g.pointwise("right::row-sq", pwSub, dtInt32, dtInt32, row, sq)
		}
		if b.R != 0 {
			row = g.pointwise("right::row+R", pwAdd, dtInt32, dtInt32, row, g.scalarI32("right::R", int32(b.R)))
		}
		keep := g.pointwise("right::row>=col", pwCmpGE, dtBoolean, dtBoolean, row, col)
		x = g.pointwise("right::select", pwBinarySelect, dtFloat, dtFloat, x, g.scalarF32("right::-inf", s.negInf()), keep)
	}
	if b.Left {
		row := g.genIndex("left::row", x, 2, dtFloat)
		col := g.genIndex("left::col", x, 3, dtFloat)
		switch {
		case b.Align == topLeft:
			col = g.pointwise("left::col+L", pwAdd, dtFloat, dtFloat, col, g.scalarF32("left::L", float32(b.L)))
		case !s.ragged:
			col = g.pointwise("left::col+L", pwAdd, dtFloat, dtFloat, col, g.scalarF32("left::L", float32(b.L-s.sk+s.sq)))
		default:
			col = g.pointwise("left::col+L", pwAdd, dtInt32, dtInt32, col, g.scalarI32("left::L", int32(b.L)))
			col = g.pointwise("left::col-skv", pwSub, dtInt32, dtInt32, col, r.seqKV)
			col = g.pointwise("left::col+sq", pwAdd, dtInt32, dtInt32, col, r.seqQ)
		}
		keep := g.pointwise("left::col>row", pwCmpGT, dtBoolean, dtBoolean, col, row)
		x = g.pointwise("left::select", pwBinarySelect, dtFloat, dtFloat, x, g.scalarF32("left::-inf", s.negInf()), keep)
	}
	return x
}

// compositeBackward: softmax_sum = rowsum(dO * O); P = exp(scale Q K^T - stats) with
// the masks; dV = P^T dO; dS = P * (dO V^T - softmax_sum) * scale; dK = dS^T Q;
// dQ = dS K through an fp32 accumulator. Grouped-query heads sum full-head dK and dV.
func compositeBackward(s spec) *graph {
	g := &graph{name: "sdpa_bwd"}
	l := s.layout()
	r := g.raggedInputs(s)
	q := g.input("Q", s.io, l.qDims, l.qStr, bindQ)
	kt := g.input("K", s.io, l.ktDims, l.ktStr, bindK)
	vt := g.input("V", s.io, l.ktDims, l.ktStr, bindV)
	o := g.input("O", s.io, l.qDims, l.qStr, bindO)
	dO := g.input("dO", s.io, l.qDims, l.qStr, bindDO)
	stats := g.input("Stats", dtFloat, l.statsDims, l.statsStr, bindStats)
	dQ := g.input("dQ", s.io, l.qDims, l.qStr, bindDQ)
	dK := g.input("dK", s.io, l.kvDims, l.kvStr, bindDK)
	dV := g.input("dV", s.io, l.kvDims, l.kvStr, bindDV)
	q.ragged, kt.ragged, vt.ragged, o.ragged, dO.ragged = r.offQ, r.offKV, r.offKV, r.offQ, r.offQ
	stats.ragged, dQ.ragged, dK.ragged, dV.ragged = r.offStats, r.offQ, r.offKV, r.offKV
	scale := g.scalarF32("attn_scale", s.scale)
	one := g.scalarF32("one", 1)

	// softmax_sum = sum over d of dO * O, per row, in longca's workspace.
	x := g.pointwise("mul_dO_O", pwMul, dtFloat, dtFloat, dO, o)
	x.strides = []int64{s.hq * s.sq * s.d, s.sq * s.d, s.hq * s.d, 1}
	rowSum := g.virt("reduce_dO_o", dtFloat, l.statsDims, []int64{s.hq * s.sq, s.sq, 1, 1})
	g.reduceTo("reduce_dO_o", reduceAdd, x, rowSum)
	var softmaxSum *operand
	if s.ragged {
		softmaxSum = g.workspaceTensor("softmax_sum", dtFloat, l.statsDims, l.statsStr, s.totalQ*l.statsStr[2]*4)
		softmaxSum.ragged = r.offStats
	} else {
		softmaxSum = g.workspaceTensor("softmax_sum", dtFloat, l.statsDims, []int64{s.hq * s.sq, s.sq, 1, 1}, s.b*s.hq*s.sq*4)
	}
	g.pointwiseTo("scale_dropout_inv", pwMul, dtFloat, softmaxSum, rowSum, one)

	// P = exp(scale S - stats), masked.
	sc := g.virt("matmul_Q_KT::y", dtFloat, l.sDims, l.sStr)
	g.matmulTo("matmul_Q_KT", q, kt, sc, r.seqQ, r.seqKV, nil)
	x = g.pointwise("mul_s_attn_scale", pwMul, dtFloat, dtFloat, sc, scale)
	if s.ragged {
		x = g.paddingMask(s, x, r)
	}
	x = g.pointwise("sub_s_m", pwSub, dtFloat, dtFloat, x, stats)
	if s.ragged && s.version < 91000 { // before 9.10 the padding goes in again after the stats
		x = g.paddingMaskNamed("padding2", s, x, r)
	}
	x = g.bandMask(s, x, r)
	p := g.pointwise("exp_s", pwExp, dtFloat, dtFloat, x)

	// dV = P^T dO (summed over each KV head's query heads).
	pT := g.reshape("reshape_p", p, s.io, l.sTDims, l.sTStr)
	g.gradient(s, "matmul_pT_dO", "red_dV_head", pT, dO, dV, r)

	// dS = P * (dO V^T - softmax_sum) * scale.
	dP := g.virt("matmul_dO_VT::y", dtFloat, l.sDims, l.sStr)
	g.matmulTo("matmul_dO_VT", dO, vt, dP, r.seqQ, r.seqKV, nil)
	x = g.pointwise("sub_dP_softmax_sum", pwSub, dtFloat, dtFloat, dP, softmaxSum)
	x = g.pointwise("mul_dP_exp_s", pwMul, dtFloat, dtFloat, x, p)
	dS := g.pointwise("mul_dS_attn_scale", pwMul, dtFloat, dtFloat, x, scale)

	// dK = dS^T Q.
	dST := g.reshape("reshape_dS", dS, s.io, l.sTDims, l.sTStr)
	g.gradient(s, "matmul_dST_Q", "red_dK_head", dST, q, dK, r)

	// dQ = dS K, accumulated in fp32 in longca's workspace, then converted.
	kr := g.reshape("reshape_k", kt, s.io, l.kvDims, []int64{l.ktStr[0], l.ktStr[1], l.ktStr[3], l.ktStr[2]})
	kr.ragged = r.offKV
	var acc *operand
	if s.ragged {
		acc = g.workspaceTensor("dQ_accum", dtFloat, l.qDims, l.qStr, s.totalQ*l.qStr[2]*4)
		acc.ragged = r.offQ
	} else {
		acc = g.workspaceTensor("dQ_accum", dtFloat, l.qDims, []int64{s.hq * s.sq * s.d, s.sq * s.d, s.d, 1}, s.b*s.hq*s.sq*s.d*4)
	}
	g.matmulTo("matmul_dS_K", dS, kr, acc, r.seqQ, nil, r.seqKV)
	g.pointwiseTo("identity_dQ", pwIdentity, dtFloat, dQ, acc)
	return g
}

// gradient adds out = a @ b over the key rows: directly for multi-head attention; for
// grouped-query attention into a full-head tensor (one per query head) summed over
// each KV head's group.
func (g *graph) gradient(s spec, name, red string, a, b, out *operand, r raggedInputs) {
	if s.hq == s.hk {
		g.matmulTo(name, a, b, out, r.seqKV, nil, r.seqQ)
		return
	}
	dims := []int64{s.b, s.hq, s.sk, s.d}
	var full *operand
	if s.ragged {
		group := s.hq / s.hk
		str := append([]int64(nil), out.strides...)
		str[0] *= group
		str[2] *= group
		full = g.workspaceTensor(name+"::full_heads", s.io, dims, str, s.totalKV*str[2]*4)
		full.ragged = out.ragged // cuDNN scales the offsets by the group size
	} else {
		full = g.virt(name+"::full_heads", s.io, dims, []int64{s.hq * s.sk * s.d, s.sk * s.d, s.d, 1})
	}
	g.matmulTo(name, a, b, full, r.seqKV, nil, r.seqQ)
	g.reduceTo(red, reduceAdd, full, out)
}
