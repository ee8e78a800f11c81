package main

// Tests of the seventh hardening pass (docs/hardening.md): the environment a run lives in.

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/longca/longca/results"
)

// cpTiny is a seconds-long cp sweep on two in-process ranks into out as run r.
func cpTiny(out string, extra ...string) []string {
	return append([]string{"--log-level", "warn", "cp", "--ranks", "2", "--methods", "ring-p2p", "--masks", "causal",
		"--tokens-per-rank", "128", "--heads", "2:2", "--head-dim", "8", "--passes", "fwd", "-w", "0", "-n", "1",
		"--samples", "1", "--baseline", "none", "--timeout", "20s", "--out", out, "--run-id", "r"}, extra...)
}

// An in-process cp whose folder holds one of the run's rank files (an earlier run's, or
// another process's started at the same moment): rank 1 could not create its file and
// returned, and rank 0 waited for it in the next collective for the whole --timeout
// (5 minutes by default), deaf to Ctrl-C and SIGTERM, then exited 1 with two lines. Now
// it is one line, exit 2, at once, and no rank file of the refused run is left behind.
func TestInProcessRankFileClash(t *testing.T) {
	for _, existing := range [][]int{{1}, {0, 1}} {
		out := t.TempDir()
		for _, r := range existing {
			w, err := results.Create(out, "r", r, 2)
			if err != nil {
				t.Fatal(err)
			}
			w.Close()
		}
		args := cpTiny(out)
		start := time.Now()
		_, errOut, code := captureRun(t, args...)
		if took := time.Since(start); took > 10*time.Second {
			t.Errorf("ranks %v there: refused after %v; want at once", existing, took)
		}
		checkUsageError(t, args, code, errOut, "--out "+out, "r.rank-", "give another run id or folder")
		if ents, _ := filepath.Glob(filepath.Join(out, "r.*")); len(ents) != len(existing) {
			t.Errorf("ranks %v there: the folder holds %v after the refusal", existing, ents)
		}
	}
}
