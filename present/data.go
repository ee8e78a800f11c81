package present

import (
	"fmt"
	"io"
	"math/bits"
	"sort"
	"strings"
)

// WriteLengthSummary prints the count, mean, quantiles and a log2 histogram of lengths.
func WriteLengthSummary(w io.Writer, name string, s, samples int, seed uint64, lens []int) {
	sorted := append([]int(nil), lens...)
	sort.Ints(sorted)
	var sum float64
	for _, v := range sorted {
		sum += float64(v)
	}
	q := func(p float64) int { return sorted[min(len(sorted)-1, int(p*float64(len(sorted))))] }
	fmt.Fprintf(w, "# longca data: %s, %d packed sequences of %d tokens, seed %d\n", name, samples, s, seed)
	fmt.Fprintf(w, "%-10s %12s %10s %10s %10s %10s %10s\n", "# docs", "docs/seq", "mean", "p50", "p90", "p99", "max")
	fmt.Fprintf(w, "%-10d %12.2f %10.1f %10d %10d %10d %10d\n", len(sorted), float64(len(sorted))/float64(samples),
		sum/float64(len(sorted)), q(0.5), q(0.9), q(0.99), sorted[len(sorted)-1])
	// Histogram over [2^i, 2^(i+1)): documents and their share of the tokens.
	counts := map[int]int{}
	tokens := map[int]float64{}
	top := 0
	for _, v := range sorted {
		b := bits.Len(uint(v)) - 1
		counts[b]++
		tokens[b] += float64(v)
		top = max(top, b)
	}
	most := 0
	for _, c := range counts {
		most = max(most, c)
	}
	fmt.Fprintf(w, "# %-19s %8s %8s  %s\n", "length", "docs", "tokens%", "docs")
	for b := bits.Len(uint(sorted[0])) - 1; b <= top; b++ {
		bar := strings.Repeat("#", (counts[b]*40+most-1)/most)
		line := fmt.Sprintf("[%8d, %8d) %8d %7.1f%%  %s", 1<<b, 1<<(b+1), counts[b], 100*tokens[b]/sum, bar)
		fmt.Fprintln(w, strings.TrimRight(line, " "))
	}
}
