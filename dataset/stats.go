package dataset

import (
	"fmt"
	"io"
	"math/bits"
	"sort"
	"strings"
)

// MaxDrawTokens bounds samples x seqlen of one `longca data` summary (2^36 tokens): past
// it the draw would run for hours, so it is refused up front.
const MaxDrawTokens = 1 << 36

// LengthStats summarises document lengths as they are drawn: a count per distinct length,
// so its memory is bounded by the number of distinct lengths (at most the sequence
// length), not by how many documents were drawn.
type LengthStats struct {
	count map[int]int64
	n     int64
	sum   float64
}

// Add counts lengths.
func (s *LengthStats) Add(lens ...int) {
	if s.count == nil {
		s.count = map[int]int64{}
	}
	for _, v := range lens {
		s.count[v]++
		s.n++
		s.sum += float64(v)
	}
}

// N is the number of lengths counted.
func (s *LengthStats) N() int64 { return s.n }

// sorted is the distinct lengths, ascending.
func (s *LengthStats) sorted() []int {
	out := make([]int, 0, len(s.count))
	for v := range s.count {
		out = append(out, v)
	}
	sort.Ints(out)
	return out
}

// Quantile is the length at rank floor(p x N) of the sorted lengths (0 when empty).
func (s *LengthStats) Quantile(p float64) int {
	if s.n == 0 {
		return 0
	}
	want := min(s.n-1, int64(p*float64(s.n)))
	var seen int64
	vals := s.sorted()
	for _, v := range vals {
		seen += s.count[v]
		if seen > want {
			return v
		}
	}
	return vals[len(vals)-1]
}

// Write prints the count, mean, quantiles and a log2 histogram (documents, and their
// share of the tokens) of the lengths of samples packed sequences of seqlen tokens.
func (s *LengthStats) Write(w io.Writer, name string, seqlen, samples int, seed uint64) {
	fmt.Fprintf(w, "# longca data: %s, %d packed sequences of %d tokens, seed %d\n", name, samples, seqlen, seed)
	if s.n == 0 {
		return
	}
	vals := s.sorted()
	fmt.Fprintf(w, "%-10s %12s %10s %10s %10s %10s %10s\n", "# docs", "docs/seq", "mean", "p50", "p90", "p99", "max")
	fmt.Fprintf(w, "%-10d %12.2f %10.1f %10d %10d %10d %10d\n", s.n, float64(s.n)/float64(samples),
		s.sum/float64(s.n), s.Quantile(0.5), s.Quantile(0.9), s.Quantile(0.99), vals[len(vals)-1])
	counts := map[int]int64{}
	tokens := map[int]float64{}
	top := 0
	for _, v := range vals {
		b := bits.Len(uint(v)) - 1
		counts[b] += s.count[v]
		tokens[b] += float64(v) * float64(s.count[v])
		top = max(top, b)
	}
	var most int64
	for _, c := range counts {
		most = max(most, c)
	}
	fmt.Fprintf(w, "# %-19s %8s %8s  %s\n", "length", "docs", "tokens%", "docs")
	for b := bits.Len(uint(vals[0])) - 1; b <= top; b++ {
		bar := strings.Repeat("#", int((counts[b]*40+most-1)/most))
		line := fmt.Sprintf("[%8d, %8d) %8d %7.1f%%  %s", 1<<b, 1<<(b+1), counts[b], 100*tokens[b]/s.sum, bar)
		fmt.Fprintln(w, strings.TrimRight(line, " "))
	}
}
