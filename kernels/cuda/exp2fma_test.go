package cuda

import (
	"bufio"
	"math"
	"os/exec"
	"strconv"
	"strings"
	"testing"

	"github.com/longca/longca/internal/hostcc"
)

// exp2_fma (attention_sm90.cu, the sm90xN experiments' exponential on the FMA pipe) as the
// GPU compiles it, here with the host compiler (fp32, fused multiply-adds, round-to-nearest
// additions, as on the device), against math.Exp2: within 1e-4 relative of 2^x for x in
// [-125, 0] (bf16's half unit is 2e-3), at most 2^-124 below that and for -inf (a masked
// score), and never negative, NaN or above 2^x's neighbourhood at 0.
func TestExp2FMA(t *testing.T) {
	fn := extract(t, SourceSM90(), "DEV float exp2_fma(float x) {", "\n}\n")
	var b strings.Builder
	b.WriteString(`#include <cstdio>
#include <cstring>
#include <cmath>
#define DEV static inline
static float fmaxf_(float a, float b) { return a > b ? a : b; }
#define fmaxf fmaxf_
static float __fadd_rn(float a, float b) { volatile float r = a + b; return r; }
static float __fsub_rn(float a, float b) { volatile float r = a - b; return r; }
static unsigned __float_as_uint(float f) { unsigned u; memcpy(&u, &f, 4); return u; }
static float __uint_as_float(unsigned u) { float f; memcpy(&f, &u, 4); return f; }
`)
	b.WriteString(fn + "\n")
	b.WriteString(`int main() {
  for (int i = 0; i <= 140000; i++) {
    float x = -140.f + i * 0.001f;
    if (x > 0.f) x = 0.f;
    printf("%.9g %.9g\n", x, exp2_fma(x));
  }
  printf("-inf %.9g\n", exp2_fma(-INFINITY));
  return 0;
}
`)
	bin := hostcc.Compile(t, "exp2_fma", b.String(), "-ffp-contract=off")
	out, err := exec.Command(bin).Output()
	if err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(strings.NewReader(string(out)))
	n, bad, worst := 0, 0, 0.0
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) != 2 {
			t.Fatalf("output line %q", sc.Text())
		}
		got := parseF(t, f[1])
		if f[0] == "-inf" {
			if !(got >= 0 && got <= math.Exp2(-124)) {
				t.Errorf("exp2_fma(-inf) = %g, want 0 .. 2^-124", got)
			}
			n++
			continue
		}
		x := parseF(t, f[0])
		n++
		switch want := math.Exp2(x); {
		case math.IsNaN(got) || got < 0:
			bad++
			if bad <= 5 {
				t.Errorf("exp2_fma(%g) = %g", x, got)
			}
		case x >= -125:
			if e := math.Abs(got/want - 1); e > 1e-4 {
				bad++
				if bad <= 5 {
					t.Errorf("exp2_fma(%g) = %g, want %g (relative error %.2g)", x, got, want, e)
				}
			} else if e > worst {
				worst = e
			}
		case got > math.Exp2(-124):
			bad++
			if bad <= 5 {
				t.Errorf("exp2_fma(%g) = %g, want at most 2^-124", x, got)
			}
		}
	}
	if n != 140002 {
		t.Fatalf("%d values checked, want 140002", n)
	}
	t.Logf("largest relative error on [-125, 0]: %.3g", worst)
}

func parseF(t *testing.T, s string) float64 {
	t.Helper()
	v, err := strconv.ParseFloat(s, 64)
	if err != nil {
		t.Fatalf("parse %q: %v", s, err)
	}
	return v
}
