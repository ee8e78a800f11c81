// Package externaltest is a worker of the external-kernel protocol written for tests: it
// serves kernels computed by the CPU reference (kernels/ref) and, by mode, misbehaves in
// each way a real worker can (a wrong result, unsupported problems, out of memory, a
// crash mid-case, a hang, malformed replies, another protocol version). A test binary
// runs it by re-executing itself with FakeEnv set (see MaybeServe).
package externaltest

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/longca/longca/kernels"
	"github.com/longca/longca/kernels/external"
	"github.com/longca/longca/kernels/ref"
	"github.com/longca/longca/tensor"
)

// FakeEnv names the environment variable that turns a test binary into the fake worker:
// its value is the mode (ok, wrong, unsupported, oom, crash, crash-once, hang,
// malformed, badid, version, crash-hello, garbage-hello, slow-hello, crash-supports,
// hang-supports, nan (a NaN in the output), timed-variant: its backward timings name the
// variant that ran, fake-timed-bwd; huge-strings: megabytes of device, versions and
// variant with line breaks and escape sequences, and a backward time request answered
// error with such a reason; chatty-time: log lines on stdout before each time reply;
// setsid-crash: exits in its time request leaving a child in another session that holds
// stdout and stderr, its pid in StateEnv's folder as child.pid; given: its backward uses
// the out and lse it is given, and its hello says so with backward_uses_given).
const FakeEnv = "LONGCA_FAKE_WORKER"

// StateEnv names a folder where the fake keeps state across its restarts (crash-once).
const StateEnv = "LONGCA_FAKE_STATE"

// MaybeServe serves the protocol on stdin/stdout and exits when FakeEnv is set; call it
// first in TestMain.
func MaybeServe() {
	mode := os.Getenv(FakeEnv)
	if mode == "" {
		return
	}
	os.Exit(Serve(mode, os.Stdin, os.Stdout, os.Stderr))
}

type request struct {
	Op         string                     `json:"op"`
	ID         int64                      `json:"id"`
	Protocol   int                        `json:"protocol"`
	Kernel     string                     `json:"kernel"`
	Problem    *external.ProblemJSON      `json:"problem"`
	Dir        string                     `json:"dir"`
	Inputs     map[string]string          `json:"inputs"`
	Outputs    map[string]string          `json:"outputs"`
	Pass       string                     `json:"pass"`
	Seed       *uint64                    `json:"seed"`
	Warmup     *int                       `json:"warmup"`
	Iters      int                        `json:"iters"`
	FlushBytes int64                      `json:"flush_bytes"`
	Extra      map[string]json.RawMessage `json:"-"`
}

// Serve answers requests until stdin ends or a quit request; it returns the exit status.
func Serve(mode string, in io.Reader, out, errw io.Writer) int {
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	send := func(v any) {
		b, _ := json.Marshal(v)
		out.Write(append(b, '\n'))
	}
	for sc.Scan() {
		var r request
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			send(map[string]any{"id": nil, "status": "error", "reason": "bad request: " + err.Error()})
			continue
		}
		fmt.Fprintf(errw, "fake worker (%s): %s request %d\n", mode, r.Op, r.ID)
		switch r.Op {
		case "hello":
			switch mode {
			case "crash-hello":
				fmt.Fprintln(errw, "fake worker: dying during hello")
				return 4
			case "garbage-hello":
				out.Write([]byte("this is not json\n"))
				continue
			case "slow-hello":
				time.Sleep(time.Hour)
			}
			proto := external.ProtocolVersion
			if mode == "version" {
				proto = 99
			}
			if mode == "huge-strings" {
				versions := map[string]string{"big": strings.Repeat("A", 1<<20), "esc": "\x1b]0;pwned\x07"}
				for i := range 1000 {
					versions[fmt.Sprintf("k%04d", i)] = "1"
				}
				send(map[string]any{"id": r.ID, "status": "ok", "protocol": proto, "worker": "w\x1b[31m" + strings.Repeat("W", 1<<20),
					"device": "GPU\n\x1b[2J\x1b[31mfake" + strings.Repeat("D", 1<<20), "versions": versions,
					"kernels": []map[string]any{{"name": "ref", "doc": strings.Repeat("doc ", 1<<18), "available": true, "masks": "any\nall",
						"versions": map[string]string{"ref\x1b[2J": strings.Repeat("r", 1<<20)}}}})
				continue
			}
			send(map[string]any{"id": r.ID, "status": "ok", "protocol": proto, "worker": "fake " + mode, "device": "cpu",
				"versions": map[string]string{"fake": "1.0"},
				"kernels": []map[string]any{
					{"name": "ref", "doc": "the CPU reference", "available": true, "masks": "any", "versions": map[string]string{"ref": "1"},
						"backward_uses_given": mode == "given"},
					{"name": "fullonly", "doc": "one full slice only", "available": true, "masks": "full"},
					{"name": "gone", "doc": "never here", "available": false, "reason": "no such device here"},
				}})
		case "supports":
			switch mode {
			case "crash-supports":
				fmt.Fprintln(errw, "fake worker: dying during supports")
				return 5
			case "hang-supports":
				time.Sleep(time.Hour)
			}
			if reason := unsupported(mode, r); reason != "" {
				send(map[string]any{"id": r.ID, "status": "unsupported", "reason": reason})
				continue
			}
			variant := "fake-" + mode
			if mode == "huge-strings" {
				variant = "V\r\n\x1b[31m" + strings.Repeat("V", 1<<20)
			}
			send(map[string]any{"id": r.ID, "status": "ok", "variant": variant})
		case "forward", "backward":
			if err := compute(mode, r); err != nil {
				send(map[string]any{"id": r.ID, "status": "error", "reason": err.Error()})
				continue
			}
			send(map[string]any{"id": r.ID, "status": "ok"})
		case "time":
			switch mode {
			case "oom":
				send(map[string]any{"id": r.ID, "status": "oom", "reason": "CUDA out of memory (fake): tried to allocate 80 GiB"})
				continue
			case "crash":
				fmt.Fprintln(errw, "fake worker: segmentation fault (pretend)")
				return 3
			case "crash-once":
				marker := filepath.Join(os.Getenv(StateEnv), "crashed")
				if _, err := os.Stat(marker); err != nil {
					os.WriteFile(marker, nil, 0o644)
					fmt.Fprintln(errw, "fake worker: crashing once")
					return 3
				}
			case "hang":
				time.Sleep(time.Hour)
			case "malformed":
				out.Write([]byte(`{"id": ` + fmt.Sprint(r.ID) + `, "status": "ok", "median_ms": "fast"}` + "\n"))
				continue
			case "badid":
				send(map[string]any{"id": r.ID + 100, "status": "ok", "median_ms": 1, "min_ms": 1, "max_ms": 1, "mean_ms": 1})
				continue
			case "huge-strings":
				if r.Pass == "bwd" {
					send(map[string]any{"id": r.ID, "status": "error", "reason": "Traceback:\n  \x1b[2Jline 2\n" + strings.Repeat("R", 1<<20)})
					continue
				}
			case "chatty-time":
				out.Write([]byte("loading kernel...\nusing sm90\nready\n")) // a library's banner, on stdout
			case "setsid-crash":
				child := exec.Command("sleep", "300")
				child.Stdout, child.Stderr = os.Stdout, os.Stderr
				child.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
				if err := child.Start(); err == nil {
					os.WriteFile(filepath.Join(os.Getenv(StateEnv), "child.pid"), []byte(fmt.Sprint(child.Process.Pid)), 0o644)
				}
				fmt.Fprintln(errw, "fake worker: exiting, a child left behind")
				return 3
			}
			tm := timing(r)
			if mode == "timed-variant" && r.Pass == "bwd" {
				tm["variant"] = "fake-timed-bwd"
			}
			send(tm)
		case "quit":
			send(map[string]any{"id": r.ID, "status": "ok"})
			return 0
		default:
			send(map[string]any{"id": r.ID, "status": "error", "reason": "unknown op " + r.Op})
		}
	}
	return 0
}

// unsupported is the fake's reason to refuse a problem ("" to accept it).
func unsupported(mode string, r request) string {
	if mode == "unsupported" {
		return "fake: refuses everything"
	}
	if r.Kernel == "fullonly" {
		m := r.Problem.Mask
		if m == nil || len(m.Mask.Slices) != 1 || m.Mask.Slices[0].Kind.String() != "full" {
			return "fullonly takes one full slice"
		}
	}
	return ""
}

// timing is a made-up but consistent answer: the pass's FLOPs at 1 TFLOP/s.
func timing(r request) map[string]any {
	ms := 4 * r.Problem.Area * float64(r.Problem.HeadsQ*r.Problem.HeadDim) / 1e9
	if r.Pass == "bwd" {
		ms *= 2.5
	}
	ms = math.Max(ms, 0.001)
	return map[string]any{"id": r.ID, "status": "ok", "median_ms": ms, "min_ms": ms * 0.9, "max_ms": ms * 1.2,
		"mean_ms": ms * 1.05, "samples_ms": []float64{ms * 0.9, ms, ms * 1.2}, "peak_mem_bytes": 1 << 20}
}

// compute runs the CPU reference on the request's files, perturbed in mode wrong.
func compute(mode string, r request) error {
	p, err := external.DecodeProblem(r.Problem)
	if err != nil {
		return err
	}
	qs, kvs, ls := p.Shapes()
	read := func(name string, dt tensor.DType, shape []int) (*tensor.Host, error) {
		h := tensor.NewHost(dt, shape...)
		f, ok := r.Inputs[name]
		if !ok {
			return nil, fmt.Errorf("no input %s", name)
		}
		return h, external.ReadNPYInto(filepath.Join(r.Dir, f), h)
	}
	write := func(name string, h *tensor.Host) error {
		f, ok := r.Outputs[name]
		if !ok {
			return fmt.Errorf("no output %s", name)
		}
		return external.WriteNPY(filepath.Join(r.Dir, f), h)
	}
	var in []*tensor.Host
	for _, a := range []struct {
		n     string
		shape []int
	}{{"q", qs}, {"k", kvs}, {"v", kvs}} {
		h, err := read(a.n, p.DType, a.shape)
		if err != nil {
			return err
		}
		in = append(in, h)
	}
	k := ref.New(ref.Options{Emulate: p.DType})
	ctx := context.Background()
	out, lse := tensor.NewHost(p.DType, qs...), tensor.NewHost(tensor.FP32, ls...)
	if mode == "given" && r.Op == "backward" { // the backward of the out and lse given
		if out, err = read("out", p.DType, qs); err != nil {
			return err
		}
		if lse, err = read("lse", tensor.FP32, ls); err != nil {
			return err
		}
	} else if err := k.Forward(ctx, p, in[0], in[1], in[2], out, lse); err != nil {
		return err
	}
	if r.Op == "forward" {
		switch mode {
		case "wrong":
			out.Set(0, out.At(0)+0.5)
		case "nan":
			out.Set(1, math.NaN())
		}
		if err := write("out", out); err != nil {
			return err
		}
		return write("lse", lse)
	}
	dout, err := read("dout", p.DType, qs)
	if err != nil {
		return err
	}
	dq, dk, dv := tensor.NewHost(p.DType, qs...), tensor.NewHost(p.DType, kvs...), tensor.NewHost(p.DType, kvs...)
	if err := k.Backward(ctx, p, in[0], in[1], in[2], out, lse, dout, dq, dk, dv); err != nil {
		return err
	}
	if mode == "wrong" {
		dq.Set(0, dq.At(0)+0.5)
	}
	for n, h := range map[string]*tensor.Host{"dq": dq, "dk": dk, "dv": dv} {
		if err := write(n, h); err != nil {
			return err
		}
	}
	return nil
}

var _ = strings.TrimSpace
var _ kernels.Pass
