package external_test

// Tests of the thirteenth probe's findings 2, 4, 5, 6 and 8: a worker's strings, its
// stdout and children, programs that cannot start, and a hello that does not come.

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
	"unicode"

	"github.com/longca/longca/kernels"
	"github.com/longca/longca/kernels/external"
	"github.com/longca/longca/kernels/external/externaltest"
	"github.com/longca/longca/results"
)

// printableLine says what is wrong with s as one printable line of at most n bytes.
func printableLine(s string, n int) string {
	if len(s) > n {
		return "longer than " + strconv.Itoa(n) + " bytes: " + strconv.Itoa(len(s))
	}
	if i := strings.IndexFunc(s, func(r rune) bool { return !unicode.IsPrint(r) }); i >= 0 {
		return "an unprintable character at byte " + strconv.Itoa(i) + ": " + strconv.Quote(s[max(0, i-20):min(len(s), i+20)])
	}
	return ""
}

// Finding 2 and 5: a worker's device, worker, versions, variant and reason reach rows,
// logs and tables as one printable line within a bound: 15 MB of versions made an 818 MB
// results file of 56 rows, and a newline and escape sequences in the device broke the
// table's "# ran on:" line and cleared the terminal.
func TestWorkerStringsAreBounded(t *testing.T) {
	k := fakeKernel(t, "huge-strings", "ref", 0)
	row := runner(k).Run(context.Background(), smallCase("causal", kernels.Fwd))
	wantStatus(t, row, results.StatusOK)
	for _, f := range []struct{ name, v string }{{"device", row.Device}, {"kernel_variant", row.KernelVariant}} {
		if why := printableLine(f.v, 200); why != "" {
			t.Errorf("%s %.80q...: %s", f.name, f.v, why)
		}
	}
	if !strings.HasPrefix(row.Device, "GPU | ") || !strings.HasSuffix(row.Device, "...") {
		t.Errorf("device %q: want the line break as \" | \" and the cut said", row.Device)
	}
	if why := printableLine(row.KernelVersions, 64<<10); why != "" {
		t.Errorf("kernel_versions: %s", why)
	}
	var v map[string]string
	if err := json.Unmarshal([]byte(row.KernelVersions), &v); err != nil {
		t.Fatalf("kernel_versions %.200s: %v", row.KernelVersions, err)
	}
	if len(v) > 64+3 || v["..."] == "" || v["protocol"] != "1" || v["worker"] == "" {
		t.Errorf("kernel_versions has %d entries (... = %q, protocol %q, worker %.40q): want at most 64 of the worker's, the count of the rest, protocol and worker",
			len(v), v["..."], v["protocol"], v["worker"])
	}
	for name, val := range v {
		if why := printableLine(name, 200) + printableLine(val, 200); why != "" {
			t.Errorf("kernel_versions %.40q: %.40q: %s", name, val, why)
		}
	}
	if strings.Contains(row.Reason, "\x1b") {
		t.Errorf("reason %q", row.Reason)
	}

	row = runner(k).Run(context.Background(), smallCase("causal", kernels.Bwd))
	wantStatus(t, row, results.StatusError, "Traceback: | ", "line 2 | RRR")
	if why := printableLine(row.Reason, 2000); why != "" {
		t.Errorf("reason %.120q: %s", row.Reason, why)
	}
}

// Finding 4: a worker that writes log lines to stdout fails its request (the lines are not
// replies), and is reaped at once: the reader of its stdout blocked for good on lines no
// one took, so Wait never ran: 5 s a case and a zombie and a pipe each. The reason says
// how the worker ended (not "killed", the word for a process never reaped) and where logs
// go.
func TestWorkerLoggingToStdoutIsReaped(t *testing.T) {
	k := fakeKernel(t, "chatty-time", "ref", 0)
	t0 := time.Now()
	row := runner(k).Run(context.Background(), smallCase("causal", kernels.Fwd))
	t.Logf("after %s", time.Since(t0))
	wantStatus(t, row, results.StatusError, `malformed reply "loading kernel..."`, "print logs to stderr")
	if !strings.Contains(row.Reason, "the worker ended: exit status") && !strings.Contains(row.Reason, "the worker ended: signal: killed") {
		t.Errorf("reason %q: want the state of a reaped process", row.Reason)
	}
}

// Finding 4: a worker that exits leaving a child in another session (setsid) that holds
// its stdout is a crash, said with its exit status: longca waited for stdout's end, the
// whole request timeout, then called it a timeout.
func TestWorkerExitWithChildHoldingStdout(t *testing.T) {
	k := fakeKernel(t, "setsid-crash", "ref", 30*time.Second)
	state := os.Getenv(externaltest.StateEnv)
	t.Cleanup(func() {
		if b, err := os.ReadFile(filepath.Join(state, "child.pid")); err == nil {
			if pid, err := strconv.Atoi(string(b)); err == nil && pid > 0 {
				syscall.Kill(pid, syscall.SIGKILL)
			}
		}
	})
	row := runner(k).Run(context.Background(), smallCase("causal", kernels.Fwd))
	wantStatus(t, row, results.StatusError, "exit status 3", "a child left behind")
	if strings.Contains(row.Reason, "no reply within") {
		t.Errorf("reason %q: a timeout, want the exit", row.Reason)
	}
}

// Finding 8: a hello that takes long is said on stderr, with its bound (longca list sat
// three minutes in silence on a Python that hung on import).
func TestSlowHelloIsSaid(t *testing.T) {
	note := &syncWriter{b: &bytes.Buffer{}}
	oldAfter, oldNotice := external.HelloNoteAfter, external.Notice
	external.HelloNoteAfter, external.Notice = 0, note
	t.Cleanup(func() { external.HelloNoteAfter, external.Notice = oldAfter, oldNotice })
	k := fakeKernel(t, "slow-hello", "ref", 2*time.Second)
	if _, err := k.Available(context.Background()); err == nil {
		t.Fatal("a hello that never comes: available")
	}
	got := note.String()
	if !strings.Contains(got, "fake worker (slow-hello): waiting for the worker's hello") || !strings.Contains(got, "given up after 2s") {
		t.Errorf("stderr %q: want a line saying longca waits for the hello, and how long at most", got)
	}
}

// Finding 6: a program that exists but that the system cannot start is refused by
// ParseExec, naming the cause and the fix (longca wrote unsupported rows and exited 0).
func TestParseExecRefusesProgramsThatCannotStart(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o755); err != nil {
			t.Fatal(err)
		}
		return p
	}
	for _, c := range []struct{ body, want string }{
		{"echo hi\n", "neither a binary nor a script with a #! line"},
		{"#!/nonexistent/interp\n", "#! interpreter /nonexistent/interp, which is not there"},
		{"#!" + dir + "\n", "which is not an executable file"},
		{"#!python3 -u\n", "relative path"},
		{"#!\n", "names no interpreter"},
		{"\x7fELFgarbage", "is not a binary this system can run"},
	} {
		p := write("w", c.body)
		_, _, err := external.ParseExec(p + ":ref")
		if err == nil || !strings.Contains(err.Error(), c.want) || !strings.HasPrefix(err.Error(), "exec:"+p+":ref: ") {
			t.Errorf("%q: %v, want exec:%s:ref: ... %s", c.body, err, p, c.want)
		}
	}
	for _, p := range []string{write("sh", "#!/bin/sh\necho hi\n"), write("env", "#!/usr/bin/env python3\n"), os.Args[0]} {
		if _, _, err := external.ParseExec(p); err != nil {
			t.Errorf("%s: %v, want it taken", p, err)
		}
	}
}

// syncWriter is a writer for a line written from a timer's goroutine.
type syncWriter struct {
	mu sync.Mutex
	b  *bytes.Buffer
}

func (w *syncWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}

func (w *syncWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.String()
}
