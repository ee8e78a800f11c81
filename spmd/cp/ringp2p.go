package cp

import "github.com/longca/longca/kernels"

// RingP2P passes K and V around a ring of N ranks in N steps, overlapping the next
// step's transfer with the current step's attention (ring attention; zigzag by default).
type RingP2P struct{ engine }

func init() { Register(RingP2P{}) }

// Name is "ring-p2p".
func (RingP2P) Name() string { return "ring-p2p" }

// Doc is a one-line description.
func (RingP2P) Doc() string {
	return "K/V around a ring of N ranks, transfer overlapped with attention; dK/dV travel back"
}

// Plan is a 1 x N mesh, one window.
func (RingP2P) Plan(cfg Config, p kernels.Problem) (*Plan, error) {
	return newPlan("ring-p2p", cfg, p, mesh{u: 1, r: cfg.Ranks, w: 1, sharding: cfg.Sharding})
}
