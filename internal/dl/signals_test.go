package dl

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestMain runs the signal child (sigChild) when the test binary is started as one.
func TestMain(m *testing.M) {
	if mode := os.Getenv("LONGCA_DL_SIGCHILD"); mode != "" {
		os.Exit(sigChild(mode == "fix"))
	}
	os.Exit(m.Run())
}

// sigChild is a process that waits for SIGINT through signal.NotifyContext (as longca's
// sweeps do) after a careless handler (no SA_ONSTACK, chaining to Go's) replaced Go's,
// with or without SignalsOnStack, and sends itself SIGINT on the running thread: exit 0
// after a clean stop.
func sigChild(fix bool) int {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT)
	defer stop()
	if err := installCareless(int(syscall.SIGINT)); err != nil {
		fmt.Println(err)
		return 4
	}
	if fix {
		SignalsOnStack()
	}
	runtime.LockOSThread()
	if err := syscall.Tgkill(os.Getpid(), syscall.Gettid(), syscall.SIGINT); err != nil {
		fmt.Println(err)
		return 4
	}
	for end := time.Now().Add(5 * time.Second); ctx.Err() == nil && time.Now().Before(end); {
	}
	if ctx.Err() == nil {
		fmt.Println("no SIGINT arrived")
		return 3
	}
	fmt.Println("stopped cleanly")
	return 0
}

// A handler installed without SA_ONSTACK that chains to Go's turns SIGINT into a fatal
// runtime error (what `timeout -s INT` did to longca kernel in call 19); with
// SignalsOnStack the same process stops cleanly.
func TestSignalsOnStackCleanStop(t *testing.T) {
	run := func(mode string) (string, error) {
		cmd := exec.Command(os.Args[0], "-test.run", "^$")
		cmd.Env = append(os.Environ(), "LONGCA_DL_SIGCHILD="+mode)
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	out, err := run("nofix")
	if err == nil || !strings.Contains(out, "SA_ONSTACK") {
		t.Errorf("without SignalsOnStack the child should die of the careless handler: err %v, output:\n%.600s", err, out)
	}
	out, err = run("fix")
	if err != nil || !strings.Contains(out, "stopped cleanly") {
		t.Errorf("with SignalsOnStack the child should stop cleanly: err %v, output:\n%.600s", err, out)
	}
}

// SignalsOnStack sets the flag on a handler that lacks it, leaves it set, and changes
// nothing the second time.
func TestSignalsOnStackSetsFlag(t *testing.T) {
	sig := int(syscall.SIGUSR2)
	signal.Ignore(syscall.SIGUSR2) // nothing is sent: the handler only has to be installed
	defer signal.Reset(syscall.SIGUSR2)
	if err := installCareless(sig); err != nil {
		t.Fatal(err)
	}
	if onStack(sig) {
		t.Fatal("the careless handler has SA_ONSTACK already")
	}
	if n := SignalsOnStack(); n < 1 {
		t.Fatalf("SignalsOnStack changed %d handlers, want at least 1", n)
	}
	if !onStack(sig) {
		t.Fatal("SIGUSR2's handler still lacks SA_ONSTACK")
	}
	if n := SignalsOnStack(); n != 0 {
		t.Errorf("a second SignalsOnStack changed %d handlers, want 0", n)
	}
}
