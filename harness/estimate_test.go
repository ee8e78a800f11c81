package harness

import (
	"math"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/longca/longca/kernels"
	"github.com/longca/longca/tensor"
)

func refCase(seqlen int, h Heads, d int, pass kernels.Pass) Case {
	return Case{Mask: "causal", SeqLen: seqlen, Heads: h, HeadDim: d, DType: tensor.BF16, Kernel: "ref", Pass: pass}
}

// TestKernelFootprint: the timing tensors are counted exactly; the CPU reference adds
// its float64 working set; a device kernel puts the tensors on the device; the sizes
// the issue found crashing are far past any host.
func TestKernelFootprint(t *testing.T) {
	c := refCase(4096, Heads{8, 2}, 64, kernels.Fwd)
	tensors := float64(4*4096*8*64*2 + 4*4096*2*64*2 + 4096*8*4)
	cpu := KernelFootprint(c, false, 0, false, false)
	if cpu.Host < tensors || cpu.Host > tensors*1.5+(4<<20) || cpu.Device != 0 {
		t.Errorf("cpu kernel: %+v, tensors %g", cpu, tensors)
	}
	ref := KernelFootprint(c, false, 0, false, true)
	if ref.Host < cpu.Host+float64(4096*8*64*8*2) {
		t.Errorf("ref kernel %g is not its tensors %g plus float64 copies", ref.Host, cpu.Host)
	}
	gpu := KernelFootprint(c, false, 0, true, false)
	if gpu.Device < tensors+FlushBytes || gpu.Host > cpu.Host {
		t.Errorf("device kernel: %+v", gpu)
	}
	if bwd := KernelFootprint(refCase(4096, Heads{8, 2}, 64, kernels.Bwd), false, 0, false, true); bwd.Host <= ref.Host {
		t.Errorf("backward %g not above forward %g", bwd.Host, ref.Host)
	}
	for _, big := range []Case{
		refCase(1<<20, Heads{64, 8}, 128, kernels.Fwd),
		refCase(1024, Heads{1000000000, 1}, 128, kernels.Fwd),
		refCase(1024, Heads{64, 8}, 100000, kernels.Fwd),
	} {
		f := KernelFootprint(big, true, DefaultCheckBudget, false, true)
		m := Machine{HostBytes: 128 << 30} // the GPU machine's host
		if err := m.Fits(f, 0, big.String()); err == nil || !strings.Contains(err.Error(), "host memory") {
			t.Errorf("%s: %s fits in 128 GiB: %v", big, FormatBytes(f.Host), err)
		}
	}
	// The check is counted at its own (bounded) size, not the case's.
	small := KernelFootprint(refCase(1<<16, Heads{8, 2}, 64, kernels.Fwd), true, DefaultCheckBudget, true, false)
	if small.Host > 2<<30 {
		t.Errorf("a 64K device case's host side (check included): %s", FormatBytes(small.Host))
	}
}

func TestCPFootprint(t *testing.T) {
	one := CPFootprint(8192, 64, 8, 128, tensor.BF16, []kernels.Pass{kernels.Fwd}, false, true)
	if one.Host < float64(timingBytes(8192, 8192, 64, 8, 128, tensor.BF16)) {
		t.Errorf("a rank's footprint %s is below its tensors", FormatBytes(one.Host))
	}
	if bwd := CPFootprint(8192, 64, 8, 128, tensor.BF16, []kernels.Pass{kernels.Fwd, kernels.Bwd}, false, true); bwd.Host <= one.Host {
		t.Error("the backward adds nothing")
	}
	if dev := CPFootprint(8192, 64, 8, 128, tensor.BF16, []kernels.Pass{kernels.Fwd}, true, false); dev.Device == 0 || dev.Host >= one.Host {
		t.Errorf("device rank: %+v", dev)
	}
}

func TestCaseSeconds(t *testing.T) {
	c := refCase(1<<16, Heads{8, 2}, 64, kernels.Fwd)
	area := float64(1<<16) * float64(1<<16) / 2
	sec := CaseSeconds(c, area, 1, 4, 1e9, false, 0, 1e9)
	want := 5 * 4 * area * 8 * 64 / 1e9
	if sec < want*0.99 || sec > want*1.01 {
		t.Errorf("5 forward passes at 1 GFLOP/s: %g s, want %g", sec, want)
	}
	c.Pass = kernels.Bwd
	if b := CaseSeconds(c, area, 1, 4, 1e9, false, 0, 1e9); b < 2.5*sec {
		t.Errorf("backward %g s, forward %g s", b, sec)
	}
	if chk := CaseSeconds(c, area, 1, 4, 1e9, true, DefaultCheckBudget, 1e9); chk <= CaseSeconds(c, area, 1, 4, 1e9, false, 0, 1e9) {
		t.Error("the check costs nothing")
	}
}

func TestThisMachineReadsLimits(t *testing.T) {
	dir := t.TempDir()
	mi := filepath.Join(dir, "meminfo")
	os.WriteFile(mi, []byte("MemTotal:       32000000 kB\nMemFree:         1000000 kB\nMemAvailable:   20000000 kB\n"), 0o644)
	if v, ok := memAvailable(mi); !ok || v != 20000000*1024 {
		t.Errorf("MemAvailable: %g, %v", v, ok)
	}
	os.WriteFile(filepath.Join(dir, "memory.max"), []byte("8589934592\n"), 0o644)
	os.WriteFile(filepath.Join(dir, "memory.current"), []byte("1073741824\n"), 0o644)
	if v, ok := cgroupRemaining(dir, "memory.max", "memory.current"); !ok || v != 7<<30 {
		t.Errorf("cgroup: %g, %v", v, ok)
	}
	os.WriteFile(filepath.Join(dir, "memory.max"), []byte("max\n"), 0o644)
	if _, ok := cgroupRemaining(dir, "memory.max", "memory.current"); ok {
		t.Error("an unlimited cgroup reads as a limit")
	}
	if m := ThisMachine(); m.HostBytes <= 0 || m.RefFLOPs <= 0 {
		t.Errorf("this machine: %+v", m)
	}
}

func TestFormat(t *testing.T) {
	for _, c := range []struct {
		n    float64
		want string
	}{{7, "7 B"}, {1536, "1.5 KiB"}, {249 << 30, "249 GiB"}, {12.4 * (1 << 50), "12.4 PiB"}} {
		if got := FormatBytes(c.n); got != c.want {
			t.Errorf("FormatBytes(%g) = %s, want %s", c.n, got, c.want)
		}
	}
	for _, c := range []struct {
		s    float64
		want string
	}{{40, "40s"}, {600, "10m"}, {3 * 3600, "3.0h"}, {5 * 86400, "5.0 days"}, {3 * 365 * 86400, "3.0 years"}} {
		if got := FormatDuration(c.s); got != c.want {
			t.Errorf("FormatDuration(%g) = %s, want %s", c.s, got, c.want)
		}
	}
}

// TestMemoryEstimateSeesLimits (issue 23, item 16): the host memory the estimates hold
// cases against is the least of MemAvailable, the cgroup's limit (v2 and v1, on the
// process's own cgroup or a parent) and the address-space limit (the issue: under
// prlimit --as=8GiB the 1M-token ref case crashed out of memory instead of being refused).
func TestMemoryEstimateSeesLimits(t *testing.T) {
	write := func(root, name, text string) {
		p := filepath.Join(root, name)
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	meminfo := "MemTotal: 100000000 kB\nMemAvailable: 90000000 kB\n" // ~86 GiB
	inf := math.Inf(1)

	v2 := t.TempDir()
	write(v2, "proc/meminfo", meminfo)
	write(v2, "proc/self/cgroup", "0::/job/step\n")
	write(v2, "sys/fs/cgroup/job/memory.max", "17179869184\n") // 16 GiB on the parent
	write(v2, "sys/fs/cgroup/job/memory.current", "1073741824\n")
	write(v2, "sys/fs/cgroup/job/step/memory.max", "max\n")
	if got := hostBytes(v2, inf); got != 15<<30 {
		t.Errorf("cgroup v2, limit on the parent: %s, want 15 GiB", FormatBytes(got))
	}

	v1 := t.TempDir()
	write(v1, "proc/meminfo", meminfo)
	write(v1, "proc/self/cgroup", "5:cpu,cpuacct:/\n4:memory:/slurm/job1\n")
	write(v1, "sys/fs/cgroup/memory/slurm/job1/memory.limit_in_bytes", "4294967296\n") // 4 GiB
	write(v1, "sys/fs/cgroup/memory/slurm/job1/memory.usage_in_bytes", "1073741824\n")
	write(v1, "sys/fs/cgroup/memory/memory.limit_in_bytes", "9223372036854771712\n") // none
	if got := hostBytes(v1, inf); got != 3<<30 {
		t.Errorf("cgroup v1: %s, want 3 GiB", FormatBytes(got))
	}
	if got := hostBytes(v1, 2<<30); got != 2<<30 {
		t.Errorf("with 2 GiB of address space left: %s", FormatBytes(got))
	}

	// The real RLIMIT_AS: 8 GiB more than this process maps now.
	var old syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_AS, &old); err != nil {
		t.Fatal(err)
	}
	lim := old
	lim.Cur = uint64(vmSize("/proc/self/status")) + 8<<30
	if lim.Cur > old.Max {
		t.Fatalf("cannot lower RLIMIT_AS below its hard limit %d", old.Max)
	}
	if err := syscall.Setrlimit(syscall.RLIMIT_AS, &lim); err != nil {
		t.Fatal(err)
	}
	left := addressSpaceLeft()
	got := ThisMachine().HostBytes
	syscall.Setrlimit(syscall.RLIMIT_AS, &old)
	if left > 8<<30 || left < 7<<30 || got > left {
		t.Errorf("under RLIMIT_AS = VmSize + 8 GiB: %s of address space left, host bytes %s", FormatBytes(left), FormatBytes(got))
	}
}

// A split backward's fp32 partials of dK and dV: two tensors of the K shape a part, none for
// the forward or one part (at 64K 64:8 d128, 8 parts: 4.3 GB).
func TestPartialsBytes(t *testing.T) {
	bwd := refCase(65536, Heads{64, 8}, 128, kernels.Bwd)
	if got, want := PartialsBytes(bwd, 8), 2*8*65536.0*8*128*4; got != want {
		t.Errorf("64K 64:8 d128, 8 parts: %.3g bytes, want %.3g", got, want)
	}
	if got := PartialsBytes(bwd, 1); got != 0 {
		t.Errorf("one part: %.3g bytes, want 0", got)
	}
	if got := PartialsBytes(refCase(65536, Heads{64, 8}, 128, kernels.Fwd), 8); got != 0 {
		t.Errorf("the forward: %.3g bytes, want 0", got)
	}
}
