package main

import (
	"strings"
	"testing"
)

// A flag or command given under another command's spelling is told the one meant: the
// commands really differ (kernel's --seqlens, cp's --seqlen; --kernels and --kernel;
// --masks and masks' --mask), and the line only said "no such flag" (probe of s40,
// finding 6).
func TestTyposAreToldTheNameMeant(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"kernel", "--seqlen", "1K"}, "did you mean --seqlens?"},
		{[]string{"kernel", "--mask", "causal"}, "did you mean --masks?"},
		{[]string{"kernel", "--kernel", "ref"}, "did you mean --kernels?"},
		{[]string{"kernel", "--head_dim", "64"}, "did you mean --head-dim?"},
		{[]string{"cp", "--kernels", "ref"}, "did you mean --kernel?"},
		{[]string{"cp", "--seqlens", "1K"}, "did you mean --seqlen?"},
		{[]string{"masks", "--masks", "causal"}, "did you mean --mask?"},
		{[]string{"kernl"}, "(did you mean kernel?)"},
		{[]string{"reprot", "x"}, "(did you mean report?)"},
	} {
		_, stderr, code := runCLI(t, c.args...)
		checkUsageError(t, c.args, code, stderr, c.want)
	}
	// nothing close: no guess
	args := []string{"kernel", "--zzz", "1"}
	_, stderr, code := runCLI(t, args...)
	checkUsageError(t, args, code, stderr, "--zzz: no such flag")
	if strings.Contains(stderr, "did you mean") {
		t.Errorf("%v: %q guesses a flag far from --zzz", args, stderr)
	}
}

func TestSuggest(t *testing.T) {
	names := []string{"seqlens", "masks", "heads", "head-dim", "w", "n", "out", "dry-run"}
	for typed, want := range map[string]string{
		"seqlen": "seqlens", "mask": "masks", "head_dim": "head-dim", "HEADS": "heads",
		"dryrun": "dry-run", "outt": "out", "xyz": "", "o": "", "seqlensss": "seqlens", "sequence": "", "heads": "",
	} {
		if got := suggest(typed, names); got != want {
			t.Errorf("suggest(%q) = %q, want %q", typed, got, want)
		}
	}
	if d := editDistance("kitten", "sitting"); d != 3 {
		t.Errorf("editDistance(kitten, sitting) = %d, want 3", d)
	}
}

// No help line states two defaults: a flag whose usage says its own had urfave/cli's
// "(default: 0)" after it (`--ranks ... (default 1) (default: 0)`, probe of s40).
func TestHelpStatesOneDefault(t *testing.T) {
	stdout, _, code := runCLI(t, "--help")
	if code != 0 {
		t.Fatalf("longca --help: exit %d", code)
	}
	var cmds []string
	in := false
	for _, l := range strings.Split(stdout, "\n") {
		switch {
		case strings.HasPrefix(l, "COMMANDS:"):
			in = true
		case in && strings.TrimSpace(l) == "":
			in = false
		case in:
			cmds = append(cmds, strings.TrimSuffix(strings.Fields(l)[0], ","))
		}
	}
	if len(cmds) < 8 {
		t.Fatalf("found %d commands in longca --help: %v", len(cmds), cmds)
	}
	seen := 0
	for _, c := range cmds {
		if c == "help" || c == "h" {
			continue
		}
		out, _, _ := runCLI(t, c, "--help")
		for _, l := range strings.Split(out, "\n") {
			if !strings.HasPrefix(strings.TrimSpace(l), "-") {
				continue
			}
			seen++
			if i := strings.LastIndex(l, " (default: "); i >= 0 && ownDefault.MatchString(l[:i]) {
				t.Errorf("longca %s --help: two defaults: %s", c, strings.TrimSpace(l))
			}
		}
	}
	if seen < 100 {
		t.Errorf("read %d flag lines, want the commands' flags", seen)
	}
}
