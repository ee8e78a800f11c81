package check

import (
	"context"
	"reflect"
	"sync"
	"testing"

	"github.com/longca/longca/kernels"
	"github.com/longca/longca/kernels/ref"
	"github.com/longca/longca/tensor"
)

// A sweep's checks through one Cache: several kernels, both passes, one case. The
// references are computed once per pass at most (a forward after a backward costs none),
// every verdict and figure is the one the uncached check gives, and a faulty kernel still
// fails; a new seed or another problem computes them again.
func TestCacheSharesReferences(t *testing.T) {
	ctx := context.Background()
	ks := []kernels.Kernel{
		ref.New(ref.Options{}),
		faulty{ref.New(ref.Options{}), perturbOut},
		ref.New(ref.Options{Emulate: tensor.BF16}),
		faulty{ref.New(ref.Options{}), perturbDK},
	}
	p := testProblem(tensor.BF16)
	c := &Cache{}
	check := func(k kernels.Kernel, p kernels.Problem, seed uint64, pass kernels.Pass) {
		t.Helper()
		got, err := c.Check(ctx, k, p, seed, pass)
		if err != nil {
			t.Fatal(err)
		}
		want, err := run(ctx, k, p, seed, pass)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s %v seed %d: cached %s, uncached %s", k.Name(), pass, seed, got, want)
		}
	}
	for _, pass := range []kernels.Pass{kernels.Fwd, kernels.Bwd} {
		for _, k := range ks {
			check(k, p, 3, pass)
		}
	}
	if n := c.Runs(); n != 2 {
		t.Errorf("4 kernels x fwd, bwd: references computed %d times, want 2", n)
	}
	for _, k := range ks { // the backward's references serve the forward and Both
		check(k, p, 3, kernels.Fwd)
		check(k, p, 3, kernels.FwdBwd)
	}
	if n := c.Runs(); n != 2 {
		t.Errorf("after forward and both checks again: %d, want 2", n)
	}
	check(ks[0], p, 4, kernels.Bwd) // a new seed: new inputs
	q := p
	q.HeadsQ = 2 // another problem
	check(ks[0], q, 4, kernels.Bwd)
	r := p
	r.Mask.Slices = r.Mask.Slices[:3] // the same shape, one slice fewer
	check(ks[0], r, 4, kernels.Fwd)
	if n := c.Runs(); n != 5 {
		t.Errorf("a new seed, another head count, another mask: %d, want 5", n)
	}
	// a faulty kernel through the cache still fails
	if rep, err := c.Check(ctx, ks[1], p, 3, kernels.Fwd); err != nil || rep.Pass {
		t.Errorf("perturbed out through the cache: %s %v", rep, err)
	}
}

// Kernels checked at once through one Cache (the race detector watches): each gets the
// uncached verdict.
func TestCacheConcurrent(t *testing.T) {
	ctx := context.Background()
	p := testProblem(tensor.BF16)
	c := &Cache{}
	var wg sync.WaitGroup
	for i := range 6 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			k := kernels.Kernel(ref.New(ref.Options{}))
			want := true
			if i%2 == 1 {
				k, want = faulty{ref.New(ref.Options{}), perturbDK}, false
			}
			rep, err := c.Check(ctx, k, p, uint64(7+i%3), kernels.Bwd)
			if err != nil || rep.Pass != want {
				t.Errorf("kernel %d: %s %v, want pass %v", i, rep, err, want)
			}
		}()
	}
	wg.Wait()
}
