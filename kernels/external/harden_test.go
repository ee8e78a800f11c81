package external_test

// Tests of issue 23, items 18 and 20: worker failures in hello and supports.

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/longca/longca/kernels"
	"github.com/longca/longca/results"
)

// TestSupportsFailureStartsOneWorker (items 18 and 20): a worker that dies or hangs on
// its supports request is started once in a case, not three times (the issue: with the
// default 10-minute timeout, 30 minutes a case); the row's reason names the supports
// phase, not forward, and says the worker's failure once.
func TestSupportsFailureStartsOneWorker(t *testing.T) {
	for _, mode := range []string{"crash-supports", "hang-supports"} {
		t.Run(mode, func(t *testing.T) {
			k := fakeKernel(t, mode, "ref", 2*time.Second)
			t0 := time.Now()
			row := runner(k).Run(context.Background(), smallCase("causal", kernels.Fwd))
			t.Logf("%s after %s: %s", row.Status, time.Since(t0), row.Reason)
			if row.Status != results.StatusError {
				t.Fatalf("status %s", row.Status)
			}
			if k.Crashes() != 1 {
				t.Errorf("the worker failed %d times in one case, want 1", k.Crashes())
			}
			if !strings.Contains(row.Reason, "supports") || strings.HasPrefix(row.Reason, "forward") || strings.Contains(row.Reason, "forward:") {
				t.Errorf("reason %q: want it labelled supports, not forward", row.Reason)
			}
			// The issue: "check at S=256 heads 4:2: check: exec:...:ref forward: ... failed
			// during its supports request": check twice, and a pass that never ran.
			if strings.Count(row.Reason, "failed during its") != 1 || strings.Count(row.Reason, "check") > 0 {
				t.Errorf("reason %q: want the worker's failure said once, without the check's labels", row.Reason)
			}
			// The next case gets a new worker.
			runner(k).Run(context.Background(), smallCase("causal", kernels.Bwd))
			if k.Crashes() != 2 {
				t.Errorf("after a second case: %d failures, want 2 (one new worker for it)", k.Crashes())
			}
		})
	}
}

// TestHelloFailureIsLabelled (item 20): a worker that dies in its hello gives a row whose
// reason names the hello phase, once.
func TestHelloFailureIsLabelled(t *testing.T) {
	k := fakeKernel(t, "crash-hello", "ref", 2*time.Second)
	row := runner(k).Run(context.Background(), smallCase("causal", kernels.Fwd))
	t.Logf("%s: %s", row.Status, row.Reason)
	if row.Status != results.StatusError || !strings.Contains(row.Reason, "hello") || strings.Contains(row.Reason, "forward") {
		t.Errorf("%s %q: want an error labelled hello", row.Status, row.Reason)
	}
	if strings.Count(row.Reason, "failed during its") != 1 || strings.Contains(row.Reason, "check") {
		t.Errorf("reason %q repeats itself", row.Reason)
	}
}

// TestNaNOutputIsNamed (item 19): a NaN in a kernel's output makes the row wrong and the
// reason says the NaN (the issue: "out error 0.00133 > tolerance 0.00498", an error
// below its tolerance, and no word of the NaN).
func TestNaNOutputIsNamed(t *testing.T) {
	k := fakeKernel(t, "nan", "ref", 0)
	row := runner(k).Run(context.Background(), smallCase("causal", kernels.Fwd))
	t.Logf("%s: %s", row.Status, row.Reason)
	if row.Status != results.StatusWrong || !strings.Contains(row.Reason, "out has 1 NaN element") || strings.Contains(row.Reason, "> tolerance") {
		t.Errorf("%s %q: want wrong, naming out's NaN", row.Status, row.Reason)
	}
}
