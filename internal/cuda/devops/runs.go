package devops

import (
	"fmt"
	"sync"

	"github.com/longca/longca/internal/cuda"
	"github.com/longca/longca/tensor"
)

// Batched row copies and sums: many runs of rows in one launch, for a layout that moves a
// rank's keys in pieces (balanced's packed documents, spmd/cp/balanced_thd.go), where one
// launch per piece would make the copies launch-bound. They are a module of their own,
// compiled on first use (Ops.RunsReady), so the helper module every method needs does
// not depend on them.

// A runs table is n runs and their starts, as long longs: run j is (to, from, rows) at
// 3j..3j+2 (rows of the destination and the source), and first[j] = 3n+j is the first row
// of run j in the concatenation of the runs (first[n] is their total). A thread finds its
// run by a binary search of first.
const runsKernels = `
__device__ __forceinline__ long long find_run(const long long *first, long long n, long long row) {
  long long lo = 0, hi = n - 1;
  while (lo < hi) {
    long long m = (lo + hi + 1) / 2;
    if (first[m] <= row) lo = m; else hi = m - 1;
  }
  return lo;
}

// copy_runs copies the runs of tab, rows of w 8-byte words, from src to dst (the
// destinations do not overlap). A block takes a row at a time (one search per row and
// thread, no division per element), its threads the row's words.
extern "C" __global__ void copy_runs(unsigned long long *dst, const unsigned long long *src, const long long *tab, long long n, long long w) {
  const long long *first = tab + 3 * n;
  for (long long row = blockIdx.x; row < first[n]; row += gridDim.x) {
    long long j = find_run(first, n, row), r = row - first[j];
    unsigned long long *d = dst + (tab[3 * j] + r) * w;
    const unsigned long long *s = src + (tab[3 * j + 1] + r) * w;
    for (long long c = threadIdx.x; c < w; c += blockDim.x) d[c] = s[c];
  }
}

// add_runs adds the runs of tab, rows of w elements, of src into the fp32 rows of dst (the
// destinations do not overlap, so no two threads add into one element), a row at a time
// per block as copy_runs.
template <typename T>
__device__ void add_runs(float *dst, const T *src, const long long *tab, long long n, long long w) {
  const long long *first = tab + 3 * n;
  for (long long row = blockIdx.x; row < first[n]; row += gridDim.x) {
    long long j = find_run(first, n, row), r = row - first[j];
    float *d = dst + (tab[3 * j] + r) * w;
    long long so = (tab[3 * j + 1] + r) * w;
    for (long long c = threadIdx.x; c < w; c += blockDim.x) d[c] = d[c] + ld(src, so + c);
  }
}
extern "C" __global__ void add_runs_bf16(float *dst, const __nv_bfloat16 *src, const long long *tab, long long n, long long w) { add_runs(dst, src, tab, n, w); }
extern "C" __global__ void add_runs_fp16(float *dst, const __half *src, const long long *tab, long long n, long long w) { add_runs(dst, src, tab, n, w); }
extern "C" __global__ void add_runs_fp32(float *dst, const float *src, const long long *tab, long long n, long long w) { add_runs(dst, src, tab, n, w); }
`

// runsSource is the module of the batched row kernels.
var runsSource = prelude + runsKernels

// RunsSource is the CUDA C of the batched row kernels (for tests that compile it alone).
func RunsSource() string { return runsSource }

// runsModule is the batched kernels' module, compiled once.
type runsModule struct {
	once sync.Once
	mod  *cuda.Module
	err  error
}

// RunsReady compiles (or loads from the NVRTC cache) the batched row kernels, once; an
// error says they cannot run here (a caller copies run by run instead).
func (o *Ops) RunsReady() error {
	o.runs.once.Do(func() {
		o.runs.mod, o.runs.err = o.g.LoadSource(runsSource, "longca_cp_runs.cu")
		if o.runs.err != nil {
			o.runs.err = fmt.Errorf("devops: the batched row kernels: %w", o.runs.err)
		}
	})
	return o.runs.err
}

// RunsTable is the runs table of runs (to, from, rows) as the long longs the kernels
// read, in an FP64 host tensor of the same bytes (to upload as it is).
func RunsTable(runs [][3]int) *tensor.Host {
	n := len(runs)
	h := tensor.NewHost(tensor.FP64, 4*n+1)
	put := func(i int, v int64) {
		for b := range 8 {
			h.Data[8*i+b] = byte(uint64(v) >> (8 * b))
		}
	}
	total := int64(0)
	for j, r := range runs {
		put(3*j, int64(r[0]))
		put(3*j+1, int64(r[1]))
		put(3*j+2, int64(r[2]))
		put(3*n+j, total)
		total += int64(r[2])
	}
	put(4*n, total)
	return h
}

// runsLaunch checks and launches a batched kernel: n runs of total rows in a table of
// 4n+1 long longs, a block of 256 threads per row at a time.
func (o *Ops) runsLaunch(name string, total int64, table *cuda.Buffer, n int, args ...any) error {
	if err := o.RunsReady(); err != nil {
		return err
	}
	if table.Bytes() < int64(8*(4*n+1)) {
		return fmt.Errorf("devops: %s: a table of %d bytes for %d runs", name, table.Bytes(), n)
	}
	if n == 0 || total == 0 {
		return nil
	}
	if err := checkArgs(name, args); err != nil {
		return err
	}
	f, err := o.runsFn(name)
	if err != nil {
		return err
	}
	blocks := int(max(1, min(int64(o.g.SMs*8), total))) // a block per row at a time
	return o.g.Do(func() error { return f.Launch(cuda.Dim3{X: blocks}, cuda.Dim3{X: 256}, 0, o.stream, args...) })
}

func (o *Ops) runsFn(name string) (*cuda.Function, error) { return o.fnIn(o.runs.mod, name) }

// CopyRuns copies n runs of rows of rowBytes (a multiple of 8) from src to dst, as the
// runs table (RunsTable, on the device) says; the destinations must not overlap. total is
// the runs' rows in all (the table's last entry), which sizes the grid.
func (o *Ops) CopyRuns(dst, src, table tensor.Tensor, n int, total int, rowBytes int64) error {
	bs, err := devs([]string{"destination", "source", "table"}, dst, src, table)
	if err != nil {
		return err
	}
	if rowBytes%8 != 0 || rowBytes <= 0 {
		return fmt.Errorf("devops: batched row copy of %d-byte rows (a multiple of 8 is needed)", rowBytes)
	}
	w := rowBytes / 8
	return o.runsLaunch("copy_runs", int64(total), bs[2], n, bs[0], bs[1], bs[2], uint64(n), uint64(w))
}

// AddRuns adds n runs of rows of rowElems elements of src (bf16, fp16 or fp32) into the
// fp32 rows of dst, as the runs table says; the destinations must not overlap.
func (o *Ops) AddRuns(dst, src, table tensor.Tensor, n int, total int, rowElems int64) error {
	bs, err := devs([]string{"destination", "source", "table"}, dst, src, table)
	if err != nil {
		return err
	}
	if bs[0].DType() != tensor.FP32 || rowElems <= 0 {
		return fmt.Errorf("devops: batched row sums into %s rows of %d elements (fp32 is needed)", bs[0].DType(), rowElems)
	}
	sf, err := suffix(bs[1].DType())
	if err != nil {
		return err
	}
	return o.runsLaunch("add_runs_"+sf, int64(total), bs[2], n, bs[0], bs[1], bs[2], uint64(n), uint64(rowElems))
}
