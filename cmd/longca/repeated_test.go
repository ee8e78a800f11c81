package main

import (
	"reflect"
	"strings"
	"testing"
)

// A flag given twice keeps its last value, and that is said (it was silent: `data --seqlen
// 1K --seqlen 2K` measured 2K); aliases count as one flag, switches and repeatable flags
// are left out, subcommands' flags are theirs, and "--" ends the flags.
func TestRepeatedFlags(t *testing.T) {
	for _, c := range []struct {
		line string
		want []string
	}{
		{"longca data --seqlen 1K --seqlen=2K", []string{`--seqlen given 2 times: the last, "2K", is used`}},
		{"longca kernel -b 1K --begin 2K -b 4K", []string{`--begin given 3 times: the last, "4K", is used`}},
		{"longca kernel --seqlens 1K --dry-run --dry-run", nil},
		{"longca kernel --gpu-state=false --seqlens 1K --gpu-state=true", []string{`--gpu-state given 2 times: the last, "true", is used`}},
		{"longca merge --run a --run b", nil},
		{"longca selftest comm --backend local --backend tcp", []string{`--backend given 2 times: the last, "tcp", is used`}},
		{"longca data --seqlen 1K -- --seqlen", nil},
		{"longca data --seqlen --seqlen", nil}, // the second is the first's value
	} {
		got := repeatedFlags(strings.Fields(c.line), nil, commands)
		if !reflect.DeepEqual(got, c.want) && !(len(got) == 0 && len(c.want) == 0) {
			t.Errorf("%s: %q, want %q", c.line, got, c.want)
		}
	}
	_, errOut, code := captureRun(t, "data", "--dist", "pile", "--seqlen", "1K", "--seqlen", "2K", "--samples", "1")
	if code != 0 || !strings.Contains(errOut, "--seqlen given 2 times") {
		t.Errorf("exit %d, %q: want the repeated --seqlen said", code, errOut)
	}
	// the app's own flags, read before the command (they were not seen: urfave/cli had
	// parsed them before Before ran)
	_, errOut, code = captureRun(t, "--log-level", "info", "--log-format", "text", "--log-level=warn", "data", "--dist", "pile", "--seqlen", "1K", "--samples", "1")
	if code != 0 || !strings.Contains(errOut, `--log-level given 2 times: the last, "warn", is used`) {
		t.Errorf("exit %d, %q: want the repeated --log-level said", code, errOut)
	}
}
