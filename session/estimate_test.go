package session

import (
	"testing"

	"github.com/longca/longca/harness"
	"github.com/longca/longca/kernels"
)

// TestCPSeconds: a CP sweep's time is its cases' samples x passes x repetitions of the
// global mask's FLOPs at the rate.
func TestCPSeconds(t *testing.T) {
	sw := harness.CPSweep{SeqLen: 4 * 1024, HeadDim: 64, Samples: 3, Seed: 42,
		Passes: []kernels.Pass{kernels.Fwd, kernels.Bwd}, Heads: []harness.Heads{{Q: 8, KV: 2}}}
	cases := []harness.CPCase{{Method: "ring-p2p", Mask: "full", Heads: harness.Heads{Q: 8, KV: 2}}}
	s := float64(4 * 1024)
	flops := 4 * s * s * 8 * 64
	want := 3 * (5*flops + (5*2.5+1)*flops) / 1e9
	if got := CPSeconds(sw, cases, 1, 4, 1e9); got < want*0.999 || got > want*1.001 {
		t.Errorf("CPSeconds = %g, want %g", got, want)
	}
}
