package main

import (
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/urfave/cli/v2"
)

// helpLines is each flag's line of `longca CMD --help`, by flag name, with the column
// padding squeezed out (the two commands align their columns differently).
func helpLines(t *testing.T, cmd string) map[string]string {
	t.Helper()
	out, errOut, code := captureRun(t, cmd, "--help")
	if code != 0 {
		t.Fatalf("longca %s --help: exit %d: %s", cmd, code, errOut)
	}
	flag := regexp.MustCompile(`^\s+--([a-z0-9-]+)`)
	space := regexp.MustCompile(`\s+`)
	lines := map[string]string{}
	for _, l := range strings.Split(out, "\n") {
		if m := flag.FindStringSubmatch(l); m != nil {
			lines[m[1]] = space.ReplaceAllString(strings.TrimSpace(l), " ")
		}
	}
	if len(lines) < 20 {
		t.Fatalf("longca %s --help: %d flag lines found:\n%s", cmd, len(lines), out)
	}
	return lines
}

// The CP sweep's flags have one owner (cpSweepFlags): `longca cp --help` and `longca
// simulate --help` show every one of them with the same text, but for what
// cpSweepDefaults says differs (the default results folder, the samples), and every
// shared flag parses the same way in both commands.
func TestCPSweepFlagsOneOwner(t *testing.T) {
	cpHelp, simHelp := helpLines(t, "cp"), helpLines(t, "simulate")
	differ := map[string]bool{"out": true, "samples": true}
	for _, f := range cpSweepFlags(cpDefaults) {
		name := f.Names()[0]
		a, okA := cpHelp[name]
		b, okB := simHelp[name]
		if !okA || !okB {
			t.Errorf("--%s: in cp's help %v, in simulate's %v: a shared flag must be in both", name, okA, okB)
			continue
		}
		if differ[name] {
			if a == b {
				t.Errorf("--%s: the same line in both commands, but cpSweepDefaults says it differs: %q", name, a)
			}
			continue
		}
		if a != b {
			t.Errorf("--%s differs between the commands:\n  cp:       %s\n  simulate: %s", name, a, b)
		}
	}
	for name, want := range map[string]string{"out": "out/cp-<time>", "samples": "(default: 30)"} {
		if !strings.Contains(cpHelp[name], want) {
			t.Errorf("cp --%s: %q, want it to contain %q", name, cpHelp[name], want)
		}
	}
	for name, want := range map[string]string{"out": "out/simulate-<time>", "samples": "(default: 5)"} {
		if !strings.Contains(simHelp[name], want) {
			t.Errorf("simulate --%s: %q, want it to contain %q", name, simHelp[name], want)
		}
	}
	// No command defines a shared flag a second time (urfave/cli would take the first).
	for _, cmd := range []string{"cp", "simulate"} {
		seen := map[string]int{}
		for _, f := range commandFlags(t, cmd) {
			for _, n := range f.Names() {
				seen[n]++
			}
		}
		for n, k := range seen {
			if k > 1 {
				t.Errorf("longca %s defines --%s %d times", cmd, n, k)
			}
		}
	}
}

// commandFlags are the flags of a registered subcommand.
func commandFlags(t *testing.T, name string) []cli.Flag {
	t.Helper()
	for _, c := range commands {
		if c.Name == name {
			return c.Flags
		}
	}
	t.Fatalf("no command %s", name)
	return nil
}

// The shared flags are read by one parser: bad input gives the same line, exit 2, from
// both commands.
func TestCPSweepFlagsSameErrors(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--methods", "nosuch"}, `--methods: unknown method "nosuch"`},
		{[]string{"--masks", "nosuch"}, `--masks: unknown mask "nosuch"`},
		{[]string{"--tokens-per-rank", "0"}, "--tokens-per-rank"},
		{[]string{"--seqlen", "64K", "--tokens-per-rank", "8K"}, "--seqlen and --tokens-per-rank both given"},
		{[]string{"--heads", "64:7:1"}, "--heads"},
		{[]string{"--head-dim", "0"}, "--head-dim 0"},
		// past the bounds, byte counts wrapped int64 (a dry run's negative fwd_bytes/rank,
		// simulate's 0% exposed transfer)
		{[]string{"--heads", "1000000:1000000"}, `--heads: heads "1000000:1000000": at most 1024`},
		{[]string{"--head-dim", "1000000000"}, "--head-dim 1000000000: must be 1 to 1024"},
		{[]string{"--dtype", "int3"}, "--dtype"},
		{[]string{"--ulysses", "-1"}, "--ulysses -1"},
		{[]string{"--cp-block", "-4"}, "--cp-block -4"},
		// bounds: a stage count past 63 overflowed (a panic), a block past the rank's tokens
		// padded every rank up to it (a panic, or gigabytes the estimate never saw)
		{[]string{"--cp-stages", "9223372036854775807"}, "--cp-stages 9223372036854775807: give at most 16"},
		{[]string{"--tokens-per-rank", "128", "--cp-block", "4611686018427387904"}, "--cp-block 4611686018427387904: give at most the sequence's"},
		{[]string{"--seqlen", "1K", "--cp-block", "2048"}, "--cp-block 2048: give at most the sequence's 1024 tokens (--seqlen)"},
		{[]string{"--sharding", "diagonal"}, "diagonal"},
		{[]string{"--samples", "0"}, "--samples 0"},
		// seeds past 2^64-1 wrapped to 0, 1, ...: a --seed 0 run's masks under another seed
		{[]string{"--samples", "3", "--seed", "18446744073709551614"}, "--seed 18446744073709551614: with --samples 3"},
		{[]string{"--passes", "sideways"}, "--passes"},
		{[]string{"--max-doc", "-3"}, "--max-doc"},
	} {
		for _, cmd := range []string{"cp", "simulate"} {
			args := append([]string{cmd}, c.args...)
			_, errOut, code := captureRun(t, args...)
			checkUsageError(t, args, code, errOut, c.want)
		}
	}
}

// The check's and the repetitions' flags have one definition and one reader for kernel,
// sparse and cp: `cp --check --no-check` is refused as kernel refuses it (it used to run
// unchecked), and the help says the same.
func TestCheckFlagsOneOwner(t *testing.T) {
	for _, cmd := range []string{"kernel", "sparse", "cp"} {
		for _, c := range []struct {
			args []string
			want string
		}{
			{[]string{"--check", "--no-check", "--dry-run"}, "--check and --no-check both given"},
			{[]string{"--check-budget", "0", "--dry-run"}, "--check-budget 0"},
			{[]string{"-w", "-1", "--dry-run"}, "-w -1 -n"},
		} {
			args := append([]string{cmd}, c.args...)
			_, errOut, code := captureRun(t, args...)
			checkUsageError(t, args, code, errOut, c.want)
		}
	}
	kernelHelp, cpHelp := helpLines(t, "kernel"), helpLines(t, "cp")
	for _, f := range checkFlags() {
		name := f.Names()[0]
		if kernelHelp[name] != cpHelp[name] {
			t.Errorf("--%s differs:\n  kernel: %s\n  cp:     %s", name, kernelHelp[name], cpHelp[name])
		}
	}
}

// A CP flag that only methods absent from --methods read is said, a warning line, and the
// run goes on (a script that runs one method at a time with the same mesh flags is a fair
// use: spmd/cp/gpu.sh does); a flag some listed method reads is not.
func TestMethodFlagsSaid(t *testing.T) {
	for _, c := range []struct {
		args []string
		warn string // "" for none
	}{
		{[]string{"--methods", "ring-p2p", "--ulysses", "2"}, "--ulysses is read by usp and loongtrain only, and --methods has none of them (ring-p2p)"},
		{[]string{"--methods", "usp,ulysses", "--windows", "2"}, "--windows is read by loongtrain only"},
		{[]string{"--methods", "ring-allgather", "--cp-layout", "thd"}, "--cp-layout is read by balanced only"},
		{[]string{"--methods", "usp,ring-p2p", "--ulysses", "2"}, ""},
		{[]string{"--methods", "balanced", "--cp-ulysses", "1,2"}, ""},
		// balanced cuts by its own dispatch: --sharding was silently not read
		{[]string{"--methods", "balanced", "--sharding", "zigzag"}, "--sharding is read by ring-p2p, ring-allgather, ulysses, usp and loongtrain only"},
		{[]string{"--methods", "balanced,ulysses", "--sharding", "zigzag"}, ""},
	} {
		for _, cmd := range []string{"cp", "simulate"} {
			args := append([]string{cmd, "--dry-run", "--ranks", "8"}, c.args...)
			if cmd == "simulate" { // (no dry run: a small sweep, a fraction of a second)
				args = append([]string{cmd, "--gpus", "8", "--masks", "causal", "--tokens-per-rank", "1K", "--out", filepath.Join(t.TempDir(), "sim")}, c.args...)
			}
			_, errOut, code := captureRun(t, args...)
			if code != 0 {
				t.Errorf("%v: exit %d, want 0: %s", args, code, errOut)
			}
			if got := strings.Contains(errOut, "it changes nothing in this run"); got != (c.warn != "") || c.warn != "" && !strings.Contains(errOut, c.warn) {
				t.Errorf("%v: stderr %q, want the warning %q", args, errOut, c.warn)
			}
		}
	}
}

// A --seqlen shorter than the ranks it is cut over: most ranks held no token, and cp wrote
// ok rows of 0.0000 TFLOP/s per rank (the eleventh pass). Refused, naming --seqlen; the
// simulation's largest GPU count is the one checked.
func TestSeqlenShorterThanRanks(t *testing.T) {
	for _, args := range [][]string{
		{"cp", "--ranks", "8", "--seqlen", "7", "--methods", "ring-p2p", "--masks", "causal", "--dry-run"},
		{"simulate", "--gpus", "4,8", "--seqlen", "7", "--masks", "causal", "--methods", "ring-p2p"},
	} {
		_, errOut, code := captureRun(t, args...)
		checkUsageError(t, args, code, errOut, "--seqlen 7 over 8 ranks leaves 1 of them without a token")
	}
}
