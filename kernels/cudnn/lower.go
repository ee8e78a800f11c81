package cudnn

import (
	"errors"
	"fmt"
	"math"
	"runtime"
	"strings"
	"unsafe"
)

// A plan is a graph lowered to cuDNN's backend: a finalized descriptor for every tensor
// and operation, the operation graph, the engine configurations the heuristics
// proposed, and the first execution plan that finalizes. Building one is slow (cuDNN may
// compile a kernel); executing it is one cudnnBackendExecute, and plans are cached.

// plan is a built execution plan and everything it holds.
type plan struct {
	lib  *Lib
	g    *graph
	spec spec

	descs    []desc // every descriptor made, destroyed together
	tensors  map[*operand]desc
	opGraph  desc
	execPlan desc

	// engine is the global index of the engine that runs the plan, engines the number
	// of configurations the heuristics returned, tried the ones tried before it.
	engine, engines, tried int
	// workspace is cuDNN's workspace bytes (longca's part, g.workspace, comes first).
	workspace int64
	// scalars holds the by-value scalars the variant pack points at.
	scalars  cmem
	scalarAt map[*operand]int

	log []string

	packs map[packKey]*variantPack
}

// BuildError is a plan that did not build: the graph, what failed, and every step
// logged before it (each descriptor finalized, the heuristics' answer, each engine
// tried).
type BuildError struct {
	Spec string
	Log  []string
	Err  error
}

func (e *BuildError) Error() string { return e.Spec + ": " + e.Err.Error() }

func (e *BuildError) Unwrap() error { return e.Err }

func (p *plan) logf(format string, args ...any) { p.log = append(p.log, fmt.Sprintf(format, args...)) }

// Log is the plan's build log.
func (p *plan) Log() string { return strings.Join(p.log, "\n") }

// buildPlan lowers g (built from s) and finds an engine for it. handle must belong to
// the device whose context is current (the caller runs it under Device.Do).
func buildPlan(lib *Lib, handle uintptr, g *graph, s spec) (*plan, error) {
	runtime.LockOSThread() // cuDNN's last-error string is per thread
	defer runtime.UnlockOSThread()
	p := &plan{lib: lib, g: g, spec: s, tensors: map[*operand]desc{}, scalarAt: map[*operand]int{}, packs: map[packKey]*variantPack{}}
	p.logf("build %s", s)
	if err := p.build(handle); err != nil {
		p.logf("FAILED: %v", err)
		p.destroy()
		return nil, &BuildError{Spec: s.String(), Log: p.log, Err: err}
	}
	p.logf("plan ready: engine %d (config %d of %d), workspace %d + %d bytes", p.engine, p.tried, p.engines, g.workspace, p.workspace)
	return p, nil
}

func (p *plan) build(handle uintptr) error {
	if err := p.makeScalars(); err != nil {
		return err
	}
	for _, t := range p.g.tensors {
		if err := p.tensorDesc(t); err != nil {
			return err
		}
	}
	p.logf("%d tensors finalized", len(p.g.tensors))
	ops := make([]desc, 0, len(p.g.ops))
	for _, o := range p.g.ops {
		d, err := p.opDesc(o)
		if err != nil {
			return fmt.Errorf("op %s: %w", o.name, err)
		}
		ops = append(ops, d)
	}
	p.logf("%d operations finalized", len(ops))
	og, err := p.create(descOperationGraph)
	if err != nil {
		return err
	}
	p.opGraph = og
	if err := p.setDescs(og, attrOperationGraphOps, ops, "operation graph"); err != nil {
		return err
	}
	if err := p.setHandle(og, attrOperationGraphHandle, handle, "operation graph"); err != nil {
		return err
	}
	if err := p.finalize(og, "operation graph"); err != nil {
		return err
	}
	cfgs, err := p.heuristics()
	if err != nil {
		return err
	}
	var errs []error
	for i, cfg := range cfgs {
		if err := p.tryConfig(handle, cfg, i, len(cfgs)); err != nil {
			errs = append(errs, err)
			continue
		}
		return nil
	}
	if len(cfgs) == 0 {
		return fmt.Errorf("cudnn %s: the heuristics found no engine for this graph", p.lib.VersionString())
	}
	return fmt.Errorf("no engine configuration finalized (%d tried): %w", len(cfgs), errors.Join(errs...))
}

func (p *plan) create(t descType) (desc, error) {
	d, err := p.lib.createDescriptor(t)
	if err != nil {
		return 0, err
	}
	p.descs = append(p.descs, d)
	return d, nil
}

func (p *plan) finalize(d desc, what string) error {
	if err := p.lib.finalizeDescriptor(d, what); err != nil {
		p.logf("finalize %s: %v", what, err)
		return err
	}
	return nil
}

func (p *plan) destroy() {
	for i := len(p.descs) - 1; i >= 0; i-- {
		p.lib.destroyDescriptor(p.descs[i])
	}
	p.descs = nil
	for _, vp := range p.packs {
		vp.mem.free()
	}
	p.packs = nil
	if p.scalars.p != nil {
		p.scalars.free()
		p.scalars = cmem{}
	}
}

// The typed attribute setters. Values go through Go memory holding no Go pointers.

func (p *plan) setInt64s(d desc, name attrName, vals []int64, what string) error {
	return p.lib.setRaw(d, name, typeInt64, len(vals), unsafe.Pointer(&vals[0]), what)
}

func (p *plan) setEnum(d desc, name attrName, t attrType, v int32, what string) error {
	return p.lib.setRaw(d, name, t, 1, unsafe.Pointer(&v), what)
}

func (p *plan) setBool(d desc, name attrName, v bool, what string) error {
	b := uint8(0)
	if v {
		b = 1
	}
	return p.lib.setRaw(d, name, typeBoolean, 1, unsafe.Pointer(&b), what)
}

func (p *plan) setFloat(d desc, name attrName, v float32, what string) error {
	return p.lib.setRaw(d, name, typeFloat, 1, unsafe.Pointer(&v), what)
}

func (p *plan) setDescs(d desc, name attrName, ds []desc, what string) error {
	return p.lib.setRaw(d, name, typeBackendDescriptor, len(ds), unsafe.Pointer(&ds[0]), what)
}

func (p *plan) setHandle(d desc, name attrName, h uintptr, what string) error {
	return p.lib.setRaw(d, name, typeHandle, 1, unsafe.Pointer(&h), what)
}

// makeScalars lays the by-value scalars out in C memory, 8 bytes each.
func (p *plan) makeScalars() error {
	n := 0
	for _, t := range p.g.tensors {
		if t.byValue {
			p.scalarAt[t] = n
			n++
		}
	}
	p.scalars = newCMem(8 * n)
	for t, i := range p.scalarAt {
		*(*uint32)(p.scalars.ptr(8 * i)) = t.value
	}
	return nil
}

// tensorDesc makes and finalizes t's descriptor: type, dims, strides, uid, 16-byte
// alignment, virtual or by-value flags, ragged offsets.
func (p *plan) tensorDesc(t *operand) error {
	what := "tensor " + t.name
	d, err := p.create(descTensor)
	if err != nil {
		return err
	}
	if len(t.dims) == 0 || len(t.dims) != len(t.strides) {
		return fmt.Errorf("%s: dims %v and strides %v", what, t.dims, t.strides)
	}
	steps := []func() error{
		func() error { return p.setEnum(d, attrTensorDataType, typeDataType, int32(t.dt), what) },
		func() error { return p.setInt64s(d, attrTensorDimensions, t.dims, what) },
		func() error { return p.setInt64s(d, attrTensorStrides, t.strides, what) },
		func() error { return p.setInt64s(d, attrTensorUniqueID, []int64{t.uid}, what) },
		func() error { return p.setInt64s(d, attrTensorByteAlignment, []int64{16}, what) },
	}
	for _, f := range steps {
		if err := f(); err != nil {
			return err
		}
	}
	if t.virtual {
		if err := p.setBool(d, attrTensorIsVirtual, true, what); err != nil {
			return err
		}
	}
	if t.byValue {
		if err := p.setBool(d, attrTensorIsByValue, true, what); err != nil {
			return err
		}
	}
	if t.ragged != nil {
		rd, ok := p.tensors[t.ragged]
		if !ok {
			return fmt.Errorf("%s: its ragged offsets %s come later in the graph", what, t.ragged.name)
		}
		if err := p.setDescs(d, attrTensorRaggedOffset, []desc{rd}, what); err != nil {
			return err
		}
	}
	if err := p.finalize(d, what); err != nil {
		return fmt.Errorf("%s (uid %d, %s %v strides %v): %w", what, t.uid, t.dt, t.dims, t.strides, err)
	}
	p.tensors[t] = d
	return nil
}

// opDesc makes and finalizes an operation (and its matmul, pointwise or reduction
// descriptor).
func (p *plan) opDesc(o *op) (desc, error) {
	td := func(t *operand) desc { return p.tensors[t] }
	switch o.kind {
	case opPointwise:
		pw, err := p.create(descPointwise)
		if err != nil {
			return 0, err
		}
		what := "pointwise " + o.name
		if err := p.setEnum(pw, attrPointwiseMode, typePointwiseMode, int32(o.pw), what); err != nil {
			return 0, err
		}
		if err := p.setEnum(pw, attrPointwiseMathPrec, typeDataType, int32(o.comp), what); err != nil {
			return 0, err
		}
		if o.pw == pwGenIndex {
			if err := p.setInt64s(pw, attrPointwiseAxis, []int64{o.axis}, what); err != nil {
				return 0, err
			}
		}
		if err := p.finalize(pw, what); err != nil {
			return 0, err
		}
		d, err := p.create(descOpPointwise)
		if err != nil {
			return 0, err
		}
		what = "pointwise operation " + o.name
		ports := []struct {
			name attrName
			t    *operand
		}{{attrOpPointwiseXDesc, o.in[0]}, {attrOpPointwiseYDesc, o.out[0]}}
		if len(o.in) > 1 {
			ports = append(ports, struct {
				name attrName
				t    *operand
			}{attrOpPointwiseBDesc, o.in[1]})
		}
		if len(o.in) > 2 {
			ports = append(ports, struct {
				name attrName
				t    *operand
			}{attrOpPointwiseTDesc, o.in[2]})
		}
		if err := p.setDescs(d, attrOpPointwisePWDescriptor, []desc{pw}, what); err != nil {
			return 0, err
		}
		for _, port := range ports {
			if err := p.setDescs(d, port.name, []desc{td(port.t)}, what); err != nil {
				return 0, err
			}
		}
		if err := p.setFloat(d, attrOpPointwiseAlpha1, 1, what); err != nil {
			return 0, err
		}
		if err := p.setFloat(d, attrOpPointwiseAlpha2, 1, what); err != nil {
			return 0, err
		}
		return d, p.finalize(d, what)
	case opMatmul:
		mm, err := p.create(descMatmul)
		if err != nil {
			return 0, err
		}
		what := "matmul " + o.name
		if err := p.setEnum(mm, attrMatmulCompType, typeDataType, int32(o.comp), what); err != nil {
			return 0, err
		}
		if err := p.finalize(mm, what); err != nil {
			return 0, err
		}
		d, err := p.create(descOpMatmul)
		if err != nil {
			return 0, err
		}
		what = "matmul operation " + o.name
		for _, a := range []struct {
			name attrName
			d    desc
		}{{attrOpMatmulADesc, td(o.in[0])}, {attrOpMatmulBDesc, td(o.in[1])}, {attrOpMatmulCDesc, td(o.out[0])}, {attrOpMatmulDesc, mm}} {
			if err := p.setDescs(d, a.name, []desc{a.d}, what); err != nil {
				return 0, err
			}
		}
		for _, ov := range []struct {
			name attrName
			t    *operand
		}{{attrOpMatmulMOverride, o.mOverride}, {attrOpMatmulNOverride, o.nOverride}, {attrOpMatmulKOverride, o.kOverride}} {
			if ov.t != nil {
				if err := p.setDescs(d, ov.name, []desc{td(ov.t)}, what); err != nil {
					return 0, err
				}
			}
		}
		return d, p.finalize(d, what)
	case opReduction:
		rd, err := p.create(descReduction)
		if err != nil {
			return 0, err
		}
		what := "reduction " + o.name
		if err := p.setEnum(rd, attrReductionCompType, typeDataType, int32(o.comp), what); err != nil {
			return 0, err
		}
		if err := p.setEnum(rd, attrReductionOperator, typeReductionOperator, int32(o.red), what); err != nil {
			return 0, err
		}
		if p.lib.version >= 91100 {
			if err := p.setBool(rd, attrReductionIsDeterministic, false, what); err != nil {
				return 0, err
			}
		}
		if err := p.finalize(rd, what); err != nil {
			return 0, err
		}
		d, err := p.create(descOpReduction)
		if err != nil {
			return 0, err
		}
		what = "reduction operation " + o.name
		for _, a := range []struct {
			name attrName
			d    desc
		}{{attrOpReductionDesc, rd}, {attrOpReductionXDesc, td(o.in[0])}, {attrOpReductionYDesc, td(o.out[0])}} {
			if err := p.setDescs(d, a.name, []desc{a.d}, what); err != nil {
				return 0, err
			}
		}
		return d, p.finalize(d, what)
	case opReshape:
		d, err := p.create(descOpReshape)
		if err != nil {
			return 0, err
		}
		what := "reshape operation " + o.name
		if err := p.setDescs(d, attrOpReshapeXDesc, []desc{td(o.in[0])}, what); err != nil {
			return 0, err
		}
		if err := p.setDescs(d, attrOpReshapeYDesc, []desc{td(o.out[0])}, what); err != nil {
			return 0, err
		}
		return d, p.finalize(d, what)
	case opSDPAForward:
		d, err := p.create(descOpSDPAForward)
		if err != nil {
			return 0, err
		}
		what := "SDPA forward operation"
		for _, a := range []struct {
			name attrName
			t    *operand
		}{{attrSDPAFwdQDesc, o.in[0]}, {attrSDPAFwdKDesc, o.in[1]}, {attrSDPAFwdVDesc, o.in[2]},
			{attrSDPAFwdODesc, o.out[0]}, {attrSDPAFwdStatsDesc, o.out[1]}, {attrSDPAFwdScaleDesc, o.in[3]}} {
			if err := p.setDescs(d, a.name, []desc{td(a.t)}, what); err != nil {
				return 0, err
			}
		}
		return d, p.finalize(d, what)
	}
	return 0, fmt.Errorf("unknown operation kind %d", o.kind)
}

// heuristics asks for engine configurations: mode A, then the fallback list when mode A
// has none. Each count is logged (the first thing to read when a graph is refused).
func (p *plan) heuristics() ([]desc, error) {
	var out []desc
	for _, mode := range []heurMode{heurModeA, heurModeFallback} {
		h, err := p.create(descEngineHeur)
		if err != nil {
			return nil, err
		}
		what := fmt.Sprintf("engine heuristics (mode %d)", mode)
		if err := p.setDescs(h, attrEngineHeurOperationGraph, []desc{p.opGraph}, what); err != nil {
			return nil, err
		}
		if err := p.setEnum(h, attrEngineHeurMode, typeHeurMode, int32(mode), what); err != nil {
			return nil, err
		}
		if err := p.finalize(h, what); err != nil {
			p.logf("%s refused the graph", what)
			continue
		}
		n, err := p.lib.getRaw(h, attrEngineHeurResults, typeBackendDescriptor, 0, nil, what)
		if err != nil {
			return nil, err
		}
		p.logf("%s: %d engine configurations", what, n)
		if n == 0 {
			continue
		}
		cfgs := make([]desc, n)
		for i := range cfgs {
			if cfgs[i], err = p.create(descEngineCfg); err != nil {
				return nil, err
			}
		}
		got, err := p.lib.getRaw(h, attrEngineHeurResults, typeBackendDescriptor, n, unsafe.Pointer(&cfgs[0]), what)
		if err != nil {
			return nil, err
		}
		out = append(out, cfgs[:min(got, n)]...)
		break
	}
	p.engines = len(out)
	return out, nil
}

// tryConfig builds the execution plan of one engine configuration.
func (p *plan) tryConfig(handle uintptr, cfg desc, i, n int) error {
	engine := -1
	if e, err := p.create(descEngine); err == nil {
		if _, err := p.lib.getRaw(cfg, attrEngineCfgEngine, typeBackendDescriptor, 1, unsafe.Pointer(&e), "engine config"); err == nil {
			var idx int64
			if _, err := p.lib.getRaw(e, attrEngineGlobalIndex, typeInt64, 1, unsafe.Pointer(&idx), "engine"); err == nil {
				engine = int(idx)
			}
		}
	}
	what := fmt.Sprintf("execution plan (engine %d, config %d of %d)", engine, i+1, n)
	ep, err := p.create(descExecutionPlan)
	if err != nil {
		return err
	}
	if err := p.setHandle(ep, attrExecutionPlanHandle, handle, what); err != nil {
		return err
	}
	if err := p.setDescs(ep, attrExecutionPlanEngineConfig, []desc{cfg}, what); err != nil {
		return err
	}
	if err := p.finalize(ep, what); err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	var ws int64
	if _, err := p.lib.getRaw(ep, attrExecutionPlanWorkspaceSize, typeInt64, 1, unsafe.Pointer(&ws), what); err != nil {
		return err
	}
	if ws < 0 || ws > math.MaxInt64/4 {
		return fmt.Errorf("%s: workspace size %d", what, ws)
	}
	p.execPlan, p.engine, p.tried, p.workspace = ep, engine, i+1, ws
	if js := p.planJSON(ep); js != "" {
		p.logf("plan JSON: %s", js)
	}
	return nil
}

// planJSON is the plan's JSON description (engine and knobs), best effort.
func (p *plan) planJSON(ep desc) string {
	m := newCMem(8192)
	defer m.free()
	n, err := p.lib.getRaw(ep, attrExecutionPlanJSON, typeChar, 8191, m.p, "execution plan")
	if err != nil || n <= 0 {
		return ""
	}
	s := cString(m.p)
	if len(s) > 400 {
		s = s[:400] + "..."
	}
	return s
}

// packKey is the memory a variant pack points at: one address per binding (the
// workspace's base at bindWorkspace).
type packKey [bindCount]uintptr

// variantPack is a finalized variant pack and the C memory of its arrays.
type variantPack struct {
	d   desc
	mem cmem
}

// maxPacks bounds the variant packs kept per plan (one per set of buffers seen).
const maxPacks = 64

// pack returns the variant pack for the addresses in key, making it on first use.
func (p *plan) pack(key packKey) (*variantPack, error) {
	if vp, ok := p.packs[key]; ok {
		return vp, nil
	}
	if len(p.packs) >= maxPacks {
		for k, vp := range p.packs {
			p.lib.destroyDescriptor(vp.d)
			vp.mem.free()
			delete(p.packs, k)
		}
	}
	bound := p.g.bound()
	mem := newCMem(16*len(bound) + 8) // uids, pointers, then the workspace address
	uids := unsafe.Slice((*int64)(mem.p), len(bound))
	ptrs := unsafe.Slice((*uintptr)(mem.ptr(8*len(bound))), len(bound))
	for i, t := range bound {
		uids[i] = t.uid
		switch t.bind {
		case bindScalar:
			ptrs[i] = p.scalars.addr(8 * p.scalarAt[t])
		case bindWorkspace:
			ptrs[i] = key[bindWorkspace] + uintptr(t.wsOffset)
		default:
			ptrs[i] = key[t.bind]
		}
		if ptrs[i] == 0 {
			mem.free()
			return nil, fmt.Errorf("cudnn: no memory given for tensor %s (%s)", t.name, t.bind)
		}
	}
	d, err := p.lib.createDescriptor(descVariantPack)
	if err != nil {
		mem.free()
		return nil, err
	}
	fail := func(err error) (*variantPack, error) {
		p.lib.destroyDescriptor(d)
		mem.free()
		return nil, err
	}
	if err := p.lib.setRaw(d, attrVariantPackUniqueIDs, typeInt64, len(bound), mem.p, "variant pack"); err != nil {
		return fail(err)
	}
	if err := p.lib.setRaw(d, attrVariantPackDataPointers, typeVoidPtr, len(bound), mem.ptr(8*len(bound)), "variant pack"); err != nil {
		return fail(err)
	}
	ws := (*uintptr)(mem.ptr(16 * len(bound)))
	if p.g.workspace+p.workspace > 0 {
		*ws = key[bindWorkspace] + uintptr(p.g.workspace)
	}
	if err := p.lib.setRaw(d, attrVariantPackWorkspace, typeVoidPtr, 1, unsafe.Pointer(ws), "variant pack"); err != nil {
		return fail(err)
	}
	if err := p.lib.finalizeDescriptor(d, "variant pack"); err != nil {
		return fail(err)
	}
	vp := &variantPack{d: d, mem: mem}
	p.packs[key] = vp
	return vp, nil
}

// execute runs the plan on the handle's stream with the memory in key; the workspace at
// key[bindWorkspace] holds at least workspaceBytes().
func (p *plan) execute(handle uintptr, key packKey) error {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	vp, err := p.pack(key)
	if err != nil {
		return err
	}
	return p.lib.executeRaw(handle, p.execPlan, vp.d)
}

// workspaceBytes is longca's and cuDNN's workspace together.
func (p *plan) workspaceBytes() int64 { return p.g.workspace + p.workspace }
