package cudnn

import (
	"encoding/binary"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/longca/longca/internal/hostcc"
	"github.com/longca/longca/tensor"
)

// The helper kernels run only on the GPU machine. Here their source is compiled by the
// host C++ compiler over a shim (CUDA's qualifiers as nothing, bf16 and fp16 as 16-bit
// types with round-to-nearest-even conversions) and every kernel runs block by block,
// thread by thread, against what it must compute: the index arithmetic, templates and
// dtype variants are checked on the CPU, the launches on the GPU.

const hostShim = hostcc.CUDAShim

const hostDriver = `
static void *buf[4]; static long sz[4];
static void load(int i, const char *p) { FILE *f = fopen(p, "rb"); fseek(f, 0, SEEK_END); sz[i] = ftell(f); fseek(f, 0, SEEK_SET);
  buf[i] = malloc(sz[i] + 1); if (fread(buf[i], 1, sz[i], f) != (size_t)sz[i]) exit(3); fclose(f); }
static void save(int i, const char *p) { FILE *f = fopen(p, "wb"); fwrite(buf[i], 1, sz[i], f); fclose(f); }
#define GRID(call) gridDim.x = 3; blockDim.x = 5; \
  for (blockIdx.x = 0; blockIdx.x < 3; blockIdx.x++) for (threadIdx.x = 0; threadIdx.x < 5; threadIdx.x++) { call; }
int main(int argc, char **argv) {
  const char *op = argv[1]; int nb = atoi(argv[2]);
  for (int i = 0; i < nb; i++) load(i, argv[3 + i]);
  long long a[3] = {0, 0, 0}; for (int i = 3 + nb, j = 0; i < argc; i++, j++) a[j] = atoll(argv[i]);
  int t = (int)a[0], h = (int)a[1], d = (int)a[2]; long long n = a[0];
  if (!strcmp(op, "lse_to_heads")) { GRID(lse_to_heads((float *)buf[0], (float *)buf[1], t, h)); }
  if (!strcmp(op, "lse_to_tokens")) { GRID(lse_to_tokens((float *)buf[0], (float *)buf[1], t, h)); }
  if (!strcmp(op, "merge_bf16")) { GRID(merge_bf16((float *)buf[0], (float *)buf[1], (__nv_bfloat16 *)buf[2], (float *)buf[3], t, h, d)); }
  if (!strcmp(op, "merge_fp16")) { GRID(merge_fp16((float *)buf[0], (float *)buf[1], (__half *)buf[2], (float *)buf[3], t, h, d)); }
  if (!strcmp(op, "accumulate_bf16")) { GRID(accumulate_bf16((float *)buf[0], (__nv_bfloat16 *)buf[1], n)); }
  if (!strcmp(op, "accumulate_fp16")) { GRID(accumulate_fp16((float *)buf[0], (__half *)buf[1], n)); }
  if (!strcmp(op, "convert_bf16")) { GRID(convert_bf16((__nv_bfloat16 *)buf[0], (float *)buf[1], n)); }
  if (!strcmp(op, "convert_fp16")) { GRID(convert_fp16((__half *)buf[0], (float *)buf[1], n)); }
  for (int i = 0; i < nb; i++) save(i, argv[3 + i]);
  return 0;
}
`

// hostHelpers builds the host program.
func hostHelpers(t *testing.T) string {
	t.Helper()
	var src strings.Builder
	src.WriteString(hostShim)
	for _, l := range strings.Split(helperSource, "\n") {
		if !strings.HasPrefix(l, "#include") {
			src.WriteString(l + "\n")
		}
	}
	src.WriteString(hostDriver)
	return hostcc.Compile(t, "the cudnn helper kernels", src.String())
}

// runHost runs one kernel on host tensors (in place) with integer arguments.
func runHost(t *testing.T, bin, op string, ts []*tensor.Host, args ...int) {
	t.Helper()
	a := make([]int64, len(args))
	for i, x := range args {
		a[i] = int64(x)
	}
	hostcc.Run(t, bin, op, ts, a...)
}

func f32s(x *tensor.Host) []float32 {
	out := make([]float32, x.Numel())
	for i := range out {
		out[i] = math.Float32frombits(binary.LittleEndian.Uint32(x.Data[4*i:]))
	}
	return out
}

func TestHelperKernelsOnHost(t *testing.T) {
	bin := hostHelpers(t)
	rng := rand.New(rand.NewPCG(1, 2))
	const tokens, heads, dim = 13, 3, 8
	// The LSE layouts: packed [tokens, heads] <-> longca's [heads, tokens].
	thd := tensor.NewHost(tensor.FP32, tokens, heads)
	thd.FillNormal(rng, 1)
	ht := tensor.NewHost(tensor.FP32, heads, tokens)
	runHost(t, bin, "lse_to_heads", []*tensor.Host{thd, ht}, tokens, heads)
	a, b := f32s(thd), f32s(ht)
	for s := range tokens {
		for h := range heads {
			if b[h*tokens+s] != a[s*heads+h] {
				t.Fatalf("lse_to_heads: [%d,%d] = %v, want %v", h, s, b[h*tokens+s], a[s*heads+h])
			}
		}
	}
	back := tensor.NewHost(tensor.FP32, tokens, heads)
	runHost(t, bin, "lse_to_tokens", []*tensor.Host{ht, back}, tokens, heads)
	if string(back.Data) != string(thd.Data) {
		t.Fatal("lse_to_tokens does not invert lse_to_heads")
	}

	for _, dt := range []tensor.DType{tensor.BF16, tensor.FP16} {
		// The merge of three partials (one with rows that saw no key) against float64.
		acc := tensor.NewHost(tensor.FP32, tokens, heads, dim)
		lacc := tensor.NewHost(tensor.FP32, heads, tokens)
		lacc.Fill(math.Inf(-1))
		wantO := make([]float64, tokens*heads*dim)
		wantL := make([]float64, heads*tokens)
		for i := range wantL {
			wantL[i] = math.Inf(-1)
		}
		for part := range 3 {
			out := tensor.NewHost(dt, tokens, heads, dim)
			out.FillNormal(rng, 1)
			lse := tensor.NewHost(tensor.FP32, heads, tokens)
			lse.FillNormal(rng, 2)
			if part == 1 {
				for i := 0; i < heads*tokens; i += 2 {
					lse.Set(i, math.Inf(-1))
					for x := range dim { // what a row with no key holds must not be read
						out.Set((i%tokens*heads+i/tokens)*dim+x, math.NaN())
					}
				}
			}
			runHost(t, bin, "merge_"+suffix(dt), []*tensor.Host{acc, lacc, out, lse}, tokens, heads, dim)
			for h := range heads {
				for s := range tokens {
					l := lse.At(h*tokens + s)
					if math.IsInf(l, -1) {
						continue
					}
					old := wantL[h*tokens+s]
					m := math.Max(old, l)
					nl := m + math.Log(math.Exp(old-m)+math.Exp(l-m))
					for x := range dim {
						i := (s*heads+h)*dim + x
						wantO[i] = math.Exp(old-nl)*wantO[i] + math.Exp(l-nl)*out.At(i)
					}
					wantL[h*tokens+s] = nl
				}
			}
		}
		for i, v := range f32s(acc) {
			if math.Abs(float64(v)-wantO[i]) > 1e-5*(1+math.Abs(wantO[i])) || math.IsNaN(float64(v)) {
				t.Fatalf("merge %s: out[%d] = %v, want %v", dt, i, v, wantO[i])
			}
		}
		for i, v := range f32s(lacc) {
			if math.Abs(float64(v)-wantL[i]) > 1e-5*(1+math.Abs(wantL[i])) {
				t.Fatalf("merge %s: lse[%d] = %v, want %v", dt, i, v, wantL[i])
			}
		}
		// Accumulation in fp32 and the conversion back, rounding to nearest even.
		n := 37
		sum := tensor.NewHost(tensor.FP32, n)
		x := tensor.NewHost(dt, n)
		x.FillNormal(rng, 1)
		want := make([]float64, n)
		for range 2 {
			runHost(t, bin, "accumulate_"+suffix(dt), []*tensor.Host{sum, x}, n)
			for i := range want {
				want[i] = float64(float32(want[i] + x.At(i)))
			}
		}
		for i, v := range f32s(sum) {
			if float64(v) != want[i] {
				t.Fatalf("accumulate %s: [%d] = %v, want %v", dt, i, v, want[i])
			}
		}
		conv := tensor.NewHost(dt, n)
		runHost(t, bin, "convert_"+suffix(dt), []*tensor.Host{conv, sum}, n)
		ref := tensor.NewHost(dt, n)
		ref.SetFloat64s(want)
		if string(conv.Data) != string(ref.Data) {
			t.Fatalf("convert %s: %v, want %v", dt, conv.Float64s(), ref.Float64s())
		}
	}
}
