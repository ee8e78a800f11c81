package cp

// Each method says which meshes it runs on (Method.Meshes), so nothing outside a method
// switches on its name.

// oneMesh is the mesh of a method that chooses its own (ring-p2p and ring-allgather:
// 1 x N; ulysses: N x 1): the user's Ulysses, Ring and Windows do not apply.
func oneMesh(fixed Config) []Config {
	c := fixed
	c.Ulysses, c.Ring, c.Windows, c.Block, c.Stages = 0, 0, 0, 0, 0
	return []Config{c}
}

// gridMeshes are the meshes of a 2-D method on fixed.Ranks ranks: the user's when
// Ulysses or Ring is set, else every U x R = Ranks with U, R >= 2, or the method's
// default mesh when Ranks has no such split (1, 2, a prime).
func gridMeshes(fixed Config) []Config {
	fixed.Block, fixed.Stages = 0, 0
	if fixed.Ulysses > 0 || fixed.Ring > 0 {
		return []Config{fixed}
	}
	n := fixed.Ranks
	var out []Config
	for u := 2; u <= n/2; u++ {
		if n%u == 0 {
			c := fixed
			c.Ulysses, c.Ring = u, n/u
			out = append(out, c)
		}
	}
	if len(out) == 0 {
		out = append(out, fixed)
	}
	return out
}

// Meshes implements Method: one mesh, the method's own.
func (engine) Meshes(fixed Config) []Config { return oneMesh(fixed) }

// Meshes implements Method: one mesh, 1 x N.
func (RingAllGather) Meshes(fixed Config) []Config { return oneMesh(fixed) }

// Meshes implements Method: every U x R split of the ranks, or the user's.
func (USP) Meshes(fixed Config) []Config { return gridMeshes(fixed) }

// Meshes implements Method: every U x R split of the ranks, or the user's (with the
// user's windows, or DefaultWindows).
func (LoongTrain) Meshes(fixed Config) []Config { return gridMeshes(fixed) }
