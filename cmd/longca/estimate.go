package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/longca/longca/harness"
	"github.com/longca/longca/kernels"
	"github.com/longca/longca/mask"
	"github.com/longca/longca/spmd/cp"
	"github.com/longca/longca/tensor"
	"github.com/urfave/cli/v2"
)

// machine is what the memory and time estimates are held against; tests replace it.
var machine = harness.ThisMachine

// slowSweep is how long a sweep may take before longca says how long it will be.
const slowSweep = 10 * time.Minute

// kernelPlace says where a kernel runs: on a GPU (with its memory), and whether it is
// the CPU reference. A kernel that cannot be made is left to the sweep (its rows say
// unsupported).
func kernelPlace(name string, ko kernels.Options) (onDevice, isRef bool, devBytes float64, ok bool) {
	k, err := newKernel(name, ko)
	if err != nil {
		return false, false, 0, false
	}
	dev := k.Device()
	if dev.Name() == "cpu" {
		return false, name == "ref", 0, true
	}
	if mi, has := dev.(interface {
		MemInfo() (free, total int64, err error)
	}); has {
		if _, total, err := mi.MemInfo(); err == nil {
			devBytes = float64(total)
		}
	}
	return true, false, devBytes, true
}

// fitSweep refuses, before anything is allocated, a sweep with a case that cannot fit in
// the host's (or the GPU's) memory: one line naming the flags that make it too big. For
// a sweep that fits but runs long it says, once, about how long.
func fitSweep(c *cli.Context, o sweepOptions) error {
	m := machine()
	type place struct {
		onDevice, isRef, ok bool
		devBytes            float64
	}
	places := map[string]place{}
	type timed struct {
		cs       harness.Case
		onDevice bool
		area     float64
	}
	var toTime []timed
	for _, cs := range o.sweep.Cases() {
		pl, seen := places[cs.Kernel]
		if !seen {
			pl.onDevice, pl.isRef, pl.devBytes, pl.ok = kernelPlace(cs.Kernel, o.kernelOpts)
			places[cs.Kernel] = pl
		}
		if !pl.ok {
			continue
		}
		f := harness.KernelFootprint(cs, o.check, o.checkBudget, pl.onDevice, pl.isRef)
		if err := m.Fits(f, pl.devBytes, "case "+cs.String()); err != nil {
			return usageError("%s: %v: give smaller sizes", sweepCulprit(c, cs, o, pl.onDevice, pl.isRef, pl.devBytes, m), err)
		}
		toTime = append(toTime, timed{cs, pl.onDevice, caseArea(cs, o.build)})
	}
	estimate := func() (total, longest float64, longestCase harness.Case) {
		for _, t := range toTime {
			rate := m.DeviceFLOPs
			if !t.onDevice {
				rate = m.RefFLOPs
			}
			sec := harness.CaseSeconds(t.cs, t.area, o.warmup, o.iters, rate, o.check, o.checkBudget, m.RefFLOPs)
			total += sec
			if sec > longest {
				longest, longestCase = sec, t.cs
			}
		}
		return total, longest, longestCase
	}
	total, _, _ := estimate()
	if total <= slowSweep.Seconds() {
		return nil
	}
	// Long by the assumed rate: measure the reference here before saying so.
	if r := calibrateRef(c.Context); r > 0 {
		m.RefFLOPs = r
	}
	total, longest, lc := estimate()
	if total > slowSweep.Seconds() {
		log.Warn().Str("estimate", harness.FormatDuration(total)).Str("longest_case", lc.Kernel+" "+lc.String()).
			Str("longest", harness.FormatDuration(longest)).
			Msgf("this sweep will take about %s (the CPU reference at %.1f GFLOP/s here, GPU kernels at %.0f TFLOP/s assumed); Ctrl-C stops it, keeping the rows written",
				harness.FormatDuration(total), m.RefFLOPs/1e9, m.DeviceFLOPs/1e12)
	}
	return nil
}

// caseArea is the mask's area (pairs) of a case: built when it is a static mask, the
// kept ratio of the full square when block-sparse.
func caseArea(cs harness.Case, build harness.MaskBuilder) float64 {
	s := float64(cs.SeqLen)
	if cs.Sparse.IsSparse() {
		return cs.Sparse.Ratio * s * s
	}
	if build == nil {
		build = harness.BuildMask
	}
	spec, err := build(cs.Mask, cs.SeqLen, cs.Seed)
	if err != nil {
		return s * s
	}
	return float64(spec.Mask.Area())
}

// sweepCulprit names the flags that make a case too big: the one whose default (or a
// modest length) alone would make it fit, else all of them with their values.
func sweepCulprit(c *cli.Context, cs harness.Case, o sweepOptions, onDevice, isRef bool, devBytes float64, m harness.Machine) string {
	lenFlag := "--seqlens"
	if !c.IsSet("seqlens") && (c.IsSet("begin") || c.IsSet("end")) {
		lenFlag = "-b/-e"
	}
	if c.Command.Name == "run" {
		return "--suite " + c.String("suite")
	}
	fits := func(x harness.Case) bool {
		return m.Fits(harness.KernelFootprint(x, o.check, o.checkBudget, onDevice, isRef), devBytes, "") == nil
	}
	shrink := []struct {
		flag, value string
		apply       func(x *harness.Case)
	}{
		{lenFlag, harness.FormatSize(cs.SeqLen), func(x *harness.Case) { x.SeqLen = min(x.SeqLen, 4096) }},
		{"--heads", cs.Heads.String(), func(x *harness.Case) { x.Heads = harness.Heads{Q: min(x.Heads.Q, 64), KV: min(x.Heads.KV, 8)} }},
		{"--head-dim", fmt.Sprint(cs.HeadDim), func(x *harness.Case) { x.HeadDim = min(x.HeadDim, 128) }},
	}
	var all []string
	for _, s := range shrink {
		x := cs
		s.apply(&x)
		if x != cs && fits(x) {
			return s.flag + " " + s.value
		}
		all = append(all, s.flag+" "+s.value)
	}
	return strings.Join(all, ", ")
}

// fitCP refuses, before any mask is built, a CP run whose ranks cannot fit in memory:
// n in-process ranks share this host; under a launcher the ranks of this node do. The
// line names --ranks when one rank would fit, else the size flags.
func fitCP(c *cli.Context, o cpOptions, n, onNode int, inProcess bool) error {
	onDevice, isRef, devBytes, ok := kernelPlace(o.kernel, o.kernelOpts)
	if !ok {
		return nil // the kernel cannot be made: the run says why
	}
	tokens := (o.seqlenFor(n) + n - 1) / n
	tokens += tokens / 8 // padding of zigzag sharding
	m := machine()
	var need harness.Footprint
	for _, h := range o.heads {
		// The methods' own buffers where they can exceed the generic estimate (balanced).
		mb := cp.MethodBufferBound(o.methods, tokens, n, h.Q, h.KV, o.headDim, o.dtype, o.passes, o.stages)
		f := harness.CPFootprintWith(tokens, h.Q, h.KV, o.headDim, o.dtype, o.passes, onDevice, isRef, mb)
		if f.Host > need.Host || f.Device > need.Device {
			need = f
		}
	}
	host := need.Scale(float64(onNode))
	dev := need
	if inProcess && onDevice {
		dev = need.Scale(float64(n)) // in-process ranks share one GPU
	}
	what := fmt.Sprintf("%d rank(s) of %d tokens", onNode, tokens)
	err := m.Fits(harness.Footprint{Host: host.Host, Device: dev.Device}, devBytes, what)
	if err == nil {
		return nil
	}
	var se *harness.SizeError
	errors.As(err, &se)
	flags := fmt.Sprintf("--tokens-per-rank %s, --heads %s, --head-dim %d", c.String("tokens-per-rank"), c.String("heads"), o.headDim)
	if o.seqlen > 0 {
		flags = fmt.Sprintf("--seqlen %s, --heads %s, --head-dim %d", c.String("seqlen"), c.String("heads"), o.headDim)
	}
	if inProcess && m.Fits(need, devBytes, "") == nil {
		return usageError("--ranks %d: %v: in-process ranks share this host; use fewer, or one process per GPU (mpirun, srun)", n, err)
	}
	return usageError("%s: %v (kernel %s): give smaller sizes", flags, err, o.kernel)
}

// calibrateRef measures the CPU reference's forward rate on this host (FLOP/s), for the
// time estimate; 0 when it cannot.
func calibrateRef(ctx context.Context) float64 {
	if ctx == nil {
		ctx = context.Background()
	}
	k, err := newKernel("ref", kernels.Options{})
	if err != nil {
		return 0
	}
	const s, h, d = 384, 2, 64
	spec, err := mask.Build("full", s, mask.Options{})
	if err != nil {
		return 0
	}
	p := kernels.Problem{HeadsQ: h, HeadsKV: h, HeadDim: d, DType: tensor.BF16, Mask: spec.Mask}
	dev := k.Device()
	qs, kvs, ls := p.Shapes()
	var ts []tensor.Tensor
	for _, sh := range [][]int{qs, kvs, kvs, qs} {
		t, err := dev.Alloc(tensor.BF16, sh...)
		if err != nil {
			return 0
		}
		ts = append(ts, t)
	}
	lse, err := dev.Alloc(tensor.FP32, ls...)
	if err != nil {
		return 0
	}
	start := time.Now()
	if err := k.Forward(ctx, p, ts[0], ts[1], ts[2], ts[3], lse); err != nil {
		return 0
	}
	return p.FLOPs(kernels.Fwd) / max(time.Since(start).Seconds(), 1e-6)
}

// cpSeconds estimates how long a CP sweep takes: every case's samples and passes, -w
// warm-ups and -n iterations of the global mask's FLOPs (a backward's forward once
// more), on n GPUs at the assumed device rate, or on this host's CPU reference when the
// kernel is ref and the ranks are in-process (they share its cores).
func cpSeconds(o cpOptions, cases []harness.CPCase, n int, rate float64) float64 {
	s := o.seqlenFor(n)
	area := map[string]float64{}
	var total float64
	for _, cs := range cases {
		if cs.Skip != nil {
			continue
		}
		a, ok := area[cs.Mask]
		if !ok {
			if spec, _, err := o.sweep(n).MaskSpec(cs.Mask, s, o.seed); err == nil {
				a = float64(spec.Mask.Area())
			} else {
				a = float64(s) * float64(s)
			}
			area[cs.Mask] = a
		}
		for _, p := range o.passes {
			flops := 4 * a * float64(cs.Heads.Q) * float64(o.headDim)
			reps := float64(o.warmup+o.iters) * p.FLOPsFactor()
			if p == kernels.Bwd {
				reps++
			}
			total += float64(o.samples) * reps * flops / rate
		}
	}
	return total
}

// warnCPTime says, once, how long a CP sweep will take when that is over slowSweep.
func warnCPTime(c *cli.Context, o cpOptions, cases []harness.CPCase, n int, inProcess bool) {
	m := machine()
	onDevice, isRef, _, ok := kernelPlace(o.kernel, o.kernelOpts)
	if !ok {
		return
	}
	rate := m.DeviceFLOPs * float64(n)
	if !onDevice {
		rate = m.RefFLOPs
		if !inProcess {
			rate *= float64(n) // one process per rank, each on its own cores (at best)
		}
	}
	total := cpSeconds(o, cases, n, rate)
	if total <= slowSweep.Seconds() {
		return
	}
	if !onDevice && isRef {
		if r := calibrateRef(c.Context); r > 0 {
			rate *= r / m.RefFLOPs
			total = cpSeconds(o, cases, n, rate)
		}
	}
	if total > slowSweep.Seconds() {
		log.Warn().Str("estimate", harness.FormatDuration(total)).Int("cases", len(cases)).Int("samples", o.samples).
			Msgf("this CP sweep will take about %s (%s at %.3g TFLOP/s in all); Ctrl-C stops it, keeping the rows written",
				harness.FormatDuration(total), o.kernel, rate/1e12)
	}
}
