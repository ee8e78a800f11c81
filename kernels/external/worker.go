package external

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/longca/longca/internal/textcut"
)

// ErrWorkerFailed marks a failure of the worker process itself (it exited, did not
// answer in time, or answered something that is not a reply): the process is killed and
// the next request starts a new one. Crashes counts them, so a sweep can stop.
var ErrWorkerFailed = errors.New("worker failed")

// errNotStarted marks a worker that could not be started at all (no interpreter, a
// program that is not there): the cases it would serve are unsupported here.
var errNotStarted = errors.New("worker not started")

// Default bounds on requests when kernels.Options.Timeout is 0.
const (
	// HelloTimeout bounds starting a worker and its hello (importing torch, creating
	// the CUDA context).
	HelloTimeout = 3 * time.Minute
	// CallTimeout bounds supports, forward and backward (which may compile kernels).
	CallTimeout = 10 * time.Minute
	// maxLine bounds one reply line.
	maxLine = 16 << 20
	// exitGrace is how long a worker that closed stdout or was killed may take to exit.
	exitGrace = 5 * time.Second
	// ioGrace is how long longca reads a worker's stdout and stderr after it exited: a
	// process it started in another session (setsid) may hold them open for good.
	ioGrace = time.Second
)

// HelloNoteAfter is how long a worker's hello may take before longca says on stderr that
// it is waiting, and for how long at most: a Python that hangs on import (an NFS home, a
// conda lock) otherwise kept `longca list` silent for the whole HelloTimeout.
var HelloNoteAfter = 10 * time.Second

// Notice is where that line goes; nil is os.Stderr (read when the worker starts).
var Notice io.Writer

// Spec says how to start a worker.
type Spec struct {
	// Argv is the program and its arguments; longca appends --device N.
	Argv []string
	// Device is the GPU index the worker runs on (its hello request says it too).
	Device int
	// Label names the worker in messages ("torch worker (python3)", "exec:./w").
	Label string
	// Script, when set, is written into the worker's folder before it starts, and
	// ScriptArg in Argv is replaced by its path (the embedded PyTorch worker).
	Script    []byte
	ScriptArg string
	// Missing is the hint given when Argv[0] cannot be found ("give --python").
	Missing string
}

// Worker is one worker process, started when first needed and restarted after it
// fails; requests are served one at a time. The kernels it serves share it.
type Worker struct {
	spec Spec

	mu       sync.Mutex
	proc     *process
	hello    *reply
	startErr error // a start that cannot succeed: not retried
	crashes  int
	dir      string
	nextID   int64
	closed   bool
}

// process is a running worker.
type process struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	stdout *os.File    // the read end of its stdout (closed by stop)
	lines  chan []byte // reply lines; closed at stdout's end
	rerr   error       // why the lines ended (set before lines is closed)
	// quit is closed by stop: the reader delivers no more lines (it blocked for good on
	// a worker that printed log lines to stdout, and with it the reaping: the fourth
	// finding of the thirteenth probe).
	quit     chan struct{}
	stopOnce sync.Once
	exited   chan struct{} // closed once the process is reaped (its ProcessState set)
	tail     *tailBuffer
	tag      string // TagEnv's value in its environment: what it left behind is found by it
}

// NewWorker makes a worker that starts on first use.
func NewWorker(s Spec) *Worker { return &Worker{spec: s} }

// Crashes is how many times the worker failed (exited, timed out, answered nonsense)
// and was killed.
func (w *Worker) Crashes() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.crashes
}

// Close stops the worker (closing its stdin, then killing its process group if it does
// not exit) and removes its folder.
func (w *Worker) Close() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.proc != nil {
		w.proc.stop(true)
		w.proc = nil
	}
	if w.dir != "" {
		os.RemoveAll(w.dir)
		w.dir = ""
	}
	w.closed = true
}

// folder is the worker's private temporary folder (mu held).
func (w *Worker) folder() (string, error) {
	if w.dir != "" {
		return w.dir, nil
	}
	d, err := os.MkdirTemp("", "longca-worker-")
	if err != nil {
		return "", fmt.Errorf("%s: temporary folder: %w", w.spec.Label, err)
	}
	w.dir = d
	return d, nil
}

// Hello starts the worker if needed and returns its hello reply.
func (w *Worker) Hello(ctx context.Context, timeout time.Duration) (*reply, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if err := w.ensure(ctx, timeout); err != nil {
		return nil, err
	}
	return w.hello, nil
}

// Folder is the worker's temporary folder (created if needed).
func (w *Worker) Folder() (string, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.folder()
}

// ensure starts the worker and says hello (mu held).
func (w *Worker) ensure(ctx context.Context, timeout time.Duration) error {
	if w.startErr != nil {
		return w.startErr
	}
	if w.closed {
		return fmt.Errorf("%s: closed", w.spec.Label)
	}
	if w.proc != nil {
		return nil
	}
	dir, err := w.folder()
	if err != nil {
		return err
	}
	argv := append([]string(nil), w.spec.Argv...)
	if len(w.spec.Script) > 0 {
		path := filepath.Join(dir, w.spec.ScriptArg)
		if err := os.WriteFile(path, w.spec.Script, 0o600); err != nil {
			return fmt.Errorf("%s: %w", w.spec.Label, err)
		}
		for i, a := range argv {
			if a == w.spec.ScriptArg {
				argv[i] = path
			}
		}
	}
	prog, err := exec.LookPath(argv[0])
	if err != nil {
		w.startErr = fmt.Errorf("%w: %s: %s not found%s", errNotStarted, w.spec.Label, argv[0], w.spec.Missing)
		return w.startErr
	}
	argv = append(argv, "--device", fmt.Sprint(w.spec.Device))
	p, err := startProcess(prog, argv[1:], dir)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			if _, statErr := os.Stat(prog); statErr == nil { // execve's ENOENT for a program that is there
				err = fmt.Errorf("%v (the program is there: its #! interpreter or its loader is not)", err)
			}
		}
		w.startErr = fmt.Errorf("%w: %s: %v", errNotStarted, w.spec.Label, err)
		return w.startErr
	}
	w.proc = p
	w.nextID++
	req := helloRequest{envelope: envelope{Op: "hello", ID: w.nextID}, Protocol: ProtocolVersion, Device: w.spec.Device, Longca: Version}
	started := time.Now()
	out := Notice
	if out == nil {
		out = os.Stderr
	}
	note := time.AfterFunc(HelloNoteAfter, func() {
		fmt.Fprintf(out, "longca: %s: waiting for the worker's hello (%s so far; given up after %s: --worker-timeout sets the bound)\n",
			w.spec.Label, time.Since(started).Round(time.Second), timeout)
	})
	r, err := w.roundTrip(ctx, "hello", req, w.nextID, timeout)
	note.Stop()
	if err != nil {
		if ctx.Err() == nil {
			w.startErr = err // a worker that fails its hello is not started again
		}
		return err
	}
	if r.Status != statusOK {
		w.kill()
		w.startErr = fmt.Errorf("%s: hello refused (%s): %s", w.spec.Label, r.Status, r.Reason)
		return w.startErr
	}
	if r.Protocol != ProtocolVersion {
		w.kill()
		w.startErr = fmt.Errorf("%s speaks protocol %d, longca %d: use a worker for protocol %d (docs/external-kernels.md)", w.spec.Label, r.Protocol, ProtocolVersion, ProtocolVersion)
		return w.startErr
	}
	w.hello = r
	return nil
}

// Version is longca's version, sent in hello (the CLI sets it).
var Version = "dev"

// Call sends one request and waits for its reply, starting the worker first when it is
// not running. A reply with a status other than ok is returned as is, not as an error;
// the error is for a worker that could not be reached or failed.
func (w *Worker) Call(ctx context.Context, op string, req *problemRequest, timeout time.Duration) (*reply, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if err := w.ensure(ctx, max(timeout, HelloTimeout)); err != nil {
		return nil, err
	}
	w.nextID++
	req.Op, req.ID = op, w.nextID
	return w.roundTrip(ctx, op, req, w.nextID, timeout)
}

// roundTrip writes one request and reads its reply (mu held, process running). A
// failure kills the process.
func (w *Worker) roundTrip(ctx context.Context, op string, req any, id int64, timeout time.Duration) (*reply, error) {
	p := w.proc
	b, err := json.Marshal(req)
	if err != nil {
		return nil, fmt.Errorf("%s: encoding %s request: %w", w.spec.Label, op, err)
	}
	if _, err := p.stdin.Write(append(b, '\n')); err != nil {
		return nil, w.failed(op, fmt.Errorf("writing the request: %w", err))
	}
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	exited := p.exited
	var afterExit <-chan time.Time
	for {
		select {
		case line, ok := <-p.lines:
			if !ok {
				return nil, w.failed(op, fmt.Errorf("its output ended (%v)", p.rerr))
			}
			var r reply
			if err := json.Unmarshal(line, &r); err != nil {
				return nil, w.failed(op, fmt.Errorf("malformed reply %q: %v (stdout carries replies only: print logs to stderr)", clip(string(line), 200), err))
			}
			if err := r.check(op, id); err != nil {
				return nil, w.failed(op, fmt.Errorf("malformed reply %q: %v", clip(string(line), 200), err))
			}
			r.sanitize()
			return &r, nil
		case <-exited:
			// it ended without a reply: read what it wrote before, for a moment (its
			// stdout may stay open in a process it started in another session)
			exited, afterExit = nil, time.After(ioGrace)
		case <-afterExit:
			return nil, w.failed(op, fmt.Errorf("it exited without a reply (its stdout is still open: a process it started holds it)"))
		case <-timer.C:
			return nil, w.failed(op, fmt.Errorf("no reply within %s (killed with its process group)", timeout))
		case <-ctx.Done():
			w.kill()
			return nil, fmt.Errorf("%s: %s request: %w", w.spec.Label, op, ctx.Err())
		}
	}
}

// failed kills the process, counts the failure and describes it with the exit status
// and the end of the worker's stderr (mu held).
func (w *Worker) failed(op string, why error) error {
	p := w.proc
	p.stop(false)
	w.proc, w.hello = nil, nil
	w.crashes++
	state := "killed"
	select {
	case <-p.exited: // Wait has returned: ProcessState is set
		if ps := p.cmd.ProcessState; ps != nil {
			state = ps.String()
		}
	default:
	}
	msg := fmt.Sprintf("%s failed during its %s request: %v; the worker ended: %s", w.spec.Label, op, why, state)
	if t := p.tail.String(); t != "" {
		msg += "; its stderr ended: " + t
	}
	return workerError(msg)
}

// workerError is a failure of the worker process: errors.Is(err, ErrWorkerFailed).
type workerError string

func (e workerError) Error() string        { return string(e) }
func (e workerError) Is(target error) bool { return target == ErrWorkerFailed }

// kill stops the process without counting a failure (mu held).
func (w *Worker) kill() {
	if w.proc != nil {
		w.proc.stop(false)
		w.proc, w.hello = nil, nil
	}
}

// startProcess starts prog in its own process group (so that a timeout kills what it
// started too), killed if longca dies, with stdout read line by line.
//
// The process is reaped as soon as it exits, whatever became of its output: stdout is a
// pipe of longca's own (os/exec's StdoutPipe is closed by Wait, so Wait had to wait for
// the reader, and the reader for someone to take its lines), and stderr's copy is
// bounded by WaitDelay after the exit.
func startProcess(prog string, args []string, dir string) (*process, error) {
	cmd := exec.Command(prog, args...)
	cmd.Dir = dir
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	cmd.WaitDelay = ioGrace
	tag := newTag()
	if tag != "" {
		cmd.Env = append(os.Environ(), TagEnv+"="+tag)
	}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, childOut, err := os.Pipe()
	if err != nil {
		stdin.Close()
		return nil, err
	}
	cmd.Stdout = childOut
	p := &process{cmd: cmd, stdin: stdin, stdout: stdout, lines: make(chan []byte, 1), quit: make(chan struct{}),
		exited: make(chan struct{}), tail: newTailBuffer(12, 400), tag: tag}
	cmd.Stderr = p.tail
	err = cmd.Start()
	childOut.Close() // the worker's now (or nobody's)
	if err != nil {
		stdout.Close()
		return nil, err
	}
	go func() {
		r := bufio.NewReaderSize(stdout, 64<<10)
		for {
			line, err := readLine(r)
			if err != nil {
				p.rerr = err
				close(p.lines)
				io.Copy(io.Discard, stdout) // let the process finish writing (until stop closes it)
				return
			}
			if len(line) == 0 {
				continue
			}
			select {
			case p.lines <- line:
			case <-p.quit: // nobody will read it (a failed request's leftovers)
				io.Copy(io.Discard, stdout)
				return
			}
		}
	}()
	go func() {
		cmd.Wait()
		close(p.exited)
	}()
	return p, nil
}

// readLine reads one line of at most maxLine bytes, without its newline.
func readLine(r *bufio.Reader) ([]byte, error) {
	var line []byte
	for {
		chunk, err := r.ReadSlice('\n')
		line = append(line, chunk...)
		if len(line) > maxLine {
			return nil, fmt.Errorf("a reply line longer than %d bytes", maxLine)
		}
		switch {
		case err == nil:
			return []byte(strings.TrimRight(string(line), "\r\n")), nil
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		case errors.Is(err, io.EOF) && len(line) > 0:
			return nil, fmt.Errorf("output ended inside a line %q", clip(string(line), 200))
		default:
			return nil, err
		}
	}
}

// stop ends the process: politely (stdin closed, a grace period) or at once, then kills
// its process group and waits for it. Whatever it started that is still running, in its
// group or in a session of its own, is killed last (killTagged).
func (p *process) stop(polite bool) {
	p.stopOnce.Do(func() {
		p.stdin.Close()
		close(p.quit)
		defer p.stdout.Close() // ends the reader, even where a process the worker left holds stdout
		defer killTagged(p.tag)
		if polite {
			select {
			case <-p.exited:
				return
			case <-time.After(exitGrace):
			}
		}
		if p.cmd.Process != nil {
			syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL) // the group: what the worker started too
		}
		select {
		case <-p.exited:
		case <-time.After(exitGrace):
		}
	})
}

// tailBuffer keeps the last lines written to it (a worker's stderr).
type tailBuffer struct {
	mu      sync.Mutex
	lines   []string
	partial string
	n, w    int
}

func newTailBuffer(lines, width int) *tailBuffer { return &tailBuffer{n: lines, w: width} }

func (t *tailBuffer) Write(b []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	s := t.partial + string(b)
	parts := strings.Split(s, "\n")
	t.partial = clip(parts[len(parts)-1], 4*t.w)
	for _, l := range parts[:len(parts)-1] {
		if l = strings.TrimSpace(l); l == "" {
			continue
		}
		t.lines = append(t.lines, oneLine(l, t.w))
		if len(t.lines) > t.n {
			t.lines = t.lines[len(t.lines)-t.n:]
		}
	}
	return len(b), nil
}

// String is the kept lines joined by " | ".
func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	l := t.lines
	if p := strings.TrimSpace(t.partial); p != "" {
		l = append(append([]string(nil), l...), oneLine(p, t.w))
	}
	return strings.Join(l, " | ")
}

// clip is s cut to at most n bytes at a character boundary, with "..." after it where cut.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return textcut.Prefix(s, n) + "..."
}
