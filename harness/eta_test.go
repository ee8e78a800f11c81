package harness

import (
	"bufio"
	"fmt"
	"math"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/longca/longca/kernels"
	"github.com/longca/longca/results"
)

// h200Case is one row of a recorded H200 run of `longca run`'s GPU suite (testdata/
// h200-run-gpu.csv: 480 cases in about 6 minutes, 2026-12-03; testdata/h200-run-gpu-cache.csv:
// 672 cases in about 8, 2026-12-04, with the reference cache), with when it started.
type h200Case struct {
	start float64
	c     EstimateCase
	row   results.Row
}

func loadH200Run(t *testing.T, file string, want int) []h200Case {
	t.Helper()
	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []h200Case
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "#") || strings.HasPrefix(line, "start_s") {
			continue
		}
		v := strings.Split(line, ",")
		start, _ := strconv.ParseFloat(v[0], 64)
		n, _ := strconv.Atoi(v[3])
		pass, err := kernels.ParsePass(v[4])
		if err != nil {
			t.Fatal(err)
		}
		flops, _ := strconv.ParseFloat(v[7], 64)
		row := results.Row{Kernel: v[1], Mask: v[2], SeqLen: int64(n), Pass: v[4], Status: results.Status(v[5])}
		if v[6] != "" {
			ms, _ := strconv.ParseFloat(v[6], 64)
			row.MedianMs = &ms
		}
		c := Case{Mask: v[2], SeqLen: n, Heads: Heads{Q: 64, KV: 8}, HeadDim: 128, Kernel: v[1], Pass: pass, Seed: 42}
		// What the run knows before it starts: the suite's cases, their FLOPs, and
		// which cases a kernel refuses (Kernel.Supports: the torch SDPA peers take only
		// full and causal masks). Checks run on the device there: no CPU share.
		out = append(out, h200Case{start: start, row: row,
			c: EstimateCase{Case: c, FLOPs: flops, OnDevice: true, Refused: row.Status == results.StatusUnsupported}})
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if len(out) != want {
		t.Fatalf("%d rows in %s, want %d", len(out), file, want)
	}
	return out
}

// The one estimate is within 25% of the real time of the H200 run of `longca run`
// (480 cases in about 6 minutes), up front and as the ETA after every case while more
// than a minute is left; the estimates of old said 18 minutes up front, and the ETA went
// from 5 to 19 minutes over the first 3 cases.
func TestEstimateH200Run(t *testing.T) {
	// The H200 host's CPU reference runs at about 50 GFLOP/s (what this run's first
	// checks of each mask took; the session measures it on the spot, calibrateRef).
	replayH200(t, "testdata/h200-run-gpu.csv", 480, 50e9, 0, false)
}

// The same for the run of 2026-12-04 (call 33, docs/perf.md): 672 cases, every kernel's
// checks against one set of references per case (check.Cache), which the estimate charges
// once (SetCheckCosts' sharedRefs). Its checks ran the reference at about 50 GFLOP/s (what
// the first kernel's 8K cases spent besides their repetitions); the host's calibration of
// the day said 12.8 (two heads on 16 cores), and with that the estimate said 616 s up front
// for 471 (1.31x): CalibrateRef now takes a head per worker.
func TestEstimateH200RunSharedRefs(t *testing.T) {
	replayH200(t, "testdata/h200-run-gpu-cache.csv", 672, 50e9, 0, true)
}

// Where the reference's rate was misjudged by 2.5x either way, the checks of the first
// masks teach the estimate: the ETA is within 25% from the 20th case on.
func TestEstimateH200RunLearnsChecks(t *testing.T) {
	for _, ref := range []float64{20e9, 125e9} {
		t.Run(fmt.Sprintf("ref %.0f GFLOP/s", ref/1e9), func(t *testing.T) { replayH200(t, "testdata/h200-run-gpu.csv", 480, ref, 20, false) })
	}
}

// replayH200 replays a recorded H200 run (file, want rows) through an Estimate with the
// reference at ref FLOP/s, charged per kernel or once per case (shared): up front (when
// from is 0) and after every case from the from-th on while more than a minute is left,
// the estimate must be within 25% of the real time.
func replayH200(t *testing.T, file string, want int, ref float64, from int, shared bool) {
	run := loadH200Run(t, file, want)
	// The last case's end: its start plus its repetitions (3 warm-ups, 10 timed, a
	// backward's forward), or its start where it was refused.
	last := run[len(run)-1]
	end := last.start
	if last.row.MedianMs != nil {
		end += (13 + 0.4) * *last.row.MedianMs / 1e3
	}
	cases := make([]EstimateCase, len(run))
	for i, r := range run {
		cases[i] = r.c
	}
	SetCheckCosts(cases, DefaultCheckBudget, ref, shared)
	e := NewEstimate(cases, EstimatePrior{DeviceFLOPs: DefaultDeviceFLOPs, RefFLOPs: ref, PerCase: DefaultPerCase, Reps: 3 + 10})
	within := func(what string, got time.Duration, want float64) {
		t.Helper()
		if r := got.Seconds() / want; math.Abs(r-1) > 0.25 {
			t.Errorf("%s: estimated %.0f s, real %.0f s (%.2fx): more than 25%% off", what, got.Seconds(), want, r)
		}
	}
	upFront := e.Total()
	if from == 0 {
		within("up front", upFront, end)
	}
	worst, at := 0.0, 0
	for i, r := range run {
		next := end
		if i+1 < len(run) {
			next = run[i+1].start
		}
		e.Done(i, r.row, time.Duration((next-r.start)*float64(time.Second)))
		left := end - next
		if left < 60 {
			break
		}
		if i+1 < from {
			continue
		}
		within("ETA after case "+strconv.Itoa(i+1), e.Remaining(), left)
		if d := math.Abs(e.Remaining().Seconds()/left - 1); d > worst {
			worst, at = d, i+1
		}
	}
	t.Logf("real %.0f s; up front %.0f s; worst ETA %.0f%% off (after case %d)", end, upFront.Seconds(), 100*worst, at)
}

// A kernel's rate is learned from its timed cases (its other pass too), a kernel not yet
// timed runs at the prior's, and a kernel that refused a mask refuses it at every length.
func TestEstimateLearns(t *testing.T) {
	mk := func(k, m string, n int, pass kernels.Pass) EstimateCase {
		return EstimateCase{Case: Case{Mask: m, SeqLen: n, Heads: Heads{Q: 8, KV: 8}, HeadDim: 64, Kernel: k, Pass: pass}, FLOPs: 1e12, OnDevice: true}
	}
	cases := []EstimateCase{mk("a", "full", 1024, kernels.Fwd), mk("b", "doc", 1024, kernels.Fwd), mk("b", "doc", 2048, kernels.Fwd),
		mk("c", "full", 1024, kernels.Fwd), mk("a", "full", 2048, kernels.FwdBwd)}
	e := NewEstimate(cases, EstimatePrior{DeviceFLOPs: 100e12, PerCase: 0, Reps: 10})
	near := func(what string, got, want float64) {
		t.Helper()
		if math.Abs(got-want) > 1e-9 {
			t.Errorf("%s: %g s, want %g", what, got, want)
		}
	}
	near("kernel c before anything is timed (10 reps of 1e12 FLOP at 100 TFLOP/s)", e.Seconds(3), 0.1)
	ms := 5.0 // 200 TFLOP/s
	e.Done(0, results.Row{Status: results.StatusOK, MedianMs: &ms}, 50*time.Millisecond)
	near("kernel a's fwd+bwd after its fwd ran at 200 TFLOP/s", e.Seconds(4), 0.05)
	near("kernel c, not yet timed, stays at the prior rate", e.Seconds(3), 0.1)
	e.Done(1, results.Row{Status: results.StatusUnsupported}, time.Millisecond)
	near("kernel b at 2048 on the mask it refused at 1024", e.Seconds(2), 0)
	if e.Elapsed() != 51*time.Millisecond {
		t.Errorf("elapsed %v, want 51ms", e.Elapsed())
	}
	if got := e.Remaining(); got != 150*time.Millisecond {
		t.Errorf("remaining %v, want 150ms (c at 0.1 s, a's fwd+bwd at 0.05 s)", got)
	}
}

// The first case of a kernel, mask, heads and pass at its checked size pays the check;
// the others reuse it, as Runner does. A check pays its three runs, and its own drawing
// of inputs (30 ns an element of q, k, v and dout) and comparing of outputs (130 ns an
// element of out and lse, or of dq, dk and dv), scaled as its length where it is checked
// smaller: the square root of its area's scale on causal (it was the area's, low).
func TestSetCheckCosts(t *testing.T) {
	mk := func(n int, pass kernels.Pass, flops float64) EstimateCase {
		return EstimateCase{Case: Case{Mask: "causal", SeqLen: n, Heads: Heads{Q: 8, KV: 2}, HeadDim: 64, Kernel: "cuda", Pass: pass}, FLOPs: flops}
	}
	cases := []EstimateCase{mk(1024, kernels.Fwd, 4e8), mk(2048, kernels.Fwd, 1.6e9), mk(4096, kernels.Fwd, 4e10), mk(8192, kernels.Fwd, 1.6e11), mk(8192, kernels.Bwd, 4e11)}
	// the inputs drawn and the outputs compared at S tokens (8:2 heads, dim 64), scaled
	draw := func(s, scale float64) float64 { return 30e-9 * (2*s*8*64 + 2*s*2*64) * scale }
	fwdOuts := func(s, scale float64) float64 { return 130e-9 * (s*8*64 + s*8) * scale }
	bwdOuts := func(s, scale float64) float64 { return 130e-9 * (s*8*64 + 2*s*2*64) * scale }
	own := []float64{draw(1024, 1) + fwdOuts(1024, 1), draw(2048, 1) + fwdOuts(2048, 1), draw(4096, math.Sqrt(0.2)) + fwdOuts(4096, math.Sqrt(0.2)), 0, draw(8192, math.Sqrt(0.05)) + bwdOuts(8192, math.Sqrt(0.05))}
	compared := []float64{fwdOuts(1024, 1), fwdOuts(2048, 1), fwdOuts(4096, math.Sqrt(0.2)), 0, bwdOuts(8192, math.Sqrt(0.05))}
	want := []float64{3*4e8/1e9 + own[0], 3*1.6e9/1e9 + own[1], 3*8e9/1e9 + own[2], 0, 3*3.5*8e9/1e9 + own[4]}
	if math.Abs(want[0]-1.3085) > 1e-3 || math.Abs(want[4]-84.2532) > 1e-3 {
		t.Fatalf("want %v", want)
	}
	for _, shared := range []bool{false, true} { // one kernel: the same either way
		SetCheckCosts(cases, 2e9, 1e9, shared)
		for i, c := range cases {
			if math.Abs(c.CheckSeconds-want[i]) > 1e-9 {
				t.Errorf("shared %v case %d (S=%d %s): check %g s, want %g", shared, i, c.SeqLen, c.Pass, c.CheckSeconds, want[i])
			}
		}
	}
	// A second kernel on the same cases: its own check at every size, and with shared
	// references and inputs (check.Cache) only its own run, a third of the runs, and its
	// comparison.
	two := append(append([]EstimateCase{}, cases...), cases...)
	for i := len(cases); i < len(two); i++ {
		two[i].Kernel = "cudnn"
	}
	for _, shared := range []bool{false, true} {
		SetCheckCosts(two, 2e9, 1e9, shared)
		for i := range cases {
			w := want[i]
			if shared && w > 0 {
				w = (w-own[i])/3 + compared[i]
			}
			if got := two[len(cases)+i].CheckSeconds; math.Abs(got-w) > 1e-9 || math.Abs(two[i].CheckSeconds-want[i]) > 1e-9 {
				t.Errorf("shared %v case %d: the second kernel's check %g s, want %g (the first's %g, want %g)", shared, i, got, w, two[i].CheckSeconds, want[i])
			}
		}
	}
}
