package external

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/longca/longca/kernels"
	"github.com/longca/longca/tensor"
)

// Kernel is one kernel a worker serves, as a kernels.Kernel: Forward and Backward
// exchange .npy files with the worker (its tensors live on the host, so the check runs
// unchanged), and TimePass hands the worker the whole timing of a case (SelfTimer).
type Kernel struct {
	name   string // longca's name: torch:flex, exec:PATH[:NAME]
	remote string // the worker's name for it ("" : the worker's only kernel)
	w      *Worker
	// timeout, when positive, bounds every request (kernels.Options.Timeout).
	timeout time.Duration

	mu       sync.Mutex
	supports map[string]supportEntry
	deferred error // a worker failure met in Supports, reported by the next pass
	// failed is this case's worker failure (hello or supports): until the next case
	// (BeginCase) no request starts a new worker, each is answered with it.
	failed error
	dev    *hostDevice
	calls  int
}

type supportEntry struct {
	variant string
	err     error
}

var (
	_ kernels.Kernel     = (*Kernel)(nil)
	_ kernels.Describer  = (*Kernel)(nil)
	_ kernels.SelfTimer  = (*Kernel)(nil)
	_ kernels.CaseScoped = (*Kernel)(nil)
)

// BeginCase forgets the last case's worker failure: the next request may start a new
// worker (--on-worker-crash restart).
func (k *Kernel) BeginCase() {
	k.mu.Lock()
	k.failed, k.deferred = nil, nil
	k.mu.Unlock()
}

// fail keeps a worker failure met in phase for the rest of the case, labelled by the
// phase; other errors pass unchanged.
func (k *Kernel) fail(phase string, err error) error {
	if !errors.Is(err, ErrWorkerFailed) {
		return err
	}
	var pe *kernels.PhaseError
	if !errors.As(err, &pe) {
		err = &kernels.PhaseError{Kernel: k.name, Phase: phase, Err: err}
	}
	k.mu.Lock()
	if k.failed == nil {
		k.failed = err
	}
	k.mu.Unlock()
	return err
}

// caseFailure is this case's worker failure, if any.
func (k *Kernel) caseFailure() error {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.failed
}

// NewKernel makes the kernel remote of worker w under longca's name.
func NewKernel(name, remote string, w *Worker, timeout time.Duration) *Kernel {
	return &Kernel{name: name, remote: remote, w: w, timeout: timeout, supports: map[string]supportEntry{}}
}

// Name is longca's name of the kernel.
func (k *Kernel) Name() string { return k.name }

// Crashes is how often the kernel's worker failed and was killed.
func (k *Kernel) Crashes() int { return k.w.Crashes() }

// hostDevice is the host, named after the device the worker computes on: the tensors
// longca hands the kernel are host tensors; rows record the worker's device.
type hostDevice struct {
	*tensor.CPU
	name string
}

func (d *hostDevice) Name() string { return d.name }

// Device is host memory named after the worker's device ("NVIDIA H200", or "cpu" for a
// worker that computes on the CPU); "unavailable" when the worker does not start.
func (k *Kernel) Device() tensor.Device {
	if k.caseFailure() != nil {
		return &hostDevice{CPU: &tensor.CPU{}, name: "unavailable"}
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.dev != nil {
		return k.dev
	}
	name := "unavailable"
	h, err := k.w.Hello(context.Background(), k.helloTimeout())
	if err != nil && errors.Is(err, ErrWorkerFailed) && k.failed == nil {
		k.failed = &kernels.PhaseError{Kernel: k.name, Phase: "hello", Err: err}
	}
	if err == nil {
		if name = h.Device; name == "" {
			name = "unknown"
		}
		k.dev = &hostDevice{CPU: &tensor.CPU{}, name: name}
		return k.dev
	}
	return &hostDevice{CPU: &tensor.CPU{}, name: name}
}

func (k *Kernel) helloTimeout() time.Duration {
	if k.timeout > 0 {
		return k.timeout
	}
	return HelloTimeout
}

func (k *Kernel) callTimeout() time.Duration {
	if k.timeout > 0 {
		return k.timeout
	}
	return CallTimeout
}

// info is the worker's description of this kernel, or why it cannot run here.
func (k *Kernel) info(ctx context.Context) (kernelInfo, *reply, error) {
	if err := k.caseFailure(); err != nil {
		return kernelInfo{}, nil, err
	}
	h, err := k.w.Hello(ctx, k.helloTimeout())
	if err != nil {
		return kernelInfo{}, nil, k.fail("hello", err)
	}
	if k.remote == "" {
		if len(h.Kernels) != 1 {
			return kernelInfo{}, h, kernels.Unsupported(fmt.Errorf("%s: the worker serves %d kernels (%s): name one as %s:NAME", k.name, len(h.Kernels), kernelNames(h), k.name))
		}
		return h.Kernels[0], h, nil
	}
	for _, ki := range h.Kernels {
		if ki.Name == k.remote {
			return ki, h, nil
		}
	}
	return kernelInfo{}, h, kernels.Unsupported(fmt.Errorf("%s: the worker serves %s, not %q", k.name, kernelNames(h), k.remote))
}

// kernelNames lists the worker's kernels for a message: each name one printable line,
// at most maxNamesShown of them (a worker may serve thousands).
func kernelNames(h *reply) string {
	var n []string
	for i, ki := range h.Kernels {
		if i == maxNamesShown {
			n = append(n, fmt.Sprintf("and %d more", len(h.Kernels)-maxNamesShown))
			break
		}
		n = append(n, oneLine(ki.Name, maxShort))
	}
	if len(n) == 0 {
		return "no kernels"
	}
	return strings.Join(n, ", ")
}

// Available says whether the kernel can run here, with its library versions; the error
// says why not.
func (k *Kernel) Available(ctx context.Context) (Versions, error) {
	ki, h, err := k.info(ctx)
	if err != nil {
		return nil, err
	}
	v := mergeVersions(h, ki)
	if !ki.Available {
		return v, fmt.Errorf("%s", ki.Reason)
	}
	return v, nil
}

// BackwardUsesGiven says whether the worker said its backward uses the out and lse it is
// given (backward_uses_given in its hello), starting the worker if need be.
func (k *Kernel) BackwardUsesGiven(ctx context.Context) (bool, error) {
	ki, _, err := k.info(ctx)
	if err != nil {
		return false, err
	}
	if !ki.Available {
		return false, fmt.Errorf("%s", ki.Reason)
	}
	return ki.BackwardUsesGiven, nil
}

// mergeVersions is the worker's versions with the kernel's (the kernel's win), at most
// maxVersions entries (each side was bounded by sanitize).
func mergeVersions(h *reply, ki kernelInfo) Versions {
	v := Versions{}
	maps.Copy(v, h.Versions)
	maps.Copy(v, ki.Versions)
	if len(v) > maxVersions {
		v = boundVersions(v)
	}
	return v
}

// Supports asks the worker (once per problem). A worker that cannot start for want of
// its program is unsupported; one that fails is reported by the case's next request, as
// an error, not hidden as unsupported.
func (k *Kernel) Supports(p kernels.Problem) error {
	_, err := k.supported(context.Background(), p)
	return err
}

func (k *Kernel) supported(ctx context.Context, p kernels.Problem) (string, error) {
	ki, _, err := k.info(ctx)
	switch {
	case errors.Is(err, errNotStarted):
		return "", kernels.Unsupported(err)
	case err != nil && errors.Is(err, kernels.ErrUnsupported):
		return "", err
	case err != nil:
		k.defer_(err)
		return "", nil
	case !ki.Available:
		return "", kernels.Unsupported(fmt.Errorf("%s: unavailable here: %s", k.name, ki.Reason))
	}
	dir, err := k.w.Folder()
	if err != nil {
		return "", err
	}
	pj, err := encodeProblem(p, dir)
	if err != nil {
		if errors.Is(err, kernels.ErrUnsupported) {
			return "", fmt.Errorf("%s: %w", k.name, err)
		}
		return "", kernels.Unsupported(fmt.Errorf("%s: %w", k.name, err))
	}
	key := problemKey(pj)
	k.mu.Lock()
	e, ok := k.supports[key]
	k.mu.Unlock()
	if ok {
		return e.variant, e.err
	}
	r, err := k.w.Call(ctx, "supports", &problemRequest{Kernel: ki.Name, Problem: pj}, k.callTimeout())
	if err != nil {
		k.defer_(k.fail("supports", err))
		return "", nil
	}
	switch r.Status {
	case statusOK:
		e = supportEntry{variant: r.Variant}
	case statusUnsupported:
		e = supportEntry{err: kernels.Unsupported(fmt.Errorf("%s: %s", k.name, r.Reason))}
	default:
		return "", nil // an oom or error answer to supports: let the case's passes say it
	}
	k.mu.Lock()
	k.supports[key] = e
	k.mu.Unlock()
	return e.variant, e.err
}

// defer_ keeps a worker failure met where it could not be reported.
func (k *Kernel) defer_(err error) {
	k.mu.Lock()
	k.deferred = err
	k.mu.Unlock()
}

// takeDeferred returns and clears a kept failure.
func (k *Kernel) takeDeferred() error {
	k.mu.Lock()
	defer k.mu.Unlock()
	err := k.deferred
	k.deferred = nil
	return err
}

// Describe records the worker's and the kernel's library versions and the variant the
// worker says serves p.
func (k *Kernel) Describe(p kernels.Problem, pass kernels.Pass) kernels.Info {
	ctx := context.Background()
	ki, h, err := k.info(ctx)
	if err != nil {
		return kernels.Info{}
	}
	v := mergeVersions(h, ki)
	if h.Worker != "" {
		v["worker"] = h.Worker
	}
	v["protocol"] = fmt.Sprint(h.Protocol)
	info := kernels.Info{Versions: v}
	if ki.Available {
		info.Variant, _ = k.supported(ctx, p)
	}
	return info
}

// prepare checks that the case can be sent and returns the kernel's worker name and the
// problem's JSON form.
func (k *Kernel) prepare(ctx context.Context, p kernels.Problem) (string, *ProblemJSON, error) {
	if err := k.takeDeferred(); err != nil {
		return "", nil, err
	}
	if _, err := k.supported(ctx, p); err != nil {
		return "", nil, err
	}
	if err := k.takeDeferred(); err != nil {
		return "", nil, err
	}
	ki, _, err := k.info(ctx)
	if err != nil {
		return "", nil, err
	}
	dir, err := k.w.Folder()
	if err != nil {
		return "", nil, err
	}
	pj, err := encodeProblem(p, dir)
	return ki.Name, pj, err
}

// answer turns a non-ok reply into an error with its status's mark.
func (k *Kernel) answer(op string, r *reply) error {
	err := fmt.Errorf("%s %s: %s", k.name, op, r.Reason)
	switch r.Status {
	case statusOK:
		return nil
	case statusUnsupported:
		return kernels.Unsupported(err)
	case statusOOM:
		return kernels.OOM(err)
	}
	return err
}

// exchange writes the inputs as .npy files into a fresh folder, asks the worker for the
// outputs, and reads them back into the output tensors.
func (k *Kernel) exchange(ctx context.Context, op string, p kernels.Problem, in map[string]tensor.Tensor, out map[string]tensor.Tensor) error {
	name, pj, err := k.prepare(ctx, p)
	if err != nil {
		return err
	}
	root, err := k.w.Folder()
	if err != nil {
		return err
	}
	k.mu.Lock()
	k.calls++
	prefix := fmt.Sprintf("%s-%d-", op, k.calls)
	k.mu.Unlock()
	// a folder of its own: the kernels of several in-process ranks share one worker (and
	// its folder) and count their calls each, so "backward-3" was made twice (cp --ranks 2)
	dir, err := os.MkdirTemp(root, prefix)
	if err != nil {
		return fmt.Errorf("%s: %w", k.name, err)
	}
	defer os.RemoveAll(dir)
	req := &problemRequest{Kernel: name, Problem: pj, Dir: dir, Inputs: map[string]string{}, Outputs: map[string]string{}}
	for _, n := range sortedKeys(in) {
		h, err := tensor.AsHost(in[n])
		if err != nil {
			return fmt.Errorf("%s %s: input %s: %w", k.name, op, n, err)
		}
		h = inProblemDType(n, h, p.DType)
		f := n + ".npy"
		if err := WriteNPY(filepath.Join(dir, f), h); err != nil {
			return fmt.Errorf("%s %s: %w", k.name, op, err)
		}
		req.Inputs[n] = f
	}
	for _, n := range sortedKeys(out) {
		req.Outputs[n] = n + ".npy"
	}
	r, err := k.w.Call(ctx, op, req, k.callTimeout())
	if err != nil {
		return err
	}
	if err := k.answer(op, r); err != nil {
		return err
	}
	for _, n := range sortedKeys(out) {
		h, err := tensor.AsHost(out[n])
		if err != nil {
			return fmt.Errorf("%s %s: output %s: %w", k.name, op, n, err)
		}
		got := h // read in the problem's dtype, then widened into h (inProblemDType)
		if n != "lse" && h.DType() != p.DType {
			got = tensor.NewHost(p.DType, h.Shape()...)
		}
		if err := ReadNPYInto(filepath.Join(dir, req.Outputs[n]), got); err != nil {
			return fmt.Errorf("%s %s: the worker's %s: %w", k.name, op, n, err)
		}
		if got != h {
			h.SetFloat64s(got.Float64s())
		}
	}
	return nil
}

// inProblemDType is h as the protocol carries tensor n: in the problem's dtype dt, lse in
// fp32. The CP methods hand their kernel fp32 partial outputs (and take its gradients so),
// where the worker reads and writes the problem's dtype: such a tensor is converted on the
// way in, and read in dt then widened on the way out (the worker computed it in dt).
func inProblemDType(n string, h *tensor.Host, dt tensor.DType) *tensor.Host {
	if h == nil || n == "lse" || h.DType() == dt {
		return h
	}
	c := tensor.NewHost(dt, h.Shape()...)
	c.SetFloat64s(h.Float64s())
	return c
}

func sortedKeys(m map[string]tensor.Tensor) []string {
	keys := make([]string, 0, len(m))
	for n := range m {
		keys = append(keys, n)
	}
	sort.Strings(keys)
	return keys
}

// Forward asks the worker for out and lse of q, k, v (host tensors, as the check gives).
func (k *Kernel) Forward(ctx context.Context, p kernels.Problem, q, kk, v, out, lse tensor.Tensor) error {
	return k.exchange(ctx, "forward", p, map[string]tensor.Tensor{"q": q, "k": kk, "v": v},
		map[string]tensor.Tensor{"out": out, "lse": lse})
}

// Backward asks the worker for dq, dk and dv.
func (k *Kernel) Backward(ctx context.Context, p kernels.Problem, q, kk, v, out, lse, dout, dq, dk, dv tensor.Tensor) error {
	return k.exchange(ctx, "backward", p,
		map[string]tensor.Tensor{"q": q, "k": kk, "v": v, "out": out, "lse": lse, "dout": dout},
		map[string]tensor.Tensor{"dq": dq, "dk": dk, "dv": dv})
}

// TimeoutFor is the default bound on a time request: CallTimeout plus every repetition
// at a pessimistic 20 TFLOP/s.
func TimeoutFor(p kernels.Problem, pass kernels.Pass, s kernels.TimeSpec) time.Duration {
	reps := float64(s.Warmup + s.Iters + 2)
	return CallTimeout + time.Duration(reps*p.FLOPs(pass)/20e12*float64(time.Second))
}

// TimePass asks the worker to time the case on its device (CUDA events, the cache
// flushed before each repetition) with inputs it draws from the seed.
func (k *Kernel) TimePass(ctx context.Context, p kernels.Problem, pass kernels.Pass, s kernels.TimeSpec) (kernels.Timing, error) {
	name, pj, err := k.prepare(ctx, p)
	if err != nil {
		return kernels.Timing{}, err
	}
	timeout := k.timeout
	if timeout <= 0 {
		timeout = TimeoutFor(p, pass, s)
	}
	seed, warm := s.Seed, s.Warmup
	r, err := k.w.Call(ctx, "time", &problemRequest{Kernel: name, Problem: pj, Pass: pass.String(), Seed: &seed,
		Warmup: &warm, Iters: s.Iters, FlushBytes: s.FlushBytes}, timeout)
	if err != nil {
		return kernels.Timing{}, err
	}
	if err := k.answer("time", r); err != nil {
		return kernels.Timing{}, err
	}
	ms := func(v float64) time.Duration { return time.Duration(v * 1e6) }
	t := kernels.Timing{Median: ms(*r.MedianMs), Min: ms(*r.MinMs), Max: ms(*r.MaxMs), Mean: ms(*r.MeanMs)}
	if r.PeakMemBytes != nil {
		t.PeakMemBytes = *r.PeakMemBytes
	}
	t.Variant = r.Variant
	return t, nil
}
