package cp

import (
	"math/rand/v2"

	"github.com/longca/longca/kernels"
	"github.com/longca/longca/tensor"
)

// inputs are fresh standard normal q, k, v, dout for p from seed.
func inputs(p kernels.Problem, seed uint64) (q, k, v, dout *tensor.Host) {
	rng := rand.New(rand.NewPCG(seed, 0xc0ffee))
	qs, kvs, _ := p.Shapes()
	q, k, v, dout = tensor.NewHost(p.DType, qs...), tensor.NewHost(p.DType, kvs...), tensor.NewHost(p.DType, kvs...), tensor.NewHost(p.DType, qs...)
	for _, t := range []*tensor.Host{q, k, v, dout} {
		t.FillNormal(rng, 1)
	}
	return q, k, v, dout
}
