package dataset

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// writeFile writes body to name in dir and returns its path.
func writeFile(t *testing.T, dir, name, body string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestTextCountsHostileLines (probe s40, finding 11): a UTF-8 byte-order mark is skipped
// (it was refused as "\ufeff100", the mark invisible); a line over 64 KiB is refused with
// its line number (bufio.Scanner's "token too long" gave neither), unless its comment has
// started; a long line is quoted cut to about 80 characters (60,000 bytes were echoed); a
// header, a CSV line, a number with separators, UTF-16 and binary bytes each get a hint.
func TestTextCountsHostileLines(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []struct {
		name, body string
		want       []int
	}{
		{"bom.txt", "\xef\xbb\xbf100\n200\n", []int{100, 200}},
		{"bomcomment.txt", "\xef\xbb\xbf# n_tokens\n100\n", []int{100}},
		{"longcomment.txt", "100 # " + strings.Repeat("c", 70000) + "\n7\n", []int{100, 7}},
		{"longcommentlast.txt", "5\n# " + strings.Repeat("c", 200000), []int{5}},
	} {
		e, err := LoadCounts(writeFile(t, dir, c.name, c.body), "")
		if err != nil || !equalInts(e.Counts, c.want) {
			t.Errorf("%s: %v, %v; want %v", c.name, e, err, c.want)
		}
	}
	for _, c := range []struct {
		name, body string
		want       []string
	}{
		{"longdigits.txt", "1\n" + strings.Repeat("1", 70000) + "\n", []string{"longdigits.txt:2: a line of more than 65536 bytes", `"1111`, `"...`, "one count a line"}},
		{"longspaces.txt", strings.Repeat(" ", 70000) + "5\n", []string{"longspaces.txt:1: a line of more than 65536 bytes"}},
		{"longtext.txt", "3\n" + strings.Repeat("x", 60000) + "\n", []string{"longtext.txt:2: ", `"...`, "(60000 bytes) is not a token count"}},
		{"header.txt", "n_tokens\n100\n", []string{"header.txt:1:", `"n_tokens" is not a token count`, "a header line? start it with #"}},
		{"later.txt", "100\nabc\n", []string{"later.txt:2:", `"abc" is not a token count (one non-negative integer a line)`}},
		{"docs.csv", "doc,n_tokens\na,100\n", []string{"docs.csv:1:", "CSV", "--column"}},
		{"sep.txt", "1,000\n", []string{"sep.txt:1:", "without separators"}},
		{"sep3.txt", "12,345,678\n", []string{"sep3.txt:1:", "without separators"}},
		// a CSV line of numbers (a document's id and its count) is told of CSV files, not
		// of separators (it was told "write a count without separators: 1000, not 1,000")
		{"ids.csv", "17,2048\n18,96\n", []string{"ids.csv:1:", `"17,2048"`, "CSV", "--column"}},
		{"row.txt", "1,2,3\n", []string{"row.txt:1:", "CSV"}},
		{"utf16.txt", "\xff\xfe1\x00\n\x00", []string{"utf16.txt is UTF-16", "save it as UTF-8"}},
		{"binary.txt", "\x00\x01\x02\xff,;\n", []string{"binary.txt:1:", "binary, not text"}},
	} {
		_, err := LoadCounts(writeFile(t, dir, c.name, c.body), "")
		if err == nil {
			t.Errorf("%s: read, want an error", c.name)
			continue
		}
		for _, w := range c.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: %v, want it to say %q", c.name, err, w)
			}
		}
		if n := len(err.Error()); n > 400 {
			t.Errorf("%s: a message of %d bytes, want a short line", c.name, n)
		}
	}
}

// TestQuoteCut: a value is quoted whole when short, and cut at about 80 characters, on a
// character's start, with "..." after it.
func TestQuoteCut(t *testing.T) {
	if got := quoteCut([]byte("n_tokens")); got != `"n_tokens"` {
		t.Errorf("short: %s", got)
	}
	for _, b := range []string{strings.Repeat("é", 100), strings.Repeat("\x00", 50), strings.Repeat("x", 1<<16)} {
		got := quoteCut([]byte(b))
		if len(got) > 90 || !strings.HasSuffix(got, `"...`) || strings.Contains(got, `\x`) && b[0] != 0 {
			t.Errorf("cut of %d bytes: %s", len(b), got)
		}
	}
}

// TestDistBOMAndNamesAnyCase (finding 11, 13): a --dist file with a UTF-8 byte-order mark is
// read (it was "invalid character 'ï'"), and a built-in name is taken in any case where no
// file has it (README writes "Pile" and "ProLong64K", which were refused).
func TestDistBOMAndNamesAnyCase(t *testing.T) {
	p := writeFile(t, t.TempDir(), "d.json", "\xef\xbb\xbf{\"[1,100)\": 1}")
	if d, err := LoadDist(p); err != nil || len(d.Bins) != 1 {
		t.Errorf("a distribution with a BOM: %v, %v", d, err)
	}
	for in, want := range map[string]string{"Pile": Pile, "ProLong64K": ProLong64K, "PROLONG512K": ProLong512K, "MagiAttention": MagiAttention} {
		d, err := Open(in)
		if err != nil || d.ID != want {
			t.Errorf("Open(%q) = %v, %v; want %s", in, d, err, want)
		}
	}
	if _, err := Open("Piles"); err == nil || !strings.Contains(err.Error(), "neither a built-in distribution") {
		t.Errorf("Open(Piles): %v", err)
	}
}

// TestPipeNamesHoldNoDescriptor (finding 13): counts and a distribution read from a shell's
// process substitution (/dev/fd/63) were named "counts:63@HASH", the descriptor's number:
// now "pipe", the hash kept (two pipes of other content stay apart).
func TestPipeNamesHoldNoDescriptor(t *testing.T) {
	if _, err := os.Stat("/dev/fd"); err != nil {
		t.Skip("no /dev/fd here")
	}
	pipe := func(body string) string {
		r, w, err := os.Pipe()
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { r.Close() })
		go func() { w.WriteString(body); w.Close() }()
		return fmt.Sprintf("/dev/fd/%d", r.Fd())
	}
	a, err := LoadCounts(pipe("100\n200\n"), "")
	if err != nil {
		t.Fatal(err)
	}
	b, err := LoadCounts(pipe("300\n"), "")
	if err != nil {
		t.Fatal(err)
	}
	if a.Name != "pipe" || !strings.HasPrefix(a.ID, "counts:pipe@") || a.ID == b.ID {
		t.Errorf("counts from pipes: %q %q and %q, want counts:pipe@HASH, each its own", a.Name, a.ID, b.ID)
	}
	d, err := LoadDist(pipe(`{"[1,100)": 1}`))
	if err != nil || d.Name != "pipe" || !strings.HasPrefix(d.ID, "file:pipe@") {
		t.Errorf("a distribution from a pipe: %v, %v", d, err)
	}
	if got := fileName("/tmp/x/63"); got != "63" { // a file of that name elsewhere keeps it
		t.Errorf("fileName(/tmp/x/63) = %q", got)
	}
}
