package cp

import (
	"context"
	"fmt"
	"testing"

	"github.com/longca/longca/comm"
	"github.com/longca/longca/comm/local"
	"github.com/longca/longca/kernels"
	"github.com/longca/longca/kernels/ref"
	"github.com/longca/longca/mask"
	"github.com/longca/longca/tensor"
)

// TestSmoke runs every method on one rank and on a 2x2 mesh of four, checked.
func TestSmoke(t *testing.T) {
	for _, n := range []int{1, 4} {
		smoke(t, n)
	}
}

func smoke(t *testing.T, n int) {
	for _, name := range Names() {
		spec, err := mask.Build("causal_document", 256, mask.Options{Seed: 1, Window: 32, BlockSize: 32})
		if err != nil {
			t.Fatal(err)
		}
		docs, _ := spec.Docs()
		p := kernels.Problem{HeadsQ: 4, HeadsKV: 2, HeadDim: 16, DType: tensor.BF16, Mask: spec.Mask}
		m, _ := New(name)
		cfg := Config{Ranks: n, Docs: docs}
		if n == 4 {
			cfg.Ulysses, cfg.Ring = 2, 2
		}
		pl, err := m.Plan(cfg, p)
		if err != nil {
			t.Fatal(err)
		}
		err = local.Run(n, func(c comm.Comm) error {
			r, err := NewRun(pl, ref.New(ref.Options{}), c)
			if err != nil {
				return err
			}
			rep, err := CheckRank(context.Background(), m, r, CheckOptions{Seed: 7, Backward: true})
			if c.Rank() == 0 {
				t.Logf("%s %s pad %d: %v", name, pl.Config.Mesh(), pl.Padding(), rep)
			}
			if err == nil && !rep.Pass {
				err = fmt.Errorf("%s on %d ranks: %v", name, n, rep)
			}
			if cerr := r.Close(); err == nil {
				err = cerr
			}
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
	}
}
