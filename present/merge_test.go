package present

import (
	"bytes"
	"fmt"
	"strings"
	"testing"

	"github.com/longca/longca/results"
)

// merge's first line names the first few runs and a count, not every run: a folder of
// 20,000 runs made it 160 KB long.
func TestWriteMergeNamesAFewRuns(t *testing.T) {
	var runs []string
	for i := 0; i < 20000; i++ {
		runs = append(runs, fmt.Sprintf("r%06d", i))
	}
	var b bytes.Buffer
	WriteMerge(&b, results.MergeResult{Runs: runs, Rows: 20000, Files: []string{"merged.arrow"}})
	first, _, _ := strings.Cut(b.String(), "\n")
	if want := "# merged 20000 rows of 20000 run(s): [r000000 r000001 r000002 r000003 r000004 r000005 r000006 r000007 r000008 r000009] and 19990 more"; first != want {
		t.Fatalf("first line (%d bytes) %.300q, want %q", len(first), first, want)
	}
	b.Reset()
	WriteMerge(&b, results.MergeResult{Runs: []string{"a", "b"}, Rows: 3})
	if !strings.HasPrefix(b.String(), "# merged 3 rows of 2 run(s): [a b]\n") {
		t.Fatalf("%q", b.String())
	}
}
