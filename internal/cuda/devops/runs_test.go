package devops

import (
	"math/rand/v2"
	"regexp"
	"testing"

	"github.com/longca/longca/internal/hostcc"
	"github.com/longca/longca/tensor"
)

// runsDriver calls one batched row kernel over a grid of 3 blocks of 5 threads (the
// grid-stride loops must cover any size): buffer 0 the destination, 1 the source, 2 the
// runs table; the integer arguments n and w.
const runsDriver = `
static void *bufs[4];
static long long sizes[4];
static void load(int i, const char *path) {
  FILE *f = fopen(path, "rb"); fseek(f, 0, SEEK_END); sizes[i] = ftell(f); fseek(f, 0, SEEK_SET);
  bufs[i] = malloc(sizes[i] + 1); if (fread(bufs[i], 1, sizes[i], f) != (size_t)sizes[i]) exit(3); fclose(f);
}
static void save(int i, const char *path) { FILE *f = fopen(path, "wb"); fwrite(bufs[i], 1, sizes[i], f); fclose(f); }
#define GRID(call) gridDim.x = 3; blockDim.x = 5; \
  for (blockIdx.x = 0; blockIdx.x < 3; blockIdx.x++) for (threadIdx.x = 0; threadIdx.x < 5; threadIdx.x++) { call; }
int main(int argc, char **argv) {
  const char *op = argv[1]; int nb = atoi(argv[2]);
  for (int i = 0; i < nb; i++) load(i, argv[3 + i]);
  long long n = atoll(argv[3 + nb]), w = atoll(argv[4 + nb]);
  const long long *tab = (const long long *)bufs[2];
  if (!strcmp(op, "copy_runs")) { GRID(copy_runs((unsigned long long *)bufs[0], (const unsigned long long *)bufs[1], tab, n, w)); }
  if (!strcmp(op, "add_runs_bf16")) { GRID(add_runs_bf16((float *)bufs[0], (const __nv_bfloat16 *)bufs[1], tab, n, w)); }
  if (!strcmp(op, "add_runs_fp16")) { GRID(add_runs_fp16((float *)bufs[0], (const __half *)bufs[1], tab, n, w)); }
  if (!strcmp(op, "add_runs_fp32")) { GRID(add_runs_fp32((float *)bufs[0], (const float *)bufs[1], tab, n, w)); }
  for (int i = 0; i < nb; i++) save(i, argv[3 + i]);
  return 0;
}
`

// TestRunsKernelsOnHost: copy_runs moves exactly the runs' rows (8-byte words, the rest
// of the destination untouched), and add_runs of every source dtype adds them into fp32
// rows, against Go; one run, several of different lengths, runs out of order.
func TestRunsKernelsOnHost(t *testing.T) {
	src := regexp.MustCompile(`(?m)^#include <cuda_.*>$`).ReplaceAllString(runsSource, "")
	bin := hostcc.Compile(t, "the batched row kernels", hostcc.CUDAShim+src+runsDriver, "-Wall", "-Wno-unused-function")
	rng := rand.New(rand.NewPCG(5, 6))
	for _, runs := range [][][3]int{
		{{3, 1, 4}},
		{{0, 10, 2}, {5, 0, 3}, {2, 7, 1}, {9, 3, 5}},
		{{12, 2, 1}, {1, 13, 6}},
	} {
		table := RunsTable(runs)
		// copy_runs on rows of 6 words of 8 bytes (24 bf16 elements).
		const w = 6 // more words than the driver's 5 threads: each strides over the row
		s, d := rnd(rng, tensor.BF16, 24, 4*w), rnd(rng, tensor.BF16, 24, 4*w)
		want := d.Clone()
		for _, r := range runs {
			copy(want.Data[8*w*r[0]:8*w*(r[0]+r[2])], s.Data[8*w*r[1]:8*w*(r[1]+r[2])])
		}
		hostcc.Run(t, bin, "copy_runs", []*tensor.Host{d, s, table}, int64(len(runs)), w)
		near(t, "copy_runs", d, want, 0)
		for dt, sf := range suffixes {
			const e = 7
			s, d := rnd(rng, dt, 24, e), rnd(rng, tensor.FP32, 24, e)
			want := d.Clone()
			for _, r := range runs {
				for i := range r[2] * e {
					want.Set(r[0]*e+i, float64(float32(d.At(r[0]*e+i))+float32(s.At(r[1]*e+i))))
				}
			}
			hostcc.Run(t, bin, "add_runs_"+sf, []*tensor.Host{d, s, table}, int64(len(runs)), e)
			near(t, "add_runs_"+sf, d, want, 0)
		}
	}
}

// TestRunsKernelsCompileForDevice compiles the batched row kernels as device code.
func TestRunsKernelsCompileForDevice(t *testing.T) {
	hostcc.CheckDevice(t, "devops-runs", runsSource, "sm_80")
}
