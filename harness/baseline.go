package harness

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"

	"github.com/longca/longca/comm"
	"github.com/longca/longca/kernels"
	"github.com/longca/longca/results"
	"github.com/longca/longca/tensor"
)

// Baseline is the yardstick of CP efficiency: the same kernel alone on one device at the
// same per-rank work (the mask at the tokens each rank holds, the same heads, head dim,
// dtype and pass), as ring-flash-attention judges CP against flash_attn at the per-GPU
// sequence length. Its TFLOP/s are measured in the run (by rank 0 on its own device,
// with the kernel harness, while the other ranks wait) or read from a results file.
type Baseline struct {
	// File, when set, is a results file (longca kernel's, or a merged one) whose ok
	// kernel rows give the figures; nothing is measured then.
	File string

	mu     sync.Mutex // a Baseline may serve in-process ranks: the file is read once
	loaded map[BaselineKey]*baselineFigure
}

// baselineFigure is a key's rows in the file: their mean TFLOP/s and the conditions they
// were measured under.
type baselineFigure struct {
	tflops float64
	conds  map[BaselineCond]bool
}

// BaselineCond is what a baseline figure was measured under beyond its key, which a CP
// row's must match for the figure to be its yardstick: the card (a figure from an H100 is
// not an H200's) and the documents' source (pile's lengths are not ProLong's; a file row
// without one, written before the column, is taken as the run's).
type BaselineCond struct {
	Device, DocSource string
}

// CondOf is a row's BaselineCond: its device less the index ("NVIDIA H200", "cpu") and its
// doc_source.
func CondOf(r results.Row) BaselineCond {
	return BaselineCond{Device: results.DeviceModel(r.Device), DocSource: r.DocSource}
}

func (c BaselineCond) String() string {
	if c.DocSource == "" {
		return c.Device
	}
	return c.Device + " with documents " + c.DocSource
}

// BaselineKey is what a baseline figure is for.
type BaselineKey struct {
	Kernel, Mask    string
	SeqLen          int
	HeadsQ, HeadsKV int
	HeadDim         int
	DType           string
	Pass            string
}

// minBaselineTFLOPs is the least kernel rate a --baseline FILE's row may give (1 kFLOP/s;
// longca's float64 reference on one core runs near 5 GFLOP/s). A hand-made row of 5e-324
// TFLOP/s had made every CP row's cp_efficiency +Inf, and report then refused the run's
// own rows.
const minBaselineTFLOPs = 1e-9

// From is what a row's kernel_tflops_from says.
func (b *Baseline) From() string {
	if b.File != "" {
		return b.File
	}
	return "measured"
}

// Load reads the file's ok kernel rows, once (Lookup reads them where Load was not
// called): the mean TFLOP/s per key.
func (b *Baseline) Load() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.load()
}

func (b *Baseline) load() error {
	if b.loaded != nil {
		return nil
	}
	rows, err := results.Load(b.File)
	if err != nil {
		return fmt.Errorf("--baseline %s: %w", b.File, err)
	}
	sum, n := map[BaselineKey]float64{}, map[BaselineKey]int{}
	conds := map[BaselineKey]map[BaselineCond]bool{}
	benches := map[string]int{}
	for _, r := range rows {
		benches[r.Bench]++
		if r.Bench != "kernel" || r.Status != results.StatusOK || r.TFLOPs == nil || !(*r.TFLOPs >= minBaselineTFLOPs) {
			continue
		}
		k := BaselineKey{r.Kernel, r.Mask, int(r.SeqLen), int(r.HeadsQ), int(r.HeadsKV), int(r.HeadDim), r.DType, r.Pass}
		sum[k] += *r.TFLOPs
		n[k]++
		if conds[k] == nil {
			conds[k] = map[BaselineCond]bool{}
		}
		conds[k][CondOf(r)] = true
	}
	if len(sum) == 0 {
		// A cp merged file, a sparse folder, a kernel run whose every case failed: every CP
		// row would lack kernel_tflops and cp_efficiency, silently.
		return fmt.Errorf("--baseline %s: no ok longca kernel row in it (%s): give a kernel run's results (longca kernel's folder or merged file), or --baseline measure or none", b.File, describeBenches(len(rows), benches))
	}
	b.loaded = map[BaselineKey]*baselineFigure{}
	for k, s := range sum {
		b.loaded[k] = &baselineFigure{tflops: s / float64(n[k]), conds: conds[k]}
	}
	return nil
}

// describeBenches says what rows a file held: "no rows", "4 rows: 4 cp", "3 rows: 2 kernel
// (none ok), 1 sparse".
func describeBenches(rows int, benches map[string]int) string {
	if rows == 0 {
		return "it has no rows"
	}
	names := make([]string, 0, len(benches))
	for b := range benches {
		names = append(names, b)
	}
	sort.Strings(names)
	parts := make([]string, len(names))
	for i, b := range names {
		parts[i] = fmt.Sprintf("%d %s", benches[b], b)
		if b == "kernel" {
			parts[i] += " (none ok with a TFLOP/s of 1e-9 or more)"
		}
	}
	return fmt.Sprintf("%d rows: %s", rows, strings.Join(parts, ", "))
}

// Lookup returns the figure for k from the file, for a CP row measured under want: 0 and
// why not where the file has no ok kernel row of k, or has them only under other
// conditions (another card, other documents), or under several (two runs' rows in one
// folder), whose mean no single run measured.
func (b *Baseline) Lookup(k BaselineKey, want BaselineCond) (tflops float64, why string, err error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if err := b.load(); err != nil {
		return 0, "", err
	}
	f := b.loaded[k]
	if f == nil {
		return 0, "no ok kernel row of this case in the file (a kernel run at each rank's length, this head dim and dtype, is one)", nil
	}
	if len(f.conds) > 1 {
		return 0, "the file's rows of this case were measured under " + condList(f.conds) + ", whose mean no run measured: give the kernel rows of one card and one document source", nil
	}
	for c := range f.conds {
		if c.DocSource == "" { // a file written before doc_source, or a mask without documents
			c.DocSource = want.DocSource
		}
		if c != want {
			return 0, "the file's rows of this case were measured on " + c.String() + " and this run's on " + want.String() + ": give kernel rows measured as this run is", nil
		}
	}
	return f.tflops, "", nil
}

// condList names conditions, sorted: "NVIDIA H100 80GB HBM3; NVIDIA H200".
func condList(conds map[BaselineCond]bool) string {
	names := make([]string, 0, len(conds))
	for c := range conds {
		names = append(names, c.String())
	}
	sort.Strings(names)
	return strings.Join(names, "; ")
}

// measureBaseline is the collective measurement of k: rank 0 runs the case with the
// kernel harness (Runner: the one timing path; unchecked, since the CP check covers the
// kernel), the others wait in the all-reduce that shares its figure. It returns the
// TFLOP/s (0 when the case did not run) and, on rank 0, the kernel row (for the log), or
// a *FatalError when the world failed.
func measureBaseline(ctx context.Context, c comm.Comm, r *Runner, k BaselineKey, seed uint64) (float64, *results.Row, error) {
	v := tensor.NewHost(tensor.FP64, 1)
	var row *results.Row
	if c.Rank() == 0 {
		dt, _ := tensor.ParseDType(k.DType)
		pass, _ := kernels.ParsePass(k.Pass)
		got := r.Run(ctx, Case{Mask: k.Mask, SeqLen: k.SeqLen, Heads: Heads{k.HeadsQ, k.HeadsKV}, HeadDim: k.HeadDim,
			DType: dt, Kernel: k.Kernel, Pass: pass, Seed: seed})
		row = &got
		if got.Status == results.StatusOK && got.TFLOPs != nil {
			v.Set(0, *got.TFLOPs)
		}
	}
	if err := c.AllReduce(v, comm.Max); err != nil {
		return 0, nil, &FatalError{fmt.Errorf("sharing the kernel baseline: %w", err)}
	}
	return v.At(0), row, nil
}
