package cudnn

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"
)

// specs are the graphs the kernel builds, one of each kind.
func testSpecs() map[string]spec {
	base := spec{io: dtBF16, b: 1, hq: 8, hk: 2, sq: 256, sk: 256, d: 64, scale: 0.125, version: 91400}
	with := func(f func(*spec)) spec { s := base; f(&s); return s }
	return map[string]spec{
		"fwd dense full":    base,
		"fwd sdpa-op":       with(func(s *spec) { s.unified = true }),
		"fwd dense causal":  with(func(s *spec) { s.mask = bounds{Align: topLeft, Right: true} }),
		"fwd dense window":  with(func(s *spec) { s.mask = bounds{Align: topLeft, Right: true, Left: true, L: 65} }),
		"fwd dense br band": with(func(s *spec) { s.sq = 128; s.mask = bounds{Align: bottomRight, Right: true, R: 3, Left: true, L: 40} }),
		"fwd ragged causal": with(func(s *spec) {
			s.ragged, s.b, s.totalQ, s.totalKV = true, 4, 640, 640
			s.mask = bounds{Align: bottomRight, Right: true}
		}),
		"fwd ragged band": with(func(s *spec) {
			s.ragged, s.b, s.totalQ, s.totalKV = true, 2, 640, 640
			s.mask = bounds{Align: bottomRight, Right: true, R: 2, Left: true, L: 9}
		}),
		"bwd dense causal mha": with(func(s *spec) { s.backward, s.hk, s.mask = true, 8, bounds{Align: topLeft, Right: true} }),
		"bwd dense full gqa":   with(func(s *spec) { s.backward = true }),
		"bwd ragged causal gqa": with(func(s *spec) {
			s.backward, s.ragged, s.b, s.totalQ, s.totalKV = true, true, 4, 640, 640
			s.mask = bounds{Align: bottomRight, Right: true}
		}),
		"bwd ragged full fp16 mha": with(func(s *spec) {
			s.backward, s.ragged, s.b, s.totalQ, s.totalKV, s.io, s.hk = true, true, 8, 640, 640, dtHalf, 8
		}),
	}
}

// TestLoweringMatchesGraph builds every kind of graph against the fake cuDNN and reads
// back each descriptor: every tensor's type, dims, strides, uid, alignment, virtual and
// by-value flags and ragged offsets, and every operation in order with its mode,
// compute type, axis, operands and overrides, are what the graph says.
func TestLoweringMatchesGraph(t *testing.T) {
	l := openFake(t, fakeLib)
	h, err := l.NewHandle()
	if err != nil {
		t.Fatal(err)
	}
	defer l.DestroyHandle(h)
	for name, s := range testSpecs() {
		t.Run(name, func(t *testing.T) {
			live := fakeInt(t, l, "fake_live")
			g, err := buildGraph(s)
			if err != nil {
				t.Fatal(err)
			}
			p, err := buildPlan(l, h, g, s)
			if err != nil {
				t.Fatalf("%v\n%s", err, strings.Join(err.(*BuildError).Log, "\n"))
			}
			checkLowering(t, dumpFake(t, l), g)
			if p.engine != 10 || p.engines != 2 || p.tried != 1 || p.workspace != 4096 {
				t.Errorf("engine %d (%d of %d), workspace %d; want engine 10, first of 2, 4096", p.engine, p.tried, p.engines, p.workspace)
			}
			if !strings.Contains(p.Log(), "engine heuristics (mode 3): 2 engine configurations") {
				t.Errorf("build log does not give the heuristics' count:\n%s", p.Log())
			}
			p.destroy()
			if n := fakeInt(t, l, "fake_live"); n != live {
				t.Errorf("%d descriptors live after destroy, %d before the build", n, live)
			}
		})
	}
}

func checkLowering(t *testing.T, st *fakeState, g *graph) {
	t.Helper()
	byUID := st.tensorsByUID()
	for _, o := range g.tensors {
		d := byUID[o.uid]
		if d == nil {
			t.Fatalf("tensor %s (uid %d) not lowered", o.name, o.uid)
		}
		want := map[attrName][]int64{attrTensorDataType: {int64(o.dt)}, attrTensorDimensions: o.dims,
			attrTensorStrides: o.strides, attrTensorByteAlignment: {16}}
		for a, w := range want {
			if got := d.ints(int(a)); !slices.Equal(got, w) {
				t.Errorf("tensor %s attribute %d = %v, want %v", o.name, a, got, w)
			}
		}
		if got := d.int(int(attrTensorIsVirtual)) == 1; got != o.virtual || !d.fin {
			t.Errorf("tensor %s virtual %v finalized %v, want virtual %v", o.name, got, d.fin, o.virtual)
		}
		if got := d.int(int(attrTensorIsByValue)) == 1; got != o.byValue {
			t.Errorf("tensor %s by value %v, want %v", o.name, got, o.byValue)
		}
		r := d.ref(int(attrTensorRaggedOffset))
		switch {
		case o.ragged == nil && r != -1:
			t.Errorf("tensor %s has ragged offsets d%d", o.name, r)
		case o.ragged != nil && (r == -1 || st.byID[r].int(int(attrTensorUniqueID)) != o.ragged.uid):
			t.Errorf("tensor %s: ragged offsets d%d, want the tensor of uid %d", o.name, r, o.ragged.uid)
		}
	}
	og := st.last(descOperationGraph)
	if og == nil || !og.fin || len(og.attrs[int(attrOperationGraphOps)]) != len(g.ops) {
		t.Fatalf("operation graph %+v, want %d ops", og, len(g.ops))
	}
	uidOf := func(d *fakeDesc, a attrName) int64 {
		r := d.ref(int(a))
		if r < 0 {
			return -1
		}
		return st.byID[r].int(int(attrTensorUniqueID))
	}
	opType := map[opKind]descType{opPointwise: descOpPointwise, opMatmul: descOpMatmul, opReduction: descOpReduction,
		opReshape: descOpReshape, opSDPAForward: descOpSDPAForward}
	uid := func(o *operand) int64 {
		if o == nil {
			return -1
		}
		return o.uid
	}
	for i, o := range g.ops {
		var id int
		fmt.Sscanf(og.attrs[int(attrOperationGraphOps)][i], "d%d", &id)
		d := st.byID[id]
		if d.typ != int(opType[o.kind]) || !d.fin {
			t.Fatalf("op %d %s: descriptor type %d finalized %v, want %d", i, o.name, d.typ, d.fin, opType[o.kind])
		}
		var ports map[attrName]*operand
		switch o.kind {
		case opPointwise:
			pw := st.byID[d.ref(int(attrOpPointwisePWDescriptor))]
			axis := int64(-999)
			if o.pw == pwGenIndex {
				axis = o.axis
			}
			if pw.int(int(attrPointwiseMode)) != int64(o.pw) || pw.int(int(attrPointwiseMathPrec)) != int64(o.comp) || pw.int(int(attrPointwiseAxis)) != axis {
				t.Errorf("op %s: mode %v prec %v axis %v, want %d %d %d", o.name, pw.attrs[0], pw.attrs[1], pw.attrs[9], o.pw, o.comp, axis)
			}
			if d.attrs[int(attrOpPointwiseAlpha1)][0] != "1" || d.attrs[int(attrOpPointwiseAlpha2)][0] != "1" {
				t.Errorf("op %s: alphas %v %v", o.name, d.attrs[int(attrOpPointwiseAlpha1)], d.attrs[int(attrOpPointwiseAlpha2)])
			}
			ports = map[attrName]*operand{attrOpPointwiseXDesc: o.in[0], attrOpPointwiseYDesc: o.out[0], attrOpPointwiseBDesc: nil, attrOpPointwiseTDesc: nil}
			if len(o.in) > 1 {
				ports[attrOpPointwiseBDesc] = o.in[1]
			}
			if len(o.in) > 2 {
				ports[attrOpPointwiseTDesc] = o.in[2]
			}
		case opMatmul:
			mm := st.byID[d.ref(int(attrOpMatmulDesc))]
			if mm.int(int(attrMatmulCompType)) != int64(dtFloat) {
				t.Errorf("op %s: compute type %v", o.name, mm.attrs[int(attrMatmulCompType)])
			}
			ports = map[attrName]*operand{attrOpMatmulADesc: o.in[0], attrOpMatmulBDesc: o.in[1], attrOpMatmulCDesc: o.out[0],
				attrOpMatmulMOverride: o.mOverride, attrOpMatmulNOverride: o.nOverride, attrOpMatmulKOverride: o.kOverride}
		case opReduction:
			rd := st.byID[d.ref(int(attrOpReductionDesc))]
			if rd.int(int(attrReductionOperator)) != int64(o.red) || rd.int(int(attrReductionCompType)) != int64(dtFloat) || rd.int(int(attrReductionIsDeterministic)) != 0 {
				t.Errorf("op %s: reduction %v", o.name, rd.attrs)
			}
			ports = map[attrName]*operand{attrOpReductionXDesc: o.in[0], attrOpReductionYDesc: o.out[0]}
		case opReshape:
			ports = map[attrName]*operand{attrOpReshapeXDesc: o.in[0], attrOpReshapeYDesc: o.out[0]}
		case opSDPAForward:
			ports = map[attrName]*operand{attrSDPAFwdQDesc: o.in[0], attrSDPAFwdKDesc: o.in[1], attrSDPAFwdVDesc: o.in[2],
				attrSDPAFwdScaleDesc: o.in[3], attrSDPAFwdODesc: o.out[0], attrSDPAFwdStatsDesc: o.out[1]}
		}
		for a, want := range ports {
			if got := uidOf(d, a); got != uid(want) {
				t.Errorf("op %d %s: attribute %d names uid %d, want %d", i, o.name, a, got, uid(want))
			}
		}
	}
}

// opsOf lists a graph's ops as "name:mode" (pointwise) or "name".
func opsOf(g *graph) []string {
	var out []string
	for _, o := range g.ops {
		switch o.kind {
		case opPointwise:
			out = append(out, o.name+":"+o.pw.String())
		default:
			out = append(out, o.name)
		}
	}
	return out
}

// TestForwardGraph pins the composite forward: the ops in cudnn-frontend's order, the
// packed layouts and ragged offsets, the per-entry GEMM sizes, the softmax stats and the
// probabilities in the I/O type.
func TestForwardGraph(t *testing.T) {
	s := testSpecs()["fwd ragged causal"]
	g, err := buildGraph(s)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"bmm1", "attn_scale:mul",
		"padding::row:gen_index", "padding::col:gen_index", "padding::row<sq:cmp_lt", "padding::col<skv:cmp_lt", "padding::and:logical_and", "padding::select:binary_select",
		"right::row:gen_index", "right::col:gen_index", "right::row+skv:add", "right::row-sq:sub", "right::row>=col:cmp_ge", "right::select:binary_select",
		"softmax::max", "softmax::sub:sub", "softmax::exp:exp", "softmax::sum", "softmax::log:log", "softmax::stats:add", "softmax::div:div", "bmm2"}
	if got := opsOf(g); !slices.Equal(got, want) {
		t.Fatalf("ops\n%v\nwant\n%v", got, want)
	}
	q, k, v, o, stats := g.find("Q"), g.find("K"), g.find("V"), g.find("O"), g.find("Stats")
	b, hq, hk, sq, sk, d := s.b, s.hq, s.hk, s.sq, s.sk, s.d
	for _, c := range []struct {
		t             *operand
		dims, strides []int64
		ragged        string
	}{
		{q, []int64{b, hq, sq, d}, []int64{sq * hq * d, d, hq * d, 1}, "offsets_q"},
		{k, []int64{b, hk, d, sk}, []int64{sk * hk * d, d, 1, hk * d}, "offsets_kv"}, // K^T
		{v, []int64{b, hk, sk, d}, []int64{sk * hk * d, d, hk * d, 1}, "offsets_kv"},
		{o, []int64{b, hq, sq, d}, []int64{sq * hq * d, d, hq * d, 1}, "offsets_q"},
		{stats, []int64{b, hq, sq, 1}, []int64{sq * hq, 1, hq, 1}, "offsets_stats"}, // packed [tokens, heads]
	} {
		if !slices.Equal(c.t.dims, c.dims) || !slices.Equal(c.t.strides, c.strides) || c.t.ragged == nil || c.t.ragged.name != c.ragged || c.t.virtual {
			t.Errorf("%s: dims %v strides %v ragged %v", c.t.name, c.t.dims, c.t.strides, c.t.ragged)
		}
	}
	for _, n := range []string{"offsets_q", "offsets_kv", "offsets_stats"} {
		if x := g.find(n); x.dt != dtInt64 || !slices.Equal(x.dims, []int64{b + 1, 1, 1, 1}) {
			t.Errorf("%s: %s %v", n, x.dt, x.dims)
		}
	}
	for _, n := range []string{"seq_q", "seq_kv"} {
		if x := g.find(n); x.dt != dtInt32 || !slices.Equal(x.dims, []int64{b, 1, 1, 1}) {
			t.Errorf("%s: %s %v", n, x.dt, x.dims)
		}
	}
	bmm1, bmm2 := g.ops[0], g.ops[len(g.ops)-1]
	if bmm1.mOverride.name != "seq_q" || bmm1.nOverride.name != "seq_kv" || bmm1.kOverride != nil ||
		bmm2.mOverride.name != "seq_q" || bmm2.nOverride != nil || bmm2.kOverride.name != "seq_kv" {
		t.Errorf("GEMM overrides: bmm1 %v %v %v, bmm2 %v %v %v", bmm1.mOverride, bmm1.nOverride, bmm1.kOverride, bmm2.mOverride, bmm2.nOverride, bmm2.kOverride)
	}
	if p := bmm2.in[0]; p.dt != dtBF16 || !p.virtual || !slices.Equal(p.dims, []int64{b, hq, sq, sk}) {
		t.Errorf("probabilities %s %v virtual %v: want bf16 [b, hq, sq, sk]", p.dt, p.dims, p.virtual)
	}
	if sc := g.find("attn_scale"); !sc.byValue || sc.value != math.Float32bits(0.125) {
		t.Errorf("scale %+v", sc)
	}
	for _, n := range []string{"padding::-inf", "right::-inf"} {
		if x := g.find(n); !x.byValue || x.value != math.Float32bits(float32(math.Inf(-1))) {
			t.Errorf("%s: %+v", n, x)
		}
	}
	if x := g.find("right::row+skv::y"); x == nil || x.dt != dtInt32 {
		t.Errorf("row+skv %+v", x)
	}
	// The bottom-right shift uses the per-entry lengths: row + seq_kv - seq_q >= col.
	add := g.ops[10]
	if add.in[1].name != "seq_kv" || g.ops[11].in[1].name != "seq_q" || add.comp != dtInt32 {
		t.Errorf("bottom-right shift: %v, %v", add, g.ops[11])
	}

	// Dense: no padding mask, no overrides, the stats in longca's own [heads, tokens].
	g, _ = buildGraph(testSpecs()["fwd dense window"])
	want = []string{"bmm1", "attn_scale:mul",
		"right::row:gen_index", "right::col:gen_index", "right::row>=col:cmp_ge", "right::select:binary_select",
		"left::row:gen_index", "left::col:gen_index", "left::col+L:add", "left::col>row:cmp_gt", "left::select:binary_select",
		"softmax::max", "softmax::sub:sub", "softmax::exp:exp", "softmax::sum", "softmax::log:log", "softmax::stats:add", "softmax::div:div", "bmm2"}
	if got := opsOf(g); !slices.Equal(got, want) {
		t.Fatalf("dense window ops\n%v\nwant\n%v", got, want)
	}
	if st := g.find("Stats"); !slices.Equal(st.strides, []int64{8 * 256, 256, 1, 1}) || st.ragged != nil {
		t.Errorf("dense stats strides %v", st.strides)
	}
	if x := g.find("left::L"); x.dt != dtFloat || x.value != math.Float32bits(65) {
		t.Errorf("top-left window bound %+v", x)
	}
	if g.ops[0].mOverride != nil || g.find("seq_q") != nil {
		t.Errorf("dense graph has per-entry lengths")
	}
	// Dense bottom-right: the shifts are by-value s_kv and s_q, the left bound L - s_kv + s_q.
	g, _ = buildGraph(testSpecs()["fwd dense br band"])
	if x := g.find("right::s_kv"); x.value != 256 || g.find("right::s_q").value != 128 || g.find("right::R").value != 3 {
		t.Errorf("bottom-right scalars %v %v %v", g.find("right::s_kv"), g.find("right::s_q"), g.find("right::R"))
	}
	if x := g.find("left::L"); x.value != math.Float32bits(40-256+128) {
		t.Errorf("bottom-right dense left bound %v", math.Float32frombits(x.value))
	}
	// Ragged band: the left bound as int32 with the per-entry lengths.
	g, _ = buildGraph(testSpecs()["fwd ragged band"])
	if x := g.find("left::L"); x.dt != dtInt32 || x.value != 9 || g.find("left::col-skv::y") == nil || g.find("left::col+sq::y") == nil {
		t.Errorf("ragged left bound %+v", x)
	}
}

// TestBackwardGraph pins the composite backward: the ops in cudnn-frontend's order, K
// and V transposed, the fp32 workspace tensors (dO.O row sums, dQ accumulator, and for
// GQA the full-head dK and dV) with their ragged offsets, strides and sizes.
func TestBackwardGraph(t *testing.T) {
	s := testSpecs()["bwd ragged causal gqa"]
	g, err := buildGraph(s)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"mul_dO_O:mul", "reduce_dO_o", "scale_dropout_inv:mul", "matmul_Q_KT", "mul_s_attn_scale:mul",
		"padding::row:gen_index", "padding::col:gen_index", "padding::row<sq:cmp_lt", "padding::col<skv:cmp_lt", "padding::and:logical_and", "padding::select:binary_select",
		"sub_s_m:sub",
		"right::row:gen_index", "right::col:gen_index", "right::row+skv:add", "right::row-sq:sub", "right::row>=col:cmp_ge", "right::select:binary_select",
		"exp_s:exp", "reshape_p", "matmul_pT_dO", "red_dV_head", "matmul_dO_VT", "sub_dP_softmax_sum:sub", "mul_dP_exp_s:mul",
		"mul_dS_attn_scale:mul", "reshape_dS", "matmul_dST_Q", "red_dK_head", "reshape_k", "matmul_dS_K", "identity_dQ:identity"}
	if got := opsOf(g); !slices.Equal(got, want) {
		t.Fatalf("ops\n%v\nwant\n%v", got, want)
	}
	b, hq, hk, sq, sk, d := s.b, s.hq, s.hk, s.sq, s.sk, s.d
	if v := g.find("V"); !slices.Equal(v.dims, []int64{b, hk, d, sk}) || !slices.Equal(v.strides, []int64{sk * hk * d, d, 1, hk * d}) {
		t.Errorf("V^T %v %v", v.dims, v.strides)
	}
	group := hq / hk
	var off int64
	for _, c := range []struct {
		name          string
		dt            dataType
		dims, strides []int64
		ragged        string
		bytes         int64
	}{
		{"softmax_sum", dtFloat, []int64{b, hq, sq, 1}, []int64{sq * hq, 1, hq, 1}, "offsets_stats", s.totalQ * hq * 4},
		{"matmul_pT_dO::full_heads", dtBF16, []int64{b, hq, sk, d}, []int64{sk * hk * d * group, d, hk * d * group, 1}, "offsets_kv", s.totalKV * hq * d * 4},
		{"matmul_dST_Q::full_heads", dtBF16, []int64{b, hq, sk, d}, []int64{sk * hk * d * group, d, hk * d * group, 1}, "offsets_kv", s.totalKV * hq * d * 4},
		{"dQ_accum", dtFloat, []int64{b, hq, sq, d}, []int64{sq * hq * d, d, hq * d, 1}, "offsets_q", s.totalQ * hq * d * 4},
	} {
		x := g.find(c.name)
		if x == nil || x.dt != c.dt || !slices.Equal(x.dims, c.dims) || !slices.Equal(x.strides, c.strides) || x.bind != bindWorkspace ||
			x.ragged == nil || x.ragged.name != c.ragged || x.wsBytes != c.bytes || x.wsOffset != off || x.wsOffset%256 != 0 {
			t.Errorf("%s: %+v, want %s %v %v ragged %s %d bytes at %d", c.name, x, c.dt, c.dims, c.strides, c.ragged, c.bytes, off)
		}
		off += (c.bytes + 255) / 256 * 256
	}
	if g.workspace != off {
		t.Errorf("longca's workspace %d, want %d", g.workspace, off)
	}
	if rk := g.find("reshape_k::y"); rk.ragged == nil || !slices.Equal(rk.dims, []int64{b, hk, sk, d}) || !slices.Equal(rk.strides, []int64{sk * hk * d, d, hk * d, 1}) {
		t.Errorf("reshaped K %+v", rk)
	}
	if x := g.find("mul_dO_O::y"); !slices.Equal(x.strides, []int64{hq * sq * d, sq * d, hq * d, 1}) {
		t.Errorf("dO*O strides %v", x.strides)
	}
	// MHA writes dK and dV from the matmuls; dense keeps dQ_accum in [b, h, s, d].
	g, _ = buildGraph(testSpecs()["bwd dense causal mha"])
	if g.find("matmul_pT_dO::full_heads") != nil || g.find("red_dV_head") != nil {
		t.Errorf("MHA graph has full-head tensors")
	}
	for _, o := range g.ops {
		if o.name == "matmul_pT_dO" && o.out[0].name != "dV" || o.name == "matmul_dST_Q" && o.out[0].name != "dK" {
			t.Errorf("MHA %s writes %s", o.name, o.out[0].name)
		}
	}
	if a := g.find("dQ_accum"); !slices.Equal(a.strides, []int64{8 * 256 * 64, 256 * 64, 64, 1}) || a.ragged != nil {
		t.Errorf("dense dQ_accum %v", a.strides)
	}
	// Dense GQA: the full-head tensors are virtual.
	g, _ = buildGraph(testSpecs()["bwd dense full gqa"])
	if x := g.find("matmul_pT_dO::full_heads"); x == nil || !x.virtual {
		t.Errorf("dense GQA full heads %+v", x)
	}
}

// TestSpecLimits: what cudnn-frontend refuses is refused before any descriptor, with a
// reason naming the version.
func TestSpecLimits(t *testing.T) {
	base := testSpecs()["fwd dense full"]
	for _, c := range []struct {
		change func(*spec)
		want   string
	}{
		{func(s *spec) { s.d = 100 }, "head dim 100"},
		{func(s *spec) { s.hq = 6; s.hk = 4 }, "do not group"},
		{func(s *spec) { s.backward = true; s.sq, s.sk = 1, 1 }, "s_q = s_kv = 1"},
		{func(s *spec) { s.unified = true; s.version = 91200 }, "needs cuDNN 9.13.1"},
		{func(s *spec) { s.unified = true; s.mask.Right = true }, "only the dense full forward"},
		{func(s *spec) { s.sq = 512; s.mask = bounds{Align: bottomRight, Right: true} }, "needs the padded layout"},
		{func(s *spec) { s.sk = 2048; s.mask = bounds{Left: true, L: 4} }, "9.14.1"},
		{func(s *spec) { s.mask = bounds{Right: true, Left: true} }, "left bound 0"},
	} {
		s := base
		c.change(&s)
		_, err := buildGraph(s)
		if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "cudnn 9.") {
			t.Errorf("%s: %v, want an error with %q", s, err, c.want)
		}
	}
}

// TestBuildErrors: a refused finalize, no engine, refused engines and a failed execute
// come back as errors carrying cuDNN's status and its own explanation, and leave no
// descriptor behind.
func TestBuildErrors(t *testing.T) {
	l := openFake(t, fakeLib)
	h, _ := l.NewHandle()
	defer l.DestroyHandle(h)
	s := testSpecs()["fwd ragged causal"]
	g, _ := buildGraph(s)
	for _, c := range []struct {
		env, val string
		want     []string
	}{
		{"FAKE_CUDNN_REFUSE", "19", []string{"finalize matmul operation bmm1", "CUDNN_STATUS_NOT_SUPPORTED (3000)", "FAKE_CUDNN_REFUSE=19", "cudnn 9.14.0"}},
		{"FAKE_CUDNN_REFUSE", "13", []string{"finalize pointwise operation attn_scale"}},
		{"FAKE_CUDNN_ENGINES", "0", []string{"the heuristics found no engine"}},
		{"FAKE_CUDNN_REFUSE_PLANS", "5", []string{"no engine configuration finalized (2 tried)", "engine 10 refused", "engine 11 refused"}},
	} {
		t.Run(c.env+"="+c.val, func(t *testing.T) {
			t.Setenv(c.env, c.val)
			live := fakeInt(t, l, "fake_live")
			_, err := buildPlan(l, h, g, s)
			var be *BuildError
			if !errors.As(err, &be) {
				t.Fatalf("error %v, want a *BuildError", err)
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
			if !strings.Contains(strings.Join(be.Log, "\n"), "FAILED") {
				t.Errorf("log does not end in the failure:\n%s", strings.Join(be.Log, "\n"))
			}
			if n := fakeInt(t, l, "fake_live"); n != live {
				t.Errorf("%d descriptors live after a failed build, %d before", n, live)
			}
		})
	}
	t.Run("second engine", func(t *testing.T) {
		t.Setenv("FAKE_CUDNN_REFUSE_PLANS", "1")
		p, err := buildPlan(l, h, g, s)
		if err != nil {
			t.Fatal(err)
		}
		defer p.destroy()
		if p.engine != 11 || p.tried != 2 || !strings.Contains(p.Log(), "engine 10 refused") {
			t.Errorf("engine %d after %d tries; log:\n%s", p.engine, p.tried, p.Log())
		}
	})
	t.Run("execute", func(t *testing.T) {
		p, err := buildPlan(l, h, g, s)
		if err != nil {
			t.Fatal(err)
		}
		defer p.destroy()
		key := fullKey()
		for _, c := range []struct {
			status string
			oom    bool
		}{{"5000", false}, {"4004", true}} {
			t.Setenv("FAKE_CUDNN_EXECUTE_STATUS", c.status)
			err := p.execute(h, key)
			var e *Error
			if !errors.As(err, &e) || e.OutOfMemory() != c.oom || !strings.Contains(err.Error(), "FAKE_CUDNN_EXECUTE_STATUS") || !strings.Contains(err.Error(), "("+c.status+")") {
				t.Errorf("status %s: %v", c.status, err)
			}
		}
	})
	t.Run("no cudnnGetLastErrorString", func(t *testing.T) {
		l2 := openFake(t, fakeLibNoLastError)
		h2, _ := l2.NewHandle()
		t.Setenv("FAKE_CUDNN_REFUSE", "19")
		_, err := buildPlan(l2, h2, g, s)
		if err == nil || !strings.Contains(err.Error(), "CUDNN_STATUS_NOT_SUPPORTED (3000)") || strings.Contains(err.Error(), "FAKE_CUDNN") {
			t.Errorf("error %v: want the status without an explanation", err)
		}
	})
}

// fullKey gives every binding a distinct fake address.
func fullKey() packKey {
	var k packKey
	for b := range k {
		k[b] = uintptr(0x100000 * (b + 1))
	}
	return k
}

// TestVariantPack: the pack lists every non-virtual tensor once with the address of the
// memory it is bound to (workspace tensors at their offsets, by-value scalars at their
// host copies), the workspace after longca's part; a pack is made once per set of
// addresses; a missing binding is an error before cuDNN sees it.
func TestVariantPack(t *testing.T) {
	l := openFake(t, fakeLib)
	h, _ := l.NewHandle()
	defer l.DestroyHandle(h)
	s := testSpecs()["bwd ragged causal gqa"]
	g, _ := buildGraph(s)
	p, err := buildPlan(l, h, g, s)
	if err != nil {
		t.Fatal(err)
	}
	defer p.destroy()
	key := fullKey()
	n0 := fakeInt(t, l, "fake_executes")
	for range 3 {
		if err := p.execute(h, key); err != nil {
			t.Fatal(err)
		}
	}
	if n := fakeInt(t, l, "fake_executes") - n0; n != 3 || len(p.packs) != 1 {
		t.Fatalf("%d executes, %d packs; want 3 and 1", n, len(p.packs))
	}
	vp := dumpFake(t, l).last(descVariantPack)
	uids, ptrs := vp.ints(int(attrVariantPackUniqueIDs)), vp.attrs[int(attrVariantPackDataPointers)]
	bound := g.bound()
	if len(uids) != len(bound) || len(ptrs) != len(bound) {
		t.Fatalf("%d uids, %d pointers for %d bound tensors", len(uids), len(ptrs), len(bound))
	}
	for i, x := range bound {
		var want uintptr
		switch x.bind {
		case bindScalar:
			want = p.scalars.addr(8 * p.scalarAt[x])
		case bindWorkspace:
			want = key[bindWorkspace] + uintptr(x.wsOffset)
		default:
			want = key[x.bind]
		}
		if uids[i] != x.uid || ptrs[i] != fmt.Sprintf("0x%x", want) {
			t.Errorf("entry %d: uid %d at %s, want %s (uid %d) at 0x%x", i, uids[i], ptrs[i], x.name, x.uid, want)
		}
	}
	if ws := vp.attrs[int(attrVariantPackWorkspace)]; len(ws) != 1 || ws[0] != fmt.Sprintf("0x%x", key[bindWorkspace]+uintptr(g.workspace)) {
		t.Errorf("workspace %v, want after longca's %d bytes", ws, g.workspace)
	}
	key[bindDV] = 0
	if err := p.execute(h, key); err == nil || !strings.Contains(err.Error(), "tensor dV") {
		t.Errorf("missing dV: %v", err)
	}
}

// TestOpenAndVersion: a missing library and an old version are errors that say what to
// do; the SDPA operation is refused on a version without it.
func TestOpenAndVersion(t *testing.T) {
	if _, err := Open("libcudnn-not-here.so.9"); err == nil || !strings.Contains(err.Error(), "libcudnn-not-here.so.9") || !strings.Contains(err.Error(), "LD_LIBRARY_PATH") {
		t.Errorf("missing library: %v", err)
	}
	l := openFake(t, fakeLib)
	if l.Version() != 91400 || l.VersionString() != "9.14.0" || l.CheckVersion() != nil {
		t.Errorf("version %d %s: %v", l.Version(), l.VersionString(), l.CheckVersion())
	}
	for v, want := range map[string]string{"90500": "cudnn 9.5.0 is too old", "91001": "9.10.1 has known wrong results"} {
		t.Setenv("FAKE_CUDNN_VERSION", v)
		l, err := Open(fakeLib)
		if err != nil {
			t.Fatal(err)
		}
		if err := l.CheckVersion(); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("version %s: %v", v, err)
		}
	}
}

// TestBackwardGraphBefore910: cuDNN before 9.10 gets the padding mask again after the
// stats are subtracted, and the lowest float instead of -inf, as cudnn-frontend does.
func TestBackwardGraphBefore910(t *testing.T) {
	s := testSpecs()["bwd ragged causal gqa"]
	s.version = 90800
	g, err := buildGraph(s)
	if err != nil {
		t.Fatal(err)
	}
	ops := opsOf(g)
	i := slices.Index(ops, "sub_s_m:sub")
	if i < 0 || i+6 >= len(ops) || ops[i+1] != "padding2::row:gen_index" || ops[i+6] != "padding2::select:binary_select" {
		t.Fatalf("ops after sub_s_m: %v", ops[i:])
	}
	if x := g.find("padding2::-inf"); x.value != math.Float32bits(-math.MaxFloat32) {
		t.Errorf("masked value %v, want the lowest float", math.Float32frombits(x.value))
	}
}
