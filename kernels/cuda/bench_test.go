//go:build gpu

package cuda

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/longca/longca/internal/cuda"
	"github.com/longca/longca/kernels"
	"github.com/longca/longca/mask"
	"github.com/longca/longca/tensor"
)

// Ceilings measured on the H200 (shared/DEVICE.md): the floor of a case is the larger of
// FLOPs at the bf16 matrix rate and bytes at the copy bandwidth.
const (
	peakFLOPs = 790e12
	peakBytes = 4.3e12
)

func envList(name, def string) []string {
	s := os.Getenv(name)
	if s == "" {
		s = def
	}
	return strings.Split(s, ",")
}

// benchRow is one timed case, printed as a JSON line.
type benchRow struct {
	Kernel  string  `json:"kernel"`
	Mask    string  `json:"mask"`
	SeqLen  int     `json:"seqlen"`
	HeadsQ  int     `json:"heads_q"`
	HeadsKV int     `json:"heads_kv"`
	Pass    string  `json:"pass_"`
	Version string  `json:"version"`
	Status  string  `json:"status"`
	MS      float64 `json:"ms"`
	TFLOPs  float64 `json:"tflops"`
	FloorMS float64 `json:"floor_ms"`
	Reason  string  `json:"reason,omitempty"`
}

// TestBench times the kernel over LONGCA_BENCH_SEQLENS x LONGCA_BENCH_MASKS x
// LONGCA_BENCH_HEADS x LONGCA_BENCH_PASSES (batch 1, head dim 128, bf16, seed 42): the
// median of LONGCA_BENCH_REPS repetitions timed with events, L2 flushed before each.
// With LONGCA_BENCH_SLICES it also writes each mask in the JSON form the peers read. It
// runs only when LONGCA_BENCH=1 (it is a measurement, not a check).
func TestBench(t *testing.T) {
	if os.Getenv("LONGCA_BENCH") != "1" {
		t.Skip("a measurement: set LONGCA_BENCH=1")
	}
	k := gpuKernel(t)
	g := k.dev
	reps, _ := strconv.Atoi(os.Getenv("LONGCA_BENCH_REPS"))
	reps = max(reps, 3)
	slicesDir := os.Getenv("LONGCA_BENCH_SLICES")
	var rows []benchRow
	for _, ss := range envList("LONGCA_BENCH_SEQLENS", "8192,16384") {
		s, err := strconv.Atoi(ss)
		if err != nil {
			t.Fatalf("LONGCA_BENCH_SEQLENS: %v", err)
		}
		for _, hs := range envList("LONGCA_BENCH_HEADS", "64:8,64:64") {
			var hq, hkv int
			if _, err := fmt.Sscanf(hs, "%d:%d", &hq, &hkv); err != nil {
				t.Fatalf("LONGCA_BENCH_HEADS %q: %v", hs, err)
			}
			rows = append(rows, benchHeads(t, k, g, s, hq, hkv, reps, slicesDir)...)
		}
	}
	sort.SliceStable(rows, func(i, j int) bool { return rows[i].Pass < rows[j].Pass })
	fmt.Printf("# %-22s %6s %6s %4s %3s %10s %9s %10s %6s\n", "mask", "S", "heads", "pass", "ver", "ms", "TFLOP/s", "floor ms", "floor%")
	for _, r := range rows {
		fmt.Printf("  %-22s %6d %3d:%-2d %4s %3s %10.3f %9.1f %10.3f %6.1f %s\n", r.Mask, r.SeqLen, r.HeadsQ, r.HeadsKV, r.Pass, r.Version, r.MS, r.TFLOPs, r.FloorMS, 100*r.FloorMS/r.MS, r.Status)
	}
}

func benchHeads(t *testing.T, k *Kernel, g *cuda.Device, s, hq, hkv, reps int, slicesDir string) []benchRow {
	const d = 128
	ctx := context.Background()
	var bufs []tensor.Tensor
	alloc := func(dt tensor.DType, shape []int) tensor.Tensor {
		b, err := g.Alloc(dt, shape...)
		if err != nil {
			t.Fatal(err)
		}
		bufs = append(bufs, b)
		return b
	}
	defer func() {
		for _, b := range bufs {
			g.Free(b)
		}
	}()
	p0 := kernels.Problem{HeadsQ: hq, HeadsKV: hkv, HeadDim: d, DType: tensor.BF16, Mask: mask.Mask{SeqQ: s, SeqK: s}}
	qs, kvs, ls := p0.Shapes()
	q, kk, v, out, dout := alloc(tensor.BF16, qs), alloc(tensor.BF16, kvs), alloc(tensor.BF16, kvs), alloc(tensor.BF16, qs), alloc(tensor.BF16, qs)
	lse := alloc(tensor.FP32, ls)
	dq, dk, dv := alloc(tensor.BF16, qs), alloc(tensor.BF16, kvs), alloc(tensor.BF16, kvs)
	for i, b := range []tensor.Tensor{q, kk, v, dout} {
		if err := g.FillNormal(b, uint64(42+i), 1); err != nil {
			t.Fatal(err)
		}
	}
	var rows []benchRow
	for _, name := range envList("LONGCA_BENCH_MASKS", strings.Join(mask.KernelMasks(), ",")) {
		spec, err := mask.Build(name, s, mask.Options{Seed: 42})
		if err != nil {
			t.Fatal(err)
		}
		if slicesDir != "" && hq == 64 && hkv == 8 {
			b, _ := json.Marshal(spec)
			if err := os.WriteFile(filepath.Join(slicesDir, fmt.Sprintf("%s-%d.json", name, s)), b, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		p := p0
		p.Mask = spec.Mask
		for _, pass := range envList("LONGCA_BENCH_PASSES", "fwd,bwd") {
			pa, err := kernels.ParsePass(pass)
			if err != nil {
				t.Fatal(err)
			}
			run := func() error { return k.Forward(ctx, p, q, kk, v, out, lse) }
			bytes := float64(2*(2*s*hq*d+2*s*hkv*d) + 4*hq*s)
			if pa == kernels.Bwd {
				if err := run(); err != nil {
					t.Fatal(err)
				}
				run = func() error { return k.Backward(ctx, p, q, kk, v, out, lse, dout, dq, dk, dv) }
				bytes = float64(2*(4*s*hq*d+4*s*hkv*d) + 4*hq*s + 3*4*s*hq*d)
			}
			ver := k.FwdVer
			if pa == kernels.Bwd {
				ver = k.BwdVer
			}
			row := benchRow{Kernel: "cuda", Mask: name, SeqLen: s, HeadsQ: hq, HeadsKV: hkv, Pass: pa.String(), Version: ver, Status: "ok"}
			if err := run(); err != nil { // warm-up: work list, module, first launch
				row.Status, row.Reason = "error", err.Error()
				rows = append(rows, row)
				continue
			}
			var times []time.Duration
			for r := 0; r < reps; r++ {
				if err := g.FlushCache(); err != nil {
					t.Fatal(err)
				}
				dt, err := g.Time(run)
				if err != nil {
					t.Fatal(err)
				}
				times = append(times, dt)
			}
			sort.Slice(times, func(i, j int) bool { return times[i] < times[j] })
			med := times[len(times)/2].Seconds()
			fl := p.FLOPs(pa)
			row.MS, row.TFLOPs = med*1e3, fl/med/1e12
			row.FloorMS = max(fl/peakFLOPs, bytes/peakBytes) * 1e3
			b, _ := json.Marshal(row)
			fmt.Println(string(b))
			rows = append(rows, row)
		}
	}
	return rows
}
