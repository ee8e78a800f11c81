package dataset

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"math"
	"math/rand/v2"
	"sort"
	"strconv"
	"strings"
	"sync"
)

// MagiAttention names the preset that reproduces the packing of MagiAttention's
// distributed-attention benchmark (its document-length histogram, embedded, and its
// packing rule: PackingStream with a cap of a quarter of the pack).
const MagiAttention = "magiattention"

// Packing rules of a Dist.
const (
	// PackingClip is MASKS.md's rule: draw a length from the bins (uniform inside the
	// bin), append it, clip the last document to what is left.
	PackingClip = ""
	// PackingStream is MagiAttention's benchmark rule: every bin stands for documents of
	// its middle length, with the bin's weight as their count; a document longer than the
	// cap is cut into pieces of the cap and a remainder; the pieces of the whole corpus
	// are shuffled into one stream, and a pack is a window of the stream of the pack's
	// length, so its first document is the end of a piece cut by the window before, and
	// its last is cut by the window's end. Here the stream is drawn piece by piece (each
	// piece independently, by its share of the corpus's pieces), one window is thrown
	// away so that the pack starts inside a piece as a window of a long stream does, and
	// the next window is the pack.
	PackingStream = "stream"
)

// Cap is a cap on document lengths: a token count, or a fraction of the packed
// sequence. The zero Cap is no cap. A document longer than the cap is split into
// chunks of the cap and a remainder.
type Cap struct {
	Tokens   int
	Fraction float64
}

// IsZero says whether the cap is none.
func (c Cap) IsZero() bool { return c.Tokens == 0 && c.Fraction == 0 }

// Resolve is the cap in tokens for a packed sequence of seqlen tokens (0: no cap); a
// fraction is rounded down, at least 1 token.
func (c Cap) Resolve(seqlen int) int {
	switch {
	case c.Tokens > 0:
		return c.Tokens
	case c.Fraction > 0:
		return max(1, int(c.Fraction*float64(seqlen)))
	}
	return 0
}

// String writes the cap as ParseCap reads it ("" for none).
func (c Cap) String() string {
	switch {
	case c.Tokens > 0:
		return FormatSize(c.Tokens)
	case c.Fraction > 0:
		return strconv.FormatFloat(c.Fraction, 'g', -1, 64)
	}
	return ""
}

// ParseCap reads a cap: a token count with an optional K/M/G suffix (16K, 4096), or a
// fraction of the sequence in (0, 1) written with a point (0.25). "" is no cap (the
// source's default); a cap of 0 tokens is refused: it was taken as "none" without a word,
// and the magiattention preset still capped at its quarter.
func ParseCap(s string) (Cap, error) {
	t := strings.TrimSpace(s)
	if t == "" {
		return Cap{}, nil
	}
	if strings.ContainsAny(t, ".eE") {
		f, err := strconv.ParseFloat(t, 64)
		if err != nil || !(f > 0 && f < 1) {
			return Cap{}, fmt.Errorf("cap %q: give a token count (16K) or a fraction of the sequence in (0, 1) such as 0.25", s)
		}
		return Cap{Fraction: f}, nil
	}
	n, err := ParseSize(t)
	if err == nil && n == 0 {
		return Cap{}, fmt.Errorf("cap %q caps nothing: give a cap of at least 1 token (16K) or a fraction of the sequence (0.25), or leave --max-doc out for the source's default (none; magiattention: 0.25)", s)
	}
	if err != nil || n < 1 {
		return Cap{}, fmt.Errorf("cap %q: give a token count (16K) or a fraction of the sequence in (0, 1) such as 0.25", s)
	}
	return Cap{Tokens: n}, nil
}

// DefaultCap is the cap a source brings with it (the magiattention preset's quarter of
// the pack); zero for the others.
func DefaultCap(src Source) Cap {
	if d, ok := src.(*Dist); ok {
		return d.Cap
	}
	return Cap{}
}

// SourceID names a source so that two different inputs never share a name: a built-in
// preset by its name, a file by its base name and a hash of its content.
func SourceID(src Source) string {
	switch s := src.(type) {
	case *Dist:
		if s.ID != "" {
			return s.ID
		}
		return s.Name
	case *Empirical:
		if s.ID != "" {
			return s.ID
		}
		return "counts:" + s.Name
	}
	return "custom"
}

// shortHash is the first 12 hex digits of the SHA-256 of b.
func shortHash(b []byte) string {
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:6])
}

// countsHash hashes a list of token counts.
func countsHash(counts []int) string {
	b := make([]byte, 8*len(counts))
	for i, c := range counts {
		binary.LittleEndian.PutUint64(b[8*i:], uint64(c))
	}
	return shortHash(b)
}

// PackDocs draws the document lengths of one packed sequence of seqlen tokens from src
// under the cap (in tokens, 0: none), by the source's packing rule. With no cap and the
// MASKS.md rule it is Pack, draw for draw. With a cap, each drawn document longer than
// the cap is split into chunks of the cap and its remainder, placed one after another.
// The lengths sum to seqlen exactly.
func PackDocs(src Source, seqlen, cap int, rng *rand.Rand) []int {
	if d, ok := src.(*Dist); ok && d.Packing == PackingStream {
		return d.packStream(seqlen, cap, rng)
	}
	if cap <= 0 {
		return Pack(src, seqlen, rng)
	}
	var docs []int
	for left := seqlen; left > 0; {
		n := max(1, src.Length(rng))
		for n > 0 && left > 0 {
			c := min(n, cap, left)
			docs = append(docs, c)
			n -= c
			left -= c
		}
	}
	return docs
}

// pieces is the stream's piece distribution under one cap: lengths and their
// cumulative weights.
type pieces struct {
	lens []int
	cum  []float64
}

var piecesCache sync.Map // key: *Dist and cap

type piecesKey struct {
	d   *Dist
	cap int
}

// piecesFor is the distribution of the pieces the corpus is cut into under cap: a bin of
// weight w and middle length m gives w x floor(m/cap) pieces of the cap and w pieces of
// m mod cap (when not 0).
func (d *Dist) piecesFor(cap int) *pieces {
	if p, ok := piecesCache.Load(piecesKey{d, cap}); ok {
		return p.(*pieces)
	}
	w := map[int]float64{}
	for _, b := range d.Bins {
		m := max(1, (b.Lo+b.Hi-1)/2)
		if cap <= 0 || m <= cap {
			w[m] += b.P
			continue
		}
		w[cap] += b.P * float64(m/cap)
		if r := m % cap; r > 0 {
			w[r] += b.P
		}
	}
	p := &pieces{}
	for l := range w {
		p.lens = append(p.lens, l)
	}
	sort.Ints(p.lens)
	var acc float64
	for _, l := range p.lens {
		acc += w[l]
		p.cum = append(p.cum, acc)
	}
	for i := range p.cum {
		p.cum[i] /= acc
	}
	piecesCache.Store(piecesKey{d, cap}, p)
	return p
}

func (p *pieces) draw(rng *rand.Rand) int {
	u := rng.Float64()
	i := sort.SearchFloat64s(p.cum, u)
	return p.lens[min(i, len(p.lens)-1)]
}

// packStream is PackingStream: a window of seqlen tokens thrown away, then the pack.
func (d *Dist) packStream(seqlen, cap int, rng *rand.Rand) []int {
	if seqlen <= 0 {
		return nil
	}
	p := d.piecesFor(cap)
	carry := 0
	for left := seqlen; left > 0; { // the window thrown away
		n := p.draw(rng)
		if n > left {
			carry = n - left
		}
		left -= min(n, left)
	}
	var docs []int
	left := seqlen
	if carry > 0 {
		c := min(carry, left)
		docs = append(docs, c)
		left -= c
	}
	for left > 0 {
		c := min(p.draw(rng), left)
		docs = append(docs, c)
		left -= c
	}
	return docs
}

// MaxDocs bounds the documents one packed sequence is expected to hold (2^24): each is an
// int while the sequence is packed, and a slice or more of the mask built from it, so past
// it a sequence of very short documents (--max-doc 1, a counts file of ones, a long
// --seqlen) would take gigabytes before anything could be refused.
const MaxDocs = 1 << 24

// MeanPiece is the mean length of the pieces src packs into a sequence under cap (0:
// none): exact for a counts file (Empirical) and a distribution's stream packing, and for
// a distribution split at the cap a lower bound (each document of length n makes at most
// n/cap + 1 pieces); NaN for a source it does not know.
func MeanPiece(src Source, cap int) float64 {
	switch s := src.(type) {
	case *Empirical:
		var tokens, pieces float64
		for _, c := range s.Counts {
			n := max(1, c)
			tokens += float64(n)
			if cap > 0 {
				pieces += float64((n + cap - 1) / cap)
			} else {
				pieces++
			}
		}
		if pieces == 0 {
			return math.NaN()
		}
		return tokens / pieces
	case *Dist:
		if s.Packing == PackingStream {
			p := s.piecesFor(cap)
			var m, prev float64
			for i, l := range p.lens {
				m += float64(l) * (p.cum[i] - prev)
				prev = p.cum[i]
			}
			return m
		}
		m := s.Mean()
		if cap > 0 {
			m = max(1, 1/(1/m+1/float64(cap)))
		}
		return m
	}
	return math.NaN()
}

// CheckDocs refuses packing seqlen tokens from src under cap where the sequence would hold
// more than MaxDocs documents by MeanPiece, naming the flags that fix it.
func CheckDocs(src Source, seqlen, cap int) error {
	m := MeanPiece(src, cap)
	if !(m > 0) {
		return nil
	}
	if docs := float64(seqlen) / m; docs > MaxDocs {
		what := "documents"
		if cap > 0 {
			what = fmt.Sprintf("documents split at --max-doc %d", cap)
		}
		return fmt.Errorf("%s %s average %.3g tokens: about %.3g a sequence of %s tokens, over the %d one sequence may hold; give a larger --max-doc or longer documents, or a shorter sequence",
			SourceID(src), what, m, docs, FormatSize(seqlen), MaxDocs)
	}
	return nil
}
