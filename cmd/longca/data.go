package main

import (
	"fmt"
	"io"
	"math/bits"
	"sort"
	"strings"

	"github.com/longca/longca/dataset"
	"github.com/longca/longca/harness"
	"github.com/urfave/cli/v2"
)

func init() {
	register(&cli.Command{
		Name:  "data",
		Usage: "sample packed sequences from a document-length distribution and summarise the lengths",
		Description: "Draws --samples packed sequences of --seqlen tokens (documents drawn until the sequence is\n" +
			"filled, the last one clipped) and prints the count, mean and quantiles of the document\n" +
			"lengths and a histogram over powers of two.",
		Flags: append([]cli.Flag{
			&cli.StringFlag{Name: "seqlen", Usage: "tokens per packed sequence (suffixes K, M: 16K); required"},
			&cli.IntFlag{Name: "samples", Value: 10, Usage: "packed sequences to draw"},
			&cli.Uint64Flag{Name: "seed", Value: 42, Usage: "seed of the one generator"},
		}, docsFlags()...),
		Action: dataAction,
	})
}

// sourceFlags are the flags that choose where document lengths come from.
func sourceFlags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "dist", Usage: "length distribution: pile, prolong64k, prolong512k, magiattention (MagiAttention's benchmark packing, documents cut at S/4) or a JSON file of \"[a,b)\": weight (default: the MASKS.md rule for S)"},
		&cli.StringFlag{Name: "counts", Usage: "real token counts per document: a .parquet or .arrow file (with --column) or one integer a line"},
		&cli.StringFlag{Name: "column", Usage: "the column of --counts that holds token counts"},
	}
}

// docsFlags are the flags of every command that builds document masks: the source and
// the cap.
func docsFlags() []cli.Flag {
	return append(sourceFlags(),
		&cli.StringFlag{Name: "max-doc", Usage: "cap document lengths: a token count (16K) or a fraction of the sequence (0.25); longer documents are split into chunks of the cap (default: none; magiattention: 0.25)"})
}

// docsFromFlags reads --dist/--counts/--column and --max-doc (harness.Docs{} when none).
func docsFromFlags(c *cli.Context) (harness.Docs, error) {
	src, _, err := lengthSource(c)
	if err != nil {
		return harness.Docs{}, err
	}
	cp, err := dataset.ParseCap(c.String("max-doc"))
	if err != nil {
		return harness.Docs{}, usageError("--max-doc: %v", err)
	}
	return harness.Docs{Source: src, MaxDoc: cp}, nil
}

// lengthSource reads --dist or --counts; nil (and "") when neither is given.
func lengthSource(c *cli.Context) (dataset.Source, string, error) {
	dist, counts := c.String("dist"), c.String("counts")
	switch {
	case dist != "" && counts != "":
		return nil, "", usageError("--dist and --counts both given: pick one source of document lengths")
	case counts != "":
		e, err := dataset.LoadCounts(counts, c.String("column"))
		if err != nil {
			return nil, "", usageError("--counts/--column: %v", err)
		}
		return e, e.Name, nil
	case dist != "":
		d, err := dataset.Open(dist)
		if err != nil {
			return nil, "", usageError("--dist: %v", err)
		}
		return d, d.Name, nil
	}
	return nil, "", nil
}

// parseSeqlen reads --seqlen with its K/M suffixes.
func parseSeqlen(c *cli.Context) (int, error) {
	s, err := dataset.ParseSize(c.String("seqlen"))
	if err != nil {
		return 0, usageError("--seqlen: %v", err)
	}
	if s < 1 {
		return 0, usageError("--seqlen must be at least 1, got %d", s)
	}
	return s, nil
}

func dataAction(c *cli.Context) error {
	if !c.IsSet("seqlen") {
		return usageError("--seqlen is required (e.g. --seqlen 16K)")
	}
	s, err := parseSeqlen(c)
	if err != nil {
		return err
	}
	n := c.Int("samples")
	if n < 1 {
		return usageError("--samples must be at least 1, got %d", n)
	}
	src, name, err := lengthSource(c)
	if err != nil {
		return err
	}
	if src == nil {
		name = dataset.ForKernel(s)
		if src, err = dataset.Builtin(name); err != nil {
			return err
		}
	}
	cp, err := dataset.ParseCap(c.String("max-doc"))
	if err != nil {
		return usageError("--max-doc: %v", err)
	}
	if cp.IsZero() {
		cp = dataset.DefaultCap(src)
	}
	rng := dataset.NewRand(c.Uint64("seed"))
	var lens []int
	for i := 0; i < n; i++ {
		lens = append(lens, dataset.PackDocs(src, s, cp.Resolve(s), rng)...)
	}
	writeLengthSummary(c.App.Writer, name, s, n, c.Uint64("seed"), lens)
	return nil
}

// writeLengthSummary prints the count, mean, quantiles and a log2 histogram of lengths.
func writeLengthSummary(w io.Writer, name string, s, samples int, seed uint64, lens []int) {
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
