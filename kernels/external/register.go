package external

import (
	"bytes"
	"debug/elf"
	_ "embed"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"sort"
	"strings"
	"sync"

	"github.com/longca/longca/kernels"
)

// torchWorker is the PyTorch worker shipped inside the binary.
//
//go:embed torch_worker.py
var torchWorker []byte

// TorchKernels are the kernels of the embedded PyTorch worker: longca's name, the
// worker's name, and what each is.
var TorchKernels = []struct{ Name, Remote, Doc string }{
	{"torch:flash", "flash", "PyTorch SDPA, FlashAttention-2 backend: full and causal masks (Python worker, --python)"},
	{"torch:cudnn", "cudnn", "PyTorch SDPA, cuDNN backend: full and causal masks (Python worker, --python)"},
	{"torch:efficient", "efficient", "PyTorch SDPA, memory-efficient backend: full and causal masks (Python worker, --python)"},
	{"torch:flex", "flex", "PyTorch FlexAttention: any mask, block-sparse too (Python worker, --python)"},
	{"torch:varlen", "varlen", "PyTorch varlen_attn (FlashAttention's varlen path, torch 2.10+): full, causal, document and sliding-window masks (Python worker, --python)"},
}

func init() {
	for _, tk := range TorchKernels {
		kernels.Register(tk.Name, tk.Doc, func(o kernels.Options) (kernels.Kernel, error) {
			return NewKernel(tk.Name, tk.Remote, torchWorkerFor(o), o.Timeout), nil
		})
	}
	kernels.RegisterPrefix("exec:", "a worker program speaking the protocol of docs/external-kernels.md: exec:PROGRAM or exec:PROGRAM:KERNEL",
		func(rest string, o kernels.Options) (kernels.Kernel, error) {
			path, remote, err := ParseExec(rest)
			if err != nil {
				return nil, err
			}
			return NewKernel("exec:"+rest, remote, execWorkerFor(path, o), o.Timeout), nil
		})
}

var (
	poolMu sync.Mutex
	pool   = map[string]*Worker{}
)

// shared returns the pool's worker for key, making it with spec when there is none:
// one process per program, interpreter and device, shared by the kernels it serves.
func shared(key string, spec Spec) *Worker {
	poolMu.Lock()
	defer poolMu.Unlock()
	if w, ok := pool[key]; ok {
		return w
	}
	w := NewWorker(spec)
	pool[key] = w
	return w
}

// CloseAll stops every pooled worker and removes their folders; the CLI calls it
// before it exits.
func CloseAll() {
	poolMu.Lock()
	ws := make([]*Worker, 0, len(pool))
	for k, w := range pool {
		ws = append(ws, w)
		delete(pool, k)
	}
	poolMu.Unlock()
	for _, w := range ws {
		w.Close()
	}
}

// Interpreter is the Python the torch:* kernels run under: o.Python, else python3.
func Interpreter(o kernels.Options) string {
	if o.Python != "" {
		return o.Python
	}
	return "python3"
}

const torchScript = "longca_torch_worker.py"

// TorchSpec is how the embedded PyTorch worker starts under python on device.
func TorchSpec(python string, device int, extra ...string) Spec {
	return Spec{
		Argv:   append([]string{python, "-u", torchScript}, extra...),
		Device: device, Label: fmt.Sprintf("torch worker (%s)", python),
		Script: torchWorker, ScriptArg: torchScript,
		Missing: ": give the interpreter with --python or LONGCA_PYTHON",
	}
}

func torchWorkerFor(o kernels.Options) *Worker {
	py := Interpreter(o)
	return shared(fmt.Sprintf("torch\x00%s\x00%d", py, o.Device), TorchSpec(py, o.Device))
}

func execWorkerFor(path string, o kernels.Options) *Worker {
	return shared(fmt.Sprintf("exec\x00%s\x00%d", path, o.Device), Spec{Argv: []string{path}, Device: o.Device, Label: "exec:" + path})
}

var kernelNameRE = regexp.MustCompile(`^[A-Za-z0-9_.+-]+$`)

// ParseExec reads PROGRAM[:KERNEL], the part of exec:PROGRAM[:KERNEL] after "exec:".
// PROGRAM must be an executable file; a relative path is taken from the current
// folder and made absolute.
func ParseExec(rest string) (path, kernel string, err error) {
	path = rest
	if i := strings.LastIndex(rest, ":"); i > 0 && kernelNameRE.MatchString(rest[i+1:]) {
		if _, statErr := os.Stat(rest); statErr != nil { // a program whose name has a colon wins
			path, kernel = rest[:i], rest[i+1:]
		}
	}
	st, err := os.Stat(path)
	switch {
	case err != nil:
		return "", "", fmt.Errorf("exec:%s: %w (give an executable worker program, exec:PROGRAM[:KERNEL])", rest, err)
	case st.IsDir() || st.Mode()&0o111 == 0:
		return "", "", fmt.Errorf("exec:%s: %s is not an executable file (chmod +x it)", rest, path)
	}
	if err := runnable(path); err != nil {
		return "", "", fmt.Errorf("exec:%s: %s %w", rest, path, err)
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return "", "", fmt.Errorf("exec:%s: %w", rest, err)
	}
	return abs, kernel, nil
}

// runnable says why the system cannot start path, an executable file, or nil: a script
// needs a #! line naming an interpreter that is there, a binary a valid ELF header for
// this machine and, if it names one, a loader that is there. execve refuses anything
// else: longca wrote every case as an unsupported row ("exec format error", or "no such
// file or directory" about the file itself for a missing interpreter) and exited 0 (the
// thirteenth probe). A file longca may run but not read is left to the system.
func runnable(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return nil
	}
	defer f.Close()
	head := make([]byte, 256)
	n, _ := io.ReadFull(f, head)
	head = head[:n]
	switch {
	case bytes.HasPrefix(head, []byte("#!")):
		line, _, _ := bytes.Cut(head[2:], []byte("\n"))
		fields := strings.Fields(string(line))
		if len(fields) == 0 {
			return fmt.Errorf("has a #! line that names no interpreter: name one, such as #!/bin/sh")
		}
		interp := fields[0]
		if !filepath.IsAbs(interp) {
			return fmt.Errorf("has the #! interpreter %s, a relative path (the worker runs in a temporary folder): give its absolute path, or #!/usr/bin/env %s", oneLine(interp, maxShort), oneLine(interp, maxShort))
		}
		st, err := os.Stat(interp)
		switch {
		case err != nil:
			return fmt.Errorf("has the #! interpreter %s, which is not there: install it or correct the #! line", oneLine(interp, maxShort))
		case st.IsDir() || st.Mode()&0o111 == 0:
			return fmt.Errorf("has the #! interpreter %s, which is not an executable file: correct the #! line", oneLine(interp, maxShort))
		}
	case bytes.HasPrefix(head, []byte(elf.ELFMAG)):
		ef, err := elf.NewFile(f)
		if err != nil {
			return fmt.Errorf("is not a binary this system can run (its ELF header: %v): rebuild it", err)
		}
		if ef.Type != elf.ET_EXEC && ef.Type != elf.ET_DYN {
			return fmt.Errorf("is an ELF file of type %s, not a program: give the program", ef.Type)
		}
		if want, ok := elfMachines[runtime.GOARCH]; ok && !slices.Contains(want, ef.Machine) {
			return fmt.Errorf("is a binary for %s, and this machine is %s: build it for this machine", ef.Machine, runtime.GOARCH)
		}
		for _, prog := range ef.Progs {
			if prog.Type != elf.PT_INTERP || prog.Filesz > 4096 {
				continue
			}
			b := make([]byte, prog.Filesz)
			if _, err := prog.ReadAt(b, 0); err != nil {
				return fmt.Errorf("is not a binary this system can run (its loader's name: %v): rebuild it", err)
			}
			loader := string(bytes.TrimRight(b, "\x00"))
			if _, err := os.Stat(loader); err != nil {
				return fmt.Errorf("needs the loader %s, which is not there: build it for this system (or statically)", oneLine(loader, maxShort))
			}
		}
	default:
		return fmt.Errorf("is neither a binary nor a script with a #! line (the system answers \"exec format error\"): add a #! line naming its interpreter, such as #!/bin/sh")
	}
	return nil
}

// elfMachines are the ELF machines a GOARCH runs (its 32-bit relative too).
var elfMachines = map[string][]elf.Machine{
	"amd64":   {elf.EM_X86_64, elf.EM_386},
	"386":     {elf.EM_386},
	"arm64":   {elf.EM_AARCH64, elf.EM_ARM},
	"arm":     {elf.EM_ARM},
	"ppc64le": {elf.EM_PPC64},
	"ppc64":   {elf.EM_PPC64},
	"s390x":   {elf.EM_S390},
	"riscv64": {elf.EM_RISCV},
}

// CheckTempDir says why kernel name's worker (exec:..., torch:*) could not make its private
// folder (TMPDIR, else /tmp, missing or not writable), or nil; nil too for a kernel that
// runs in no worker. Every problem a worker is sent goes through that folder, and without
// it every case was an error row, the run exit 0.
func CheckTempDir(name string) error {
	if !InWorker(name) {
		return nil
	}
	d, err := os.MkdirTemp("", "longca-worker-")
	if err != nil {
		var pe *fs.PathError
		if errors.As(err, &pe) {
			err = pe.Err
		}
		return fmt.Errorf("its worker's temporary folder cannot be made in %s (%v): set TMPDIR to a folder you can write", os.TempDir(), err)
	}
	return os.Remove(d)
}

// InWorker says whether kernel name runs in a worker process (exec:..., torch:*).
func InWorker(name string) bool {
	return strings.HasPrefix(name, "exec:") || slices.Contains(TorchNames(), name)
}

// TorchNames are the names of the torch:* kernels, sorted.
func TorchNames() []string {
	var n []string
	for _, tk := range TorchKernels {
		n = append(n, tk.Name)
	}
	sort.Strings(n)
	return n
}
