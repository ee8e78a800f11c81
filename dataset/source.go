package dataset

import (
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
)

// Source draws document lengths (in tokens, at least 1).
type Source interface {
	Length(rng *rand.Rand) int
}

var (
	_ Source = (*Dist)(nil)
	_ Source = (*Empirical)(nil)
)

// pcgStream is the fixed second word of every generator's PCG state, so that one seed
// gives one stream everywhere in the benchmark.
const pcgStream = 0x6c6f6e67_63610001

// NewRand is the benchmark's one seeded generator: PCG with the given seed and a fixed
// stream constant.
func NewRand(seed uint64) *rand.Rand { return rand.New(rand.NewPCG(seed, pcgStream)) }

// Empirical draws lengths uniformly from a list of real documents' token counts.
type Empirical struct {
	Name string
	// ID names the counts in result rows: "counts:" the file's base name and a hash of the
	// counts read.
	ID     string
	Counts []int
}

// Length draws one of the counts uniformly.
func (e *Empirical) Length(rng *rand.Rand) int {
	return max(1, e.Counts[rng.IntN(len(e.Counts))])
}

// Pack draws document lengths from src until seqlen tokens are filled; the last is
// clipped to what is left, so the lengths sum to seqlen exactly (empty for seqlen <= 0).
func Pack(src Source, seqlen int, rng *rand.Rand) []int {
	var docs []int
	PackEach(src, seqlen, rng, func(n int) { docs = append(docs, n) })
	return docs
}

// PackEach draws as Pack does, handing each document's length to fn instead of keeping
// them (a summary of many sequences holds nothing per document).
func PackEach(src Source, seqlen int, rng *rand.Rand, fn func(int)) {
	for left := seqlen; left > 0; {
		n := min(max(1, src.Length(rng)), left)
		fn(n)
		left -= n
	}
}

// fileName names an input file in result rows and messages: its base name, except for a
// pipe of the shell's process substitution (--counts <(...), /dev/fd/63), whose descriptor
// number says nothing of its content: "pipe" (the hash beside it in an ID tells two apart).
func fileName(path string) string {
	base := filepath.Base(path)
	if dir := filepath.Dir(path); dir != "/dev/fd" && !(strings.HasPrefix(dir, "/proc/") && strings.HasSuffix(dir, "/fd")) {
		return base
	}
	if strings.Trim(base, "0123456789") != "" {
		return base
	}
	if fi, err := os.Stat(path); err == nil && fi.Mode()&os.ModeNamedPipe != 0 {
		return "pipe"
	}
	return "fd"
}
