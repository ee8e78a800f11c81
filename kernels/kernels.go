// Package kernels defines the attention Kernel interface, the Problem a kernel solves,
// the FLOPs rule of MASKS.md, and the registry every kernel adds itself to.
package kernels

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/longca/longca/mask"
	"github.com/longca/longca/tensor"
)

// Pass is a direction of the attention computation.
type Pass uint8

const (
	Fwd Pass = iota + 1
	Bwd
	FwdBwd
)

func (p Pass) String() string {
	switch p {
	case Fwd:
		return "fwd"
	case Bwd:
		return "bwd"
	case FwdBwd:
		return "fwd+bwd"
	}
	return fmt.Sprintf("pass(%d)", uint8(p))
}

// ParsePass reads fwd, bwd or fwd+bwd.
func ParsePass(s string) (Pass, error) {
	switch strings.ToLower(s) {
	case "fwd", "forward":
		return Fwd, nil
	case "bwd", "backward":
		return Bwd, nil
	case "fwd+bwd", "fwdbwd", "both":
		return FwdBwd, nil
	}
	return 0, fmt.Errorf("unknown pass %q: use fwd, bwd or fwd+bwd", s)
}

// FLOPsFactor is the pass's FLOPs as a multiple of the forward's (MASKS.md: backward is
// 2.5x forward, forward+backward 3.5x).
func (p Pass) FLOPsFactor() float64 {
	switch p {
	case Bwd:
		return 2.5
	case FwdBwd:
		return 3.5
	}
	return 1
}

// Problem is one attention problem: batch 1 of a packed sequence, SeqQ = Mask.SeqQ
// queries against SeqK = Mask.SeqK keys.
//
// Layouts: q, out, dq are [SeqQ, HeadsQ, HeadDim]; k, v, dk, dv are [SeqK, HeadsKV,
// HeadDim]; lse is [HeadsQ, SeqQ] in fp32 (natural log). Query head h uses KV head
// h / (HeadsQ/HeadsKV). A query row with no allowed key has out = 0 and lse = -inf.
type Problem struct {
	HeadsQ, HeadsKV, HeadDim int
	DType                    tensor.DType
	Mask                     mask.Mask
	// Scale is the softmax scale; 0 means 1/sqrt(HeadDim).
	Scale float64
	// HeadMasks, when set, gives one mask per KV head (block-sparse attention: each
	// query head uses its KV head's mask); Mask then only fixes SeqQ and SeqK.
	HeadMasks []mask.Mask
}

// MaskFor is the mask query head h attends with.
func (p Problem) MaskFor(h int) mask.Mask {
	if len(p.HeadMasks) == 0 {
		return p.Mask
	}
	return p.HeadMasks[h/(p.HeadsQ/p.HeadsKV)]
}

// Area is the allowed pairs summed over query heads, divided by HeadsQ: the mask's area
// when every head shares it.
func (p Problem) Area() float64 {
	if len(p.HeadMasks) == 0 {
		return float64(p.Mask.Area())
	}
	var a float64
	for _, m := range p.HeadMasks {
		a += float64(m.Area())
	}
	return a / float64(len(p.HeadMasks))
}

// SoftmaxScale is Scale, or 1/sqrt(HeadDim) when Scale is 0.
func (p Problem) SoftmaxScale() float64 {
	if p.Scale != 0 {
		return p.Scale
	}
	return 1 / math.Sqrt(float64(p.HeadDim))
}

// Validate checks the head counts and sizes.
func (p Problem) Validate() error {
	switch {
	case p.HeadsQ <= 0 || p.HeadsKV <= 0:
		return fmt.Errorf("heads %d:%d: both must be positive (--heads Q:KV)", p.HeadsQ, p.HeadsKV)
	case p.HeadsQ%p.HeadsKV != 0:
		return fmt.Errorf("heads %d:%d: query heads must be a multiple of KV heads (--heads Q:KV)", p.HeadsQ, p.HeadsKV)
	case p.HeadDim <= 0:
		return fmt.Errorf("head dim %d must be positive (--head-dim)", p.HeadDim)
	case p.Mask.SeqQ <= 0 || p.Mask.SeqK <= 0:
		return fmt.Errorf("sequence %dx%d must be non-empty", p.Mask.SeqQ, p.Mask.SeqK)
	case len(p.HeadMasks) != 0 && len(p.HeadMasks) != p.HeadsKV:
		return fmt.Errorf("%d head masks for %d KV heads", len(p.HeadMasks), p.HeadsKV)
	}
	return nil
}

// FLOPs is 4 * area * HeadsQ * HeadDim times the pass's factor (MASKS.md).
func (p Problem) FLOPs(pass Pass) float64 {
	return AreaFLOPs(p.Area(), p.HeadsQ, p.HeadDim, pass)
}

// AreaFLOPs is Problem.FLOPs of a mask of area allowed pairs, for those who keep only
// the area (a block-sparse mask can be most of a GiB: estimates and dry runs drop it).
func AreaFLOPs(area float64, headsQ, headDim int, pass Pass) float64 {
	return 4 * area * float64(headsQ) * float64(headDim) * pass.FLOPsFactor()
}

// Shapes returns the shapes of q, k (and v), and lse.
func (p Problem) Shapes() (q, kv, lse []int) {
	return []int{p.Mask.SeqQ, p.HeadsQ, p.HeadDim}, []int{p.Mask.SeqK, p.HeadsKV, p.HeadDim}, []int{p.HeadsQ, p.Mask.SeqQ}
}

// Kernel computes attention under any mask of a Problem.
type Kernel interface {
	Name() string
	// Device is where the kernel's tensors live.
	Device() tensor.Device
	// Supports returns nil, or a reason the problem cannot run (shown as status
	// "unsupported").
	Supports(p Problem) error
	// Forward writes out and lse.
	Forward(ctx context.Context, p Problem, q, k, v, out, lse tensor.Tensor) error
	// Backward writes dq, dk, dv (overwriting them) given the forward's out and lse.
	Backward(ctx context.Context, p Problem, q, k, v, out, lse, dout, dq, dk, dv tensor.Tensor) error
}

// Options configure a kernel when it is made. Everything here that can change a result is
// recorded in the rows (device_index, kernel_variant): settings are data, never only an
// environment variable.
type Options struct {
	// Device is the index of the GPU the kernel runs on, among the devices the process
	// sees (after CUDA_VISIBLE_DEVICES); a launched rank passes its local rank's GPU.
	Device int
	// Variant picks one of the kernel's variants by name (longca list names them); ""
	// lets the kernel choose the best for the device. The row records the one used. It may
	// name a variant per kernel ("cuda=sm90,cudnn=composite", ParseVariants): New hands
	// each kernel only its own (Options.For).
	Variant string
	// Python is the interpreter external Python workers run under ("" means python3 on
	// the PATH); the CLI fills it from --python or LONGCA_PYTHON.
	Python string
	// Timeout bounds one request to an external worker (0: the worker's default).
	Timeout time.Duration
	// Deterministic asks for a backward whose results are bitwise the same run after run
	// (dQ accumulated in a fixed order); a kernel without one gives unsupported rows.
	Deterministic bool
}

// GivenForward is a kernel that may answer its backward from a forward of its own, not
// from the out and lse it is given (a worker's, kernels/external): it says, asking once,
// whether its backward uses the given ones. A CP method's step passes the whole row's out
// and lse with part of the keys, so only such a backward can serve it. A kernel that is
// not a GivenForward always uses them.
type GivenForward interface {
	BackwardUsesGiven(ctx context.Context) (bool, error)
}

// DeterministicBackward is a kernel that can run its backward deterministically (made with
// Options.Deterministic): it says whether this instance does.
type DeterministicBackward interface {
	DeterministicBackward() bool
}

// CallCounter is a kernel that runs a mask as several calls of the kernel beneath it
// (cuDNN takes packed documents with one diagonal bound per call: kernels/cudnn cuts any
// mask into such calls). Calls is how many calls mask m takes (a count past what the
// kernel supports is a mask it refuses), or why m cannot be cut. A kernel without it runs
// any mask in one call. A context-parallel method asks it to lay out a rank's keys so that
// the rank's sub-mask takes few calls.
type CallCounter interface {
	Calls(m mask.Mask) (int, error)
}

// Factory makes a kernel, or says why it cannot (no GPU, a missing library).
type Factory func(o Options) (Kernel, error)

// PrefixFactory makes a kernel of a family named by a prefix (exec:PATH[:NAME]) from
// the rest of its name.
type PrefixFactory func(rest string, o Options) (Kernel, error)

// Info says what exactly ran, beyond the kernel's name: recorded in every row.
type Info struct {
	// Variant is the code path used (for example "sm90" or "sm80", a cuDNN engine).
	Variant string
	// Versions are the libraries behind the kernel and their versions
	// ({"torch": "2.11.0", "cudnn": "91400"}).
	Versions map[string]string
}

// Describer is a kernel that says which variant and library versions serve a problem.
type Describer interface {
	Describe(p Problem, pass Pass) Info
}

// TimeSpec is how a self-timing kernel times one case: Warmup untimed repetitions, then
// Iters timed ones with the device's own clock, FlushBytes written before each to evict
// the cache, inputs drawn from Seed.
type TimeSpec struct {
	Warmup, Iters int
	FlushBytes    int64
	Seed          uint64
}

// Timing is a self-timing kernel's answer.
type Timing struct {
	Median, Min, Max, Mean time.Duration
	// PeakMemBytes is the device memory the kernel held at its peak (0: unknown).
	PeakMemBytes int64
	// Variant, when set, is the code path that ran the timed pass, where it differs by
	// pass from what Describe said (an external worker's backward at another block size).
	Variant string
}

// SelfTimer is a kernel that times itself, on a device longca does not drive (an
// external worker process): the harness hands it the whole timing of a case instead of
// timing Forward and Backward calls.
type SelfTimer interface {
	TimePass(ctx context.Context, p Problem, pass Pass, s TimeSpec) (Timing, error)
}

// CaseScoped is a kernel that keeps state for the length of one case: an external
// worker's failure, so that a case starts its worker once rather than at every request
// (Device, Describe, Supports, the check's passes). The runner calls BeginCase before
// each case.
type CaseScoped interface {
	BeginCase()
}

// PhaseError is a kernel's failure in a phase before the pass it surfaced in (an
// external worker's hello or supports, reported by the check's forward): it names that
// phase, so the pass's label does not misname it.
type PhaseError struct {
	Kernel, Phase string
	Err           error
}

func (e *PhaseError) Error() string { return e.Kernel + " " + e.Phase + ": " + e.Err.Error() }

// Unwrap is the failure itself.
func (e *PhaseError) Unwrap() error { return e.Err }

// ErrUnsupported marks an error as "this case cannot run here": status unsupported.
var ErrUnsupported = errors.New("unsupported")

// ErrOOM marks an out-of-memory error: status oom.
var ErrOOM = errors.New("out of memory")

// Unsupported marks err as unsupported, keeping its message.
func Unsupported(err error) error { return markedError{err, ErrUnsupported} }

// OOM marks err as out of memory, keeping its message.
func OOM(err error) error { return markedError{err, ErrOOM} }

type markedError struct{ err, mark error }

func (m markedError) Error() string   { return m.err.Error() }
func (m markedError) Unwrap() []error { return []error{m.err, m.mark} }

var (
	mu       sync.Mutex
	registry = map[string]Factory{}
	docs     = map[string]string{}
	prefixes = map[string]PrefixFactory{}
	variants = map[string][]string{}
)

// RegisterVariants lists a kernel's variants (Options.Variant values), a line each of
// "name: description", for longca list.
func RegisterVariants(name string, vs []string) {
	mu.Lock()
	defer mu.Unlock()
	variants[name] = vs
}

// Variants are the lines RegisterVariants gave for a kernel.
func Variants(name string) []string {
	mu.Lock()
	defer mu.Unlock()
	return variants[name]
}

// Register adds a kernel under a name; call it from an init function.
func Register(name, doc string, f Factory) {
	mu.Lock()
	defer mu.Unlock()
	if _, dup := registry[name]; dup {
		panic("kernels: duplicate kernel " + name)
	}
	registry[name] = f
	docs[name] = doc
}

// RegisterPrefix adds a family of kernels named prefix+rest (exec:PATH): New passes rest
// to f. The prefix is listed by Names as prefix+"PATH".
func RegisterPrefix(prefix, doc string, f PrefixFactory) {
	mu.Lock()
	defer mu.Unlock()
	if _, dup := prefixes[prefix]; dup {
		panic("kernels: duplicate kernel prefix " + prefix)
	}
	prefixes[prefix] = f
	docs[prefix+"PATH"] = doc
}

// Names lists the registered kernels, sorted (a prefix family as prefix+"PATH").
func Names() []string {
	mu.Lock()
	defer mu.Unlock()
	out := make([]string, 0, len(registry)+len(prefixes))
	for n := range registry {
		out = append(out, n)
	}
	for p := range prefixes {
		out = append(out, p+"PATH")
	}
	sort.Strings(out)
	return out
}

// Known says whether name is a registered kernel or a member of a registered family.
func Known(name string) bool {
	mu.Lock()
	defer mu.Unlock()
	if _, ok := registry[name]; ok {
		return true
	}
	_, _, ok := prefixOf(name)
	return ok
}

// prefixOf finds the family of name (mu held).
func prefixOf(name string) (PrefixFactory, string, bool) {
	for p, f := range prefixes {
		if rest, ok := strings.CutPrefix(name, p); ok && rest != "" {
			return f, rest, true
		}
	}
	return nil, "", false
}

// Doc is a kernel's one-line description.
func Doc(name string) string {
	mu.Lock()
	defer mu.Unlock()
	return docs[name]
}

// New makes the named kernel with the options.
func New(name string, o Options) (Kernel, error) {
	mu.Lock()
	f, ok := registry[name]
	pf, rest, isPrefix := prefixOf(name)
	mu.Unlock()
	switch {
	case ok:
		return f(o.For(name))
	case isPrefix:
		return pf(rest, o.For(name))
	}
	return nil, fmt.Errorf("unknown kernel %q (--kernels): registered are %s", name, strings.Join(Names(), ", "))
}
