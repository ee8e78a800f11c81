package cuda

import (
	"testing"
)

// The L2 model against what ncu measured on the H200 (one d128 backward launch, 64:8, its
// DRAM bytes read; docs/perf.md "Calls 48-51"): full 16K 2.10 GB; causal 16K 17.4 unpaired
// and 2.03 paired; causal 32K 73.2 unpaired and 5.15 paired. The model must land each within
// a factor of 1.5 and keep their order: a model that cannot tell thrashing from streaming
// here cannot design the next order.
func TestL2ModelMatchesMeasured(t *testing.T) {
	const gb = 1e9
	for _, c := range []struct {
		mask  string
		s     int
		sched int32
		want  float64 // GB read, measured
	}{
		{"full", 16384, schedKTFast, 2.10},
		{"causal", 16384, schedKTFast, 17.4},
		{"causal", 16384, schedKTFast | 8, 2.03},
		{"causal", 32768, schedKTFast, 73.2},
		{"causal", 32768, schedKTFast | 8, 5.15},
	} {
		w := backwardList(t, 42, c.s, c.mask)
		r, _, _ := l2Traffic(w, 8, 8, 132, 128, c.sched, 50<<20, 0.02)
		got := float64(r) / gb
		t.Logf("%s %d sched %d: modelled %.2f GB read, measured %.2f", c.mask, c.s, c.sched, got, c.want)
		if got < c.want/1.5 || got > c.want*1.5 {
			t.Errorf("%s %d sched %d: modelled %.2f GB read, measured %.2f", c.mask, c.s, c.sched, got, c.want)
		}
	}
}
