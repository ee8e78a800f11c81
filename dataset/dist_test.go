package dataset

import (
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// chiSquare bins samples by d's bins (merging neighbours until every expected count is
// at least 5) and returns the statistic, its degrees of freedom and how many samples
// fell outside every bin.
func chiSquare(d *Dist, samples []int) (stat float64, df int, outside int) {
	obs := make([]float64, len(d.Bins))
	for _, v := range samples {
		found := false
		for i, b := range d.Bins {
			// Length turns a 0 of the first bin into 1, which stays in that bin.
			if v >= b.Lo && v < b.Hi {
				obs[i]++
				found = true
				break
			}
		}
		if !found {
			outside++
		}
	}
	n := float64(len(samples))
	var groups [][2]float64 // observed, expected
	var o, e float64
	for i, b := range d.Bins {
		o += obs[i]
		e += b.P * n
		if e >= 5 {
			groups = append(groups, [2]float64{o, e})
			o, e = 0, 0
		}
	}
	if e > 0 || o > 0 {
		if len(groups) == 0 {
			groups = append(groups, [2]float64{})
		}
		groups[len(groups)-1][0] += o
		groups[len(groups)-1][1] += e
	}
	for _, g := range groups {
		stat += (g[0] - g[1]) * (g[0] - g[1]) / g[1]
	}
	return stat, len(groups) - 1, outside
}

// chi2Crit999 is the 99.9% critical value of chi-square with df degrees of freedom
// (Wilson-Hilferty; accurate to well under 1% for df >= 10).
func chi2Crit999(df int) float64 {
	const z = 3.090232
	k := float64(df)
	return k * math.Pow(1-2/(9*k)+z*math.Sqrt(2/(9*k)), 3)
}

func draw(src Source, n int, seed uint64) []int {
	rng := NewRand(seed)
	out := make([]int, n)
	for i := range out {
		out[i] = src.Length(rng)
	}
	return out
}

func TestBuiltinsParse(t *testing.T) {
	for _, name := range Builtins() {
		d, err := Builtin(name)
		if err != nil {
			t.Fatal(err)
		}
		if len(d.Bins) < 10 {
			t.Errorf("%s: only %d bins", name, len(d.Bins))
		}
		var sum float64
		for i, b := range d.Bins {
			sum += b.P
			if i > 0 && b.Lo < d.Bins[i-1].Hi {
				t.Errorf("%s: bins %d and %d not sorted or overlapping", name, i-1, i)
			}
		}
		if math.Abs(sum-1) > 1e-12 {
			t.Errorf("%s: probabilities sum to %v, want 1", name, sum)
		}
	}
	if _, err := Builtin("nope"); err == nil || !strings.Contains(err.Error(), "pile") {
		t.Errorf("unknown builtin: err = %v, want one listing the names", err)
	}
}

func TestLengthsFollowDistribution(t *testing.T) {
	const n = 200000
	for _, name := range Builtins() {
		d, _ := Builtin(name)
		for _, seed := range []uint64{1, 42} {
			stat, df, outside := chiSquare(d, draw(d, n, seed))
			t.Logf("%s seed %d: chi2 = %.1f, df %d, 99.9%% critical %.1f", name, seed, stat, df, chi2Crit999(df))
			if outside != 0 || stat > chi2Crit999(df) {
				t.Errorf("%s seed %d: chi2 = %.1f (df %d, critical %.1f), %d outside", name, seed, stat, df, chi2Crit999(df), outside)
			}
		}
	}
}

// TestChiSquareRejectsOtherDistributions is the negative control: the test above would
// catch a sampler that drew from the wrong distribution.
func TestChiSquareRejectsOtherDistributions(t *testing.T) {
	const n = 200000
	for _, pair := range [][2]string{{Pile, ProLong64K}, {ProLong64K, Pile}, {ProLong512K, ProLong64K}, {Pile, ProLong512K}} {
		want, _ := Builtin(pair[0])
		other, _ := Builtin(pair[1])
		stat, df, outside := chiSquare(want, draw(other, n, 7))
		t.Logf("%s samples as %s: chi2 = %.1f, df %d, critical %.1f, %d outside", pair[1], pair[0], stat, df, chi2Crit999(df), outside)
		if outside == 0 && stat <= chi2Crit999(df) {
			t.Errorf("samples of %s pass as %s: chi2 = %.1f <= %.1f", pair[1], pair[0], stat, chi2Crit999(df))
		}
	}
	// A subtler fault: lengths always at the bin's lower end keep the bin counts right
	// but not the mean (a bounded distribution, so the sample mean is tight).
	d := &Dist{Name: "two", Bins: []Bin{{0, 200, 0.5}, {1000, 3000, 0.5}}}
	var sum float64
	for _, v := range draw(d, n, 3) {
		sum += float64(v)
	}
	if got, want := sum/n, d.Mean(); math.Abs(got-want) > 0.03*want {
		t.Errorf("pile sample mean %.1f, want %.1f within 3%%", got, want)
	}
}

func TestEmpiricalFollowsCounts(t *testing.T) {
	e := &Empirical{Counts: []int{5, 5, 10, 300}} // 5 has weight 1/2
	hist := map[int]int{}
	const n = 40000
	for _, v := range draw(e, n, 9) {
		hist[v]++
	}
	for v, p := range map[int]float64{5: 0.5, 10: 0.25, 300: 0.25} {
		if got := float64(hist[v]) / n; math.Abs(got-p) > 0.015 {
			t.Errorf("P(%d) = %.3f, want %.3f", v, got, p)
		}
	}
	if len(hist) != 3 {
		t.Errorf("drew values outside the counts: %v", hist)
	}
}

func TestPackFillsExactly(t *testing.T) {
	for _, name := range Builtins() {
		d, _ := Builtin(name)
		for _, s := range []int{1, 2, 17, 1000, 12288, 65536, 1 << 20} {
			for seed := uint64(0); seed < 3; seed++ {
				docs := Pack(d, s, NewRand(seed))
				sum := 0
				for _, n := range docs {
					if n < 1 {
						t.Fatalf("%s S=%d: document of length %d", name, s, n)
					}
					sum += n
				}
				if sum != s {
					t.Errorf("%s S=%d seed %d: lengths sum to %d", name, s, seed, sum)
				}
				again := Pack(d, s, NewRand(seed))
				if len(again) != len(docs) || again[0] != docs[0] || again[len(again)-1] != docs[len(docs)-1] {
					t.Errorf("%s S=%d seed %d: not reproducible", name, s, seed)
				}
			}
		}
	}
	// Only the last document is clipped: a source of constant 7 packs 7s then the rest.
	docs := Pack(&Empirical{Counts: []int{7}}, 30, NewRand(1))
	if want := []int{7, 7, 7, 7, 2}; !equalInts(docs, want) {
		t.Errorf("Pack(const 7, 30) = %v, want %v", docs, want)
	}
	if docs := Pack(&Empirical{Counts: []int{7}}, 0, NewRand(1)); len(docs) != 0 {
		t.Errorf("Pack(S=0) = %v, want none", docs)
	}
}

func equalInts(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestForKernelAndCP(t *testing.T) {
	cases := []struct {
		s          int
		kernel, cp string
	}{
		{1, Pile, Pile}, {12288, Pile, Pile}, {12289, ProLong64K, ProLong64K},
		{65535, ProLong64K, ProLong64K}, {65536, ProLong64K, ProLong512K}, {1 << 22, ProLong64K, ProLong512K},
	}
	for _, c := range cases {
		if got := ForKernel(c.s); got != c.kernel {
			t.Errorf("ForKernel(%d) = %s, want %s", c.s, got, c.kernel)
		}
		if got := ForCP(c.s); got != c.cp {
			t.Errorf("ForCP(%d) = %s, want %s", c.s, got, c.cp)
		}
	}
}

func TestLoadDist(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	d, err := LoadDist(write("mine.json", `{"[10,20)": 3, "[0,10)": 1}`))
	if err != nil {
		t.Fatal(err)
	}
	if d.Name != "mine" || len(d.Bins) != 2 || d.Bins[0] != (Bin{0, 10, 0.25}) || d.Bins[1] != (Bin{10, 20, 0.75}) {
		t.Errorf("LoadDist = %+v", d)
	}
	bad := []struct{ file, body, want string }{
		{"key.json", `{"[10,x)": 1}`, `"[10,x)"`},
		{"order.json", `{"[10,5)": 1}`, `"[10,5)"`},
		{"brackets.json", `{"10-20": 1}`, `"10-20"`},
		{"zero.json", `{"[0,10)": 0, "[10,20)": 0}`, "sum to 0"},
		{"neg.json", `{"[0,10)": -1, "[10,20)": 2}`, "weight"},
		{"overlap.json", `{"[0,10)": 1, "[5,20)": 1}`, "overlap"},
		{"notjson.json", `[1, 2]`, "JSON"},
		// a bin of 0-token documents drew them as 1-token ones without a word (the review of
		// the thirty-eighth session); a bin from 0 to more is a bin of lengths from 1
		{"empty.json", `{"[0,1)": 1, "[1,100)": 3}`, `bin "[0,1)" holds only documents of 0 tokens`},
	}
	for _, b := range bad {
		p := write(b.file, b.body)
		_, err := LoadDist(p)
		if err == nil || !strings.Contains(err.Error(), b.want) || !strings.Contains(err.Error(), b.file) {
			t.Errorf("LoadDist(%s) err = %v, want one naming the file and %q", b.file, err, b.want)
		}
	}
	if _, err := Open(filepath.Join(dir, "missing.json")); err == nil {
		t.Error("Open(missing) succeeded")
	}
	if d, err := Open(ProLong512K); err != nil || d.Name != ProLong512K {
		t.Errorf("Open(prolong512k) = %v, %v", d, err)
	}
}

func TestParseSize(t *testing.T) {
	good := map[string]int{"0": 0, "1": 1, "1K": 1024, "48k": 49152, "4M": 4194304, "2G": 1 << 31, " 300 ": 300}
	for s, want := range good {
		if got, err := ParseSize(s); err != nil || got != want {
			t.Errorf("ParseSize(%q) = %d, %v; want %d", s, got, err, want)
		}
		if want > 0 {
			if back, _ := ParseSize(FormatSize(want)); back != want {
				t.Errorf("FormatSize(%d) = %q does not parse back", want, FormatSize(want))
			}
		}
	}
	for _, s := range []string{"", "K", "-1", "1.5K", "4X", "12KB", "99999999999G"} {
		if _, err := ParseSize(s); err == nil {
			t.Errorf("ParseSize(%q) succeeded", s)
		}
	}
	// past int64 is too large, as 2^63-1 is, not "not a non-negative integer"
	for _, s := range []string{"9223372036854775807", "9223372036854775808", "99999999999999999999K"} {
		if _, err := ParseSize(s); err == nil || !strings.Contains(err.Error(), "is too large") {
			t.Errorf("ParseSize(%q): %v, want \"too large\"", s, err)
		}
	}
}

// Weights near the float64 maximum are normalised, not summed to +Inf (which left every
// bin but the last at probability 0 without a word).
func TestParseDistHugeWeights(t *testing.T) {
	d, err := ParseDist("huge", []byte(`{"[1,2)": 1e308, "[2,3)": 1e308}`))
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range d.Bins {
		if math.Abs(b.P-0.5) > 1e-12 {
			t.Errorf("bin [%d,%d): P %v, want 0.5", b.Lo, b.Hi, b.P)
		}
	}
}

// The same file gives the same probabilities, bit for bit, however Go orders the map it
// is read through (the weights were summed in map order).
func TestParseDistDeterministic(t *testing.T) {
	data := []byte(`{"[1,2)": 0.1, "[2,5)": 0.2, "[5,9)": 0.3, "[9,20)": 0.7, "[20,40)": 1.1, "[40,80)": 0.013}`)
	first, err := ParseDist("d", data)
	if err != nil {
		t.Fatal(err)
	}
	for range 50 {
		d, err := ParseDist("d", data)
		if err != nil {
			t.Fatal(err)
		}
		for i, b := range d.Bins {
			if b != first.Bins[i] {
				t.Fatalf("bin %d: %+v, then %+v", i, first.Bins[i], b)
			}
		}
	}
}
