package harness

import (
	"context"
	"runtime"
	"testing"
	"weak"

	"github.com/longca/longca/kernels"
	"github.com/longca/longca/mask"
	"github.com/longca/longca/results"
	"github.com/longca/longca/tensor"
)

// PlanArea is PlanProblem's area to the pair, block-sparse masks built or not: uniform
// blocks that divide the length and blocks that do not, variable blocks, random and
// content scores, one KV head and several; and a static mask.
func TestPlanAreaIsPlanProblems(t *testing.T) {
	sw := Sweep{SeqLens: []int{250, 256, 600}, Heads: []Heads{{1, 1}, {4, 2}, {6, 3}}, HeadDim: 8, DType: tensor.BF16,
		Kernels: []string{"ref"}, Passes: []kernels.Pass{kernels.Fwd}}
	for _, r := range []float64{0.05, 0.5, 1} {
		for _, sc := range []mask.Scores{mask.RandomScores, mask.ContentScores} {
			for _, b := range []int{1, 7, 8, 64, 100} {
				sw.Sparse = append(sw.Sparse, SparseSpec{Block: b, Ratio: r, Scores: sc})
			}
			sw.Sparse = append(sw.Sparse, SparseSpec{AvgBlock: 128, Ratio: r, Scores: sc}, SparseSpec{AvgBlock: 200, Ratio: r, Scores: sc})
		}
	}
	cases := sw.Cases()
	for _, c := range append(cases, Case{Mask: "causal_document", SeqLen: 1000, Heads: Heads{4, 2}, HeadDim: 8, DType: tensor.BF16, Seed: 5}) {
		for _, seed := range []uint64{0, 42} {
			c.Seed = seed
			p, err := PlanProblem(c, BuildMask)
			if err != nil {
				t.Fatalf("%s: PlanProblem: %v", c, err)
			}
			got, err := PlanArea(c, BuildMask)
			if err != nil {
				t.Fatalf("%s: PlanArea: %v", c, err)
			}
			if got != p.Area() {
				t.Fatalf("%s seed %d: PlanArea %g, PlanProblem's %g", c, seed, got, p.Area())
			}
		}
	}
	// refused as PlanProblem refuses it
	c := Case{Mask: "block_sparse_variable", SeqLen: 100, Heads: Heads{1, 1}, HeadDim: 8, DType: tensor.BF16, Sparse: SparseSpec{AvgBlock: 128, Ratio: 0.5}}
	_, perr := PlanProblem(c, BuildMask)
	if _, err := PlanArea(c, BuildMask); err == nil || perr == nil || err.Error() != perr.Error() {
		t.Fatalf("PlanArea's error %v, PlanProblem's %v", err, perr)
	}
}

// maskRecorder is a kernel that times nothing and records (weakly) the first slice of
// each problem's block-sparse mask it is asked about.
type maskRecorder struct {
	*fakeKernel
	seen []weak.Pointer[mask.Slice]
}

func (m *maskRecorder) Supports(p kernels.Problem) error {
	m.seen = append(m.seen, weak.Make(&p.HeadMasks[0].Slices[0]))
	return m.fakeKernel.Supports(p)
}

// A sparse run builds each mask once: the cases of one mask (every kernel and pass) run
// on the problem its first case built, and the mask before is dropped once the next is
// built, so one is held at a time (1-token blocks over 16K tokens are most of a GiB and
// seconds to build, and were built again for every kernel and pass).
func TestRunnerBuildsEachSparseMaskOnce(t *testing.T) {
	sw := Sweep{SeqLens: []int{256, 512}, Heads: []Heads{{2, 1}, {4, 2}}, HeadDim: 8, DType: tensor.BF16,
		Kernels: []string{"a", "b"}, Passes: []kernels.Pass{kernels.Fwd, kernels.Bwd}, Seed: 1}
	for _, r := range []float64{0.2, 0.5} {
		sw.Sparse = append(sw.Sparse, SparseSpec{Block: 8, Ratio: r}, SparseSpec{Block: 8, Ratio: r, Scores: mask.ContentScores})
	}
	f := newFake()
	f.noop = true
	k := &maskRecorder{fakeKernel: f}
	r := &Runner{Iters: 1, NewKernel: func(string) (kernels.Kernel, error) { return k, nil }}
	type maskKey struct {
		label  string
		seqlen int
		heads  Heads
	}
	built := map[maskKey]weak.Pointer[mask.Slice]{}
	var lastKey maskKey
	cases := sw.Cases()
	err := r.RunAll(context.Background(), cases, func(i int, row results.Row) error {
		c := cases[i]
		if row.Status != results.StatusOK {
			t.Fatalf("case %s: %s %s", c, row.Status, row.Reason)
		}
		got := k.seen[len(k.seen)-1]
		key := maskKey{c.Label(), c.SeqLen, c.Heads}
		if b, ok := built[key]; ok {
			if key != lastKey {
				t.Fatalf("case %s: its mask's cases are not one after another", c)
			}
			if b != got {
				t.Errorf("case %s (%s %s): its mask built again, not taken from its first case", c, c.Kernel, c.Pass)
			}
			return nil
		}
		built[key] = got
		if i > 0 {
			runtime.GC()
			if built[lastKey].Value() != nil {
				t.Errorf("case %s: the mask of %v still held once the next was built", c, lastKey)
			}
		}
		lastKey = key
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if want := len(cases) / (len(sw.Kernels) * len(sw.Passes)); len(built) != want || len(k.seen) != len(cases) {
		t.Fatalf("%d masks for %d cases (%d seen): want %d", len(built), len(cases), len(k.seen), want)
	}
}
