package harness

import (
	"context"
	"fmt"
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
	loaded map[BaselineKey]float64
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
	for _, r := range rows {
		if r.Bench != "kernel" || r.Status != results.StatusOK || r.TFLOPs == nil {
			continue
		}
		k := BaselineKey{r.Kernel, r.Mask, int(r.SeqLen), int(r.HeadsQ), int(r.HeadsKV), int(r.HeadDim), r.DType, r.Pass}
		sum[k] += *r.TFLOPs
		n[k]++
	}
	b.loaded = map[BaselineKey]float64{}
	for k, s := range sum {
		b.loaded[k] = s / float64(n[k])
	}
	return nil
}

// Lookup returns the figure for k from the file (0 when the file has none).
func (b *Baseline) Lookup(k BaselineKey) (float64, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if err := b.load(); err != nil {
		return 0, err
	}
	return b.loaded[k], nil
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
