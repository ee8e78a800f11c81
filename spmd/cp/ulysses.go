package cp

import "github.com/longca/longca/kernels"

// Ulysses turns sequence shards into head shards with an all-to-all, attends the full
// sequence on H/N heads, and turns the result back (DeepSpeed-Ulysses). KV heads are
// replicated when there are fewer than N.
type Ulysses struct{ engine }

func init() { Register(Ulysses{}) }

// Name is "ulysses".
func (Ulysses) Name() string { return "ulysses" }

// Doc is a one-line description.
func (Ulysses) Doc() string {
	return "all-to-all sequence<->heads, full-sequence attention on H/N heads, all-to-all back"
}

// Plan is an N x 1 mesh; contiguous sharding by default.
func (Ulysses) Plan(cfg Config, p kernels.Problem) (*Plan, error) {
	s := cfg.Sharding
	if s == DefaultSharding {
		s = Contiguous
	}
	return newPlan("ulysses", cfg, p, mesh{u: cfg.Ranks, r: 1, w: 1, sharding: s})
}
