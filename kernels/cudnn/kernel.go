// Package cudnn is the "cudnn" kernel: cuDNN's fused attention driven through its backend
// API, with libcudnn.so.9 opened by dlopen and its types and enum values declared here
// (no cuDNN headers at build time). The forward is the SDPA forward operation where the
// installed cuDNN has it and the mask is full, otherwise the composite operation graph;
// the backward is the composite graph cudnn-frontend builds for Hopper. Any mask is cut
// into pieces cuDNN accepts (cut.go); plans are built once per shape and mask and
// cached, so a timed call only executes.
package cudnn

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"math"
	"slices"
	"sort"
	"strings"
	"sync"

	"github.com/longca/longca/internal/cuda"
	"github.com/longca/longca/kernels"
	"github.com/longca/longca/mask"
	"github.com/longca/longca/tensor"
)

// Variants are the kernel's variants (the Variant option): auto takes the SDPA forward
// operation for full masks where cuDNN has it and the composite graph otherwise;
// composite always builds the composite graph; sdpa-op insists on the operation for
// full masks (and refuses the case where it cannot be built).
var Variants = []string{"auto", "composite", "sdpa-op"}

func init() {
	kernels.RegisterVariants("cudnn", []string{
		"auto: the SDPA forward operation for full masks where cuDNN has it (9.13.1+), the composite graph otherwise (default)",
		"composite: always the composite operation graph",
		"sdpa-op: the SDPA forward operation for full masks, or unsupported",
	})
	kernels.Register("cudnn", "cuDNN's fused attention (backend API, libcudnn.so.9 by dlopen): SDPA forward operation or composite graph, composite backward; any mask cut into full/causal/band pieces; bf16/fp16, head dim 64/128", func(o kernels.Options) (kernels.Kernel, error) {
		if o.Device < 0 {
			return nil, fmt.Errorf("cudnn: device index %d must not be negative (--device)", o.Device)
		}
		variant, err := parseVariant(o.Variant)
		if err != nil {
			return nil, err
		}
		lib, err := Open()
		if err != nil {
			return nil, err
		}
		if err := lib.CheckVersion(); err != nil {
			return nil, err
		}
		g, err := cuda.Open(o.Device)
		if err != nil {
			return nil, fmt.Errorf("cudnn %s: %w", lib.VersionString(), err)
		}
		return New(lib, g, variant)
	})
}

func parseVariant(v string) (string, error) {
	if v == "" {
		return "auto", nil
	}
	for _, x := range Variants {
		if v == x {
			return v, nil
		}
	}
	return "", fmt.Errorf("cudnn: variant %q: use %s (--variant)", v, strings.Join(Variants, ", "))
}

// Kernel is the "cudnn" kernel on one device.
type Kernel struct {
	lib     *Lib
	dev     *cuda.Device
	handle  uintptr
	variant string

	// BuildLog, when set, receives the log of every plan built (each descriptor's
	// finalize, the heuristics' engine count, each engine tried): the GPU tests print it.
	BuildLog func(string)

	// mu serialises everything: cuDNN handles are not thread safe, and simulated
	// context-parallel ranks share one kernel.
	mu       sync.Mutex
	problems map[uint64]*problemPlan
	last     *problemPlan // the problem of the latest call
	plans    map[spec]planEntry
	help     *helpers
	scratch  *cuda.ScratchPool
}

var _ kernels.Kernel = (*Kernel)(nil)
var _ kernels.Describer = (*Kernel)(nil)
var _ kernels.CallCounter = (*Kernel)(nil)

// New makes the kernel on device g with cuDNN lib (variant auto, composite or sdpa-op).
func New(lib *Lib, g *cuda.Device, variant string) (*Kernel, error) {
	variant, err := parseVariant(variant)
	if err != nil {
		return nil, err
	}
	// cuDNN's runtime-compiled engines open NVRTC by its soname; opening it first, by
	// the paths longca knows, lets them find it where it is not on the loader's path.
	_, _, _ = cuda.NVRTCVersion()
	k := &Kernel{lib: lib, dev: g, variant: variant, problems: map[uint64]*problemPlan{}, plans: map[spec]planEntry{},
		scratch: cuda.NewScratchPool(g)}
	err = g.Do(func() error {
		h, err := lib.NewHandle()
		if err != nil {
			return err
		}
		k.handle = h
		return lib.SetStream(h, uintptr(g.Stream()))
	})
	if err != nil {
		return nil, err
	}
	return k, nil
}

// Name is "cudnn".
func (k *Kernel) Name() string { return "cudnn" }

// Device is the GPU the kernel runs on.
func (k *Kernel) Device() tensor.Device { return k.dev }

// CUDADevice is the GPU as its concrete type: the context-parallel methods run their
// buffers on it.
func (k *Kernel) CUDADevice() *cuda.Device { return k.dev }

// FP32Partials is false: cuDNN writes outputs and gradients in the problem's type.
func (k *Kernel) FP32Partials() bool { return false }

// Calls implements kernels.CallCounter: the calls of cuDNN's attention mask m is cut
// into (Calls; more than MaxCalls is a mask Supports refuses).
func (k *Kernel) Calls(m mask.Mask) (int, error) { return Calls(m) }

// Lib is the cuDNN library the kernel drives.
func (k *Kernel) Lib() *Lib { return k.lib }

// Supports accepts bf16 and fp16 at head dim 64 or 128 with one mask for every head,
// cut into at most MaxCalls calls.
func (k *Kernel) Supports(p kernels.Problem) error {
	if err := p.Validate(); err != nil {
		return err
	}
	v := k.lib.VersionString()
	switch {
	case len(p.HeadMasks) > 0:
		return fmt.Errorf("cudnn %s: per-head block-sparse masks are not supported", v)
	case p.DType != tensor.BF16 && p.DType != tensor.FP16:
		return fmt.Errorf("cudnn %s kernel takes bf16 or fp16, not %s (--dtype)", v, p.DType)
	case p.HeadDim != 64 && p.HeadDim != 128:
		return fmt.Errorf("cudnn %s kernel takes head dim 64 or 128, not %d (--head-dim)", v, p.HeadDim)
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	pp := k.problem(p)
	if pp.cutErr != nil {
		return fmt.Errorf("cudnn %s: %w", v, pp.cutErr)
	}
	return nil
}

// planEntry is a cached plan, or why it did not build.
type planEntry struct {
	p   *plan
	err error
}

// callPlan is one call of a problem in one pass: its plan and, for the ragged layout,
// its device arrays.
type callPlan struct {
	plan *plan
	spec spec
	arr  *raggedArrays
	// fallback says why the SDPA operation was not used, when it was tried.
	fallback string
}

// raggedArrays are a call's per-entry lengths and offsets on the device.
type raggedArrays struct {
	seqQ, seqKV, offQ, offKV, offStats *cuda.Buffer
}

// problemPlan is everything built for one problem: its cut and each pass's calls.
type problemPlan struct {
	p      kernels.Problem
	cut    *cut
	cutErr error
	arrays map[int]*raggedArrays // by call
	passes map[bool][]callPlan   // by backward
	errs   map[bool]error
}

// maxProblems bounds the problems kept (their plans stay in k.plans).
const maxProblems = 512

// problemKey hashes what a problem's cut and plans depend on.
func problemKey(p kernels.Problem) uint64 {
	h := fnv.New64a()
	fmt.Fprintf(h, "%d %d %d %d %d %d %g|", p.Mask.SeqQ, p.Mask.SeqK, p.HeadsQ, p.HeadsKV, p.HeadDim, p.DType, p.SoftmaxScale())
	for _, s := range p.Mask.Slices {
		fmt.Fprintf(h, "%d,%d,%d,%d,%d;", s.Q.Start, s.Q.End, s.K.Start, s.K.End, s.Kind)
	}
	return h.Sum64()
}

// sameProblem says whether two problems have the same shape, scale and mask.
func sameProblem(a, b kernels.Problem) bool {
	return a.Mask.SeqQ == b.Mask.SeqQ && a.Mask.SeqK == b.Mask.SeqK && a.HeadsQ == b.HeadsQ && a.HeadsKV == b.HeadsKV &&
		a.HeadDim == b.HeadDim && a.DType == b.DType && a.SoftmaxScale() == b.SoftmaxScale() && slices.Equal(a.Mask.Slices, b.Mask.Slices)
}

// problem finds or cuts p (k.mu held). A timed loop passes the same problem again and
// again: the last one is compared first, without hashing the mask.
func (k *Kernel) problem(p kernels.Problem) *problemPlan {
	if k.last != nil && sameProblem(k.last.p, p) {
		return k.last
	}
	key := problemKey(p)
	if pp, ok := k.problems[key]; ok && sameProblem(pp.p, p) {
		k.last = pp
		return pp
	}
	if len(k.problems) >= maxProblems {
		k.dropProblems()
	}
	p.Mask.Slices = slices.Clone(p.Mask.Slices) // kept to compare with later problems
	pp := &problemPlan{p: p, arrays: map[int]*raggedArrays{}, passes: map[bool][]callPlan{}, errs: map[bool]error{}}
	pp.cut, pp.cutErr = cutMask(p.Mask)
	k.problems[key] = pp
	k.last = pp
	return pp
}

// dropProblems frees every problem's device arrays (after the work that reads them).
func (k *Kernel) dropProblems() {
	_ = k.dev.Sync()
	for _, pp := range k.problems {
		for _, a := range pp.arrays {
			for _, b := range []*cuda.Buffer{a.seqQ, a.seqKV, a.offQ, a.offKV, a.offStats} {
				k.dev.Free(b)
			}
		}
	}
	k.problems = map[uint64]*problemPlan{}
	k.last = nil
}

// ioType is cuDNN's type for a longca dtype.
func ioType(dt tensor.DType) dataType {
	if dt == tensor.FP16 {
		return dtHalf
	}
	return dtBF16
}

func roundUp(n, m int64) int64 { return (n + m - 1) / m * m }

func pow2(n int64) int64 {
	p := int64(1)
	for p < n {
		p *= 2
	}
	return p
}

// specFor is the graph of call i in one pass: dense when the call is one piece over the
// whole problem (and cuDNN takes it so), ragged otherwise, with the batch and the
// longest lengths padded to powers of two (lengths at least 64) so that steps and
// samples of similar shape share plans (each plan costs a build; the padding entries
// are empty, and the padded lengths cost only tiles that exit at once).
func (k *Kernel) specFor(pp *problemPlan, i int, backward bool) spec {
	p, c := pp.p, pp.cut
	cl := c.calls[i]
	s := spec{backward: backward, io: ioType(p.DType), hq: int64(p.HeadsQ), hk: int64(p.HeadsKV), d: int64(p.HeadDim),
		mask: cl.bounds, scale: float32(p.SoftmaxScale()), version: k.lib.version}
	if c.dense(i) {
		s.b, s.sq, s.sk = 1, int64(p.Mask.SeqQ), int64(p.Mask.SeqK)
		// cuDNN up to 9.15 needs the padded layout in the backward when s_kv is not a
		// multiple of 128 (cudnn-frontend's workaround).
		if (!backward || k.lib.version > 91500 || s.sk%128 == 0) && s.validate() == nil {
			return s
		}
	}
	var sq, sk int64
	for _, pc := range cl.pieces {
		sq, sk = max(sq, int64(pc.Q.Len())), max(sk, int64(pc.K.Len()))
	}
	s.ragged = true
	s.b, s.sq, s.sk = pow2(int64(len(cl.pieces))), pow2(max(sq, 64)), pow2(max(sk, 64))
	s.totalQ, s.totalKV = roundUp(int64(p.Mask.SeqQ), 128)+128, roundUp(int64(p.Mask.SeqK), 128)+128
	return s
}

// plan finds or builds the plan of s (k.mu held, under Device.Do).
func (k *Kernel) plan(s spec) (*plan, error) {
	if e, ok := k.plans[s]; ok {
		return e.p, e.err
	}
	g, err := buildGraph(s)
	var pl *plan
	if err == nil {
		pl, err = buildPlan(k.lib, k.handle, g, s)
	}
	if k.BuildLog != nil {
		if pl != nil {
			k.BuildLog(pl.Log())
		} else {
			var be *BuildError
			if errors.As(err, &be) {
				k.BuildLog(strings.Join(be.Log, "\n"))
			} else {
				k.BuildLog(fmt.Sprintf("build %s: %v", s, err))
			}
		}
	}
	k.plans[s] = planEntry{pl, err}
	return pl, err
}

// prepare builds (or finds) the calls of p for one pass (k.mu held).
func (k *Kernel) prepare(p kernels.Problem, backward bool) (*problemPlan, error) {
	pp := k.problem(p)
	if pp.cutErr != nil {
		return nil, kernels.Unsupported(fmt.Errorf("cudnn %s: %w", k.lib.VersionString(), pp.cutErr))
	}
	if _, ok := pp.passes[backward]; ok {
		return pp, pp.errs[backward]
	}
	var calls []callPlan
	err := k.dev.Do(func() error {
		if k.help == nil {
			h, err := newHelpers(k.dev)
			if err != nil {
				return err
			}
			k.help = h
		}
		for i := range pp.cut.calls {
			cp, err := k.callPlan(pp, i, backward)
			if err != nil {
				return err
			}
			calls = append(calls, cp)
		}
		return nil
	})
	if err != nil {
		var be *BuildError
		if errors.As(err, &be) || isUnsupported(err) {
			err = kernels.Unsupported(err)
		}
		calls = nil
	}
	pp.passes[backward], pp.errs[backward] = calls, err
	return pp, err
}

func isUnsupported(err error) bool {
	var e *Error
	return errors.As(err, &e) && e.NotSupported()
}

// callPlan builds call i's plan for one pass: the SDPA operation first where the variant
// allows and the call is a dense full forward, the composite graph otherwise.
func (k *Kernel) callPlan(pp *problemPlan, i int, backward bool) (callPlan, error) {
	s := k.specFor(pp, i, backward)
	cp := callPlan{spec: s}
	if !backward && !s.ragged && !s.mask.Right && !s.mask.Left && k.variant != "composite" {
		u := s
		u.unified = true
		pl, err := k.plan(u)
		switch {
		case err == nil:
			cp.plan, cp.spec = pl, u
			return cp, nil
		case k.variant == "sdpa-op":
			return cp, err
		}
		cp.fallback = err.Error()
	}
	pl, err := k.plan(s)
	if err != nil {
		return cp, err
	}
	cp.plan = pl
	if s.ragged {
		a, err := k.arrays(pp, i, s)
		if err != nil {
			return cp, err
		}
		cp.arr = a
	}
	return cp, nil
}

// arrays uploads call i's lengths and offsets (once per problem and call).
func (k *Kernel) arrays(pp *problemPlan, i int, s spec) (*raggedArrays, error) {
	if a, ok := pp.arrays[i]; ok {
		return a, nil
	}
	h := raggedHost(pp.p, pp.cut.calls[i].pieces, s.b)
	a := &raggedArrays{}
	var err error
	if a.seqQ, err = k.upload(int32Bytes(h.seqQ)); err == nil {
		if a.seqKV, err = k.upload(int32Bytes(h.seqKV)); err == nil {
			if a.offQ, err = k.upload(int64Bytes(h.offQ)); err == nil {
				if a.offKV, err = k.upload(int64Bytes(h.offKV)); err == nil {
					a.offStats, err = k.upload(int64Bytes(h.offStats))
				}
			}
		}
	}
	if err != nil {
		return nil, err
	}
	pp.arrays[i] = a
	return a, nil
}

// raggedValues are a call's per-entry lengths and offsets on the host.
type raggedValues struct {
	seqQ, seqKV           []int32
	offQ, offKV, offStats []int64
}

// raggedHost lays b batch entries out: entry e < len(pieces) is piece e (its lengths,
// and its first element in Q/O/dO/dQ, K/V/dK/dV and the packed stats); the entries
// after are empty and start where the last piece ends, as does the closing offset.
func raggedHost(p kernels.Problem, pieces []piece, b int64) raggedValues {
	n := int(b)
	v := raggedValues{seqQ: make([]int32, n), seqKV: make([]int32, n), offQ: make([]int64, n+1), offKV: make([]int64, n+1), offStats: make([]int64, n+1)}
	hq, hk, d := int64(p.HeadsQ), int64(p.HeadsKV), int64(p.HeadDim)
	endQ, endK := int64(pieces[len(pieces)-1].Q.End), int64(pieces[len(pieces)-1].K.End)
	for e := 0; e <= n; e++ {
		qs, ks := endQ, endK
		if e < len(pieces) {
			pc := pieces[e]
			v.seqQ[e], v.seqKV[e] = int32(pc.Q.Len()), int32(pc.K.Len())
			qs, ks = int64(pc.Q.Start), int64(pc.K.Start)
		}
		v.offQ[e], v.offKV[e], v.offStats[e] = qs*hq*d, ks*hk*d, qs*hq
	}
	return v
}

func int32Bytes(v []int32) []byte {
	out := make([]byte, 4*len(v))
	for i, x := range v {
		u := uint32(x)
		out[4*i], out[4*i+1], out[4*i+2], out[4*i+3] = byte(u), byte(u>>8), byte(u>>16), byte(u>>24)
	}
	return out
}

func int64Bytes(v []int64) []byte {
	out := make([]byte, 8*len(v))
	for i, x := range v {
		u := uint64(x)
		for j := range 8 {
			out[8*i+j] = byte(u >> (8 * j))
		}
	}
	return out
}

// upload copies raw bytes (a multiple of 4) to a new device buffer.
func (k *Kernel) upload(b []byte) (*cuda.Buffer, error) {
	buf, err := k.dev.AllocBuffer(tensor.FP32, len(b)/4)
	if err != nil {
		return nil, err
	}
	h := tensor.NewHost(tensor.FP32, len(b)/4)
	copy(h.Data, b)
	if err := k.dev.CopyIn(buf, h); err != nil {
		k.dev.Free(buf)
		return nil, err
	}
	return buf, nil
}

// scratchBuf is the kernel's device buffer of a role with at least n elements of dt
// (internal/cuda's ScratchPool: one per role, grown when a larger problem comes).
func (k *Kernel) scratchBuf(role string, dt tensor.DType, n int) (*cuda.Buffer, error) {
	b, err := k.scratch.Get(role, dt, n)
	if err != nil {
		return nil, oomOr(fmt.Errorf("cudnn: %w", err))
	}
	return b, nil
}

// oomOr marks an out-of-memory error as such.
func oomOr(err error) error {
	var ce *cuda.Error
	var de *Error
	if (errors.As(err, &ce) && ce.OutOfMemory()) || (errors.As(err, &de) && de.OutOfMemory()) {
		return kernels.OOM(err)
	}
	return err
}

// Describe names the implementation and engines that serve the problem: e.g.
// "fwd sdpa-op eng=3 dense; bwd composite eng=8 dense" (building the plans if needed),
// with the cuDNN version.
func (k *Kernel) Describe(p kernels.Problem, pass kernels.Pass) kernels.Info {
	info := kernels.Info{Versions: map[string]string{"cudnn": k.lib.VersionString()}}
	if k.Supports(p) != nil {
		return info
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	var parts []string
	for _, backward := range []bool{false, true} {
		if backward && pass == kernels.Fwd {
			continue
		}
		pp, err := k.prepare(p, backward)
		if err != nil {
			return info
		}
		parts = append(parts, describeCalls(backward, pp.passes[backward]))
	}
	info.Variant = strings.Join(parts, "; ")
	return info
}

// describeCalls is one pass's implementation, engines and layout.
func describeCalls(backward bool, calls []callPlan) string {
	pass := "fwd"
	if backward {
		pass = "bwd"
	}
	impl := map[string]bool{}
	var engines, layouts []string
	for _, c := range calls {
		if c.spec.unified {
			impl["sdpa-op"] = true
		} else {
			impl["composite"] = true
		}
		engines = append(engines, fmt.Sprint(c.plan.engine))
		if c.spec.ragged {
			layouts = append(layouts, fmt.Sprintf("ragged b=%d", c.spec.b))
		} else {
			layouts = append(layouts, "dense")
		}
	}
	var names []string
	for n := range impl {
		names = append(names, n)
	}
	sort.Strings(names)
	s := fmt.Sprintf("%s %s eng=%s %s", pass, strings.Join(names, "+"), strings.Join(engines, ","), strings.Join(dedupe(layouts), ","))
	if len(calls) > 1 {
		s += fmt.Sprintf(" (%d calls)", len(calls))
	}
	return s
}

func dedupe(xs []string) []string {
	var out []string
	seen := map[string]bool{}
	for _, x := range xs {
		if !seen[x] {
			seen[x] = true
			out = append(out, x)
		}
	}
	return out
}

// bindings are the user tensors of a call, by what they are bound to.
type bindings [bindCount]*cuda.Buffer

// key is a call's variant pack memory: the tensors bound to it and the workspace.
func (cp callPlan) key(t *bindings, ws *cuda.Buffer) packKey {
	var key packKey
	for b, buf := range t {
		if buf != nil {
			key[b] = buf.DevicePtr()
		}
	}
	if cp.arr != nil {
		key[bindSeqQ], key[bindSeqKV] = cp.arr.seqQ.DevicePtr(), cp.arr.seqKV.DevicePtr()
		key[bindOffQ], key[bindOffKV], key[bindOffStats] = cp.arr.offQ.DevicePtr(), cp.arr.offKV.DevicePtr(), cp.arr.offStats.DevicePtr()
	}
	if ws != nil {
		key[bindWorkspace] = ws.DevicePtr()
	}
	return key
}

// workspace is a buffer of the largest workspace the calls need.
func (k *Kernel) workspace(calls []callPlan) (*cuda.Buffer, error) {
	var n int64
	for _, c := range calls {
		n = max(n, c.plan.workspaceBytes())
	}
	if n == 0 {
		return nil, nil
	}
	return k.scratchBuf("workspace", tensor.FP32, int((n+3)/4))
}

// fill sets every element of b to -inf (an fp32 buffer) or to zero bytes.
func (k *Kernel) fill(b *cuda.Buffer, negInf bool) error {
	if negInf {
		return k.dev.MemsetOn(k.dev.Stream(), b, 4, math.Float32bits(float32(math.Inf(-1))))
	}
	return k.dev.MemsetOn(k.dev.Stream(), b, 1, 0)
}

func (k *Kernel) execute(cp callPlan, t *bindings, ws *cuda.Buffer) error {
	if err := cp.plan.execute(k.handle, cp.key(t, ws)); err != nil {
		return oomOr(fmt.Errorf("cudnn: %s: %w", cp.spec, err))
	}
	return nil
}

// Forward writes out and lse.
func (k *Kernel) Forward(ctx context.Context, p kernels.Problem, q, kk, v, out, lse tensor.Tensor) error {
	if err := k.Supports(p); err != nil {
		return kernels.Unsupported(err)
	}
	bs, err := kernels.ForwardArgs[*cuda.Buffer]("cudnn", p, q, kk, v, out, lse)
	if err != nil {
		return err
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	pp, err := k.prepare(p, false)
	if err != nil {
		return err
	}
	calls := pp.passes[false]
	ws, err := k.workspace(calls)
	if err != nil {
		return err
	}
	return k.dev.Do(func() error { return k.forward(pp, calls, bs, ws) })
}

func (k *Kernel) forward(pp *problemPlan, calls []callPlan, bs []*cuda.Buffer, ws *cuda.Buffer) error {
	p, c := pp.p, pp.cut
	sq, hq, d := p.Mask.SeqQ, p.HeadsQ, p.HeadDim
	q, kk, v, out, lse := bs[0], bs[1], bs[2], bs[3], bs[4]
	t := &bindings{bindQ: q, bindK: kk, bindV: v}
	// run executes call i into o and the [heads, tokens] lse l (through the packed
	// stats scratch for the ragged layout, its uncovered rows -inf).
	single := len(calls) == 1
	run := func(cp callPlan, o, l *cuda.Buffer, fillOut bool) error {
		t[bindO] = o
		if fillOut {
			if err := k.fill(o, false); err != nil {
				return err
			}
		}
		if !cp.spec.ragged {
			t[bindStats] = l
			return k.execute(cp, t, ws)
		}
		thd, err := k.scratchBuf("stats_tokens", tensor.FP32, sq*hq)
		if err != nil {
			return err
		}
		if !single || !c.coveredQ { // rows this call does not write stay -inf
			if err := k.fill(thd, true); err != nil {
				return err
			}
		}
		t[bindStats] = thd
		if err := k.execute(cp, t, ws); err != nil {
			return err
		}
		return k.help.lseToHeads(thd, l, sq, hq)
	}
	if single {
		return run(calls[0], out, lse, !c.coveredQ)
	}
	acc, err := k.scratchBuf("acc_out", tensor.FP32, sq*hq*d)
	if err != nil {
		return err
	}
	lacc, err := k.scratchBuf("acc_lse", tensor.FP32, hq*sq)
	if err != nil {
		return err
	}
	tmpO, err := k.scratchBuf("part_out", p.DType, sq*hq*d)
	if err != nil {
		return err
	}
	tmpL, err := k.scratchBuf("part_lse", tensor.FP32, hq*sq)
	if err != nil {
		return err
	}
	if err := k.fill(acc, false); err != nil {
		return err
	}
	if err := k.fill(lacc, true); err != nil {
		return err
	}
	for _, cp := range calls {
		if err := run(cp, tmpO, tmpL, false); err != nil {
			return err
		}
		if err := k.help.merge(acc, lacc, tmpO, tmpL, sq, hq, d, p.DType); err != nil {
			return err
		}
	}
	if err := k.help.convert(out, acc, p.DType); err != nil {
		return err
	}
	return k.dev.CopyOn(k.dev.Stream(), lse, 0, lacc, 0, lse.Bytes())
}

// Backward writes dq, dk and dv.
func (k *Kernel) Backward(ctx context.Context, p kernels.Problem, q, kk, v, out, lse, dout, dq, dk, dv tensor.Tensor) error {
	if err := k.Supports(p); err != nil {
		return kernels.Unsupported(err)
	}
	bs, err := kernels.BackwardArgs[*cuda.Buffer]("cudnn", p, q, kk, v, out, lse, dout, dq, dk, dv)
	if err != nil {
		return err
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	pp, err := k.prepare(p, true)
	if err != nil {
		return err
	}
	calls := pp.passes[true]
	ws, err := k.workspace(calls)
	if err != nil {
		return err
	}
	return k.dev.Do(func() error { return k.backward(pp, calls, bs, ws) })
}

func (k *Kernel) backward(pp *problemPlan, calls []callPlan, bs []*cuda.Buffer, ws *cuda.Buffer) error {
	p, c := pp.p, pp.cut
	sq, hq := p.Mask.SeqQ, p.HeadsQ
	t := &bindings{bindQ: bs[0], bindK: bs[1], bindV: bs[2], bindO: bs[3], bindDO: bs[5]}
	lse, dq, dk, dv := bs[4], bs[6], bs[7], bs[8]
	var thd *cuda.Buffer
	for _, cp := range calls {
		if cp.spec.ragged && thd == nil {
			var err error
			if thd, err = k.scratchBuf("stats_tokens", tensor.FP32, sq*hq); err != nil {
				return err
			}
			if err := k.help.lseToTokens(lse, thd, sq, hq); err != nil {
				return err
			}
		}
	}
	run := func(cp callPlan, gq, gk, gv *cuda.Buffer) error {
		t[bindStats] = lse
		if cp.spec.ragged {
			t[bindStats] = thd
		}
		t[bindDQ], t[bindDK], t[bindDV] = gq, gk, gv
		return k.execute(cp, t, ws)
	}
	if len(calls) == 1 {
		if !c.coveredQ {
			if err := k.fill(dq, false); err != nil {
				return err
			}
		}
		if !c.coveredK {
			if err := k.fill(dk, false); err != nil {
				return err
			}
			if err := k.fill(dv, false); err != nil {
				return err
			}
		}
		return run(calls[0], dq, dk, dv)
	}
	outs := []*cuda.Buffer{dq, dk, dv}
	var accs, parts [3]*cuda.Buffer
	for i, name := range []string{"dq", "dk", "dv"} {
		var err error
		if accs[i], err = k.scratchBuf("acc_"+name, tensor.FP32, outs[i].Numel()); err != nil {
			return err
		}
		if parts[i], err = k.scratchBuf("part_"+name, p.DType, outs[i].Numel()); err != nil {
			return err
		}
		if err := k.fill(accs[i], false); err != nil {
			return err
		}
	}
	for _, cp := range calls {
		for _, b := range parts {
			if err := k.fill(b, false); err != nil {
				return err
			}
		}
		if err := run(cp, parts[0], parts[1], parts[2]); err != nil {
			return err
		}
		for i := range parts {
			if err := k.help.accumulate(accs[i], parts[i], p.DType); err != nil {
				return err
			}
		}
	}
	for i := range outs {
		if err := k.help.convert(outs[i], accs[i], p.DType); err != nil {
			return err
		}
	}
	return nil
}
