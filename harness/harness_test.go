package harness

import (
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/longca/longca/kernels"
	"github.com/longca/longca/results"
	"github.com/longca/longca/tensor"
)

func TestSizeRange(t *testing.T) {
	for _, c := range []struct {
		b, e, f, step int
		want          []int
		bad           bool
	}{
		{1024, 49152, 2, 0, []int{1024, 2048, 4096, 8192, 16384, 32768}, false},
		{8192, 49152, 0, 8192, []int{8192, 16384, 24576, 32768, 40960, 49152}, false},
		{1024, 1024, 0, 0, []int{1024}, false},
		{1000, 9000, 3, 0, []int{1000, 3000, 9000}, false},
		{0, 10, 2, 0, nil, true},
		{10, 5, 2, 0, nil, true},
		{10, 50, 1, 0, nil, true},
		{10, 50, 2, -1, nil, true},
	} {
		got, err := SizeRange(c.b, c.e, c.f, c.step)
		if (err != nil) != c.bad || !slices.Equal(got, c.want) {
			t.Errorf("SizeRange(%d,%d,%d,%d) = %v, %v; want %v", c.b, c.e, c.f, c.step, got, err, c.want)
		}
	}
	got, err := ParseSizeList("1K, 2K,48K,1000")
	if err != nil || !slices.Equal(got, []int{1024, 2048, 49152, 1000}) {
		t.Errorf("ParseSizeList: %v %v", got, err)
	}
	for _, bad := range []string{"", "1X", "-2K", "0"} {
		if _, err := ParseSizeList(bad); err == nil {
			t.Errorf("ParseSizeList(%q) accepted", bad)
		}
	}
}

func TestParseHeads(t *testing.T) {
	got, err := ParseHeads("64:8,64:64, 32")
	if err != nil || !slices.Equal(got, []Heads{{64, 8}, {64, 64}, {32, 32}}) {
		t.Fatalf("%v %v", got, err)
	}
	if got, err := ParseHeads("1024:1024"); err != nil || got[0] != (Heads{MaxHeads, MaxHeads}) {
		t.Errorf("the bound itself: %v %v", got, err)
	}
	for _, bad := range []string{"64:7", "0:1", "a:b", "", "8:-2", "1025:1", "2048:1024", "9223372036854775807:1"} {
		if _, err := ParseHeads(bad); err == nil {
			t.Errorf("ParseHeads(%q) accepted", bad)
		}
	}
}

func TestCasesCount(t *testing.T) {
	s := Sweep{Masks: []string{"full", "causal", "sliding_window"}, SeqLens: []int{1024, 2048}, Heads: []Heads{{8, 2}, {8, 8}},
		Kernels: []string{"ref", "cuda"}, Passes: []kernels.Pass{kernels.Fwd, kernels.Bwd}, HeadDim: 64, DType: tensor.BF16}
	cs := s.Cases()
	if len(cs) != 3*2*2*2*2 {
		t.Fatalf("%d cases", len(cs))
	}
	seen := map[Case]bool{}
	for _, c := range cs {
		if seen[c] {
			t.Fatalf("duplicate %v", c)
		}
		seen[c] = true
	}
	if cs[0].Pass != kernels.Fwd || cs[1].Pass != kernels.Bwd || cs[2].Kernel != "cuda" || cs[len(cs)-1].Mask != "sliding_window" {
		t.Fatalf("order: %v %v %v", cs[0], cs[1], cs[2])
	}
}

// fakeDevice times with a scripted clock and counts flushes.
type fakeDevice struct {
	tensor.CPU
	times   []time.Duration
	timed   int
	flushes int
}

func (d *fakeDevice) Time(fn func() error) (time.Duration, error) {
	if err := fn(); err != nil {
		return 0, err
	}
	t := d.times[d.timed%len(d.times)]
	d.timed++
	return t, nil
}

func (d *fakeDevice) FlushCache() error { d.flushes++; return nil }

func TestTimeStatistics(t *testing.T) {
	ms := time.Millisecond
	for _, c := range []struct {
		times                []time.Duration
		warmup, iters        int
		median, lo, hi, mean time.Duration
	}{
		{[]time.Duration{5 * ms, 1 * ms, 3 * ms}, 2, 3, 3 * ms, 1 * ms, 5 * ms, 3 * ms},
		{[]time.Duration{4 * ms, 1 * ms, 2 * ms, 9 * ms}, 0, 4, 3 * ms, 1 * ms, 9 * ms, 4 * ms},
		{[]time.Duration{7 * ms}, 5, 1, 7 * ms, 7 * ms, 7 * ms, 7 * ms},
		{[]time.Duration{10 * ms, 2 * ms, 3 * ms, 100 * ms, 4 * ms}, 1, 5, 4 * ms, 2 * ms, 100 * ms, 23800 * time.Microsecond},
	} {
		dev := &fakeDevice{times: c.times}
		calls := 0
		st, err := Time(dev, c.warmup, c.iters, func() error { calls++; return nil })
		if err != nil {
			t.Fatal(err)
		}
		if st.Median != c.median || st.Min != c.lo || st.Max != c.hi || st.Mean != c.mean {
			t.Errorf("%v: got median %v min %v max %v mean %v", c.times, st.Median, st.Min, st.Max, st.Mean)
		}
		if calls != c.warmup+c.iters || dev.timed != c.iters || dev.flushes != c.iters || len(st.Samples) != c.iters {
			t.Errorf("%v: %d calls, %d timed, %d flushes for %d+%d", c.times, calls, dev.timed, dev.flushes, c.warmup, c.iters)
		}
	}
	dev := &fakeDevice{times: []time.Duration{ms}}
	boom := errors.New("boom")
	n := 0
	if _, err := Time(dev, 1, 5, func() error {
		n++
		if n == 3 {
			return boom
		}
		return nil
	}); !errors.Is(err, boom) {
		t.Errorf("error not returned: %v", err)
	}
	if _, err := Time(dev, 0, 0, func() error { return nil }); err == nil {
		t.Error("0 iterations accepted")
	}
}

func TestClassify(t *testing.T) {
	for _, c := range []struct {
		err  error
		want results.Status
	}{
		{nil, results.StatusOK},
		{fmt.Errorf("cuMemAlloc: CUDA_ERROR_OUT_OF_MEMORY: out of memory"), results.StatusOOM},
		{fmt.Errorf("wrap: %w", Unsupported(errors.New("head dim 96"))), results.StatusUnsupported},
		{fmt.Errorf("%w: dq error 3", ErrWrong), results.StatusWrong},
		{errors.New("launch failed"), results.StatusError},
	} {
		st, reason := Classify(c.err)
		if st != c.want {
			t.Errorf("%v: %s, want %s", c.err, st, c.want)
		}
		if c.err != nil && reason != c.err.Error() {
			t.Errorf("reason %q", reason)
		}
	}
}

func TestCheckSize(t *testing.T) {
	full := func(n int) (int64, bool) { return int64(n) * int64(n), true }
	blocks := func(n int) (int64, bool) { return int64(n) * int64(n), n%1024 == 0 }
	for _, c := range []struct {
		seqlen  int
		heads   Heads
		dim     int
		area    func(int) (int64, bool)
		wantLen int
		want    Heads
	}{
		{1024, Heads{8, 2}, 64, full, 1024, Heads{8, 2}},       // within budget: itself
		{49152, Heads{64, 8}, 128, full, 1024, Heads{8, 1}},    // 4K and 2K too big even at 8:1
		{49152, Heads{64, 64}, 128, full, 2048, Heads{2, 2}},   // MHA keeps the 1:1 ratio
		{8192, Heads{16, 16}, 16, full, 4096, Heads{4, 4}},     // 4K fits at 4 heads
		{3000, Heads{8, 8}, 4096, blocks, 1024, Heads{1, 1}},   // over budget everywhere, 512 not buildable: smallest built
		{600, Heads{64, 64}, 8192, blocks, 600, Heads{64, 64}}, // nothing smaller: itself
	} {
		c := c
		area := func(n int, _ Heads) (int64, bool) { return c.area(n) }
		n, h := CheckSize(Case{SeqLen: c.seqlen, Heads: c.heads, HeadDim: c.dim}, DefaultCheckLengths, area, 2e9)
		if n != c.wantLen || h != c.want {
			t.Errorf("S=%d heads %s d=%d: checked at %d %s, want %d %s", c.seqlen, c.heads, c.dim, n, h, c.wantLen, c.want)
		}
	}
}

func TestSparseCases(t *testing.T) {
	s := Sweep{Masks: []string{"causal"}, SeqLens: []int{1024, 2048}, Heads: []Heads{{8, 2}}, Kernels: []string{"ref"},
		Passes: []kernels.Pass{kernels.Fwd}, HeadDim: 64, DType: tensor.BF16,
		Sparse: []SparseSpec{{Block: 64, Ratio: 0.5}, {AvgBlock: 256, Ratio: 0.2}}}
	cs := s.Cases()
	if len(cs) != 2*2 {
		t.Fatalf("%d cases, want 4 (sparse settings replace masks)", len(cs))
	}
	if cs[0].Mask != "block_sparse_uniform" || cs[0].Label() != "block_sparse_uniform_b64_r0.5" || cs[3].Label() != "block_sparse_variable_b256_r0.2" {
		t.Fatalf("labels %q %q", cs[0].Label(), cs[3].Label())
	}
}
