package cp

import "github.com/longca/longca/kernels"

// LoongTrain is the 2-D mesh with the double ring: Ulysses inside groups of U ranks, and
// the ring of R ranks cut into W windows: K/V go around an inner ring inside a window
// while the outer ring moves them to the next window, overlapped.
type LoongTrain struct{ engine }

func init() { Register(LoongTrain{}) }

// Name is "loongtrain".
func (LoongTrain) Name() string { return "loongtrain" }

// Doc is a one-line description.
func (LoongTrain) Doc() string {
	return "2-D mesh U x R with the double ring: R cut into W windows (inner rings, outer ring)"
}

// Plan takes the mesh from cfg (DefaultMesh) and the windows from cfg.Windows, or
// DefaultWindows.
func (LoongTrain) Plan(cfg Config, p kernels.Problem) (*Plan, error) {
	u, r := DefaultMesh(cfg, p)
	w := cfg.Windows
	if w == 0 {
		w = DefaultWindows(u, r)
	}
	return newPlan("loongtrain", cfg, p, mesh{u: u, r: r, w: w, sharding: cfg.Sharding})
}

// DefaultWindows cuts the ring so that one window of U x ws ranks fills at most a node of
// 8: ws is the largest divisor of r with u*ws <= 8.
func DefaultWindows(u, r int) int {
	ws := 1
	for c := 1; c <= r; c++ {
		if r%c == 0 && u*c <= 8 {
			ws = c
		}
	}
	return r / ws
}
