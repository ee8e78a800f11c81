package dataset

import (
	"bytes"
	"sort"
	"testing"
)

// TestLengthStatsStreams (issue 23, item 15): the summary of `longca data` counts lengths
// as they are drawn, holding one count per distinct length (at most the sequence
// length) however many documents are drawn, and its quantiles are those of the sorted
// list it replaces.
func TestLengthStatsStreams(t *testing.T) {
	src, err := Builtin(ForKernel(16 << 10))
	if err != nil {
		t.Fatal(err)
	}
	rng := NewRand(7)
	var st LengthStats
	var all []int
	for range 200 {
		PackEach(src, 16<<10, rng, func(n int) { st.Add(n); all = append(all, n) })
	}
	sort.Ints(all)
	if st.N() != int64(len(all)) {
		t.Fatalf("counted %d of %d", st.N(), len(all))
	}
	for _, p := range []float64{0, 0.5, 0.9, 0.99, 0.999999} {
		if got, want := st.Quantile(p), all[min(len(all)-1, int(p*float64(len(all))))]; got != want {
			t.Errorf("p%g: %d, want %d", p*100, got, want)
		}
	}
	if len(st.count) > 16<<10 {
		t.Errorf("%d distinct lengths held", len(st.count))
	}
	var b bytes.Buffer
	st.Write(&b, "x", 16<<10, 200, 7)
	if !bytes.Contains(b.Bytes(), []byte("docs/seq")) {
		t.Errorf("summary:\n%s", b.String())
	}
}
