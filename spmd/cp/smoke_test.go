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

func TestSmoke(t *testing.T) {
	for _, name := range Names() {
		spec, err := mask.Build("causal_document", 256, mask.Options{Seed: 1, Window: 32, BlockSize: 32})
		if err != nil {
			t.Fatal(err)
		}
		docs, _ := spec.Docs()
		p := kernels.Problem{HeadsQ: 4, HeadsKV: 2, HeadDim: 16, DType: tensor.BF16, Mask: spec.Mask}
		m, _ := New(name)
		pl, err := m.Plan(Config{Ranks: 4, Ulysses: 2, Ring: 2, Windows: 0, Docs: docs}, p)
		if err != nil {
			t.Fatal(err)
		}
		err = local.Run(4, func(c comm.Comm) error {
			r, err := NewRun(pl, ref.New(ref.Options{}), c)
			if err != nil {
				return err
			}
			rep, err := CheckRank(context.Background(), m, r, 7, true)
			if c.Rank() == 0 {
				t.Logf("%s %s pad %d: %v", name, pl.Config.Mesh(), pl.Padding(), rep)
			}
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
	}
}
