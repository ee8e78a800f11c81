package cp

import "github.com/longca/longca/kernels"

// USP is the 2-D mesh of unified sequence parallelism: Ulysses inside groups of U ranks,
// ring attention across the R groups (U x R = N).
type USP struct{ engine }

func init() { Register(USP{}) }

// Name is "usp".
func (USP) Name() string { return "usp" }

// Doc is a one-line description.
func (USP) Doc() string { return "2-D mesh U x R: Ulysses inside groups of U, ring across R" }

// Plan takes the mesh from cfg (DefaultMesh fills what is missing).
func (USP) Plan(cfg Config, p kernels.Problem) (*Plan, error) {
	u, r := DefaultMesh(cfg, p)
	return newPlan("usp", cfg, p, mesh{u: u, r: r, w: 1, sharding: cfg.Sharding})
}

// DefaultMesh resolves cfg's Ulysses x Ring: a missing one is N divided by the other;
// with neither, U is the largest divisor of N of at most 8 (one node) that the query
// heads split over and the KV heads split over or replicate onto.
func DefaultMesh(cfg Config, p kernels.Problem) (u, r int) {
	n := cfg.Ranks
	switch {
	case cfg.Ulysses > 0 && cfg.Ring > 0:
		return cfg.Ulysses, cfg.Ring
	case cfg.Ulysses > 0:
		return cfg.Ulysses, n / max(cfg.Ulysses, 1)
	case cfg.Ring > 0:
		return n / cfg.Ring, cfg.Ring
	}
	u = 1
	for c := 1; c <= min(n, 8); c++ {
		if n%c == 0 && p.HeadsQ%c == 0 && p.HeadsKV > 0 && (p.HeadsKV%c == 0 || c%p.HeadsKV == 0) {
			u = c
		}
	}
	return u, n / u
}
