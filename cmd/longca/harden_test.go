package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A file named where a small JSON file is expected (--dist, --machine, --links) is read
// up to a bound, not whole: /dev/zero ran the process out of memory. A file over the
// bound is one line naming the flag, exit status 2.
func TestSmallFileFlagsAreBounded(t *testing.T) {
	big := filepath.Join(t.TempDir(), "big.json")
	if err := os.WriteFile(big, []byte(strings.Repeat(" ", 5<<20)+"{}"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		{"data", "--seqlen", "16K", "--dist", big},
		{"simulate", "--gpus", "8", "--machine", big},
		{"cp", "--dry-run", "--links", big},
	} {
		_, errOut, code := captureRun(t, args...)
		checkUsageError(t, args, code, errOut, "--"+strings.TrimPrefix(args[len(args)-2], "--"), "holds more than")
	}
}
