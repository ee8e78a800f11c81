package harness

import (
	"fmt"

	"github.com/longca/longca/results"

	"github.com/longca/longca/kernels"
	"github.com/longca/longca/mask"
	"github.com/longca/longca/spmd/cp"
	"github.com/longca/longca/tensor"
)

// CPSweep is what `longca cp` measures: every method on each mesh it runs on, x masks x
// head settings, each on Samples masks (seeds Seed..Seed+Samples-1) and every pass.
type CPSweep struct {
	Methods []string
	Masks   []string
	// SeqLen is the global sequence length (weak scaling: ranks x tokens per rank).
	SeqLen  int
	Heads   []Heads
	HeadDim int
	DType   tensor.DType
	Passes  []kernels.Pass
	Samples int
	Seed    uint64
	// Kernel is the attention kernel of every step (by name, as kernels.New takes it).
	Kernel string
	// Mesh holds the user's mesh choices: Ulysses, Ring and Windows (0: the method's),
	// HeadFirst and Sharding. Ranks is set per world.
	Mesh cp.Config
	// Build lays out a mask; nil means BuildCPMask.
	Build MaskBuilder
	// Docs is where Build's documents come from (the zero Docs: MASKS.md's CP rule): the
	// estimates read their expected count and lengths from it before any mask is built
	// (MaskDocs).
	Docs Docs
}

// CPCase is one method on one mesh, mask and head setting; its rows are samples x
// passes.
type CPCase struct {
	Method string
	// Config is the mesh, resolved by the plan of the first sample (Docs nil).
	Config cp.Config
	Mask   string
	Heads  Heads
	// Skip, when set, says why the method cannot run this mesh with these heads (its
	// plan refused it): the case's rows are unsupported, with this reason.
	Skip error
	// NoMesh says Skip is the method's refusal of the rank count itself (cp.MeshRefuser:
	// a 2-D method on 1 or a prime number of ranks), not of the user's settings.
	NoMesh bool
}

func (c CPCase) String() string {
	return fmt.Sprintf("%s %s %s %s", c.Method, c.Config.Mesh(), c.Mask, c.Heads)
}

// BuildCPMask is the default mask builder of CP runs: mask.Build with MASKS.md's CP
// document distributions (mask.PurposeCP).
func BuildCPMask(name string, seqlen int, seed uint64) (mask.Spec, error) {
	return mask.Build(name, seqlen, mask.Options{Seed: seed, Purpose: mask.PurposeCP})
}

// MaskSpec lays out the named mask with the sweep's builder and returns its documents.
func (s CPSweep) MaskSpec(name string, seqlen int, seed uint64) (mask.Spec, []mask.Range, error) {
	return s.build(name, seqlen, seed)
}

func (s CPSweep) build(name string, seqlen int, seed uint64) (mask.Spec, []mask.Range, error) {
	b := s.Build
	if b == nil {
		b = BuildCPMask
	}
	spec, err := b(name, seqlen, seed)
	if err != nil {
		return spec, nil, err
	}
	docs, err := spec.Docs()
	return spec, docs, err
}

// Problem is the global problem of a head setting on a mask.
func (s CPSweep) Problem(h Heads, m mask.Mask) kernels.Problem {
	return kernels.Problem{HeadsQ: h.Q, HeadsKV: h.KV, HeadDim: s.HeadDim, DType: s.DType, Mask: m}
}

// PlanSample builds the mask of sample (0 is the first: seed Seed) and plans the case on
// it at the sweep's length: the one place a CP case's mask is built and planned (the
// run, its checks and baseline, the dry run's table, simulate's predictions).
func (s CPSweep) PlanSample(c CPCase, sample int) (cp.Method, *cp.Plan, mask.Spec, error) {
	return s.plan(c, s.SeqLen, c.Heads, s.Seed+uint64(sample))
}

// plan builds sample's mask and plans the case on it.
func (s CPSweep) plan(c CPCase, seqlen int, h Heads, seed uint64) (cp.Method, *cp.Plan, mask.Spec, error) {
	m, err := cp.New(c.Method)
	if err != nil {
		return nil, nil, mask.Spec{}, err
	}
	spec, docs, err := s.build(c.Mask, seqlen, seed)
	if err != nil {
		return m, nil, spec, fmt.Errorf("mask %s at S=%d: %w", c.Mask, seqlen, err)
	}
	pl, err := s.planOn(m, c, h, spec, docs)
	return m, pl, spec, err
}

// planOn plans case c with heads h on a built mask and its documents: the one place a
// CP case is planned.
func (s CPSweep) planOn(m cp.Method, c CPCase, h Heads, spec mask.Spec, docs []mask.Range) (*cp.Plan, error) {
	cfg := c.Config
	cfg.Docs = docs
	return m.Plan(cfg, s.Problem(h, spec.Mask))
}

// Configs expands the sweep for n ranks without planning: every method x each mesh it
// runs on (Method.Meshes) x masks x heads, in that order; a method that has no mesh of
// its own on n ranks (cp.MeshRefuser) gives cases that carry Skip. It is the case
// description `longca cp` (through Cases) and `longca simulate` share.
func (s CPSweep) Configs(n int) ([]CPCase, error) {
	var out []CPCase
	fixed := s.Mesh
	fixed.Ranks = n
	for _, name := range s.Methods {
		m, err := cp.New(name)
		if err != nil {
			return nil, err
		}
		var refused error // a 2-D method on ranks without a 2-D mesh: unsupported rows, not a 1-D fallback's numbers
		if r, ok := m.(cp.MeshRefuser); ok {
			refused = r.NoMesh(fixed)
		}
		for _, cfg := range m.Meshes(fixed) {
			for _, mk := range s.Masks {
				for _, h := range s.Heads {
					c := CPCase{Method: name, Config: cfg, Mask: mk, Heads: h}
					if refused != nil {
						c.Skip, c.NoMesh = Unsupported(refused), true
					}
					out = append(out, c)
				}
			}
		}
	}
	return out, nil
}

// Cases expands the sweep for n ranks (Configs) and plans each case's first sample, so an
// impossible configuration is known before any work: such a case carries Skip (it
// becomes unsupported rows). The error is a method that does not exist or a mask that
// cannot be laid out at this length: the flags' fault. The masks are built one at a time,
// each planned for all its cases and then let go: at a long length a mask of short
// documents is gigabytes, and the estimates (DocsFit) count one.
func (s CPSweep) Cases(n int) ([]CPCase, error) {
	cases, err := s.Configs(n)
	if err != nil {
		return nil, err
	}
	for _, name := range s.Masks {
		var spec mask.Spec
		var docs []mask.Range
		built := false
		for i := range cases {
			c := &cases[i]
			if c.Mask != name {
				continue
			}
			if !built {
				if spec, docs, err = s.build(name, s.SeqLen, s.Seed); err != nil {
					return nil, fmt.Errorf("mask %s at seqlen %d: %w", name, s.SeqLen, err)
				}
				built = true
			}
			if c.Skip != nil {
				continue
			}
			m, err := cp.New(c.Method)
			if err != nil {
				return nil, err
			}
			pl, err := s.planOn(m, *c, c.Heads, spec, docs)
			if err != nil {
				c.Skip = Unsupported(err)
			} else {
				c.Config = pl.Config
				c.Config.Docs = nil
			}
		}
	}
	return cases, nil
}

// SetPlanColumns fills the columns a CP plan gives a row: the resolved mesh, the
// dimension inside a node, the tokens each rank holds and the padding, the sharding, and
// balanced's block, stages and key layout. longca cp's rows and simulate's predicted rows
// both take them from here.
func SetPlanColumns(row *results.Row, pl *cp.Plan) {
	c := pl.Config
	SetMeshColumns(row, c)
	row.SeqLenPerRank, row.PadTokens = int64(pl.Tokens), results.Ptr(int64(pl.Padding()))
	if c.Block > 0 {
		row.CPBlock, row.CPStages = results.Ptr(int64(c.Block)), results.Ptr(int64(c.Stages))
		row.CPLayout = pl.KVLayoutName()
	}
}

// SetMeshColumns fills a CP row's mesh columns from its case's config: U x R and the
// windows where the mesh is resolved (a plan's always; null for a case the method refused
// before resolving one), the dimension inside a node, and the sharding.
func SetMeshColumns(row *results.Row, c cp.Config) {
	if c.Ulysses > 0 && c.Ring > 0 {
		row.Ulysses, row.Ring, row.Windows = results.Ptr(int64(c.Ulysses)), results.Ptr(int64(c.Ring)), results.Ptr(int64(max(c.Windows, 1)))
	}
	row.InnerDim, row.CPSharding = InnerDim(c), c.Sharding.String()
}

// InnerDim is the mesh dimension contiguous in rank order (inside a node): ulysses when
// a Ulysses group of more than one rank comes first, else ring.
func InnerDim(c cp.Config) string {
	if c.HeadFirst && c.Ulysses > 1 {
		return "ulysses"
	}
	return "ring"
}
