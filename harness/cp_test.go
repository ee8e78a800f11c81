package harness

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/longca/longca/comm"
	"github.com/longca/longca/comm/local"
	"github.com/longca/longca/kernels"
	"github.com/longca/longca/kernels/ref"
	"github.com/longca/longca/mask"
	"github.com/longca/longca/results"
	"github.com/longca/longca/tensor"
)

// faultKernel is the reference kernel that, on the rank it is made for, fails the way
// the problem's query head count asks: the faults of the shared table.
type faultKernel struct {
	*ref.Kernel
	faulty bool // this instance misbehaves
}

// The faults, by query heads.
const (
	headsOK          = 4
	headsUnsupported = 2
	headsOOM         = 6
	headsWrong       = 8
	headsError       = 10
)

func (f faultKernel) Name() string { return "fault" }

func (f faultKernel) Supports(p kernels.Problem) error {
	if f.faulty && p.HeadsQ == headsUnsupported {
		return errors.New("fault: two query heads are not compiled")
	}
	return f.Kernel.Supports(p)
}

func (f faultKernel) Forward(ctx context.Context, p kernels.Problem, q, k, v, out, lse tensor.Tensor) error {
	if f.faulty {
		switch p.HeadsQ {
		case headsOOM:
			return kernels.OOM(errors.New("fault: cuMemAlloc of 80 GiB"))
		case headsError:
			return errors.New("fault: launch failed")
		}
	}
	if err := f.Kernel.Forward(ctx, p, q, k, v, out, lse); err != nil {
		return err
	}
	if f.faulty && p.HeadsQ == headsWrong { // off by a little everywhere: far past the rule
		h := out.(*tensor.Host)
		for i := range h.Numel() {
			h.Set(i, h.At(i)+0.05)
		}
	}
	return nil
}

// sharedTable is the one table of outcomes the kernel harness and the CP harness are
// held to: the same kernel faults give the same statuses, whichever path runs them.
var sharedTable = []struct {
	heads int
	want  results.Status
}{
	{headsOK, results.StatusOK},
	{headsUnsupported, results.StatusUnsupported},
	{headsOOM, results.StatusOOM},
	{headsWrong, results.StatusWrong},
	{headsError, results.StatusError},
	{headsOK, results.StatusOK}, // and the run goes on after every failure
}

// cpTestMasks lays out masks small enough for the table.
func cpTestMasks(name string, seqlen int, seed uint64) (mask.Spec, error) {
	return mask.Build(name, seqlen, mask.Options{Seed: seed, Window: 16, BlockSize: 32, LongMin: 16, LongMax: 40, Purpose: mask.PurposeCP})
}

// TestOneHarnessTable runs the shared table through the kernel harness (Runner, one
// device) and through the CP harness (CPRunner, three in-process ranks of ring-p2p, the
// fault on rank 1 only), checked and unchecked: every outcome is a row with the table's
// status, the same on every rank, times only on ok rows, and the sweep goes on.
func TestOneHarnessTable(t *testing.T) {
	for _, checked := range []bool{true, false} {
		t.Run(fmt.Sprintf("kernel/checked=%v", checked), func(t *testing.T) {
			r := &Runner{Build: cpTestMasks, Warmup: 1, Iters: 2,
				NewKernel: func(string) (kernels.Kernel, error) { return faultKernel{ref.New(ref.Options{}), true}, nil }}
			if checked {
				r.Check = KernelCheck
			}
			for _, c := range sharedTable {
				row := r.Run(context.Background(), Case{Mask: "causal", SeqLen: 96, Heads: Heads{c.heads, 2}, HeadDim: 8,
					DType: tensor.BF16, Kernel: "fault", Pass: kernels.Fwd, Seed: 3})
				assertStatus(t, "kernel", c.heads, checked, c.want, row)
			}
		})
		t.Run(fmt.Sprintf("cp/checked=%v", checked), func(t *testing.T) {
			const n = 3
			var heads []Heads
			for _, c := range sharedTable {
				heads = append(heads, Heads{c.heads, 2})
			}
			sw := CPSweep{Methods: []string{"ring-p2p"}, Masks: []string{"causal"}, SeqLen: 96, Heads: heads, HeadDim: 8,
				DType: tensor.BF16, Passes: []kernels.Pass{kernels.Fwd, kernels.Bwd}, Samples: 1, Seed: 3, Kernel: "fault", Build: cpTestMasks}
			cases, err := sw.Cases(n)
			if err != nil {
				t.Fatal(err)
			}
			rows := make([][]results.Row, n)
			err = local.Run(n, func(c comm.Comm) error {
				r := &CPRunner{Sweep: sw, Comm: c, Kernel: faultKernel{ref.New(ref.Options{}), c.Rank() == 1}, Check: checked,
					Warmup: 1, Iters: 2, Base: results.Row{Host: "test"}}
				return RunCP(context.Background(), r, cases, func(_ int, row results.Row) error {
					rows[c.Rank()] = append(rows[c.Rank()], row)
					return nil
				})
			}, local.WithTimeout(30*time.Second))
			if err != nil {
				t.Fatal(err)
			}
			for rank, rs := range rows {
				if len(rs) != 2*len(sharedTable) {
					t.Fatalf("rank %d wrote %d rows, want %d", rank, len(rs), 2*len(sharedTable))
				}
				for i, row := range rs {
					c := sharedTable[i/2]
					assertStatus(t, fmt.Sprintf("cp rank %d %s", rank, row.Pass), c.heads, checked, c.want, row)
					if o := rows[0][i]; row.Status != o.Status || row.Reason != o.Reason {
						t.Errorf("rank %d row %d: %s %q; rank 0 wrote %s %q", rank, i, row.Status, row.Reason, o.Status, o.Reason)
					}
				}
			}
		})
	}
}

// assertStatus holds a row to the table: unchecked, the wrong kernel is timed (ok).
func assertStatus(t *testing.T, path string, heads int, checked bool, want results.Status, row results.Row) {
	t.Helper()
	if !checked && want == results.StatusWrong {
		want = results.StatusOK
	}
	if row.Status != want {
		t.Errorf("%s, %d heads: status %s (%q), want %s", path, heads, row.Status, row.Reason, want)
		return
	}
	if (row.MedianMs != nil) != (want == results.StatusOK) || (row.TFLOPs != nil) != (want == results.StatusOK) {
		t.Errorf("%s, %d heads: status %s with median %v, TFLOP/s %v", path, heads, row.Status, row.MedianMs, row.TFLOPs)
	}
	if want != results.StatusOK && !strings.Contains(row.Reason, "fault") && !strings.Contains(row.Reason, "failed the check") {
		t.Errorf("%s, %d heads: reason %q does not say what failed", path, heads, row.Reason)
	}
	if want == results.StatusWrong && (row.CheckPass == nil || *row.CheckPass) {
		t.Errorf("%s: a wrong row without a failed check", path)
	}
}

// TestCPAgreementAfterAbort: a rank that fails inside a method while the others wait
// for it there aborts the run's sub-groups; the others return at once (not at the
// timeout) and every rank records the failing rank's reason.
func TestCPAgreementAfterAbort(t *testing.T) {
	const n = 4
	sw := CPSweep{Methods: []string{"ring-p2p"}, Masks: []string{"causal"}, SeqLen: 128, Heads: []Heads{{headsOOM, 2}}, HeadDim: 8,
		DType: tensor.BF16, Passes: []kernels.Pass{kernels.Fwd}, Samples: 1, Seed: 1, Kernel: "fault", Build: cpTestMasks}
	cases, err := sw.Cases(n)
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	reasons := map[string]int{}
	start := time.Now()
	err = local.Run(n, func(c comm.Comm) error {
		r := &CPRunner{Sweep: sw, Comm: c, Kernel: faultKernel{ref.New(ref.Options{}), c.Rank() == 2}, Warmup: 0, Iters: 1,
			Base: results.Row{Host: "test"}}
		return RunCP(context.Background(), r, cases, func(_ int, row results.Row) error {
			mu.Lock()
			reasons[string(row.Status)+": "+row.Reason]++
			mu.Unlock()
			return nil
		})
	}, local.WithTimeout(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); took > 20*time.Second {
		t.Fatalf("took %v: the ranks waited for a timeout", took)
	}
	if len(reasons) != 1 {
		t.Fatalf("the ranks disagree: %v", reasons)
	}
	for r := range reasons {
		if !strings.HasPrefix(r, "oom: ") || !strings.Contains(r, "rank 2: ring-p2p") || !strings.Contains(r, "80 GiB") {
			t.Fatalf("status and reason %q, want rank 2's out-of-memory", r)
		}
	}
}

func TestCheckSizeKeepsThePlanShape(t *testing.T) {
	// 64:8 heads on 8 Ulysses ranks: one KV head each. Fewer KV heads would be
	// replicated (another code path), so only the length shrinks.
	fits := func(n int, h Heads) (int64, bool) { return int64(n) * int64(n) / 2, h.KV >= 8 }
	n, h := CheckSize(Case{SeqLen: 65536, Heads: Heads{64, 8}, HeadDim: 128}, cpCheckLengths(8), fits, 2e9)
	if n != 512 || h != (Heads{64, 8}) {
		t.Fatalf("checked at %d %s, want 512 64:8", n, h)
	}
	if got := cpCheckLengths(96); got[0] != 4128 || got[3] != 576 {
		t.Fatalf("lengths on 96 ranks %v, want multiples of 96", got)
	}
}

// versionedComm is a communicator that names a library (as NCCL's and MPI's do).
type versionedComm struct{ comm.Comm }

func (versionedComm) Versions() map[string]string { return map[string]string{"nccl": "2.28.3"} }

// TestCPRowsRecordCommVersions: a CP row's kernel_versions holds its communicator's library
// and version beside its kernel's (the reference's threads); a communicator that names none
// leaves the kernel's alone.
func TestCPRowsRecordCommVersions(t *testing.T) {
	sw := CPSweep{Methods: []string{"ring-p2p"}, Masks: []string{"causal"}, SeqLen: 64, Heads: []Heads{{2, 2}}, HeadDim: 8,
		DType: tensor.BF16, Passes: []kernels.Pass{kernels.Fwd}, Samples: 1, Seed: 1, Kernel: "ref", Build: cpTestMasks}
	cases, err := sw.Cases(2)
	if err != nil {
		t.Fatal(err)
	}
	for _, named := range []bool{true, false} {
		var mu sync.Mutex
		var got []string
		err = local.Run(2, func(c comm.Comm) error {
			if named {
				c = versionedComm{c}
			}
			r := &CPRunner{Sweep: sw, Comm: c, Kernel: ref.New(ref.Options{}), Warmup: 0, Iters: 1, Base: results.Row{Host: "test"}}
			return RunCP(context.Background(), r, cases, func(_ int, row results.Row) error {
				mu.Lock()
				got = append(got, string(row.Status)+" "+row.KernelVersions)
				mu.Unlock()
				return nil
			})
		}, local.WithTimeout(time.Minute))
		if err != nil {
			t.Fatal(err)
		}
		threads := strconv.Itoa(runtime.GOMAXPROCS(0))
		want := `ok {"gomaxprocs":"` + threads + `"}`
		if named {
			want = `ok {"gomaxprocs":"` + threads + `","nccl":"2.28.3"}`
		}
		if len(got) != 2 || got[0] != want || got[1] != want {
			t.Fatalf("named %v: rows %q, want two of %s", named, got, want)
		}
	}
}
