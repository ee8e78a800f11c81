package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"
	"time"

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
		&cli.StringFlag{Name: "max-doc", Usage: "cap document lengths: a token count of at least 1 (16K) or a fraction of the sequence (0.25); longer documents are split into chunks of the cap (default: none; magiattention: 0.25)"})
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

// emptyDocFlags are the document flags with what an empty value of each should be.
var emptyDocFlags = []struct{ flag, give string }{
	{"counts", "give a file of token counts"},
	{"dist", "give a distribution (" + strings.Join(dataset.Builtins(), ", ") + ") or a JSON file"},
	{"column", "give the name of the --counts file's column of token counts"},
	{"max-doc", "give a cap (16K, or 0.25 of the sequence)"},
}

// lengthSource reads --dist or --counts; nil (and "") when neither is given. A document
// flag given empty is refused (`--counts "$F"` with F unset, `--counts=`: it read as not
// given, and the built-in documents were measured without a word); so is "-" (no file of
// that name), which names /dev/stdin.
func lengthSource(c *cli.Context) (dataset.Source, string, error) {
	for _, f := range emptyDocFlags {
		if c.IsSet(f.flag) && strings.TrimSpace(c.String(f.flag)) == "" {
			return nil, "", usageError("--%s %q: %s, or leave --%s out", f.flag, c.String(f.flag), f.give, f.flag)
		}
	}
	dist, counts := c.String("dist"), c.String("counts")
	for _, f := range []string{"counts", "dist"} {
		if c.String(f) == "-" {
			if _, err := os.Stat("-"); err != nil {
				return nil, "", usageError("--%s -: no such file: to read standard input, give --%s /dev/stdin", f, f)
			}
		}
	}
	switch {
	case dist != "" && counts != "":
		return nil, "", usageError("--dist and --counts both given: pick one source of document lengths")
	case counts == "" && c.String("column") != "":
		return nil, "", usageError("--column %s without --counts: it names a column of the --counts file", c.String("column"))
	case counts != "":
		stop := pipeNotice("--counts", counts)
		e, err := dataset.LoadCounts(counts, c.String("column"))
		stop()
		if err != nil {
			// the flags given, and --counts alone for a file that could not be opened or read
			var pathErr *fs.PathError
			flags := "--counts/--column"
			if c.String("column") == "" || errors.As(err, &pathErr) {
				flags = "--counts"
			}
			return nil, "", usageError("%s: %v", flags, err)
		}
		return e, e.Name, nil
	case dist != "":
		stop := pipeNotice("--dist", dist)
		d, err := dataset.Open(dist)
		stop()
		if err != nil {
			return nil, "", usageError("--dist: %v", err)
		}
		return d, d.Name, nil
	}
	return nil, "", nil
}

// pipeWait is how long a --counts or --dist that is a named pipe or a device (a terminal's
// /dev/stdin) may keep longca reading before a line says so: a FIFO with no writer waited
// in silence (a minute, in open(2)), and one whose writer never closes it for good.
var pipeWait = 10 * time.Second

// pipeNotice starts the clock of pipeWait on reading path, given as flag, where path is a
// named pipe or a device, and returns what stops it (once the line, if begun, is out).
func pipeNotice(flag, path string) (stop func()) {
	fi, err := os.Stat(path)
	if err != nil || fi.Mode()&(os.ModeNamedPipe|os.ModeCharDevice) == 0 {
		return func() {}
	}
	format := "%s %s: waiting for a writer on the named pipe (%s so far): longca reads it to its end before it starts; Ctrl-C stops it"
	if fi.Mode()&os.ModeNamedPipe == 0 {
		format = "%s %s: still reading the device (%s so far): a terminal ends its input with Ctrl-D; Ctrl-C stops longca"
	}
	done := make(chan struct{})
	t := time.AfterFunc(pipeWait, func() {
		defer close(done)
		log.Warn().Str("flag", flag).Msgf(format, flag, path, pipeWait)
	})
	return func() {
		if !t.Stop() {
			<-done
		}
	}
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
	if float64(n)*float64(s) > dataset.MaxDrawTokens {
		fix := "lower --samples"
		if s > dataset.MaxDrawTokens { // one sample alone is over
			fix = fmt.Sprintf("lower --seqlen to at most %s", dataset.FormatSize(dataset.MaxDrawTokens))
		}
		return usageError("--samples %d x --seqlen %s is %.3g tokens, over the %.3g one summary draws: %s", n, dataset.FormatSize(s), float64(n)*float64(s), float64(dataset.MaxDrawTokens), fix)
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
	if err := dataset.CheckDocs(src, s, cp.Resolve(s)); err != nil {
		return usageError("%v", err)
	}
	rng := dataset.NewRand(c.Uint64("seed"))
	var st dataset.LengthStats
	for i := 0; i < n; i++ {
		st.Add(dataset.PackDocs(src, s, cp.Resolve(s), rng)...) // one sequence at a time: nothing kept per document
	}
	st.Write(c.App.Writer, name, s, n, c.Uint64("seed"))
	return nil
}
