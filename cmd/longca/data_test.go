package main

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// dataSummary parses the summary row and the histogram's document counts.
func dataSummary(t *testing.T, out string) (stats []float64, histDocs int) {
	t.Helper()
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		switch {
		case strings.HasPrefix(l, "#"):
		case strings.HasPrefix(l, "["):
			f := strings.Fields(l[strings.Index(l, ")")+1:])
			n, err := strconv.Atoi(f[0])
			if err != nil {
				t.Fatalf("histogram row %q", l)
			}
			histDocs += n
		default:
			for _, f := range strings.Fields(l) {
				v, err := strconv.ParseFloat(f, 64)
				if err != nil {
					t.Fatalf("summary row %q", l)
				}
				stats = append(stats, v)
			}
		}
	}
	if len(stats) != 7 {
		t.Fatalf("summary has %d numbers, want 7:\n%s", len(stats), out)
	}
	return stats, histDocs
}

func TestDataSummary(t *testing.T) {
	out, errOut, code := captureRun(t, "data", "--dist", "pile", "--seqlen", "16K", "--samples", "5", "--seed", "3")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	st, hist := dataSummary(t, out)
	docs, perSeq, mean, p50, p90, p99, mx := st[0], st[1], st[2], st[3], st[4], st[5], st[6]
	if float64(hist) != docs || perSeq*5 != docs {
		t.Errorf("docs %v, per sequence %v, histogram total %d", docs, perSeq, hist)
	}
	// The documents fill 5 x 16K tokens exactly.
	if d := mean*docs - 5*16384; d > 0.5*docs || d < -0.5*docs {
		t.Errorf("mean %v x docs %v = %v, want 81920", mean, docs, mean*docs)
	}
	if !(p50 <= p90 && p90 <= p99 && p99 <= mx && mx <= 16384) {
		t.Errorf("quantiles out of order: %v", st)
	}
	again, _, _ := captureRun(t, "data", "--dist", "pile", "--seqlen", "16K", "--samples", "5", "--seed", "3")
	other, _, _ := captureRun(t, "data", "--dist", "pile", "--seqlen", "16K", "--samples", "5", "--seed", "4")
	if again != out || other == out {
		t.Error("output is not a function of the seed")
	}
}

func TestDataCounts(t *testing.T) {
	dir := t.TempDir()
	text := filepath.Join(dir, "c.txt")
	os.WriteFile(text, []byte("# one length only\n100\n"), 0o644)
	out, errOut, code := captureRun(t, "data", "--counts", text, "--seqlen", "1050", "--samples", "2")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	st, _ := dataSummary(t, out)
	// Ten documents of 100 and a clipped one of 50, twice.
	if st[0] != 22 || st[3] != 100 || st[6] != 100 {
		t.Errorf("summary %v, want 22 docs, p50 100, max 100", st)
	}
}

func writeTokensArrow(t *testing.T, path string) {
	schema := arrow.NewSchema([]arrow.Field{{Name: "n_tokens", Type: arrow.PrimitiveTypes.Int64}}, nil)
	b := array.NewRecordBuilder(memory.DefaultAllocator, schema)
	defer b.Release()
	b.Field(0).(*array.Int64Builder).AppendValues([]int64{300, 500, 700}, nil)
	rec := b.NewRecordBatch()
	defer rec.Release()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	w, err := ipc.NewFileWriter(f, ipc.WithSchema(schema))
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Write(rec); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
}

func TestDataArrowColumn(t *testing.T) {
	p := filepath.Join(t.TempDir(), "docs.arrow")
	writeTokensArrow(t, p)
	out, errOut, code := captureRun(t, "data", "--counts", p, "--column", "n_tokens", "--seqlen", "64K")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	if st, _ := dataSummary(t, out); st[6] != 700 || st[3] < 300 {
		t.Errorf("summary %v, want lengths from {300, 500, 700}", st)
	}
}

func TestDataBadInput(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "docs.arrow")
	writeTokensArrow(t, p)
	zero := filepath.Join(dir, "zero.json")
	os.WriteFile(zero, []byte(`{"[0,10)": 0, "[10,20)": 0}`), 0o644)
	cases := []struct {
		args []string
		want []string
	}{
		{[]string{"data", "--counts", p, "--column", "tokens", "--seqlen", "1K"}, []string{"--column", `no column "tokens"`, "n_tokens"}},
		{[]string{"data", "--counts", p, "--seqlen", "1K"}, []string{"--column", "n_tokens"}},
		{[]string{"data", "--dist", zero, "--seqlen", "1K"}, []string{"--dist", "sum to 0"}},
		{[]string{"data", "--dist", "pile", "--counts", p, "--seqlen", "1K"}, []string{"--dist", "--counts"}},
		{[]string{"data", "--dist", "pile", "--seqlen", "1K", "--samples", "0"}, []string{"--samples"}},
		{[]string{"data", "--dist", "pile", "--seqlen", "-5"}, []string{"--seqlen"}},
		{[]string{"data", "--dist", "pile"}, []string{"--seqlen", "required"}},
		// one sample over the bound: the fix is --seqlen's (it said "lower --samples" of 1)
		{[]string{"data", "--dist", "pile", "--seqlen", "8388608G", "--samples", "1"}, []string{"lower --seqlen to at most 64G"}},
	}
	for _, c := range cases {
		_, errOut, code := captureRun(t, c.args...)
		checkUsageError(t, c.args, code, errOut, c.want...)
	}
}

// A --counts error names the flags given: --counts alone without --column, and for a
// file that cannot be opened (it said "--counts/--column" of a missing file with no
// --column given: the review of the thirty-eighth session); and a --dist bin of 0-token
// documents is refused, naming it (they were drawn as 1-token ones without a word).
func TestDataCountsNamesFlagsGiven(t *testing.T) {
	dir := t.TempDir()
	missing := filepath.Join(dir, "missing.parquet")
	text := filepath.Join(dir, "c.txt")
	os.WriteFile(text, []byte("12\nabc\n"), 0o644)
	empty := filepath.Join(dir, "empty.json")
	os.WriteFile(empty, []byte(`{"[0,1)": 1, "[1,100)": 3}`), 0o644)
	cases := []struct {
		args      []string
		want, not string
	}{
		{[]string{"data", "--seqlen", "1K", "--counts", missing}, "--counts: ", "--column"},
		{[]string{"data", "--seqlen", "1K", "--counts", missing, "--column", "len"}, "--counts: ", "--column"},
		{[]string{"data", "--seqlen", "1K", "--counts", text}, "--counts: ", "--column"},
		{[]string{"data", "--seqlen", "1K", "--dist", empty}, `--dist: dataset: distribution ` + empty + `: bin "[0,1)" holds only documents of 0 tokens`, "--counts"},
	}
	for _, c := range cases {
		_, errOut, code := captureRun(t, c.args...)
		checkUsageError(t, c.args, code, errOut, c.want)
		if strings.Contains(errOut, c.not) {
			t.Errorf("%v: %q names %s", c.args, strings.TrimSpace(errOut), c.not)
		}
	}
}
