package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/longca/longca/internal/smallfile"
	"github.com/longca/longca/internal/smallfile/fifotest"
)

// TestEmptyDocFlagsRefused (probe s40, finding 5): --counts, --dist, --max-doc or --column
// given empty (`--counts "$F"` with F unset, `--counts=`) read as not given, and every
// command measured the built-in documents without a word, exit 0: each is refused in one
// line naming the flag, in every command that draws documents.
func TestEmptyDocFlagsRefused(t *testing.T) {
	out := t.TempDir()
	commands := map[string][]string{
		"data":     {"data", "--seqlen", "16K", "--samples", "1"},
		"kernel":   {"kernel", "--masks", "causal_document", "--seqlens", "1K", "--dry-run"},
		"cp":       {"cp", "--ranks", "2", "--masks", "causal_document", "--methods", "ring-p2p", "--samples", "1", "--dry-run"},
		"simulate": {"simulate", "--gpus", "8", "--masks", "causal_document", "--methods", "ring-p2p", "--samples", "1", "--out", out},
		"masks":    {"masks", "--mask", "causal_document", "--seqlen", "1K"},
	}
	for _, c := range []struct{ flag, want string }{
		{"counts", `--counts "": give a file of token counts, or leave --counts out`},
		{"dist", `--dist "": give a distribution (pile, prolong64k, prolong512k, magiattention) or a JSON file, or leave --dist out`},
		{"max-doc", `--max-doc "": give a cap`},
		{"column", `--column "": give the name of the --counts file's column`},
	} {
		for _, args := range commands {
			for _, given := range [][]string{{"--" + c.flag + "="}, {"--" + c.flag, ""}} {
				a := append(append([]string{}, args...), given...)
				_, errOut, code := captureRun(t, a...)
				checkUsageError(t, a, code, errOut, c.want)
			}
		}
	}
	// a value of blanks is no more a file than an empty one
	args := []string{"data", "--seqlen", "1K", "--counts", "  "}
	_, errOut, code := captureRun(t, args...)
	checkUsageError(t, args, code, errOut, `--counts "  ": give a file of token counts`)
}

// TestDocFlagsSmallPoints (finding 13): --counts - named no file ("open -: no such file or
// directory"): it names /dev/stdin; --dist takes a built-in name in any case (README writes
// "Pile"); --max-doc 0 was "no cap" without a word (magiattention still capped at 0.25): it
// is refused, and the help says a cap is at least 1.
func TestDocFlagsSmallPoints(t *testing.T) {
	for _, flag := range []string{"--counts", "--dist"} {
		args := []string{"data", "--seqlen", "1K", flag, "-"}
		_, errOut, code := captureRun(t, args...)
		checkUsageError(t, args, code, errOut, flag+" -: no such file: to read standard input, give "+flag+" /dev/stdin")
	}
	out, errOut, code := captureRun(t, "data", "--seqlen", "1K", "--samples", "1", "--dist", "Pile")
	if code != 0 || !strings.HasPrefix(out, "# longca data: pile,") {
		t.Errorf("--dist Pile: exit %d, %q %q; want pile's summary", code, out, errOut)
	}
	args := []string{"data", "--seqlen", "16K", "--samples", "1", "--dist", "magiattention", "--max-doc", "0"}
	_, errOut, code = captureRun(t, args...)
	checkUsageError(t, args, code, errOut, `--max-doc: cap "0" caps nothing`, "leave --max-doc out")
	out, _, _ = captureRun(t, "data", "--help")
	if !strings.Contains(out, "a token count of at least 1") {
		t.Errorf("data --help does not say a cap is at least 1:\n%s", out)
	}
}

// TestCountsPipeSaysItWaits (finding 6): a FIFO given as --counts or --dist with no writer
// waited in silence (a minute in open(2), and for good where a writer never closes it):
// after pipeWait one line on stderr says longca waits for a writer on the named pipe and
// that Ctrl-C stops it. A pipe that is written at once (the shell's <(printf ...)) says
// nothing, works, and is named "pipe", not by its descriptor's number.
func TestCountsPipeSaysItWaits(t *testing.T) {
	defer func(p, w time.Duration) { pipeWait, smallfile.WriterWait = p, w }(pipeWait, smallfile.WriterWait)
	pipeWait, smallfile.WriterWait = 50*time.Millisecond, time.Second
	dir := t.TempDir()
	for _, flag := range []string{"--counts", "--dist"} {
		fifo := fifotest.Make(t, filepath.Join(dir, "fifo"+flag[2:]))
		args := []string{"--log-format", "text", "data", "--seqlen", "1K", flag, fifo}
		var errOut string
		fifotest.Within(t, "data "+flag+" FIFO", 20*time.Second, func() error {
			_, errOut, _ = captureRun(t, args...)
			return nil
		})
		for _, w := range []string{flag + " " + fifo + ": waiting for a writer on the named pipe", "Ctrl-C stops it", "no one opened for writing"} {
			if !strings.Contains(errOut, w) {
				t.Errorf("%v: stderr %q, want %q", args, errOut, w)
			}
		}
	}
	if _, err := os.Stat("/dev/fd"); err != nil {
		return
	}
	pipeWait = time.Minute
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	go func() { w.WriteString("100\n200\n"); w.Close() }()
	out, errOut, code := captureRun(t, "data", "--seqlen", "1K", "--samples", "1", "--counts", fmt.Sprintf("/dev/fd/%d", r.Fd()))
	if code != 0 || !strings.HasPrefix(out, "# longca data: pipe,") || strings.Contains(errOut, "waiting") {
		t.Errorf("a counts pipe written at once: exit %d, %q, %q", code, out, errOut)
	}
}

// TestRepeatedFlagThatFailsIsNotSaidUsed (finding 12): `data --samples= --samples 1` warned
// that the last, "1", is used, then failed on the empty one: the two lines contradicted each
// other. The repeats are said at the action's start, once every value parsed, so a flag one
// of whose values does not parse is not said; the one error line stands.
func TestRepeatedFlagThatFailsIsNotSaidUsed(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"data", "--samples=", "--seqlen", "16K", "--samples", "1"}, `"": give a whole number`},
		{[]string{"data", "--seed=", "--seqlen", "16K", "--seed", "1"}, `"": give a whole number`},
		{[]string{"data", "--samples", "1", "--samples", "x"}, `--samples x: give a whole number`},
		{[]string{"kernel", "--settle", "1s", "--settle", "soon", "--dry-run"}, `--settle soon: give a duration`},
		{[]string{"kernel", "--gpu-state=maybe", "--gpu-state=true", "--dry-run"}, `--gpu-state=maybe: give true or false`},
	} {
		_, errOut, code := captureRun(t, c.args...)
		checkUsageError(t, c.args, code, errOut, c.want)
		if strings.Contains(errOut, "is used") {
			t.Errorf("%q: %q: a value that failed is said used", c.args, errOut)
		}
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"data", "--samples", "0x10", "--samples", "1", "--seqlen", "1K"}, `--samples given 2 times: the last, \"1\", is used`},
		{[]string{"data", "--seqlen=", "--seqlen", "1K", "--samples", "1"}, `--seqlen given 2 times: the last, \"1K\", is used`}, // a string: read by the command (the log line is JSON)
	} {
		_, errOut, code := captureRun(t, c.args...)
		if code != 0 || strings.Count(errOut, c.want) != 1 {
			t.Errorf("%q: exit %d, %q: want %q once", c.args, code, errOut, c.want)
		}
	}
}
