package present

import "testing"

// TestRatesOfAnySizeStayNarrow: a finite rate read from a file (1e308 TFLOP/s) printed as
// a 309-digit cell that widened the whole table; it keeps 4 significant digits.
func TestRatesOfAnySizeStayNarrow(t *testing.T) {
	for _, v := range []float64{1e308, 123456789, 1e6} {
		for name, f := range map[string]func(float64) string{"formatTFLOPs": formatTFLOPs, "FormatRate": FormatRate} {
			if s := f(v); len(s) > 10 {
				t.Errorf("%s(%g) = %q, want at most 10 characters", name, v, s)
			}
		}
	}
	if s := formatTFLOPs(512.34); s != "512.3" {
		t.Errorf("formatTFLOPs(512.34) = %q, want 512.3 (unchanged below 1e6)", s)
	}
}
