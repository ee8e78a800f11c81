package main

import (
	"flag"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/longca/longca/results"
)

var updateDocs = flag.Bool("update", false, "TestDocTables: rewrite every table of the docs from its command (make doc-tables)")

// docTable is one generated block of a doc: the command after "longca" and whether the
// test reruns it (cheap) or only `make doc-tables` does.
type docTable struct {
	args    []string
	checked bool
	start   int // byte offsets of the block's body (between its fences)
	end     int
}

// A generated block in a Markdown doc:
//
//	<!-- longca-table checked: simulate --gpus 8 ... -->
//	```
//	(the command's standard output, less its "# rows:" line, which names a folder and a time)
//	```
//	<!-- end longca-table -->
//
// "checked" makes TestDocTables rerun the command and compare; "generated" blocks (the
// expensive ones) are rewritten by `make doc-tables` only.
var docTableRE = regexp.MustCompile("(?s)<!-- longca-table (checked|generated): ([^\n]*?) -->\n```\n(.*?)```\n<!-- end longca-table -->")

func docTables(doc string) []docTable {
	var out []docTable
	for _, m := range docTableRE.FindAllStringSubmatchIndex(doc, -1) {
		out = append(out, docTable{args: strings.Fields(doc[m[4]:m[5]]), checked: doc[m[2]:m[3]] == "checked", start: m[6], end: m[7]})
	}
	return out
}

// runDocTable runs a block's command in-process (paths in it are relative to the
// repository root; the results go to a temporary folder) and returns what the block holds.
func runDocTable(t *testing.T, args []string) string {
	t.Helper()
	var full []string
	for _, a := range args {
		if !strings.HasPrefix(a, "-") {
			if _, err := os.Stat(filepath.Join("..", "..", a)); err == nil && strings.Contains(a, "/") {
				a = filepath.Join("..", "..", a)
			}
		}
		full = append(full, a)
	}
	full = append([]string{"--log-level", "warn"}, append(full, "--out", filepath.Join(t.TempDir(), "out"))...)
	stdout, stderr, code := captureRun(t, full...)
	if code != 0 {
		t.Fatalf("longca %s: exit %d: %s", strings.Join(args, " "), code, stderr)
	}
	var keep []string
	for _, l := range strings.SplitAfter(stdout, "\n") {
		if !strings.HasPrefix(l, "# rows: ") {
			keep = append(keep, l)
		}
	}
	return strings.Join(keep, "")
}

// TestDocTables: the tables of docs/simulate.md are the output of the commands written
// above them, at the version and seed of the code. The checked ones (cheap: the
// published-figure comparison at 8 and 64 GPUs, the H200 comparison) are rerun here and
// must be identical; the generated ones (the 512-GPU sweeps, minutes) are rewritten with
// the checked ones by `make doc-tables` (go test -run TestDocTables -args -update).
func TestDocTables(t *testing.T) {
	path := filepath.Join("..", "..", "docs", "simulate.md")
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	tables := docTables(doc)
	if len(tables) == 0 {
		t.Fatalf("%s has no longca-table blocks", path)
	}
	checked := 0
	for i := len(tables) - 1; i >= 0; i-- { // from the end, so that offsets stay valid
		tb := tables[i]
		if !tb.checked && !*updateDocs {
			continue
		}
		got := runDocTable(t, tb.args)
		if *updateDocs {
			doc = doc[:tb.start] + got + doc[tb.end:]
			continue
		}
		checked++
		if want := doc[tb.start:tb.end]; got != want {
			t.Errorf("docs/simulate.md: the table of `longca %s` differs from what the command prints now (run make doc-tables):\n%s",
				strings.Join(tb.args, " "), firstDiff(want, got))
		}
	}
	if *updateDocs {
		if err := os.WriteFile(path, []byte(doc), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	if checked == 0 {
		t.Fatalf("%s: no checked table", path)
	}
}

// firstDiff shows the first line where two texts differ.
func firstDiff(want, got string) string {
	w, g := strings.Split(want, "\n"), strings.Split(got, "\n")
	for i := 0; i < max(len(w), len(g)); i++ {
		var a, b string
		if i < len(w) {
			a = w[i]
		}
		if i < len(g) {
			b = g[i]
		}
		if a != b {
			return "line " + strconv.Itoa(i+1) + ":\n  docs: " + a + "\n  now:  " + b
		}
	}
	return "(same lines)"
}

// The row_checksum recipe in docs/results-format.md names the type spellings it hashes
// (a reader checking rows with pyarrow's spellings got every row wrong): every column's
// type, as the checksum writes it, is among them.
func TestChecksumDocNamesEveryTypeSpelling(t *testing.T) {
	b, err := os.ReadFile("../../docs/results-format.md")
	if err != nil {
		t.Fatal(err)
	}
	_, after, ok := strings.Cut(string(b), "the type as Arrow Go spells it: ")
	if !ok {
		t.Fatal("docs/results-format.md no longer lists the type spellings row_checksum hashes")
	}
	list, _, _ := strings.Cut(after, ";")
	named := map[string]bool{}
	for _, s := range strings.Split(list, ", `") {
		named[strings.Trim(s, "` ")] = true
	}
	for _, f := range results.Schema(nil).Fields() {
		if !named[f.Type.String()] {
			t.Errorf("column %s: type %q is not among the spellings the doc names (%q)", f.Name, f.Type.String(), list)
		}
	}
}
