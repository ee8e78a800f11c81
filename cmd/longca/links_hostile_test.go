package main

import (
	"os"
	"path/filepath"
	"testing"
)

// TestLinksThatCannotBeEmulated: a --links machine file whose numbers are finite and
// positive (sim.Machine.Validate holds them so) but leave time.Duration's range is one
// line, exit 2. A latency of 1e300 microseconds wrapped to a negative wait and
// comm/local panicked (a 23-line trace); a bandwidth of 5e-324 GB/s gave a negative time
// on the wire, and the run went on without any wait after warning of 292 years.
func TestLinksThatCannotBeEmulated(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct{ name, json, want string }{
		{"latency", `{"preset":"h100-ib","intra":{"bandwidth_gbs":360,"latency_us":1e300}}`, "intra: latency_us 1e+300"},
		{"slow", `{"preset":"h100-ib","intra":{"bandwidth_gbs":5e-324,"latency_us":3}}`, "intra: bandwidth_gbs 5e-324"},
		{"fast", `{"preset":"h100-ib","inter":{"bandwidth_gbs":1e308,"latency_us":3}}`, "inter: bandwidth_gbs 1e+308"},
	} {
		file := filepath.Join(dir, tc.name+".json")
		if err := os.WriteFile(file, []byte(tc.json), 0o644); err != nil {
			t.Fatal(err)
		}
		out := t.TempDir()
		args := []string{"cp", "--kernel", "ref", "-w", "0", "-n", "1", "--heads", "2:1", "--head-dim", "16", "--samples", "1",
			"--passes", "fwd", "--masks", "causal", "--methods", "ring-p2p", "--ranks", "2", "--tokens-per-rank", "128",
			"--baseline", "none", "--links", file, "--out", out}
		_, errOut, code := captureRun(t, args...)
		checkUsageError(t, args, code, errOut, "--links", tc.want, "cannot be emulated")
	}
}

// TestLinksSlowerThanTimeout: a --links latency of --timeout or more is refused by name,
// exit 2: every message on the link would time out (with 1e9 microseconds, 17 minutes, the
// run went on past --timeout 10s and past its first interrupt, the twelfth pass).
func TestLinksSlowerThanTimeout(t *testing.T) {
	file := filepath.Join(t.TempDir(), "lat.json")
	if err := os.WriteFile(file, []byte(`{"preset":"h100-ib","intra":{"bandwidth_gbs":360,"latency_us":1e9}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	args := []string{"cp", "--kernel", "ref", "-w", "0", "-n", "1", "--heads", "2:1", "--head-dim", "16", "--samples", "1",
		"--passes", "fwd", "--masks", "causal", "--methods", "ring-p2p", "--ranks", "2", "--tokens-per-rank", "128",
		"--baseline", "none", "--links", file, "--timeout", "10s", "--out", t.TempDir()}
	_, errOut, code := captureRun(t, args...)
	checkUsageError(t, args, code, errOut, "--links", "intra: latency_us 1e+09 is --timeout 10s or more", "a longer --timeout")
}
