// Package cp holds the context-parallel (CP) attention methods: ring-p2p, ring-allgather,
// ulysses, usp, loongtrain and longca's own balanced (dispatch.go: blocks placed by mask
// area), one file each behind one Method interface and registry,
// with the sequence sharding (contiguous, or zigzag per document), the per-step
// sub-masks (cut from the global mask by mask.Mask.Window) and the log-sum-exp merge
// they share.
//
// All methods but ring-allgather are one engine: an optional Ulysses all-to-all
// (sequence <-> heads) over groups of U ranks around a double ring over R ranks (the
// ring cut into W windows: inner rings inside a window, an outer ring across windows).
// ring-p2p is U=1, W=1; ulysses is R=1; usp is U x R with W=1; loongtrain is U x R
// with W windows.
package cp

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"

	"github.com/longca/longca/kernels"
	"github.com/longca/longca/tensor"
)

// Method is one context-parallel attention algorithm.
//
// Tensors are this rank's shard in the kernels' layouts: q, out, dq are [Tokens,
// HeadsQ, HeadDim], k, v, dk, dv are [Tokens, HeadsKV, HeadDim], lse is [HeadsQ, Tokens]
// (fp32), where Tokens = Plan.Tokens and the rows are the rank's shard of the padded
// sequence (Plan.Shard cuts them from the global tensors, Plan.Gather joins them back).
type Method interface {
	Name() string
	// Doc is a one-line description.
	Doc() string
	// Meshes lists the configurations the method runs on fixed.Ranks ranks: for a 2-D
	// method every U x R = Ranks with U, R >= 2 (or the user's, when fixed names
	// Ulysses or Ring), for the others their own one. HeadFirst, Sharding and Windows
	// are kept as given. Plan may still refuse one (heads that do not split): the
	// harness reports that as an unsupported row.
	Meshes(fixed Config) []Config
	// Plan checks the configuration against the problem (before any work: impossible
	// meshes, head counts and token counts fail here with one clear line) and computes
	// the sharding. Every rank computes the same plan.
	Plan(cfg Config, p kernels.Problem) (*Plan, error)
	// Forward writes out and lse for this rank's queries. Collective over the run's ranks.
	Forward(ctx context.Context, r *Run, q, k, v, out, lse tensor.Tensor) error
	// Backward writes dq, dk, dv given the forward's out and lse. As with autograd, it
	// may use what the last Forward on the same Run saved (the head-sharded tensors of
	// Ulysses), so Forward must have run on r with the same q, k, v first.
	Backward(ctx context.Context, r *Run, q, k, v, out, lse, dout, dq, dk, dv tensor.Tensor) error
	// CommBytes is the bytes each rank sends in one pass (fwd, bwd or fwd+bwd), computed
	// from the plan; comm.Counters counts the same. A method whose ranks send different
	// amounts returns the most and implements RankBytes (RankCommBytesOf).
	CommBytes(pl *Plan, pass kernels.Pass) int64
}

var (
	mu       sync.Mutex
	registry = map[string]Method{}
)

// Register adds a method; call it from an init function.
func Register(m Method) {
	mu.Lock()
	defer mu.Unlock()
	if _, dup := registry[m.Name()]; dup {
		panic("cp: duplicate method " + m.Name())
	}
	registry[m.Name()] = m
}

// Names lists the registered methods, sorted.
func Names() []string {
	mu.Lock()
	defer mu.Unlock()
	out := make([]string, 0, len(registry))
	for n := range registry {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// New returns the named method.
func New(name string) (Method, error) {
	mu.Lock()
	m, ok := registry[name]
	mu.Unlock()
	if !ok {
		return nil, fmt.Errorf("unknown CP method %q (--methods): registered are %s", name, strings.Join(Names(), ", "))
	}
	return m, nil
}

// CommBytesOf is the plan's method's CommBytes (0 for an unregistered method).
func CommBytesOf(pl *Plan, pass kernels.Pass) int64 {
	m, err := New(pl.Method)
	if err != nil {
		return 0
	}
	return m.CommBytes(pl, pass)
}

// RankBytes is implemented by a method whose ranks send different amounts (balanced):
// its CommBytes is then the most any rank sends, and RankCommBytes each rank's.
type RankBytes interface {
	RankCommBytes(pl *Plan, rank int, pass kernels.Pass) int64
}

// RankCommBytesOf is what rank sends in one pass of the plan's method, as its
// comm.Counters count it: the method's RankCommBytes, or CommBytes (every rank sends
// the same); 0 for an unregistered method.
func RankCommBytesOf(pl *Plan, rank int, pass kernels.Pass) int64 {
	m, err := New(pl.Method)
	if err != nil {
		return 0
	}
	if rb, ok := m.(RankBytes); ok {
		return rb.RankCommBytes(pl, rank, pass)
	}
	return m.CommBytes(pl, pass)
}
