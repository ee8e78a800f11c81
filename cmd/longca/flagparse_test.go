package main

import (
	"strings"
	"testing"
)

// urfave/cli's own parse errors are Go's flag package's, naming the flag with one dash
// (`invalid value "x" for flag -samples: parse error`); each is now one line naming the
// flag as written and the value it takes, exit 2, for every kind of flag.
func TestFlagParseErrorsNameTheFlag(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"data", "--seqlen", "1K", "--samples", "x"}, "longca: --samples x: give a whole number"}, // int
		{[]string{"data", "--seqlen", "1K", "--samples="}, `longca: --samples "": give a whole number`},
		{[]string{"data", "--seqlen", "1K", "--samples", "99999999999999999999"}, "longca: --samples 99999999999999999999: out of range: too large for a whole number (at most 9223372036854775807)"},
		{[]string{"list", "--device", "99999999999999999999"}, "longca: --device 99999999999999999999: out of range: too large for a whole number (at most 9223372036854775807)"},
		{[]string{"data", "--seqlen", "1K", "--samples", "-99999999999999999999"}, "longca: --samples -99999999999999999999: out of range: too small for a whole number (at least -9223372036854775808)"},
		{[]string{"data", "--seqlen", "1K", "--samples"}, "longca: --samples given without a value: give a whole number"},
		{[]string{"data", "--seqlen", "1K", "--seed", "-1"}, "longca: --seed -1: give a whole number, 0 or more"},                // uint64
		{[]string{"kernel", "--dry-run", "-n", "x"}, "longca: -n x: give a whole number"},                                        // an alias
		{[]string{"kernel", "--dry-run", "--check-budget", "x"}, "longca: --check-budget x: give a number (such as 0.5 or 1e9)"}, // float64
		{[]string{"kernel", "--dry-run", "--check-budget", "1e999"}, "longca: --check-budget 1e999: out of range"},
		{[]string{"kernel", "--dry-run", "--no-check=maybe"}, "longca: --no-check=maybe: give true or false (the flag alone is true)"},               // bool
		{[]string{"kernel", "--dry-run", "--worker-timeout", "5"}, "longca: --worker-timeout 5: give a duration with its unit (such as 90s or 10m)"}, // duration
		{[]string{"kernel", "--dry-run", "--seqlens"}, "longca: --seqlens given without a value: give a value (see longca kernel --help)"},           // string
		{[]string{"merge", "--run"}, "longca: --run given without a value: give a value (see longca merge --help)"},                                  // string slice
		{[]string{"data", "--nope"}, "longca: --nope: no such flag (see longca data --help)"},
		{[]string{"kernel", "--dry-run", "--log-format", "text"}, "longca: --log-format: longca's own flag: give it before the command (longca --log-format ... kernel ...)"},
		{[]string{"--log-level"}, "longca: --log-level given without a value: give a value (see longca --help)"}, // the app's own
		{[]string{"report", t.TempDir(), "--at", "x"}, "longca: --at x: give a number (such as 0.5 or 1e9)"},     // a flag after report's folder
	} {
		_, errOut, code := captureRun(t, c.args...)
		checkUsageError(t, c.args, code, errOut, c.want)
		if strings.Contains(errOut, "flag -") || strings.Contains(errOut, "parse error") {
			t.Errorf("%v: %q is still Go's flag error", c.args, errOut)
		}
	}
}

// Text logs into a pipe or a file carry no colour escape codes (the eleventh pass: they
// did, ESC[90m in every line of a log file); a terminal keeps them.
func TestTextLogsUncolouredOffATerminal(t *testing.T) {
	_, errOut, code := captureRun(t, "--log-format", "text", "simulate", "--gpus", "8", "--masks", "full", "--methods", "ring-p2p", "--passes", "fwd", "--out", t.TempDir())
	if code != 0 || !strings.Contains(errOut, "INF") {
		t.Fatalf("exit %d, stderr %q: want text log lines", code, errOut)
	}
	if strings.Contains(errOut, "\x1b[") {
		t.Errorf("text logs into a pipe hold escape codes: %q", errOut)
	}
}
