package harness

import (
	"bufio"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/longca/longca/dataset"
	"github.com/longca/longca/kernels"
	"github.com/longca/longca/mask"
	"github.com/longca/longca/tensor"
)

// Footprint is the memory a case holds at its peak, in bytes (float64: a request such as
// 1e9 heads must not overflow before it is refused).
type Footprint struct {
	Host, Device float64
}

// Add is f + g.
func (f Footprint) Add(g Footprint) Footprint {
	return Footprint{Host: f.Host + g.Host, Device: f.Device + g.Device}
}

// Scale is f x n.
func (f Footprint) Scale(n float64) Footprint {
	return Footprint{Host: f.Host * n, Device: f.Device * n}
}

// Machine is what the estimates are held against.
type Machine struct {
	// HostBytes is the memory this process may still take: MemAvailable, or the cgroup's
	// remaining limit when that is less.
	HostBytes float64
	// RefFLOPs is the CPU reference kernel's rate on this host (FLOP/s).
	RefFLOPs float64
	// DeviceFLOPs is the rate assumed of a GPU kernel (FLOP/s), for time estimates only.
	DeviceFLOPs float64
}

// DefaultDeviceFLOPs is the rate assumed of a GPU kernel when estimating how long a sweep
// takes: a fraction of an H100/H200's dense bf16 peak that attention kernels reach.
const DefaultDeviceFLOPs = 300e12

// DefaultRefFLOPs is the CPU reference's rate assumed when none was measured: about
// what kernels/ref reaches on one core.
const DefaultRefFLOPs = 1e9

// fitFraction is the share of the available memory a case may plan to use: the rest is
// the Go runtime's, the mask's and the other tensors' slack.
const fitFraction = 0.85

// ThisMachine reads the host memory this process may use: the least of /proc/meminfo's
// MemAvailable, what its cgroup's memory limit leaves (v2 memory.max, or v1
// memory.limit_in_bytes, on its cgroup and every parent), and what its address-space
// limit leaves (RLIMIT_AS, `ulimit -v` or `prlimit --as`, less the address space it
// already maps).
func ThisMachine() Machine {
	m := Machine{HostBytes: hostBytes("/", addressSpaceLeft()), RefFLOPs: DefaultRefFLOPs, DeviceFLOPs: DefaultDeviceFLOPs}
	return m
}

// hostBytes is the least of the limits under root (a file-system root: "/", or a test's
// folder holding proc/ and sys/fs/cgroup/) and as (the address space left; +Inf for none).
func hostBytes(root string, as float64) float64 {
	v := math.Inf(1)
	if a, ok := memAvailable(filepath.Join(root, "proc/meminfo")); ok {
		v = a
	}
	if c, ok := cgroupLeft(root); ok {
		v = min(v, c)
	}
	return min(v, as)
}

func memAvailable(path string) (float64, bool) {
	f, err := os.Open(path)
	if err != nil {
		return 0, false
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fs := strings.Fields(sc.Text())
		if len(fs) >= 2 && fs[0] == "MemAvailable:" {
			kb, err := strconv.ParseFloat(fs[1], 64)
			return kb * 1024, err == nil
		}
	}
	return 0, false
}

// cgroupLimitV1Unlimited is what cgroup v1 reports as "no limit" (or more).
const cgroupLimitV1Unlimited = 1 << 62

// cgroupLeft is what the memory limits of this process's cgroups leave: the least, over
// its memory cgroup (v2 and v1, from proc/self/cgroup) and every parent up to the root of
// the mounted hierarchy, of limit less usage.
func cgroupLeft(root string) (float64, bool) {
	b, err := os.ReadFile(filepath.Join(root, "proc/self/cgroup"))
	if err != nil {
		return 0, false
	}
	left, found := math.Inf(1), false
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) != 3 {
			continue
		}
		var base, limitFile, usageFile string
		switch {
		case parts[0] == "0" && parts[1] == "": // v2
			base, limitFile, usageFile = "sys/fs/cgroup", "memory.max", "memory.current"
		case slices.Contains(strings.Split(parts[1], ","), "memory"): // v1
			base, limitFile, usageFile = "sys/fs/cgroup/memory", "memory.limit_in_bytes", "memory.usage_in_bytes"
		default:
			continue
		}
		// The path may be hidden by a cgroup namespace (the hierarchy is mounted at the
		// process's own cgroup): look at it and its parents, and at the mount's root.
		for p := filepath.Clean("/" + parts[2]); ; p = filepath.Dir(p) {
			if v, ok := cgroupRemaining(filepath.Join(root, base, p), limitFile, usageFile); ok {
				left, found = min(left, v), true
			}
			if p == "/" {
				break
			}
		}
	}
	return left, found
}

// cgroupRemaining is limit less usage of one cgroup folder; false when it sets no limit.
func cgroupRemaining(dir, limitFile, usageFile string) (float64, bool) {
	read := func(name string) (float64, bool) {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			return 0, false
		}
		v, err := strconv.ParseFloat(strings.TrimSpace(string(b)), 64)
		return v, err == nil // "max" does not parse: no limit
	}
	limit, ok := read(limitFile)
	if !ok || limit >= cgroupLimitV1Unlimited {
		return 0, false
	}
	used, _ := read(usageFile)
	return max(limit-used, 0), true
}

// addressSpaceLeft is RLIMIT_AS less the address space this process maps now (VmSize);
// +Inf without a limit.
func addressSpaceLeft() float64 {
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_AS, &rl); err != nil || rl.Cur == math.MaxUint64 || rl.Cur >= 1<<62 {
		return math.Inf(1)
	}
	return max(float64(rl.Cur)-vmSize("/proc/self/status"), 0)
}

// vmSize is the VmSize line of a /proc/PID/status file, in bytes (0 when absent).
func vmSize(path string) float64 {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if fs := strings.Fields(line); len(fs) >= 2 && fs[0] == "VmSize:" {
			kb, _ := strconv.ParseFloat(fs[1], 64)
			return kb * 1024
		}
	}
	return 0
}

// tensorBytes is the size of a [tokens, heads, dim] tensor of dt.
func tensorBytes(tokens, heads, dim float64, dt tensor.DType) float64 {
	return tokens * heads * dim * float64(dt.Size())
}

// timingBytes are the nine tensors a timed case holds (q, k, v, dout, out, lse, dq, dk,
// dv: harness.buffers, and cp's per-rank inputs).
func timingBytes(sq, sk, hq, hkv, d float64, dt tensor.DType) float64 {
	return 4*tensorBytes(sq, hq, d, dt) + 4*tensorBytes(sk, hkv, d, dt) + sq*hq*4
}

// refBytes is what kernels/ref (float64) holds for one pass beyond its inputs and
// outputs: the head-major float64 copies of q, k, v, its accumulators, each row's key
// spans (rangesPerRow ranges a row) and every worker's score rows. A backward holds
// more than the forward that runs before it (dout's copy, dsum, dq, dk, dv, the column
// spans), and the forward's memory is garbage by then: the peak is the backward's, with
// half the forward's again for the collector's lag.
func refBytes(sq, sk, hq, hkv, d, rangesPerRow float64, pass kernels.Pass) float64 {
	const f64, rangeBytes, sliceHeader, blockRows = 8, 16, 24, 16
	workers := float64(runtime.GOMAXPROCS(0))
	engine := f64 * (sq*hq*d + 2*sk*hkv*d)
	spans := sq * (sliceHeader + rangesPerRow*rangeBytes)
	fwd := engine + f64*(sq*hq*d+sq*hq) + spans + workers*2*blockRows*sk*f64
	if pass == kernels.Fwd {
		return fwd
	}
	bwd := engine + f64*(2*sq*hq*d+3*sq*hq) + f64*2*sk*hkv*d + spans + sk*(sliceHeader+rangesPerRow*rangeBytes) +
		workers*2*blockRows*max(sq, sk)*f64
	return bwd + fwd/2
}

// maskBytes is the mask a case builds: a few slices for static masks; for block-sparse
// ones a slice per kept block per KV head.
func maskBytes(c Case) (bytes, rangesPerRow float64) {
	const sliceBytes = 48
	// a packed sequence holds at most a document a token and at most dataset.MaxDocs (a
	// longer one is refused by its expected count before it is drawn), and building one
	// costs about 210 bytes a document (its slices, lengths and parameters: 3.5 GB for 2^24
	// one-token documents, masks --max-doc 1 --seqlen 16M); the estimate takes 320
	const docBytes = 320
	if !c.Sparse.IsSparse() {
		if mask.DrawsDocuments(c.Mask) {
			return max(1<<20, docBytes*float64(min(c.SeqLen, dataset.MaxDocs))), 4
		}
		return 1 << 20, 4
	}
	blk := float64(max(c.Sparse.BlockSize(), 1))
	blocks := math.Ceil(float64(c.SeqLen) / blk)
	keep := math.Ceil(c.Sparse.Ratio * blocks)
	return float64(c.Heads.KV) * blocks * keep * sliceBytes, keep
}

// MaskBytes is the host memory of one case's mask (a block-sparse mask holds a tile per
// kept block of every q-block row, for every KV head): what the case builds when it runs.
func MaskBytes(c Case) float64 {
	b, _ := maskBytes(c)
	return b
}

// PartialsBytes is the device memory of a backward that splits each KV head's query heads
// over parts blocks, each adding fp32 partials of dK and dV (cuda's sm90: 2 or 4 parts at
// head dim 64, 2, 4 or 8 at 128 by its rules, 8 always in sm90g8; the kernel says
// how many at most, session.FitKernels asks it): 0 for a forward or one part.
func PartialsBytes(c Case, parts int) float64 {
	if parts <= 1 || c.Pass == kernels.Fwd {
		return 0
	}
	return 2 * float64(parts) * tensorBytes(float64(c.SeqLen), float64(c.Heads.KV), float64(c.HeadDim), tensor.FP32)
}

// KernelFootprint is the peak memory of one kernel case: the timing tensors (on the
// device for a device kernel, on the host for a CPU one), the reference's working set
// when the kernel is the CPU reference, the mask, and the check at its own size, that
// size bounded by a full (or causal) mask's area (checkSizeBound: exact for full and
// causal, CheckSizeBounded; KernelFootprintAt counts another mask's check at its size).
// onDevice says whether the kernel runs on a GPU; isRef whether it is kernels/ref.
func KernelFootprint(c Case, check bool, checkBudget float64, onDevice, isRef bool) Footprint {
	return KernelFootprintAt(c, check, checkBudget, onDevice, isRef, nil)
}

// CheckArea is the area (pairs) of a case's mask at a length with heads, false where it
// cannot be laid out: CheckSize's fits, as the runner's check asks it.
type CheckArea = func(seqlen int, h Heads) (int64, bool)

// KernelFootprintAt is KernelFootprint with the check counted at the size it runs at:
// CheckSize with area, the mask's own area (nil: checkSizeBound's). A mask of short
// documents has little area, so its check runs at the case's full length where a full
// mask's area would put it at 4K or less: kernel --kernels ref over 1-token documents at
// 256K (8:2 heads, dim 64) peaked at 11 GB where the bound counted 4.5 GiB.
func KernelFootprintAt(c Case, check bool, checkBudget float64, onDevice, isRef bool, area CheckArea) Footprint {
	s, hq, hkv, d := float64(c.SeqLen), float64(c.Heads.Q), float64(c.Heads.KV), float64(c.HeadDim)
	mb, ranges := maskBytes(c)
	buf := timingBytes(s, s, hq, hkv, d, c.DType)
	largest := tensorBytes(s, hq, d, c.DType) // fillRandom's host staging tensor
	var f Footprint
	if onDevice {
		f.Device = buf + FlushBytes
		if c.Pass != kernels.Fwd {
			f.Device += tensorBytes(s, hq, d, tensor.FP32) + 2*s*hq*4 // fp32 dq and Dsum/lse workspace
			// (a kernel that splits its backward adds its partials: PartialsBytes)
		}
		f.Host = largest + mb
	} else {
		f.Host = buf + largest + mb
		if isRef {
			f.Host += refBytes(s, s, hq, hkv, d, ranges, c.Pass)
		}
	}
	if check {
		n, h := KernelCheckSize(c, checkBudget, area)
		f.Host += checkBytes(float64(n), float64(h.Q), float64(h.KV), d, ranges, c.Pass)
	}
	return f
}

// checkBytes is the host memory of the check of a pass at n tokens with heads hq:hkv
// (kernels/check): the tensors it holds at once (the inputs, the outputs of the kernel,
// of the float64 reference and of the naive baseline, and the float64 copies each figure
// is compared in), counted three times as float64 tensors, and two of kernels/ref's
// working sets (the kernel's own when it is the reference, then each reference's, the
// last one's garbage not yet collected). A forward check runs and compares forwards only:
// q, k, v, out and lse, and a forward's working set. A backward's (bwd, or fwd+bwd) runs
// the forward and then the backward, and adds dout, dq, dk and dv and the backward's
// working set. Against the peaks of checked cases of kernels/ref at their full length
// (1-token documents, 16K-256K, 8:2 heads, dim 64): 1.4-1.6x a forward's resident peak,
// 1.9-2.1x a backward's (session's TestFitKernelsCountsTheCheckByPass); 1.8-2.5x and
// 2.2-2.8x their heap's (TestKernelCheckCountedByPass).
func checkBytes(n, hq, hkv, d, ranges float64, pass kernels.Pass) float64 {
	if pass == kernels.Fwd {
		tensors := 2*tensorBytes(n, hq, d, tensor.FP64) + 2*tensorBytes(n, hkv, d, tensor.FP64) + 8*n*hq // q, k, v, out, lse
		return 3*tensors + 2*refBytes(n, n, hq, hkv, d, ranges, kernels.Fwd)
	}
	return 3*timingBytes(n, n, hq, hkv, d, tensor.FP64) + 2*refBytes(n, n, hq, hkv, d, ranges, kernels.FwdBwd)
}

// The check's own work besides its three runs (kernels/check), per element on one core
// (none of it is spread over the cores): drawing its inputs (Inputs: a standard normal
// rounded into each element of q, k, v and dout, whatever the pass), and for each output
// it checks, the kernel's copy poisoned and brought back, then it, the reference's and
// the naive baseline's made float64 (three fresh copies, 24 bytes an element) and walked
// once (CompareOutputs). A check at the full length of 1-token documents has about as
// many elements as multiply-adds, and these were the half of it the estimate left out:
// at 64K (8:2 heads, dim 64) it drew 84M elements and compared 34M, 1.8 s and 2.4 s of
// CPU where the kernel and the two references took 4.8 s; at 256K 6.7 s and 14.5 s.
// Measured on the 2-core build machine (the process's CPU time, user and system, of
// Inputs, the kernel's run and CompareOutputs on 1-token documents, 16K-256K tokens,
// fwd and bwd): 20-25 ns an element drawn; 43 ns (16K) to 108 ns (256K) an element
// compared, and 16 more for the kernel's copy (its fresh memory is most of it: the
// larger the check, the more of it is faulted in). Taken 30 and 130.
const (
	checkDrawNs    = 30  // an element of q, k, v or dout drawn
	checkCompareNs = 130 // an element of an output poisoned, brought back and compared
)

// CheckElementSeconds is the seconds of case c's check's own work at the case's own size
// (SetCheckCosts scales it to a smaller check): drawing the inputs, paid once for every
// kernel checked on the problem through one check.Cache, and comparing the pass's
// outputs (out and lse for fwd; dq, dk and dv for bwd; all five for fwd+bwd), paid by
// each kernel.
func CheckElementSeconds(c Case) (draw, compare float64) {
	s, q, kv, d := float64(c.SeqLen), float64(c.Heads.Q), float64(c.Heads.KV), float64(c.HeadDim)
	var outs float64
	if c.Pass != kernels.Bwd {
		outs += s*q*d + s*q // out, lse
	}
	if c.Pass != kernels.Fwd {
		outs += s*q*d + 2*s*kv*d // dq, dk, dv
	}
	return (2*s*q*d + 2*s*kv*d) * checkDrawNs * 1e-9, outs * checkCompareNs * 1e-9
}

// KernelCheckSize is the size case c is checked at under budget (0: the default):
// CheckSize over DefaultCheckLengths with area, the mask's area at a length; with a nil
// area, checkSizeBound's.
func KernelCheckSize(c Case, budget float64, area CheckArea) (int, Heads) {
	if area == nil {
		return checkSizeBound(c, budget)
	}
	if budget <= 0 {
		budget = DefaultCheckBudget
	}
	return CheckSize(c, DefaultCheckLengths, area, budget)
}

// CheckSizeBounded says whether checkSizeBound's area is case c's own mask's, to within
// its diagonal: full (n^2) and causal (n^2/2 of n(n+1)/2, a check no larger than the
// bound's). Any other mask may have far less area than the bound, and is checked at a
// larger size than it gives (1-token documents at their full length): KernelFootprintAt
// with the mask's own area counts it.
func CheckSizeBounded(c Case) bool {
	return !c.Sparse.IsSparse() && (c.Mask == "full" || c.Mask == "causal")
}

// checkSizeBound is CheckSize with the mask's area bounded by a full mask's (a causal
// one's where the name says causal): the size the check of a full or causal mask runs
// at. Another mask, with less area, may be checked at a larger size (KernelCheckSize
// with its area).
func checkSizeBound(c Case, budget float64) (int, Heads) {
	if budget <= 0 {
		budget = DefaultCheckBudget
	}
	area := func(n int, _ Heads) (int64, bool) {
		a := float64(n) * float64(n)
		if c.Mask == "causal" || strings.Contains(c.Mask, "causal") {
			a /= 2
		}
		return int64(min(a, math.MaxInt64/2)), true
	}
	return CheckSize(c, DefaultCheckLengths, area, budget)
}

// CaseSeconds estimates how long a case takes: warm-ups and timed repetitions of the
// pass (a backward also runs its forward once) at rate, plus the check on the CPU
// reference at its size. area is the mask's area (pairs).
func CaseSeconds(c Case, area float64, warmup, iters int, rate float64, check bool, checkBudget, refRate float64) float64 {
	p := kernels.Problem{HeadsQ: c.Heads.Q, HeadsKV: c.Heads.KV, HeadDim: c.HeadDim}
	flops := func(pass kernels.Pass) float64 {
		return 4 * area * float64(p.HeadsQ) * float64(p.HeadDim) * pass.FLOPsFactor()
	}
	sec := float64(warmup+iters) * flops(c.Pass) / rate
	if c.Pass == kernels.Bwd {
		sec += flops(kernels.Fwd) / rate
	}
	if check {
		n, h := checkSizeBound(c, checkBudget)
		scale := float64(n) * float64(n) / max(float64(c.SeqLen)*float64(c.SeqLen), 1) * float64(h.Q) / float64(c.Heads.Q)
		// the reference, the naive baseline and the kernel itself, forward and backward
		sec += 3 * 3.5 * flops(kernels.Fwd) * min(scale, 1) / refRate
	}
	return sec
}

// SizeError says that a case does not fit: which size, how much it needs, how much
// there is.
type SizeError struct {
	What      string // "host memory" or "device memory"
	Need, Has float64
	Case      string
}

func (e *SizeError) Error() string {
	return fmt.Sprintf("%s needs about %s of %s; %s available", e.Case, FormatBytes(e.Need), e.What, FormatBytes(e.Has))
}

// Fits checks f against the memory there is: the host's, and devBytes (0 when the
// kernel is on the host). what names the case in the error.
func (m Machine) Fits(f Footprint, devBytes float64, what string) error {
	if f.Host > fitFraction*m.HostBytes {
		return &SizeError{What: "host memory", Need: f.Host, Has: m.HostBytes, Case: what}
	}
	if devBytes > 0 && f.Device > fitFraction*devBytes {
		return &SizeError{What: "device memory", Need: f.Device, Has: devBytes, Case: what}
	}
	return nil
}

// FormatBytes writes n as 1.5 GiB, 320 MiB, 12 KiB or 7 B (and "1e+21 B" past EiB).
func FormatBytes(n float64) string {
	units := []string{"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"}
	i := 0
	for n >= 1024 && i < len(units)-1 {
		n /= 1024
		i++
	}
	if i == 0 || n >= 100 {
		return fmt.Sprintf("%.0f %s", n, units[i])
	}
	return fmt.Sprintf("%.1f %s", n, units[i])
}

// FormatDuration writes seconds as 40s, 12m, 3.5h, 6.2 days or 2.1 years.
func FormatDuration(sec float64) string {
	switch {
	case math.IsInf(sec, 0) || sec > 1e12:
		return "forever"
	case sec < 120:
		return time.Duration(sec * float64(time.Second)).Round(time.Second).String()
	case sec < 7200:
		return fmt.Sprintf("%.0fm", sec/60)
	case sec < 2*86400:
		return fmt.Sprintf("%.1fh", sec/3600)
	case sec < 2*365*86400:
		return fmt.Sprintf("%.1f days", sec/86400)
	}
	return fmt.Sprintf("%.1f years", sec/(365*86400))
}

// CPPlanBytes estimates the host memory of planning one CP case of n ranks on a
// sequence of seqlen tokens the way a dry run does, every rank's plan at once (the
// layout, every rank's step sub-masks, balanced's dispatch): a base, a few bytes per
// token of the mask, a share growing as ranks x tokens (every rank's view of the
// documents) and one as ranks squared (every rank's view of every step). An
// over-estimate from the build machine's peaks (cp --dry-run, all methods, document
// masks: 4096 ranks x 8K tokens 0.69 GB, 1024 x 32K 0.30 GB, 4096 x 2K 0.19 GB; 100000
// ranks of an 8K sequence 4.8 GB; 100000 x 8K ran out of memory in balanced's dispatch).
func CPPlanBytes(n, seqlen int) float64 {
	r, s := float64(max(n, 1)), float64(max(seqlen, 1))
	const base = 64 << 20
	return base + 8*s + 4e-3*r*s + 2*r*r
}

// CPDispatchWork is what a dry run's planning of balanced adds at a --cp-block of block
// tokens on a seqlen-token sequence: its dispatch holds a few words a block and places
// each. Measured: cp --dry-run on 64 ranks of 128K at --cp-block 1 (8M blocks) took 1.1 GB
// and 55 s, outside CPPlanBytes and CPPlanSeconds; rounded up to 256 bytes and 10 us a
// block. The default block (at least 1/512 of a dispatch unit's tokens) adds little.
func CPDispatchWork(seqlen, block int) (bytes, seconds float64) {
	if block <= 0 || seqlen <= 0 {
		return 0, 0
	}
	blocks := math.Ceil(float64(seqlen) / float64(block))
	return 256 * blocks, 10e-6 * blocks
}

// CPPlanSeconds estimates the CPU time of a dry run's planning of cases CP cases on n
// ranks of a seqlen-token sequence (a dry run plans each case twice: for the list of
// cases and for the printed plan): per case, a share per token (the masks, balanced's
// dispatch) and one growing as ranks x tokens (the zigzag layout gives every document
// pieces on every ring rank). Fitted to cp --dry-run of every method and the default
// masks on the 2-core build machine, 8K tokens a rank (1024 ranks 1.5 s for 88 cases,
// 2048 3.8 s for 96, 4096 12.3 s for 104, 8192 39.4 s for 112), rounded up.
func CPPlanSeconds(n, seqlen, cases int) float64 {
	r, s := float64(max(n, 1)), float64(max(seqlen, 1))
	return float64(max(cases, 0)) * s * (2e-9 + 5e-13*r)
}

// CPFootprint is one CP rank's peak memory: its share of the sequence (tokens, padding
// included) as the nine timing tensors, the method's buffers (a ring step's incoming
// and outgoing K, V blocks and partial outputs, an all-to-all's send and receive copies:
// bounded by twice the inputs), the kernel's working set for one step (kernels/ref's when
// isRef), and a fixed cost for the rank itself (goroutines, queues, the mask).
func CPFootprint(tokens, hq, hkv, d int, dt tensor.DType, passes []kernels.Pass, onDevice, isRef bool) Footprint {
	return CPFootprintWith(tokens, hq, hkv, d, dt, passes, onDevice, isRef, 0, 0)
}

// CPFootprintWith is CPFootprint with the method's buffers at least methodBytes (a
// method's own bound, cp.MethodBufferBound: balanced fetches what the mask needs, up to
// many ranks' K/V) and, for kernels/ref, refRanges key ranges a query row of a step's
// sub-mask (0 or less: the few of a contiguous shard's; balanced's sub-masks hold up to
// one a dispatch block, RefRangesPerRow).
func CPFootprintWith(tokens, hq, hkv, d int, dt tensor.DType, passes []kernels.Pass, onDevice, isRef bool, methodBytes, refRanges float64) Footprint {
	t, q, kv, dd := float64(tokens), float64(hq), float64(hkv), float64(d)
	pass := kernels.Fwd
	for _, p := range passes {
		if p != kernels.Fwd {
			pass = kernels.FwdBwd
		}
	}
	data := timingBytes(t, t, q, kv, dd, dt)
	method := max(2*data+tensorBytes(t, q, dd, tensor.FP32)+t*q*8, methodBytes) // fp32 partial out and lse
	var f Footprint
	const perRank = 4 << 20
	if onDevice {
		f.Device = data + method
		f.Host = perRank + data // host copies of the inputs while they are uploaded
	} else {
		f.Host = perRank + data + method
	}
	if isRef {
		f.Host += refBytes(t, t, q, kv, dd, max(refRanges, 4), pass)
	}
	return f
}

// RefRangesPerRow bounds the key ranges a query row of one of balanced's sub-masks holds
// at a --cp-block of block tokens: a range for each block its rank fetches, at most the
// sequence's blocks (session.FitCP counts it for a --cp-block given). kernels/ref lists a
// row's ranges before merging them (rowSpans), so cp --kernel ref --cp-block 8 on 8 ranks
// of 8K tokens held 3.3 GB of spans, where the few ranges of a contiguous shard counted
// 0.1; --cp-block 1 grew past 5.8 GB in 20 s on its way to about 70.
func RefRangesPerRow(seqlen, block int) float64 {
	return math.Ceil(float64(seqlen) / float64(max(block, 1)))
}
