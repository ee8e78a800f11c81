package external

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// script writes an executable shell script into a test folder.
func script(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "w.sh")
	if err := os.WriteFile(p, []byte("#!/bin/sh\n"+body), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

// reaped says whether stop left the process reaped (exited closed).
func reaped(p *process) bool {
	select {
	case <-p.exited:
		return true
	default:
		return false
	}
}

// Finding 4 of the thirteenth probe: lines on stdout that no request takes (a worker's
// log lines after a failed reply) blocked the reader for good, and with it Wait: stop
// waited its grace twice and the process stayed a zombie, with its pipe open.
func TestStopReapsAWorkerWithUnreadLines(t *testing.T) {
	p, err := startProcess(script(t, "echo one; echo two; echo three; echo four; exec sleep 60\n"), nil, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if line := <-p.lines; string(line) != "one" {
		t.Fatalf("first line %q", line)
	}
	p.stop(false)
	if !reaped(p) {
		t.Fatal("stop returned and the worker is not reaped")
	}
}

// The same finding: a worker that starts a child in its own session, holding its stdout
// and stderr, is reaped once it exits (longca's every run ended 10 s late: stop waited for
// stdout's end, then again after a kill that cannot reach the child).
func TestStopReapsAWorkerWhoseChildHoldsStdout(t *testing.T) {
	if _, err := exec.LookPath("setsid"); err != nil {
		t.Skip("no setsid here")
	}
	dir := t.TempDir()
	pidFile := filepath.Join(dir, "child.pid")
	p, err := startProcess(script(t, "setsid sleep 60 </dev/null &\necho $! > "+pidFile+"\nread line\n"), nil, dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if b, err := os.ReadFile(pidFile); err == nil {
			if pid, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil && pid > 0 {
				syscall.Kill(pid, syscall.SIGKILL)
			}
		}
	})
	p.stop(true) // stdin closed: the script's read ends, and the script
	if !reaped(p) {
		t.Fatal("stop returned and the worker is not reaped")
	}
	// what it left in a session of its own is found by its tag and killed (it outlived
	// longca before the fourteenth pass)
	b, err := os.ReadFile(pidFile)
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatal(err)
	}
	if running(pid, 2*time.Second) {
		t.Errorf("the worker's child in its own session (pid %d) still runs after stop", pid)
	}
}

// running says whether pid still runs (neither gone nor a zombie) after waiting up to d
// for it to end.
func running(pid int, d time.Duration) bool {
	end := time.Now().Add(d)
	for {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			return false
		}
		if i := bytes.LastIndexByte(b, ')'); i >= 0 && i+2 < len(b) && b[i+2] == 'Z' {
			return false
		}
		if time.Now().After(end) {
			return true
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// A worker's descendants are found by the tag in their environment, and only they: a
// process of the same program without the tag, and one with another worker's tag, keep
// running.
func TestKillTaggedKillsOnlyItsOwn(t *testing.T) {
	start := func(env ...string) *exec.Cmd {
		c := exec.Command("sleep", "60")
		c.Env = append(os.Environ(), env...)
		if err := c.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Process.Kill(); c.Wait() })
		return c
	}
	tag := newTag() // of this test alone: another test process may run this one beside it
	mine := start(TagEnv + "=" + tag)
	other := start(TagEnv + "=" + tag + "4") // a tag that starts with mine
	plain := start("X=" + TagEnv + "=" + tag)
	if n := killTagged(tag); n != 1 {
		t.Errorf("killTagged killed %d processes, want 1", n)
	}
	mine.Wait()
	if mine.ProcessState == nil || mine.ProcessState.Success() {
		t.Errorf("the tagged process was not killed: %v", mine.ProcessState)
	}
	for _, c := range []*exec.Cmd{other, plain} {
		if !running(c.Process.Pid, 0) {
			t.Errorf("pid %d (args %q, not tagged with mine) was killed", c.Process.Pid, c.Env[len(c.Env)-1])
		}
	}
	if killTagged("") != 0 {
		t.Error("an empty tag killed something")
	}
}

func TestHasEntry(t *testing.T) {
	for _, c := range []struct {
		env, entry string
		want       bool
	}{
		{"A=1\x00T=x\x00", "T=x", true},
		{"T=x", "T=x", true},
		{"T=xy\x00", "T=x", false},
		{"XT=x\x00", "T=x", false},
		{"", "T=x", false},
	} {
		if got := hasEntry([]byte(c.env), []byte(c.entry)); got != c.want {
			t.Errorf("hasEntry(%q, %q) = %v", c.env, c.entry, got)
		}
	}
}

func TestOneLine(t *testing.T) {
	for _, c := range []struct {
		in   string
		n    int
		want string
	}{
		{"NVIDIA H200", 200, "NVIDIA H200"},
		{"GPU\n\x1b[2J\x1b[31mfake", 200, "GPU | \ufffd[2J\ufffd[31mfake"},
		{"a\r\n  b\n\n\tc\t", 200, "a | b | c"},
		{"\n\nx\n", 200, "x"},
		{"tab\there", 200, "tab here"},
		{"\u202eevil", 200, "\ufffdevil"},
		{strings.Repeat("A", 300), 10, "AAAAAAA..."},
		{"ééééé", 8, "éé..."}, // cut at a character
		{"bad \xff byte", 200, "bad \ufffd byte"},
	} {
		got := oneLine(c.in, c.n)
		if got != c.want || len(got) > c.n {
			t.Errorf("oneLine(%q, %d) = %q, want %q", c.in, c.n, got, c.want)
		}
	}
}
