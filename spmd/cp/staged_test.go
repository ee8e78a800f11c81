package cp

import (
	"context"
	"testing"

	"github.com/longca/longca/comm"
	"github.com/longca/longca/comm/local"
	"github.com/longca/longca/kernels"
	"github.com/longca/longca/kernels/ref"
	"github.com/longca/longca/mask"
	"github.com/longca/longca/tensor"
)

// TestStagedKernel: the methods through the staging adapter (here around the CPU
// reference, whose device also takes host tensors) pass the check, with partial outputs
// that go through the problem's dtype on the "device".
func TestStagedKernel(t *testing.T) {
	spec, err := mask.Build("causal_document", 128, testMaskOptions(4))
	if err != nil {
		t.Fatal(err)
	}
	docs, _ := spec.Docs()
	p := kernels.Problem{HeadsQ: 4, HeadsKV: 2, HeadDim: 16, DType: tensor.BF16, Mask: spec.Mask}
	k := Staged(ref.New(ref.Options{}))
	if k.Name() != "ref+staged" || k.Supports(p) != nil {
		t.Fatalf("staged kernel %s: %v", k.Name(), k.Supports(p))
	}
	for _, name := range []string{"ring-p2p", "usp", "ring-allgather"} {
		m, _ := New(name)
		pl, err := m.Plan(Config{Ranks: 4, Ulysses: 2, Ring: 2, Docs: docs}, p)
		if err != nil {
			t.Fatal(err)
		}
		err = local.Run(4, func(c comm.Comm) error {
			r, err := NewRun(pl, k, c)
			if err != nil {
				return err
			}
			rep, err := CheckRank(context.Background(), m, r, CheckOptions{Seed: 11, Backward: true})
			if err == nil && !rep.Pass {
				t.Errorf("%s: %s", name, rep)
			}
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
	}
}
