package cuda

import (
	"fmt"
	"strings"
	"testing"

	"github.com/longca/longca/internal/hostcc"
)

// exp2_fma (attention_sm90.cu: experiments sm90xf8 and sm90xf4's exponentials on the FMA
// pipe) compiled on the host from the kernel's source, its CUDA intrinsics given their exact
// IEEE meaning (__fadd_rd: a float add under the rounding mode toward -inf, the program
// compiled with -frounding-math), against exp2 in double: relative error at most 1e-4
// wherever 2^x is a normal float (x from -126 to 8.5, 2^-12 apart, up to 8 being where
// sm90lz's subtraction point trails the maximum; the float neighbours of every integer
// there; tiny negatives, where j = -1 and f rounds to 1), exactly +0 for -inf and from -127
// down (a masked score must add nothing to a row's sum: rows with no key keep lse -inf), 0
// up to 2^-126 between -127 and -126, and exactly 1 at 0.
func TestExp2FMAOnHost(t *testing.T) {
	fn := extract(t, SourceSM90(), "DEV float exp2_fma(float x) {", "\n}\n")
	prog := `#include <cstdio>
#include <cmath>
#include <cstring>
#include <cfenv>
#define DEV static
static float __fadd_rd(float a, float b) {
  volatile float x = a, y = b;
  std::fesetround(FE_DOWNWARD);
  volatile float r = x + y;
  std::fesetround(FE_TONEAREST);
  return r;
}
static float __int_as_float(int i) { float f; std::memcpy(&f, &i, 4); return f; }
static int __float_as_int(float f) { int i; std::memcpy(&i, &f, 4); return i; }
` + fn + `
static double worst = 0; static float worst_x = 0; static int bad_zero = 0, bad_tiny = 0;
static void check(float x) {
  const float y = exp2_fma(x);
  if (x <= -127.f) { if (__float_as_int(y) != 0) bad_zero++; return; }
  if (x < -126.f) { if (!(y >= 0.f && y <= 0x1p-126f)) bad_tiny++; return; }
  const double e = std::fabs((double)y / std::exp2((double)x) - 1.0);
  if (!(e <= worst)) { worst = e; worst_x = x; }
}
int main() {
  for (double x = -130.0; x <= 8.5; x += 1.0 / 4096) check((float)x);
  for (int j = -130; j <= 8; j++) { check(std::nextafterf((float)j, -INFINITY)); check(std::nextafterf((float)j, INFINITY)); }
  check(-INFINITY); check(-1e30f); check(-0.f); check(1e-7f);
  for (float t = -1e-30f; t > -0.01f; t *= 4) check(t);
  check(-0x1p-149f);
  if (__fadd_rd(-0x1p-149f, 12582912.f) != 12582911.f) { printf("rounding mode ignored\n"); return 1; }
  printf("worst %.3e at %.9g\nzero %d tiny %d\none %a\ninf %d\n", worst, worst_x, bad_zero, bad_tiny, exp2_fma(0.f),
         __float_as_int(exp2_fma(-INFINITY)));
  return 0;
}
`
	out := hostcc.Output(t, "exp2fma", prog, "-frounding-math")
	var worst, worstX float64
	var zero, tiny, inf int
	var one string
	if _, err := fmt.Sscanf(out, "worst %g at %g\nzero %d tiny %d\none %s\ninf %d\n", &worst, &worstX, &zero, &tiny, &one, &inf); err != nil {
		t.Fatalf("output %q: %v", out, err)
	}
	if worst > 1e-4 {
		t.Errorf("exp2_fma's relative error %.3e at x = %g, want at most 1e-4", worst, worstX)
	}
	if zero != 0 || inf != 0 {
		t.Errorf("exp2_fma is not +0 at %d points at or below -127 (-inf's bits %#x)", zero, inf)
	}
	if tiny != 0 {
		t.Errorf("exp2_fma is outside [0, 2^-126] at %d points between -127 and -126", tiny)
	}
	if strings.TrimSpace(one) != "0x1p+0" {
		t.Errorf("exp2_fma(0) = %s, want exactly 1", one)
	}
	t.Logf("exp2_fma: worst relative error %.3e at %g", worst, worstX)
}
