package cp

import "fmt"

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

// MeshRefuser is a method that can say that a world has no mesh of its own for it: a
// 2-D method on a rank count without a split U x R with U, R >= 2. Sweeps (longca cp,
// longca simulate) ask it before running the method's fallback mesh, so that a 1 x N
// "usp" never reports Ring P2P's numbers under usp's name; the fallback itself still
// plans (the conformance tests run it on 1 and 2 ranks).
type MeshRefuser interface {
	NoMesh(fixed Config) error
}

// noGridMesh is the refusal of a 2-D method on fixed.Ranks ranks when the user gave no
// mesh and the ranks have no U x R split with U, R >= 2.
func noGridMesh(name string, fixed Config) error {
	if fixed.Ulysses > 0 || fixed.Ring > 0 {
		return nil
	}
	n := fixed.Ranks
	for u := 2; u <= n/2; u++ {
		if n%u == 0 {
			return nil
		}
	}
	return fmt.Errorf("%s needs a 2-D mesh U x R with U, R >= 2, and %d ranks have none (%d is 1 or a prime): its only meshes would be 1 x %d (ring-p2p's) and %d x 1 (ulysses'); use those methods, or name a mesh with --ulysses/--ring", name, n, n, n, n)
}

// NoMesh implements MeshRefuser.
func (USP) NoMesh(fixed Config) error { return noGridMesh("usp", fixed) }

// NoMesh implements MeshRefuser.
func (LoongTrain) NoMesh(fixed Config) error { return noGridMesh("loongtrain", fixed) }
