package main

import (
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// cp of 1-token documents: its dry run built the 16M documents' mask (3.7 GB, Go's fatal
// out-of-memory under ulimit -v 3000000) and a run of 4K tokens a rank passed its
// estimate and peaked at 8 GB (every document zigzag-padded to 16 tokens). Both are
// refused before any mask is built: one line naming the documents, the length and (for
// the run, where it fits) --sharding contiguous, exit 2, and next to nothing allocated.
func TestCPRefusesShortDocumentsBeforeBuilding(t *testing.T) {
	dir := t.TempDir()
	ones := filepath.Join(dir, "d1.txt")
	if err := os.WriteFile(ones, []byte("1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	base := []string{"cp", "--ranks", "8", "--counts", ones, "--masks", "causal_document", "--samples", "1", "--methods", "ring-p2p", "--passes", "fwd"}
	for _, c := range []struct {
		host  float64
		args  []string
		wants []string
	}{
		{3e9, []string{"--tokens-per-rank", "2M", "--dry-run"}, []string{"--tokens-per-rank 2M:", "documents of 1 token on average, about 16777216 a sequence", "--counts"}},
		{4 << 30, []string{"--tokens-per-rank", "4K", "--heads", "8:2", "--head-dim", "32", "-w", "0", "-n", "1", "--settle", "0", "--out", filepath.Join(dir, "out")},
			[]string{"--tokens-per-rank 4K:", "65538 tokens", "zigzag sharding pads", "--counts", "--sharding contiguous, which fits"}},
	} {
		withMachine(t, c.host)
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		_, stderr, code := runCLI(t, append(base, c.args...)...)
		runtime.ReadMemStats(&after)
		if code != 2 {
			t.Fatalf("%v: exit %d, want 2:\n%s", c.args, code, stderr)
		}
		line := strings.TrimSpace(stderr)
		if strings.Contains(line, "\n") {
			t.Errorf("%v: more than one line:\n%s", c.args, line)
		}
		for _, w := range c.wants {
			if !strings.Contains(line, w) {
				t.Errorf("%v: %q does not say %q", c.args, line, w)
			}
		}
		if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 100<<20 {
			t.Errorf("%v: %d MB allocated before the refusal, want no mask built", c.args, alloc>>20)
		}
	}
	if entries, _ := os.ReadDir(filepath.Join(dir, "out")); len(entries) > 0 {
		t.Errorf("the refused run left %d files in --out", len(entries))
	}
}
