package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/longca/longca/present"
	"github.com/longca/longca/results"
	"github.com/longca/longca/sim"
	"github.com/longca/longca/spmd/cp"
)

// emulatedMachine is the machine of the CPU validation: 4 in-process ranks on a 2-core
// machine, modelled as 2 "GPUs" (one per node) of 2 ranks each, so ranks 0 and 1 share
// a core (and a local link), as do 2 and 3; nodes talk over the inter link. Bandwidths
// are scaled by bw; fast makes every link effectively free (to measure compute alone).
func emulatedMachine(t *testing.T, dir, name string, bw, computeScale float64, fast bool) string {
	t.Helper()
	local, inter := 0.0005*bw, 0.000125*bw // GB/s
	llat, ilat := 500.0, 2000.0            // us
	if fast {
		local, inter, llat, ilat = 100, 100, 0, 0
	}
	js := fmt.Sprintf(`{"name": %q, "gpus_per_node": 1, "ranks_per_gpu": 2,
 "local": {"bandwidth_gbs": %g, "latency_us": %g},
 "intra": {"bandwidth_gbs": %g, "latency_us": %g},
 "inter": {"bandwidth_gbs": %g, "latency_us": %g},
 "collectives": "direct", "rendezvous": false,
 "helpers": {"bandwidth_gbs": 1, "launch_us": 20}, "kernel": "cpu-ref", "compute_scale": %g}`,
		name, local, llat, local, llat, inter, ilat, computeScale)
	p := filepath.Join(dir, name+".json")
	if err := os.WriteFile(p, []byte(js), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// caseKey pairs a measured row with a predicted one.
type caseKey struct{ method, mesh, mask, pass string }

func keyOf(r results.Row) caseKey {
	return caseKey{r.Method, present.RowMeshLabel(r), r.Mask, r.Pass}
}

// timesOf reads the rows of a run folder: the median time per case (rank 0's row for a
// measured run), and the kernel rows' file when asked.
func timesOf(t *testing.T, dir string) map[caseKey]float64 {
	t.Helper()
	rows, _, err := results.ReadRows(results.MergedPath(dir, filepath.Base(dir)))
	if err != nil {
		t.Fatal(err)
	}
	out := map[caseKey]float64{}
	for _, r := range rows {
		if r.Rank != 0 || r.MedianMs == nil {
			continue
		}
		out[keyOf(r)] = *r.MedianMs
	}
	return out
}

// TestSimulateAgreesWithEmulatedLinks is the CPU validation of longca simulate: longca cp
// with in-process ranks over emulated links (comm/local's link emulator), against
// longca simulate for the same machine file: every method (loongtrain with two windows,
// so that its outer ring runs), forward and backward, over a grid of two sizes and
// bandwidths 1 to 3 (times the base links), each CP mask at two of the four points. The
// kernel model is fitted to ref rows timed here; compute is calibrated from the same run:
// before each size, the ranks' times with free links over the model's give the machine's
// compute scale (the ranks share 2 cores with whatever else runs). Every prediction must
// be within 15% of the measurement (a point with a miss is calibrated and measured again,
// up to 3 times, each keeping its fastest: load only slows). The links dominate, so this
// checks the schedule and the network model; at 64 tokens and 4 times the base links the
// compute was the larger share of the full-mask cases, and the 2 shared cores' noise (two
// runs of the same 8x1 work measured 77.6 and 89.5 ms) missed the bound on an idle machine
// in 2 of 4 runs: that point is at 3 times the base links since (worst 11.8-14.3% in 3 runs).
func TestSimulateAgreesWithEmulatedLinks(t *testing.T) {
	dir := t.TempDir()
	common := []string{"--heads", "4:2", "--head-dim", "8", "--dtype", "fp32", "--windows", "2", "--samples", "1"}
	run := func(args ...string) string {
		t.Helper()
		out, errOut, code := captureRun(t, append([]string{"--log-level", "warn"}, args...)...)
		if code != 0 {
			t.Fatalf("longca %s: exit %d\n%s\n%s", strings.Join(args, " "), code, out, errOut)
		}
		return out
	}
	kdir := filepath.Join(dir, "kernel")
	run("kernel", "--kernels", "ref", "--masks", "full,causal,full_document,causal_document", "--seqlens", "32,64,128,256",
		"--heads", "4:2,2:1", "--head-dim", "8", "--dtype", "fp32", "--no-check", "-w", "1", "-n", "3", "--out", kdir)
	matches, _ := filepath.Glob(filepath.Join(kdir, "*.rank-0-of-1.arrow"))
	if len(matches) != 1 {
		t.Fatalf("kernel rows in %s: %v", kdir, matches)
	}
	krows := matches[0]
	grid := []struct {
		tokens int
		bw     float64
		masks  string
	}{
		{32, 1, "full,causal_document_long"},
		{32, 2, "causal,full_document_long"},
		{64, 2, "causal,full_document_long"},
		{64, 3, "full,causal_document_long"},
	}
	var worst float64
	var report strings.Builder
	scales := map[int]float64{}
	calibrations := 0
	// calibrate is the machine's compute scale at a size: compute alone (free links),
	// measured over predicted, the median over every case.
	calibrate := func(tok string) float64 {
		t.Helper()
		calibrations++
		args := append([]string{"--tokens-per-rank", tok, "--masks", "full,causal,full_document_long,causal_document_long"}, common...)
		fast := emulatedMachine(t, dir, "fast", 1, 1, true)
		mdir, pdir := filepath.Join(dir, fmt.Sprintf("cp-fast-%s-%d", tok, calibrations)), filepath.Join(dir, fmt.Sprintf("sim-fast-%s-%d", tok, calibrations))
		run(append([]string{"cp", "--ranks", "4", "--links", fast, "--kernel", "ref", "--no-check", "-w", "1", "-n", "3", "--out", mdir}, args...)...)
		run(append([]string{"simulate", "--gpus", "4", "--machine", fast, "--kernel-rows", krows, "--out", pdir}, args...)...)
		meas, pred := timesOf(t, mdir), timesOf(t, pdir)
		var ratios []float64
		for k, m := range meas {
			if p, ok := pred[k]; ok && p > 0 {
				ratios = append(ratios, m/p)
			}
		}
		if want := 8 * len(cp.Names()); len(ratios) != want {
			t.Fatalf("%d cases paired between cp and simulate with free links, want %d (%d methods x 4 masks x 2 passes)", len(ratios), want, len(cp.Names()))
		}
		slices.Sort(ratios)
		return ratios[len(ratios)/2]
	}
	for _, g := range grid {
		tok := fmt.Sprint(g.tokens)
		name := fmt.Sprintf("links-%s-%g", tok, g.bw)
		if _, ok := scales[g.tokens]; !ok {
			scales[g.tokens] = calibrate(tok)
		}
		scale := scales[g.tokens]
		args := append([]string{"--tokens-per-rank", tok, "--masks", g.masks}, common...)
		slow := emulatedMachine(t, dir, name, g.bw, scale, false)
		mdir, pdir := filepath.Join(dir, "cp-"+name), filepath.Join(dir, "sim-"+name)
		run(append([]string{"cp", "--ranks", "4", "--links", slow, "--kernel", "ref", "--no-check", "-w", "0", "-n", "3", "--out", mdir}, args...)...)
		predict := func(slow, pdir string) string {
			return run(append([]string{"simulate", "--gpus", "4", "--machine", slow, "--kernel-rows", krows, "--compare", mdir, "--out", pdir}, args...)...)
		}
		table := predict(slow, pdir)
		cases := 4 * len(cp.Names())
		if !strings.Contains(table, fmt.Sprintf("# compared %d cases", cases)) {
			t.Errorf("%s: simulate --compare does not pair the %d cases:\n%s", name, cases, table)
		}
		meas, pred := timesOf(t, mdir), timesOf(t, pdir)
		if len(meas) != cases {
			t.Fatalf("%s: %d measured cases, want %d (%d methods x 2 masks x 2 passes)", name, len(meas), cases, len(cp.Names()))
		}
		// Whatever else runs on the machine (other packages' tests under go test ./...,
		// the scheduler of 2 cores) only ever slows a measurement, the calibration's as
		// much as the point's: while a case misses, the compute scale is measured again
		// (the size keeps its lowest scale, and the point is predicted again with it) and
		// the point is measured again, up to 3 more times, each case keeping its fastest time.
		missed := func() bool {
			for k, m := range meas {
				if p, ok := pred[k]; ok && math.Abs(p/m-1) > 0.15 {
					return true
				}
			}
			return false
		}
		for again := 1; again <= 3 && missed(); again++ {
			if sc := calibrate(tok); sc < scales[g.tokens] {
				scales[g.tokens], scale = sc, sc
				slow = emulatedMachine(t, dir, fmt.Sprintf("%s-again%d", name, again), g.bw, scale, false)
				pdir = fmt.Sprintf("%s-again%d", pdir, again)
				predict(slow, pdir)
				pred = timesOf(t, pdir)
			}
			adir := fmt.Sprintf("%s-again%d", mdir, again)
			run(append([]string{"cp", "--ranks", "4", "--links", slow, "--kernel", "ref", "--no-check", "-w", "0", "-n", "3", "--out", adir}, args...)...)
			for k2, m2 := range timesOf(t, adir) {
				if old, ok := meas[k2]; ok && m2 < old {
					meas[k2] = m2
				}
			}
			fmt.Fprintf(&report, "%s: measured again (%d; a case missed by more than 15%%)\n", name, again)
		}
		fmt.Fprintf(&report, "%s: compute scale %.2f\n", name, scale)
		for k, m := range meas {
			p, ok := pred[k]
			if !ok {
				t.Fatalf("%s: no prediction for %+v", name, k)
			}
			e := p/m - 1
			worst = max(worst, math.Abs(e))
			fmt.Fprintf(&report, "%-14s %-18s %-22s %-4s measured %7.1f ms predicted %7.1f ms %+6.1f%%\n", name, k.mesh, k.mask, k.pass, m, p, 100*e)
			if math.Abs(e) > 0.15 {
				t.Errorf("%s %s %s %s: predicted %.1f ms, measured %.1f ms (%+.0f%%, tolerance 15%%)", name, k.mesh, k.mask, k.pass, p, m, 100*e)
			}
		}
	}
	t.Logf("worst error %.1f%%\n%s", 100*worst, report.String())
}

func TestSimulateUsageErrors(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.json")
	if err := os.WriteFile(bad, []byte(`{"preset": "h100-ib", "inter": {"bandwidth_gb": 10}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"--gpus", "8,x"}, "--gpus"},
		{[]string{"--gpus", ""}, "--gpus"},
		{[]string{"--machine", "nope"}, "--machine"},
		{[]string{"--machine", bad}, "bandwidth_gb"},
		{[]string{"--inter-bw", "0"}, "inter"},
		{[]string{"--collectives", "mpi"}, `--collectives "mpi": use nccl or direct`},
		{[]string{"--kernel-model", "fa9"}, "--kernel-model"},
		{[]string{"--kernel-rows", filepath.Join(dir, "none")}, "--kernel-rows"},
		{[]string{"--calibrate", "nope"}, "--calibrate"},
		{[]string{"--calibrate", "ref", "--kernel-rows", dir}, "both given"},
		{[]string{"--calibrate", "ref", "--calibrate-seqlens", "1G"}, "--calibrate-seqlens 1G: case"},
		{[]string{"--methods", "ring-p"}, "--methods"},
		{[]string{"--passes", "up"}, "--passes"},
		{[]string{"--nccl-table", "--nccl-sizes", "8"}, "--nccl-sizes"},
		{[]string{"--nccl-table", "--gpus", "8,100000"}, "--nccl-table: predicting the collectives on 100000 GPUs would take about"},
		{[]string{"--exact-ranks", "0"}, "--exact-ranks"},
		// a flag read only with another, given without it (the probe of 2026-12-06: each
		// was ignored, exit 0)
		{[]string{"--rows-kernel", "ref"}, "--rows-kernel ref without --kernel-rows"},
		{[]string{"--calibrate-seqlens", "1K"}, "--calibrate-seqlens 1K without --calibrate"},
		{[]string{"--calibrate-iters", "3"}, "--calibrate-iters 3 without --calibrate"},
		{[]string{"--calibrate-check=false"}, "--calibrate-check false without --calibrate"},
		{[]string{"--nccl-sizes", "8:1K"}, "--nccl-sizes 8:1K without --nccl-table"},
		{[]string{"--run-id", "a/b"}, "--run-id"},
		{[]string{"--gpus", "65536", "--masks", "causal_document_long"}, "host memory"},
		{[]string{"--gpus", "1024", "--exact-ranks", "1024", "--masks", "causal_document_long"}, "use a smaller --exact-ranks"},
	}
	for _, c := range cases {
		args := append([]string{"simulate", "--out", filepath.Join(dir, "out")}, c.args...)
		_, errOut, code := captureRun(t, args...)
		checkUsageError(t, args, code, errOut, c.want)
	}
	args := []string{"cp", "--ranks", "4", "--links", "h100-ib", "--backend", "tcp", "--dry-run"}
	_, errOut, code := captureRun(t, args...)
	checkUsageError(t, args, code, errOut, "--ranks 4 with --backend tcp")
}

// TestSimulateRun: predicted rows for every method, mesh, mask, GPU count and pass
// (ulysses past the head count unsupported, with its reason), the table with its units,
// a plot per mask and pass, and the NCCL table.
func TestSimulateRun(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "sim")
	out, errOut, code := captureRun(t, "--log-level", "warn", "simulate", "--gpus", "8,16,32", "--masks", "causal,causal_document_long",
		"--tokens-per-rank", "1K", "--heads", "16:4", "--out", dir)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	rows, _, err := results.ReadRows(results.MergedPath(dir, filepath.Base(dir)))
	if err != nil {
		t.Fatal(err)
	}
	// Meshes: 8 GPUs usp/loongtrain 2x4, 4x2; 16: 2x8, 4x4, 8x2; 32: 2x16 .. 16x2 (16 heads);
	// plus balanced, ring-p2p, ring-allgather, ulysses each; x 2 passes x (causal once,
	// whatever the seed; causal_document_long the default 5 samples).
	meshes := map[int64]int{8: 4 + 2*2, 16: 4 + 2*3, 32: 4 + 2*4}
	want := 0
	for _, m := range meshes {
		want += m * 2 * (1 + 5)
	}
	if len(rows) != want {
		t.Fatalf("%d rows, want %d", len(rows), want)
	}
	for _, r := range rows {
		switch {
		case r.Method == "ulysses" && r.WorldSize == 32:
			if r.Status != results.StatusUnsupported || !strings.Contains(r.Reason, "16 query heads do not split over 32") {
				t.Fatalf("ulysses on 32 GPUs with 16 heads: %s %q", r.Status, r.Reason)
			}
		case r.Status != results.StatusPredicted || r.Bench != "simulate" || r.TFLOPs == nil || *r.TFLOPs <= 0 || r.MedianMs == nil ||
			r.ExposedCommShare == nil || r.Bottleneck == "" || !strings.Contains(r.ModelParams, `"machine"`) || r.CommBytes == nil || r.Reason != "":
			t.Fatalf("row %+v", r)
		}
		if r.SeqLen != r.WorldSize*1024 {
			t.Fatalf("weak scaling: seqlen %d on %d GPUs", r.SeqLen, r.WorldSize)
		}
		// The spread over samples: on every predicted document row, over the samples up
		// to its own; none on causal (one sample).
		switch {
		case r.Status != results.StatusPredicted:
		case r.Mask == "causal":
			if r.SamplesN != nil || r.Sample != 0 {
				t.Fatalf("causal row with sample %d, samples_n %v", r.Sample, r.SamplesN)
			}
		case r.SamplesN == nil || *r.SamplesN != r.Sample+1 || *r.SamplesTFLOPsMin > *r.SamplesTFLOPsMedian || *r.SamplesTFLOPsMedian > *r.SamplesTFLOPsMax ||
			*r.TFLOPs < *r.SamplesTFLOPsMin || *r.TFLOPs > *r.SamplesTFLOPsMax || r.DocSource == "":
			t.Fatalf("document row: sample %d, samples_n %v, spread %v-%v-%v, doc_source %q", r.Sample, r.SamplesN, r.SamplesTFLOPsMin, r.SamplesTFLOPsMedian, r.SamplesTFLOPsMax, r.DocSource)
		}
	}
	for _, w := range []string{"(TFLOP/s)", "h100-ib", "fa3-h100", "*", "# Rows: ", "median over the mask samples (min-max)", "5 mask sample(s)"} {
		if !strings.Contains(out, w) {
			t.Errorf("table without %q:\n%s", w, out)
		}
	}
	plots, _ := filepath.Glob(filepath.Join(dir, "plots", "*_scaling.png"))
	if len(plots) != 4 {
		t.Errorf("%d plots, want 4 (2 masks x 2 passes): %v", len(plots), plots)
	}
	out, errOut, code = captureRun(t, "simulate", "--nccl-table", "--gpus", "16", "--nccl-sizes", "1K:1M")
	if code != 0 || !strings.Contains(out, "all_gather_perf") || !strings.Contains(out, "busbw") || strings.Count(out, "\n") < 40 {
		t.Fatalf("nccl table: exit %d %s\n%s", code, errOut, out)
	}
}

// TestSimulateRefusesAMillionGPUs: everything that grows with the GPU count is counted
// before any work, so a million GPUs is one line and exit 2 at once (it used to pass the
// guard, which counted only documents, and die out of memory after a minute). The
// command runs with a deadline so that a guard that lets it through fails the test
// instead of taking the machine's memory.
func TestSimulateRefusesAMillionGPUs(t *testing.T) {
	type result struct {
		errOut string
		code   int
	}
	done := make(chan result, 1)
	go func() {
		_, errOut, code := captureRun(t, "simulate", "--gpus", "1000000", "--masks", "full", "--methods", "ring-p2p", "--out", filepath.Join(t.TempDir(), "out"))
		done <- result{errOut, code}
	}()
	select {
	case r := <-done:
		args := []string{"simulate", "--gpus", "1000000"}
		checkUsageError(t, args, r.code, r.errOut, "--gpus 1000000")
		if !strings.Contains(r.errOut, "host memory") || strings.Count(strings.TrimSpace(r.errOut), "\n") > 0 {
			t.Fatalf("want one line about host memory, got %q", r.errOut)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("simulate --gpus 1000000 was not refused within 20 s: the guard let it start")
	}
}

// TestSimulateNoMeshIsUnsupported: on 3 GPUs usp and loongtrain have no 2-D mesh; their
// rows are unsupported with the reason, never Ring P2P's numbers under their names.
func TestSimulateNoMeshIsUnsupported(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "sim")
	_, errOut, code := captureRun(t, "--log-level", "warn", "simulate", "--gpus", "3", "--methods", "usp,loongtrain,ring-p2p",
		"--masks", "full", "--tokens-per-rank", "1K", "--heads", "16:4", "--samples", "1", "--out", dir)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	rows, _, err := results.ReadRows(results.MergedPath(dir, filepath.Base(dir)))
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]int{}
	for _, r := range rows {
		seen[r.Method]++
		switch r.Method {
		case "usp", "loongtrain":
			if r.Status != results.StatusUnsupported || r.TFLOPs != nil || !strings.Contains(r.Reason, "3 ranks have none") {
				t.Errorf("%s on 3 GPUs: status %s, tflops %v, reason %q; want unsupported, no numbers, the reason", r.Method, r.Status, r.TFLOPs, r.Reason)
			}
		case "ring-p2p":
			if r.Status != results.StatusPredicted {
				t.Errorf("ring-p2p on 3 GPUs: %s %q", r.Status, r.Reason)
			}
		}
	}
	if seen["usp"] != 2 || seen["loongtrain"] != 2 || seen["ring-p2p"] != 2 {
		t.Errorf("rows per method %v, want 2 each (fwd, bwd)", seen)
	}
}

// biasH200 are the cases of the H200 rows the model misses by more than 15%, and its
// limits for them (see TestSimulatePredictsH200Rows): known biases of the model, not of
// the rows. None since the rows of 2026-12-05 and the refit of the kernel's preset and the
// helpers' rate; the rows of 2026-12-03 (ed9018a) had two, ring-allgather's full backward
// (-15.9%: its one call of 8K queries against 64K keys then ran 12% slower than ulysses's
// calls of the same FLOPs; -2.1% now) and ring-p2p's forward on causal_document_long
// (+15.4%, the merges priced at twice their cost; -2.4 to +13.8% now).
var biasH200 = map[string]float64{}

// TestSimulatePredictsH200Rows holds the model to a measurement: 8 ranks on one H200,
// longca cp --ranks 8 --kernel cuda, 8K tokens per rank, 64:8, d128, the 4 CP masks, one
// sample (seed 42), every case checked, the kernel alone measured in the same run
// (--baseline measure), measured on 2026-12-05 02:59-03:08 UTC at ab7811c in one call of
// scripts/device/cp-final.sh (spmd/cp/balanced_gpu.sh: the six methods, --ulysses 2
// --ring 4 --windows 2, balanced on the mesh its plan chose per mask). Rank 0's ok rows
// (48: 6 methods x 4 masks x fwd, bwd) are in testdata/h200/cp-ranks8-cuda-8k-ab7811c.arrow
// (the rows of 5074d11 beside them, one run per method with --overlap, serve the CP time
// estimate's tests). Every case is predicted within 15% by the h200-1gpu machine and the
// longca-cuda-h200 kernel model (fitted to the same run's kernel-alone rows:
// TestH200PresetFitsKernelAlone; the helpers' rate fitted to these rows: sim/machine.go),
// so that a model change cannot drift away from a measurement unnoticed. Balanced is
// compared on its measured mesh: the test checks that the prediction took the same one.
//
// Before these rows: the rows of 2026-12-03 (ed9018a, call 9's kernel) against that day's
// preset, median 3.6%, worst 15.9% (48 cases); the same preset and helpers against these
// rows, median 14.4%, worst 29.8% (the kernel got faster: 559 / 465 TFLOP/s dense then, 617
// / 539 now; the new preset with the old helpers' 3 TB/s: median 5.0%, worst 24.2%).
// Now: median 3.0%, worst 13.8%.
func TestSimulatePredictsH200Rows(t *testing.T) {
	measured := filepath.Join("testdata", "h200", "cp-ranks8-cuda-8k-ab7811c.arrow")
	dir := filepath.Join(t.TempDir(), "sim")
	out, errOut, code := captureRun(t, "--log-level", "warn", "simulate", "--gpus", "8", "--machine", "h200-1gpu", "--tokens-per-rank", "8K",
		"--masks", "full,causal,full_document_long,causal_document_long", "--samples", "1", "--ulysses", "2", "--ring", "4", "--windows", "2",
		"--compare", measured, "--out", dir)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	compared := 0
	for _, l := range strings.Split(out, "\n") {
		f := strings.Fields(l)
		if len(f) != 11 || !strings.HasSuffix(f[7], "%") || strings.HasPrefix(l, "#") {
			continue
		}
		e, err := strconv.ParseFloat(strings.TrimSuffix(f[7], "%"), 64)
		if err != nil {
			t.Fatalf("line %q: %v", l, err)
		}
		compared++
		limit := 15.0
		if b, ok := biasH200[f[0]+" "+f[1]+" "+f[2]]; ok {
			limit = b
		}
		if math.Abs(e) > limit {
			t.Errorf("%s %s %s: predicted %s ms, measured %s ms (%+.1f%%, limit %g%%)", f[0], f[1], f[2], f[6], f[5], e, limit)
		}
	}
	if compared != 48 {
		t.Fatalf("compared %d cases, want the 48 measured:\n%s", compared, out)
	}
	// balanced's rows pair by method alone: its predicted mesh must be the one measured.
	mesh := func(path string) map[string]string {
		rows, _, err := results.ReadRows(path)
		if err != nil {
			t.Fatal(err)
		}
		m := map[string]string{}
		for _, r := range rows {
			if r.Method == "balanced" && r.Ulysses != nil && r.Ring != nil {
				m[r.Mask+" "+r.Pass] = fmt.Sprintf("%dx%d", *r.Ulysses, *r.Ring)
			}
		}
		return m
	}
	want, got := mesh(measured), mesh(results.MergedPath(dir, filepath.Base(dir)))
	if len(want) != 8 {
		t.Fatalf("balanced: %d measured cases with a mesh, want 8", len(want))
	}
	for k, w := range want {
		if got[k] != w {
			t.Errorf("balanced %s: predicted on mesh %q, measured on %s", k, got[k], w)
		}
	}
	i := strings.Index(out, "# compared")
	t.Log(strings.TrimSpace(out[i : strings.Index(out[i:], "\n")+i]))
}

// TestDocumentsReachKernelAndSimulate: --dist, --counts and --max-doc reach the masks of
// longca kernel and longca simulate, and their rows record them (cp: TestCPOnUserDocuments).
func TestDocumentsReachKernelAndSimulate(t *testing.T) {
	tmp := t.TempDir()
	dir := filepath.Join(tmp, "sim")
	_, errOut, code := captureRun(t, "--log-level", "warn", "simulate", "--gpus", "8", "--dist", "magiattention", "--masks", "causal_document",
		"--methods", "ulysses", "--samples", "2", "--tokens-per-rank", "1K", "--heads", "16:4", "--out", dir)
	if code != 0 {
		t.Fatalf("simulate: exit %d: %s", code, errOut)
	}
	rows, _, err := results.ReadRows(results.MergedPath(dir, filepath.Base(dir)))
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 2*2 {
		t.Fatalf("%d rows, want 2 samples x 2 passes", len(rows))
	}
	for _, r := range rows {
		if r.DocSource != "magiattention" || r.MaxDoc == nil || *r.MaxDoc != 8*1024/4 || !strings.Contains(r.MaskParams, `"max_doc":"2048"`) {
			t.Fatalf("simulate row: doc_source %q, max_doc %v, params %s; want magiattention, S/4 = 2048", r.DocSource, r.MaxDoc, r.MaskParams)
		}
	}
	counts := filepath.Join(tmp, "c.txt")
	if err := os.WriteFile(counts, []byte("100\n300\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	dir = filepath.Join(tmp, "kernel")
	_, errOut, code = captureRun(t, "--log-level", "warn", "kernel", "--kernels", "ref", "--masks", "causal_document,causal", "--seqlens", "512",
		"--heads", "4:2", "--head-dim", "16", "--passes", "fwd", "-w", "0", "-n", "1", "--counts", counts, "--max-doc", "64", "--out", dir)
	if code != 0 {
		t.Fatalf("kernel: exit %d: %s", code, errOut)
	}
	if rows, _, err = results.ReadRows(filepath.Join(dir, results.FileName(filepath.Base(dir), 0, 1))); err != nil {
		t.Fatal(err)
	}
	seen := 0
	for _, r := range rows {
		switch r.Mask {
		case "causal_document":
			seen++
			if !strings.HasPrefix(r.DocSource, "counts:c.txt@") || r.MaxDoc == nil || *r.MaxDoc != 64 || r.Status != results.StatusOK {
				t.Fatalf("kernel row: %s doc_source %q max_doc %v", r.Status, r.DocSource, r.MaxDoc)
			}
		case "causal":
			if r.DocSource != "" || r.MaxDoc != nil {
				t.Fatalf("causal has no documents: doc_source %q max_doc %v", r.DocSource, r.MaxDoc)
			}
		}
	}
	if seen != 1 {
		t.Fatalf("%d causal_document rows, want 1", seen)
	}
}

// TestSimulateProgressOnStderr: simulate says on stderr, as kernel and cp do, how many
// cases it will run and its bound before the first, then a line as each GPU count
// finishes with how many remain; stdout, the tables that tests and notebooks parse, is
// the same as with the progress lines off (--log-level warn) and holds none of them.
func TestSimulateProgressOnStderr(t *testing.T) {
	args := func(out string) []string {
		return []string{"simulate", "--gpus", "8,16", "--masks", "causal", "--methods", "ring-p2p,ulysses", "--passes", "fwd",
			"--tokens-per-rank", "1K", "--heads", "16:4", "--run-id", "progress", "--out", out}
	}
	out, errOut, code := captureRun(t, append([]string{"--log-format", "json", "--log-level", "info"}, args(filepath.Join(t.TempDir(), "a"))...)...)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	quiet, qerr, code := captureRun(t, append([]string{"--log-level", "warn"}, args(filepath.Join(t.TempDir(), "b"))...)...)
	if code != 0 || qerr != "" {
		t.Fatalf("--log-level warn: exit %d, stderr %q", code, qerr)
	}
	// The closing "# rows:" line names the folder and the wall time; the rest must match.
	table := func(s string) string { return s[:strings.LastIndex(strings.TrimSuffix(s, "\n"), "\n")+1] }
	if table(out) != table(quiet) || !strings.Contains(out, "# Rows: 4") {
		t.Errorf("stdout with progress:\n%s\nwithout:\n%s", out, quiet)
	}
	if strings.Contains(out, "simulate sweep") || strings.Contains(out, "simulate gpus") || strings.Contains(out, `"level"`) {
		t.Errorf("progress on stdout:\n%s", out)
	}
	// 2 cases (ring-p2p, ulysses; causal has one sample) on each of 8 and 16 GPUs.
	var lines, gpus []string
	for _, line := range strings.Split(strings.TrimSpace(errOut), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("stderr line %q: %v", line, err)
		}
		switch m["message"] {
		case "simulate sweep":
			if d, err := time.ParseDuration(fmt.Sprint(m["at_most"])); err != nil || d < 0 {
				t.Errorf("at_most %v: %v", m["at_most"], err)
			}
			lines = append(lines, fmt.Sprintf("sweep cases=%v gpus=%v", m["cases"], m["gpus"]))
		case "simulate gpus":
			if _, err := time.ParseDuration(fmt.Sprint(m["eta"])); err != nil {
				t.Errorf("eta %v: %v", m["eta"], err)
			}
			done := m["done"]
			if done == 3.0 {
				done = 2.0 // a case of the other GPU count may end first: 2 or 3 done
			}
			lines = append(lines, fmt.Sprintf("done=%v/%v gpus_left=%v", done, m["of"], m["gpus_left"]))
			gpus = append(gpus, fmt.Sprint(m["gpus"]))
		}
	}
	// The cases run in parallel: a GPU count may finish before the one listed first.
	slices.Sort(gpus)
	want := []string{"sweep cases=4 gpus=[8 16]", "done=2/4 gpus_left=1", "done=4/4 gpus_left=0"}
	if strings.Join(lines, "\n") != strings.Join(want, "\n") || !slices.Equal(gpus, []string{"16", "8"}) {
		t.Errorf("progress lines:\n%s\nwant:\n%s\n(GPU counts %v)\nstderr:\n%s", strings.Join(lines, "\n"), strings.Join(want, "\n"), gpus, errOut)
	}
}

// simulate --kernel-rows fits one kind of row: a folder of two variants' runs (merged
// --variant runs), or rows of another dtype than the simulation's, is refused with one
// line, exit 2, instead of one fit over both (it had fitted sm80 and sm90 rows together);
// one run whose cases took different paths (cuDNN's sdpa-op and composite) is fitted.
func TestSimulateKernelRowsOfOneKind(t *testing.T) {
	tmp := t.TempDir()
	src := filepath.Join(tmp, "src")
	args := []string{"--log-level", "warn", "kernel", "--kernels", "ref", "--masks", "causal,full", "--seqlens", "128,256", "--heads", "2:1", "--head-dim", "16",
		"-w", "0", "-n", "1", "--out", src, "--run-id", "src"}
	if _, errOut, code := captureRun(t, args...); code != 0 {
		t.Fatalf("%v: exit %d: %s", args, code, errOut)
	}
	rows, err := results.Load(src)
	if err != nil {
		t.Fatal(err)
	}
	mixed := filepath.Join(tmp, "mixed")
	for _, v := range []string{"sm80", "sm90"} {
		w, err := results.Create(mixed, "run-"+v, 0, 1)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range rows {
			r.RunID, r.KernelVariant = "run-"+v, v+" wide-fwd"
			if err := w.Write(r); err != nil {
				t.Fatal(err)
			}
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
	}
	sim := []string{"simulate", "--gpus", "8", "--methods", "ring-p2p", "--masks", "causal", "--passes", "fwd"}
	a := append(append([]string{}, sim...), "--kernel-rows", mixed, "--out", filepath.Join(tmp, "s1"))
	_, errOut, code := captureRun(t, a...)
	checkUsageError(t, a, code, errOut, "--kernel-rows "+mixed+": its ref rows are of 2 variants on the same cases (sm80, sm90)", "give the rows of one")
	a = append(append([]string{}, sim...), "--kernel-rows", src, "--dtype", "fp16", "--out", filepath.Join(tmp, "s2"))
	_, errOut, code = captureRun(t, a...)
	checkUsageError(t, a, code, errOut, "its ref rows are bf16, the simulation's --dtype fp16", "give rows of fp16")
	a = append(append([]string{}, sim...), "--kernel-rows", src, "--out", filepath.Join(tmp, "s3"))
	if _, errOut, code := captureRun(t, a...); code != 0 {
		t.Fatalf("%v: exit %d: %s", a, code, errOut)
	}
	paths := filepath.Join(tmp, "paths")
	w, err := results.Create(paths, "one", 0, 1)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rows {
		r.RunID, r.KernelVariant = "one", "fwd sdpa-op eng=3 dense"
		if r.Mask == "full" {
			r.KernelVariant = "fwd composite eng=8 dense"
		}
		if err := w.Write(r); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	a = append(append([]string{}, sim...), "--kernel-rows", paths, "--out", filepath.Join(tmp, "s4"))
	if _, errOut, code := captureRun(t, a...); code != 0 {
		t.Fatalf("one run of two paths: %v: exit %d: %s", a, code, errOut)
	}
}

// TestCompareRowsShareDevicesAsTheMachine: --compare reads rows against a machine whose
// ranks share GPUs as the rows' did. The H200 rows of 8 ranks on one GPU against the default
// machine (a GPU a rank) read every case about 87% fast before this check; now that is one
// line naming --machine h200-1gpu and exit 2, before any simulation. Mixed rows keep those
// that match (and rows written before ranks_per_device), the others named in a warning.
func TestCompareRowsShareDevicesAsTheMachine(t *testing.T) {
	measured := filepath.Join("testdata", "h200", "cp-ranks8-cuda-8k-ab7811c.arrow")
	_, errOut, code := captureRun(t, "simulate", "--gpus", "8", "--compare", measured, "--out", t.TempDir())
	if code != 2 || !strings.Contains(errOut, "--machine h200-1gpu") || !strings.Contains(errOut, "48 with 8 ranks on a device where --machine h100-ib puts 1") {
		t.Errorf("8-rank-per-GPU rows against h100-ib: exit %d, %q; want exit 2 naming --machine h200-1gpu", code, errOut)
	}
	row := func(world int64, perDevice *int64) results.Row {
		return results.Row{Bench: "cp", Device: "NVIDIA H200", WorldSize: world, RanksPerDevice: perDevice}
	}
	host := row(8, results.Ptr(int64(4)))
	host.Device = "cpu" // cp --links: the machine file's ranks_per_gpu shapes the links
	eight, one := results.Ptr(int64(8)), results.Ptr(int64(1))
	for _, c := range []struct {
		machine string
		rows    []results.Row
		kept    int // -1: a usage error
	}{
		{"h100-ib", []results.Row{row(8, eight), row(8, one), row(8, nil)}, 2},
		{"h100-ib", []results.Row{row(8, eight)}, -1},
		{"h200-1gpu", []results.Row{row(8, eight), row(8, nil)}, 2},
		{"h200-1gpu", []results.Row{row(1, one), row(8, one)}, 1}, // one rank alone on the GPU: min(8, 1)
		{"h200-1gpu", []results.Row{row(8, one)}, -1},
		{"h100-ib", []results.Row{host}, 1},
	} {
		kept, err := sharedAsMachine(c.rows, sim.MachinePresets[c.machine], "m.arrow")
		if c.kept < 0 && err != nil && c.rows[0].RanksPerDevice == one && !strings.Contains(err.Error(), "h100-ib or h200-ib give each rank its own GPU") {
			t.Errorf("rows of a GPU a rank against %s: %v, want the hint of a machine of a GPU a rank", c.machine, err)
		}
		var exit cli.ExitCoder
		switch {
		case c.kept < 0 && (!errors.As(err, &exit) || exit.ExitCode() != 2):
			t.Errorf("%s, %d rows: %v, want a usage error", c.machine, len(c.rows), err)
		case c.kept >= 0 && (err != nil || len(kept) != c.kept):
			t.Errorf("%s: kept %d rows (%v), want %d", c.machine, len(kept), err, c.kept)
		}
	}
}
