package present

import (
	"strings"
	"testing"

	"github.com/longca/longca/results"
)

// settingRow is an ok kernel row of causal 1K, 8:2, fwd, d128 bf16 batch 1 at rate tf.
func settingRow(kernel string, tf float64) results.Row {
	return results.Row{Bench: "kernel", Kernel: kernel, Mask: "causal", MaskParams: "{}", SeqLen: 1024, HeadsQ: 8, HeadsKV: 2, HeadDim: 128,
		DType: "bf16", Batch: 1, Pass: "fwd", Status: results.StatusOK, TFLOPs: results.Ptr(tf), FLOPs: 1e9}
}

func caseMasks(s Summary) []string {
	var m []string
	for _, c := range s.Cases {
		m = append(m, c.Mask)
	}
	return m
}

// TestSummarizeKeepsProblemsApart: rows of one mask, length, heads and pass but another
// head dim, dtype, batch, window or document source are other cases, labelled by what
// differs, each with its own rate; never one cell of their mean.
func TestSummarizeKeepsProblemsApart(t *testing.T) {
	for _, tc := range []struct {
		name  string
		other func(*results.Row)
		want  []string
	}{
		{"head dim", func(r *results.Row) { r.HeadDim = 64 }, []string{"causal_d128", "causal_d64"}},
		{"dtype", func(r *results.Row) { r.DType = "fp16" }, []string{"causal_bf16", "causal_fp16"}},
		{"batch", func(r *results.Row) { r.Batch = 4 }, []string{"causal_batch1", "causal_batch4"}},
		{"window", func(r *results.Row) { r.MaskParams = `{"window":"512"}` }, []string{"causal_none", "causal_window512"}},
		{"documents", func(r *results.Row) { r.DocSource = "file:my.txt@0123456789ab" }, []string{"causal_none", "causal_file-my.txt-0123456789ab"}},
		{"head dim and dtype", func(r *results.Row) { r.HeadDim, r.DType = 64, "fp16" }, []string{"causal_d128_bf16", "causal_d64_fp16"}},
	} {
		a, b := settingRow("cuda", 100), settingRow("cuda", 300)
		tc.other(&b)
		s := Summarize([]results.Row{a, b}, "")
		if got := caseMasks(s); strings.Join(got, ",") != strings.Join(tc.want, ",") {
			t.Fatalf("%s: cases %v, want %v", tc.name, got, tc.want)
		}
		for i, want := range []float64{100, 300} {
			if c := s.Cells[s.Cases[i]]["cuda"]; c.TFLOPs != want || c.N != 1 {
				t.Fatalf("%s: case %s cell %+v, want its own rate %g", tc.name, s.Cases[i].Mask, c, want)
			}
		}
	}
}

// TestSummarizeOneProblemUnchanged: a file of one problem keeps its plain mask labels; the
// document samples of a case (other lengths drawn) are averaged as before, and a window
// sized by the length differs only between lengths, which are cases already.
func TestSummarizeOneProblemUnchanged(t *testing.T) {
	var rows []results.Row
	for i, lens := range []string{`"100,924"`, `"512,512"`} {
		r := settingRow("cuda", 100+100*float64(i))
		r.Mask, r.Sample, r.DocSource = "causal_document", int64(i), "pile"
		r.MaskParams = `{"dist":"pile","doc_count":"2","doc_lengths":` + lens + `}`
		rows = append(rows, r)
	}
	for _, n := range []int64{1024, 2048} {
		r := settingRow("cuda", 50)
		r.Mask, r.SeqLen, r.MaskParams = "sliding_window", n, `{"window":"`+map[int64]string{1024: "128", 2048: "256"}[n]+`"}`
		rows = append(rows, r)
	}
	s := Summarize(rows, "")
	if got := strings.Join(caseMasks(s), ","); got != "causal_document,sliding_window,sliding_window" {
		t.Fatalf("cases %s", got)
	}
	if c := s.Cells[s.Cases[0]]["cuda"]; c.N != 2 || c.TFLOPs != 150 {
		t.Fatalf("document samples: %+v, want the mean of 2 samples, 150", c)
	}
}

// TestCPTableKeepsLengthsApart: two runs of one method, mesh and mask at other lengths
// (a merged folder of 8K and 16K tokens a rank) are two lines, each with its own time.
func TestCPTableKeepsLengthsApart(t *testing.T) {
	var rows []results.Row
	for _, n := range []int64{65536, 131072} {
		r := results.Row{Bench: "cp", Method: "ring-p2p", Ulysses: results.Ptr(int64(1)), Ring: results.Ptr(int64(8)), Mask: "causal",
			SeqLen: n, HeadsQ: 64, HeadsKV: 8, HeadDim: 128, DType: "bf16", Batch: 1, Pass: "fwd", Status: results.StatusOK}
		r.MedianMs, r.TFLOPs = results.Ptr(float64(n)/1000), results.Ptr(float64(n)/10000)
		rows = append(rows, r)
	}
	data := cpTableLines(t, rows)
	if len(data) != 2 {
		t.Fatalf("%d lines, want 2:\n%s", len(data), strings.Join(data, "\n"))
	}
	for i, want := range [][2]string{{"65536", "65.536"}, {"131072", "131.072"}} {
		if f := strings.Fields(data[i]); f[3] != want[0] || f[7] != want[1] {
			t.Fatalf("line %d %q: want seqlen %s and time %s", i, data[i], want[0], want[1])
		}
	}
}

// TestComparisonKeepsHeadDimsApart: measured CP rows at two head dims beside a prediction
// at one: the prediction is compared with its own head dim's time only (200 ms, error 0),
// never with the mean of both (150 ms).
func TestComparisonKeepsHeadDimsApart(t *testing.T) {
	row := func(d int64, ms float64, st results.Status) results.Row {
		r := results.Row{Bench: "cp", Method: "ring-p2p", Ulysses: results.Ptr(int64(1)), Ring: results.Ptr(int64(8)), Mask: "causal", WorldSize: 8,
			SeqLen: 65536, HeadsQ: 64, HeadsKV: 8, HeadDim: d, DType: "bf16", Pass: "fwd", Status: st}
		r.MedianMs, r.TFLOPs = results.Ptr(ms), results.Ptr(100.0)
		return r
	}
	var b strings.Builder
	measured := []results.Row{row(64, 100, results.StatusOK), row(128, 200, results.StatusOK)}
	if err := WriteComparison(&b, "m", measured, []results.Row{row(128, 200, results.StatusPredicted)}); err != nil {
		t.Fatal(err)
	}
	if out := b.String(); !strings.Contains(out, "200.000      200.000    +0.0%") || !strings.Contains(out, "# compared 1 cases") {
		t.Fatalf("want the d128 prediction against the d128 measurement alone:\n%s", out)
	}
	// the d64 case, which no prediction matched, is counted and named, not dropped unseen
	if out := b.String(); !strings.Contains(out, "# 1 measured cases have no prediction here (ring-p2p 1)") || !strings.Contains(out, "length, pass, documents") {
		t.Fatalf("want the unmatched d64 case named, the pass among the causes:\n%s", out)
	}
	if strings.Contains(b.String(), "ran on the CPU") {
		t.Errorf("a hint of CPU rows for rows of no CPU:\n%s", b.String())
	}
	// CPU-timed rows 100x slower than a GPU's prediction: the line says how to predict them
	b.Reset()
	cpu := row(128, 20000, results.StatusOK)
	cpu.Device = "cpu"
	if err := WriteComparison(&b, "m", []results.Row{cpu}, []results.Row{row(128, 200, results.StatusPredicted)}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "# the measured rows ran on the CPU: predict their kernel with --kernel-rows") {
		t.Errorf("CPU rows 99%% off: no hint to calibrate:\n%s", b.String())
	}
}

func cpRow(method string, u, ring int64, ms float64) results.Row {
	r := results.Row{Bench: "cp", Method: method, Kernel: "cuda", Ulysses: results.Ptr(u), Ring: results.Ptr(ring), Mask: "causal", WorldSize: u * ring,
		SeqLen: 65536, HeadsQ: 64, HeadsKV: 8, HeadDim: 128, DType: "bf16", Batch: 1, Pass: "fwd", Status: results.StatusOK}
	r.MedianMs, r.TFLOPs = results.Ptr(ms), results.Ptr(1000/ms)
	return r
}

func kernelsOf(s Summary) string { return strings.Join(s.Kernels, ",") }

// TestColumnsKeepVariantsAndMeshesApart: two variants of one kernel in one case are two
// columns, named by the variant asked for (not the path words after it, which differ
// from case to case of one run); balanced on 1x4 and 4x1 two columns; one run of several
// methods keeps its plain labels.
func TestColumnsKeepVariantsAndMeshesApart(t *testing.T) {
	a, b := settingRow("cuda", 100), settingRow("cuda", 300)
	a.KernelVariant, b.KernelVariant = "sm80", "sm90 wide-fwd"
	if s := Summarize([]results.Row{a, b}, ""); kernelsOf(s) != "cuda[sm80],cuda[sm90]" || len(s.Cases) != 1 {
		t.Fatalf("variants: columns %s, %d cases", kernelsOf(s), len(s.Cases))
	}
	// one run: the path words differ between cases, the variant does not
	c := settingRow("cuda", 200)
	c.SeqLen, c.KernelVariant = 2048, "sm90 persistent-fwd"
	if s := Summarize([]results.Row{b, c}, ""); kernelsOf(s) != "cuda" {
		t.Fatalf("one run: columns %s, want cuda", kernelsOf(s))
	}
	d, e := settingRow("cudnn", 100), settingRow("cudnn", 300)
	d.KernelVariant, e.KernelVariant = "fwd sdpa-op eng=3 dense", "fwd composite eng=8 dense"
	if s := Summarize([]results.Row{d, e}, ""); kernelsOf(s) != "cudnn[sdpa-op],cudnn[composite]" {
		t.Fatalf("cudnn: columns %s", kernelsOf(s))
	}
	f := settingRow("cuda", 100)
	f.KernelVariant = "sm90 deterministic"
	if s := Summarize([]results.Row{b, f}, ""); kernelsOf(s) != "cuda[sm90],cuda[sm90+deterministic]" {
		t.Fatalf("deterministic: columns %s", kernelsOf(s))
	}
	s := Summarize([]results.Row{cpRow("balanced", 1, 4, 10), cpRow("balanced", 4, 1, 20)}, "")
	if kernelsOf(s) != "balanced-1x4,balanced-4x1" {
		t.Fatalf("balanced meshes: columns %s", kernelsOf(s))
	}
	s = Summarize([]results.Row{cpRow("ring-p2p", 1, 4, 10), cpRow("ulysses", 4, 1, 20), cpRow("usp", 2, 2, 15)}, "")
	if kernelsOf(s) != "ring-p2p,ulysses,usp-2x2" || len(s.Cases) != 1 || s.Cases[0].Mask != "causal" {
		t.Fatalf("one cp run: columns %s, cases %v", kernelsOf(s), caseMasks(s))
	}
	// the same card kind on other indices is one device; another kind is another case
	g, h := settingRow("cuda", 100), settingRow("cuda", 300)
	g.Device, h.Device = "cuda:0 NVIDIA H100 80GB HBM3", "cuda:3 NVIDIA H100 80GB HBM3"
	if s := Summarize([]results.Row{g, h}, ""); len(s.Cases) != 1 {
		t.Fatalf("one card kind: cases %v", caseMasks(s))
	}
	h.Device = "cuda:0 NVIDIA H200"
	if s := Summarize([]results.Row{g, h}, ""); strings.Join(caseMasks(s), ",") != "causal_H100-80GB-HBM3,causal_H200" {
		t.Fatalf("two cards: cases %v", caseMasks(s))
	}
}

// TestCPTableKeepsRunsApart: two `cp` runs in one folder, of other shardings or other
// kernels, are lines of their own; one run whose methods shard differently is not split.
func TestCPTableKeepsRunsApart(t *testing.T) {
	lines := func(rows []results.Row) []string {
		var out []string
		for _, l := range cpTableLines(t, rows) {
			f := strings.Fields(l)
			out = append(out, f[0]+" "+f[2]+" "+f[7])
		}
		return out
	}
	a, b := cpRow("ring-p2p", 1, 8, 10), cpRow("ring-p2p", 1, 8, 20)
	a.CPSharding, b.CPSharding = "contiguous", "zigzag"
	if got := strings.Join(lines([]results.Row{a, b}), "; "); got != "ring-p2p causal_contiguous 10.000; ring-p2p causal_zigzag 20.000" {
		t.Fatalf("shardings: %s", got)
	}
	b.CPSharding, b.Kernel = "contiguous", "cudnn"
	if got := strings.Join(lines([]results.Row{a, b}), "; "); got != "ring-p2p[cuda] causal 10.000; ring-p2p[cudnn] causal 20.000" {
		t.Fatalf("kernels: %s", got)
	}
	// runs under other NCCL settings (the env column), and a run without any beside a file
	// written before the column (env "") read as one
	b.Kernel, a.CPSharding, b.CPSharding = "cuda", "contiguous", "contiguous"
	a.Env, b.Env = `{"NCCL_ALGO":"Ring"}`, `{"NCCL_ALGO":"Tree","NCCL_PROTO":"Simple"}`
	if got := strings.Join(lines([]results.Row{a, b}), "; "); got != "ring-p2p causal_NCCL-ALGO-Ring 10.000; ring-p2p causal_NCCL-ALGO-Tree-NCCL-PROTO-Simple 20.000" {
		t.Fatalf("env: %s", got)
	}
	a.Env, b.Env = "{}", ""
	if got := strings.Join(lines([]results.Row{a, b}), "; "); got != "ring-p2p causal 15.000" {
		t.Fatalf("env {} beside an older file's: %s", got)
	}
	a.Env, b.Env = "", ""
	u := cpRow("ulysses", 8, 1, 30)
	a.CPSharding, u.CPSharding = "zigzag", "contiguous"
	if got := strings.Join(lines([]results.Row{a, u}), "; "); got != "ring-p2p causal 10.000; ulysses causal 30.000" {
		t.Fatalf("one run: %s", got)
	}
	// one case's document samples, each with the layout and stages its plan took (--cp-layout
	// auto): averaged, as samples are
	s0, s1 := cpRow("balanced", 1, 8, 10), cpRow("balanced", 1, 8, 20)
	s0.Sample, s1.Sample = 0, 1
	s0.CPLayout, s1.CPLayout, s0.CPStages, s1.CPStages = "thd 3/8", "thd 5/8", results.Ptr(int64(2)), results.Ptr(int64(3))
	if got := strings.Join(lines([]results.Row{s0, s1}), "; "); got != "balanced causal 15.000" {
		t.Fatalf("samples of one case: %s", got)
	}
}

// TestSimTableKeepsBalancedMeshesApart: simulate's best mesh of balanced over 1x8 and 8x1
// is the faster of the two, never their mean read as a spread over samples.
func TestSimTableKeepsBalancedMeshesApart(t *testing.T) {
	var rows []results.Row
	for _, m := range [][3]float64{{1, 8, 10}, {8, 1, 20}} {
		r := cpRow("balanced", int64(m[0]), int64(m[1]), m[2])
		r.Status, r.ExposedCommShare = results.StatusPredicted, results.Ptr(0.0)
		rows = append(rows, r)
	}
	best, keys, _ := bestCells(rows)
	c := best[keys[0]]["balanced"]
	if c.n != 1 || c.tflops != 100 || c.label != "balanced-1x8" {
		t.Fatalf("best cell %+v, want balanced-1x8 alone at 100", *c)
	}
}

// cpTableLines are WriteCPTable's data lines of rows (not its '#' lines).
func cpTableLines(t *testing.T, rows []results.Row) []string {
	t.Helper()
	var b strings.Builder
	if err := WriteCPTable(&b, "cp", rows); err != nil {
		t.Fatal(err)
	}
	var data []string
	for _, l := range strings.Split(strings.TrimRight(b.String(), "\n"), "\n") {
		if !strings.HasPrefix(l, "#") {
			data = append(data, l)
		}
	}
	return data
}

// TestOneRunNotSplit: what differs within one run's case is not a setting: a mask
// parameter drawn per sample (prefix_lm's prefix), the path a kernel named for a sample
// (cuDNN's sdpa-op on a single document, composite on ragged ones), a sample that failed
// before its timing wrote settle_ms; and simulate's lines at a fixed length, one a GPU
// count, keep ring-p2p's own mesh ("=").
func TestOneRunNotSplit(t *testing.T) {
	a, b := settingRow("cuda", 100), settingRow("cuda", 300)
	a.Mask, b.Mask, a.Seed, b.Seed = "prefix_lm_causal", "prefix_lm_causal", 42, 43
	a.MaskParams, b.MaskParams = `{"prefix":"162"}`, `{"prefix":"24"}`
	if s := Summarize([]results.Row{a, b}, ""); strings.Join(caseMasks(s), ",") != "prefix_lm_causal" || s.Cells[s.Cases[0]]["cuda"].N != 2 {
		t.Fatalf("per-sample prefix: cases %v", caseMasks(s))
	}
	c, d := cpRow("ring-p2p", 1, 8, 10), cpRow("ring-p2p", 1, 8, 20)
	c.Kernel, d.Kernel, c.Seed, d.Seed = "cudnn", "cudnn", 42, 43
	c.KernelVariant, d.KernelVariant = "fwd sdpa-op eng=3 dense", "fwd composite eng=8 dense"
	if got := strings.Join(cpTableLines(t, []results.Row{c, d}), "\n"); !strings.HasPrefix(strings.TrimSpace(got), "ring-p2p 1x8  causal") || strings.Count(got, "\n") != 0 {
		t.Fatalf("per-sample cudnn paths:\n%s", got)
	}
	e, f := settingRow("cuda", 100), settingRow("cuda", 0)
	e.SettleMs, f.Seed, f.Status, f.TFLOPs = results.Ptr(250.0), 43, results.StatusOOM, nil
	if s := Summarize([]results.Row{e, f}, ""); strings.Join(caseMasks(s), ",") != "causal" {
		t.Fatalf("a failed sample: cases %v", caseMasks(s))
	}
	var rows []results.Row
	for _, n := range []int64{8, 16} {
		r := cpRow("ring-p2p", 1, n, 10)
		r.Status, r.ExposedCommShare = results.StatusPredicted, results.Ptr(0.0)
		rows = append(rows, r)
	}
	best, keys, _ := bestCells(rows)
	for _, k := range keys {
		if c := best[k]["ring-p2p"]; c.label != "ring-p2p" {
			t.Fatalf("fixed length on %d GPUs: label %s, want ring-p2p", k.gpus, c.label)
		}
	}
}

// TestComparisonCPUHintAfterCalibration: CPU rows of 4 ranks sharing the host's cores
// against a prediction whose kernel model is already the CPU reference's (--calibrate
// ref) on a machine of one rank a GPU: the line names the sharing and ranks_per_gpu, not
// --calibrate ref again (it said "predict their kernel with ... --calibrate ref" to a run
// given --calibrate ref).
func TestComparisonCPUHintAfterCalibration(t *testing.T) {
	meas := cpRow("ring-p2p", 1, 4, 300)
	meas.Device, meas.Backend, meas.Kernel, meas.RanksPerDevice = "cpu", "local", "ref", results.Ptr(int64(4))
	pred := cpRow("ring-p2p", 1, 4, 100)
	pred.Status, pred.Device, pred.Backend = results.StatusPredicted, "h100-ib", "sim"
	pred.ModelParams = `{"machine":{"name":"h100-ib","ranks_per_gpu":1},"kernel_model":{"name":"fa3-h100+fit","source":"fa3-h100; fitted to ref timed here (out/x-calibration.rank-0-of-1.arrow): fwd 8 rows","fitted_to":"ref"}}`
	var b strings.Builder
	if err := WriteComparison(&b, "m", []results.Row{meas}, []results.Row{pred}); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	if strings.Contains(out, "--calibrate ref") {
		t.Errorf("the kernel hint again, to a prediction calibrated on ref:\n%s", out)
	}
	if !strings.Contains(out, "4 ranks shared this host's cores") || !strings.Contains(out, `"ranks_per_gpu": 4`) {
		t.Errorf("want the sharing of the cores named, with ranks_per_gpu:\n%s", out)
	}
	// a machine whose ranks share as the measured ones did: no such line
	b.Reset()
	pred.ModelParams = `{"machine":{"name":"cpu4","ranks_per_gpu":4},"kernel_model":{"name":"cpu-ref"}}`
	if err := WriteComparison(&b, "m", []results.Row{meas}, []results.Row{pred}); err != nil {
		t.Fatal(err)
	}
	if out := b.String(); strings.Contains(out, "shared this host's cores") || strings.Contains(out, "--calibrate ref") {
		t.Errorf("a hint where the machine shares as the rows did:\n%s", out)
	}
	// a GPU's kernel model: the kernel hint as before
	b.Reset()
	pred.ModelParams = `{"machine":{"name":"h100-ib","ranks_per_gpu":1},"kernel_model":{"name":"fa3-h100"}}`
	pred.MedianMs = results.Ptr(1.0)
	if err := WriteComparison(&b, "m", []results.Row{meas}, []results.Row{pred}); err != nil {
		t.Fatal(err)
	}
	if out := b.String(); !strings.Contains(out, "predict their kernel with --kernel-rows") {
		t.Errorf("GPU kernel model against CPU rows: no kernel hint:\n%s", out)
	}
}
