package cp

import (
	"fmt"
	"strings"

	"github.com/longca/longca/kernels"
	"github.com/longca/longca/mask"
)

// Sharding says how the sequence is cut over the ring's ranks.
type Sharding uint8

const (
	// DefaultSharding lets the method choose (zigzag for the ring methods, contiguous for
	// ulysses and on a ring of one rank, where zigzag would only pad).
	DefaultSharding Sharding = iota
	// Contiguous gives ring rank r the r-th of R equal runs of the sequence.
	Contiguous
	// Zigzag pads each document to a multiple of 2N, cuts it into 2R chunks and gives
	// ring rank r chunks r and 2R-1-r of every document, balancing causal work.
	Zigzag
)

func (s Sharding) String() string {
	switch s {
	case Contiguous:
		return "contiguous"
	case Zigzag:
		return "zigzag"
	}
	return "default"
}

// ParseSharding reads contiguous, zigzag or default.
func ParseSharding(s string) (Sharding, error) {
	switch strings.ToLower(s) {
	case "", "default":
		return DefaultSharding, nil
	case "contiguous", "contig":
		return Contiguous, nil
	case "zigzag":
		return Zigzag, nil
	}
	return 0, fmt.Errorf("unknown sharding %q (--sharding): use contiguous, zigzag or default", s)
}

// Config is what the user chooses about a CP run.
type Config struct {
	// Ranks is the world size N.
	Ranks int
	// Ulysses and Ring are the 2-D mesh U x R (U*R = N) of usp and loongtrain; 0 lets
	// the method choose (ring-p2p, ring-allgather: 1 x N; ulysses: N x 1).
	Ulysses, Ring int
	// Windows is the number of windows loongtrain cuts its ring of R ranks into (inner
	// rings of R/Windows ranks, an outer ring of Windows); 0 picks one; 1 for the others.
	Windows int
	// HeadFirst places a Ulysses group on consecutive ranks (inside a node); otherwise
	// the ring dimension is the contiguous one.
	HeadFirst bool
	// Sharding of the sequence over the ring.
	Sharding Sharding
	// Block is the dispatch block of balanced, in tokens (--cp-block); 0 picks one
	// (DefaultBlock). The other methods ignore it.
	Block int
	// Stages is the most stages balanced cuts a rank's fetch into (--cp-stages): 1 one
	// piece, k > 1 pieces doubling in size; 0 picks (DefaultStages). A plan holds the
	// stages the fetches took (the most of any rank).
	Stages int
	// Splits are balanced's head-parallel degrees to run (--cp-ulysses), one mesh U x N/U
	// each: U ranks split the heads (Ulysses all-to-alls), N/U split the sequence by
	// area; 0 (or none) lets the plan choose per mask (BalancedMeshChoice). The other
	// methods ignore it. A resolved plan holds its U in Ulysses.
	Splits []int
	// KVLayout is how balanced lays out a rank's keys for its kernel call (--cp-layout):
	// auto (per rank, by Calls), blocks or thd (balanced_thd.go). The others ignore it.
	KVLayout KVLayout
	// Calls is the kernel's count of calls per mask (kernels.CallCounter: cuDNN's cut),
	// which balanced's auto layout asks; nil for a kernel that runs any mask in one call.
	// The runner sets it from its kernel.
	Calls kernels.CallCounter
	// Docs are the documents of the packed sequence (mask.Spec.Docs) for zigzag
	// sharding; nil is one document.
	Docs []mask.Range
}

// Mesh names the resolved mesh, e.g. "2x4 w2 head-first".
func (c Config) Mesh() string {
	s := fmt.Sprintf("%dx%d", c.Ulysses, c.Ring)
	if c.Windows > 1 {
		s += fmt.Sprintf(" w%d", c.Windows)
	}
	if c.Block > 0 {
		s += fmt.Sprintf(" b%d s%d", c.Block, c.Stages)
	}
	if c.Ulysses > 1 && c.Ring > 1 {
		if c.HeadFirst {
			s += " head-first"
		} else {
			s += " context-first"
		}
	}
	return s
}
