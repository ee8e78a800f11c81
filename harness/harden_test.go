package harness

// Tests of issue 23, items 14 and 17.

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/longca/longca/kernels"
	"github.com/longca/longca/kernels/ref"
	"github.com/longca/longca/tensor"
)

// TestSizeRangeBounded (item 14): -b 1 -e 1G --step 1 is refused at once, before a slice
// of a billion lengths is made (the issue: fatal error: out of memory); a range that
// would overflow int stops instead of wrapping.
func TestSizeRangeBounded(t *testing.T) {
	start := time.Now()
	_, err := SizeRange(1, 1<<30, 2, 1)
	if err == nil || !strings.Contains(err.Error(), "1073741824 lengths") {
		t.Errorf("-b 1 -e 1G --step 1: %v", err)
	}
	if el := time.Since(start); el > 100*time.Millisecond {
		t.Errorf("refusing took %s", el)
	}
	if l, err := SizeRange(1, MaxLengths, 2, 1); err != nil || len(l) != MaxLengths || l[MaxLengths-1] != MaxLengths {
		t.Errorf("the largest allowed range: %d lengths, %v", len(l), err)
	}
	if l, err := SizeRange(1<<61, 1<<62, 1<<40, 0); err != nil || len(l) != 1 {
		t.Errorf("a factor past int's range: %v, %v", l, err)
	}
	if l, err := SizeRange(1, 1<<62, 0, 1<<62); err != nil || len(l) != 1 {
		t.Errorf("a step past int's range: %v, %v", l, err)
	}
}

// TestSparseRecordsKeptRatio (item 17): at 1K tokens in blocks of 512 every ratio below
// 1 keeps 1 of 2 k blocks per row. The row records the kept ratio the mask has (0.5),
// not the one asked for, and ratios that keep the same blocks are one case, the others
// dropped with a reason (the issue: r0.2, r0.5 and r0.8 had the same area and the rows
// said r0.2).
func TestSparseRecordsKeptRatio(t *testing.T) {
	s := Sweep{SeqLens: []int{1024}, Heads: []Heads{{2, 1}}, HeadDim: 8, DType: tensor.FP32, Kernels: []string{"ref"},
		Passes: []kernels.Pass{kernels.Fwd}, Seed: 1,
		Sparse: []SparseSpec{{Block: 512, Ratio: 0.2}, {Block: 512, Ratio: 0.5}, {Block: 512, Ratio: 0.8}, {Block: 512, Ratio: 1}}}
	cs := s.Cases()
	if len(cs) != 2 || cs[0].Sparse.Ratio != 0.2 || cs[1].Sparse.Ratio != 1 {
		t.Fatalf("cases %v; want r0.2 (which keeps 1 of 2) and r1", cs)
	}
	if d := s.Dropped(); len(d) != 2 || !strings.Contains(d[0], "r=0.5") || !strings.Contains(d[0], "keeps 1 of 2") {
		t.Errorf("dropped %q", d)
	}
	r := &Runner{Warmup: 0, Iters: 1, NewKernel: func(string) (kernels.Kernel, error) { return ref.New(ref.Options{}), nil }}
	row := r.Run(context.Background(), cs[0])
	if row.KeptRatio == nil || *row.KeptRatio != 0.5 || !strings.Contains(row.MaskParams, `"ratio":"0.2"`) || row.MaskArea != 1024*512 {
		t.Errorf("row of r0.2 at 1K in blocks of 512: kept %v, params %s, area %d; want kept 0.5, ratio 0.2 in the params", row.KeptRatio, row.MaskParams, row.MaskArea)
	}
	// A length where the ratio is honoured keeps all three.
	s.SeqLens = []int{64 << 10}
	if cs := s.Cases(); len(cs) != 4 {
		t.Errorf("at 64K: %d cases, want 4", len(cs))
	}
}
