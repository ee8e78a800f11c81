package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/longca/longca/kernels"
	"github.com/longca/longca/kernels/ref"
	"github.com/longca/longca/results"
	"github.com/longca/longca/tensor"
)

// wrongKernel is the reference with a corrupted output: `longca cp --check` must exit 1.
type wrongKernel struct{ *ref.Kernel }

func (wrongKernel) Name() string { return "cp-test-wrong" }

func (w wrongKernel) Forward(ctx context.Context, p kernels.Problem, q, k, v, out, lse tensor.Tensor) error {
	if err := w.Kernel.Forward(ctx, p, q, k, v, out, lse); err != nil {
		return err
	}
	o := out.(*tensor.Host)
	o.Set(0, o.At(0)+1)
	return nil
}

func init() {
	kernels.Register("cp-test-wrong", "test only: ref with a wrong output element", func(kernels.Options) (kernels.Kernel, error) {
		return wrongKernel{ref.New(ref.Options{})}, nil
	})
}

func TestCPUsageErrors(t *testing.T) {
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"--methods", "ulysses", "--ranks", "96", "--heads", "64:8"}, "64 query heads do not split over 96"},
		{[]string{"--methods", "usp", "--ranks", "8", "--ulysses", "3", "--ring", "2"}, "mesh 3x2 (--ulysses x --ring) has 6 ranks"},
		{[]string{"--methods", "loongtrain", "--ranks", "8", "--ulysses", "2", "--windows", "3"}, "3 windows (--windows) do not divide a ring of 4"},
		{[]string{"--methods", "ring-p2p", "--ranks", "8", "--seqlen", "1001", "--sharding", "contiguous"}, "1001 tokens do not split over 8 ranks"},
		{[]string{"--methods", "ring-p"}, "--methods: unknown method"},
		{[]string{"--sharding", "diagonal"}, "--sharding"},
		{[]string{"--cp-layout", "diagonal"}, "--cp-layout"},
		{[]string{"--tokens-per-rank", "0"}, "--tokens-per-rank"},
		{[]string{"--seqlen", "4K", "--tokens-per-rank", "1K"}, "both given"},
		{[]string{"--samples", "0"}, "--samples"},
		{[]string{"--passes", "sideways"}, "--passes"},
		{[]string{"--kernel", "nope"}, "--kernel"},
		{[]string{"--ranks", "0"}, "--ranks"},
		{[]string{"--ranks", "8", "--backend", "nccl"}, "--ranks 8 with --backend nccl"},
		{[]string{"--cp-ulysses", "2,x"}, "--cp-ulysses"},
		{[]string{"--cp-ulysses", "-2"}, "--cp-ulysses"},
		{[]string{"--methods", "balanced", "--ranks", "8", "--cp-ulysses", "3"}, "--cp-ulysses 3 does not divide 8 ranks"},
		// A dry run plans every rank: a world too big to plan is refused before it is
		// planned (it ran out of memory in balanced's dispatch), naming --ranks.
		{[]string{"--ranks", "100000"}, "--ranks 100000, --tokens-per-rank 8K: planning 100000 ranks"},
		{[]string{"--ranks", "1000000", "--seqlen", "1M"}, "--ranks 1000000, --seqlen 1M: planning"},
		{[]string{"--ranks", "1000000", "--seqlen", "8K"}, "--seqlen 8192 over 1000000 ranks leaves 991808 of them without a token"},
	}
	for _, c := range cases {
		args := append([]string{"cp", "--dry-run"}, c.args...)
		_, errOut, code := captureRun(t, args...)
		checkUsageError(t, args, code, errOut, c.want)
	}
}

// dryRunMeshes runs longca cp --dry-run with args and returns its output and its cases as
// "method mesh" pairs joined by spaces.
func dryRunMeshes(t *testing.T, args ...string) (out, meshes string) {
	t.Helper()
	out, errOut, code := captureRun(t, append([]string{"cp", "--dry-run"}, args...)...)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var ms []string
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		if !strings.HasPrefix(l, "#") {
			f := strings.Fields(l)
			ms = append(ms, f[0]+" "+f[1])
		}
	}
	return out, strings.Join(ms, " ")
}

func TestCPDryRun(t *testing.T) {
	out, got := dryRunMeshes(t, "--ranks", "8", "--methods", "all", "--masks", "causal", "--heads", "64:8")
	// balanced, ring-allgather, ring-p2p, ulysses: one mesh (balanced's the plan's choice on
	// causal at 8 ranks, 64:8: 8x1, spmd/cp's TestBalancedMeshChoice); usp and loongtrain:
	// 2x4 and 4x2.
	want := "balanced 8x1-b4096-s0 loongtrain 2x4-hf loongtrain 4x2-hf ring-allgather 1x8 ring-p2p 1x8 ulysses 8x1 usp 2x4-hf usp 4x2-hf"
	if got != want {
		t.Fatalf("cases %q, want %q\n%s", got, want, out)
	}
	if !strings.Contains(out, "seqlen 65536") {
		t.Fatalf("weak scaling: want seqlen 8 x 8K = 65536 in\n%s", out)
	}
}

// TestCPBalancedMeshes: --cp-ulysses names balanced's meshes, one case each (U x 8/U);
// without it the plan chooses per mask; usp's --ulysses does not reach balanced.
func TestCPBalancedMeshes(t *testing.T) {
	out, got := dryRunMeshes(t, "--ranks", "8", "--methods", "balanced,usp", "--masks", "causal",
		"--heads", "64:8", "--ulysses", "2", "--ring", "4", "--cp-ulysses", "1,2,4,8")
	// the default block is 512 tokens times U (spmd/cp.DefaultBlock)
	want := "balanced 1x8-b512-s1 balanced 2x4-hf-b1024-s1 balanced 4x2-hf-b2048-s1 balanced 8x1-b4096-s0 usp 2x4-hf"
	if got != want {
		t.Fatalf("cases %q, want %q\n%s", got, want, out)
	}
}

func TestCPInProcessRun(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "cp")
	out, errOut, code := captureRun(t, "--log-level", "warn", "cp", "--ranks", "4", "--methods", "ring-p2p,usp,loongtrain,balanced",
		"--masks", "causal_document", "--tokens-per-rank", "32", "--heads", "4:2", "--head-dim", "8",
		"--samples", "2", "-w", "0", "-n", "2", "--passes", "fwd,bwd", "--windows", "2", "--overlap", "--cp-ulysses", "1", "--out", dir)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	rows, _, err := results.ReadRows(results.MergedPath(dir, filepath.Base(dir)))
	if err != nil {
		t.Fatal(err)
	}
	// 4 cases (usp and loongtrain on 2x2) x 2 samples x 2 passes x 4 ranks.
	if len(rows) != 4*2*2*4 {
		t.Fatalf("%d rows, want 64", len(rows))
	}
	for _, r := range rows {
		if r.Status != results.StatusOK || r.CheckPass == nil || !*r.CheckPass || r.MedianMs == nil || r.CommBytes == nil || *r.CommBytes <= 0 {
			t.Fatalf("row %+v", r)
		}
		if r.Reason != "" { // set when the counted bytes differ from CommBytes
			t.Fatalf("row reason %q", r.Reason)
		}
		if r.SeqLen != 128 || r.WorldSize != 4 || r.Bench != "cp" {
			t.Fatalf("row seqlen %d world %d bench %s", r.SeqLen, r.WorldSize, r.Bench)
		}
		if r.Method == "loongtrain" && *r.Windows != 2 {
			t.Fatalf("loongtrain row with %d windows, want 2", *r.Windows)
		}
		if (r.CPBlock != nil) != (r.Method == "balanced") || r.Method == "balanced" && (*r.CPBlock != 4 || r.CPStages == nil || *r.CPStages != 1) {
			t.Fatalf("%s row with block %v, stages %v (balanced: the default block 4 and 1 stage on 4 ranks of 32 tokens)", r.Method, r.CPBlock, r.CPStages)
		}
		if r.Method == "balanced" && (*r.Ulysses != 1 || *r.Ring != 4) {
			t.Fatalf("balanced row on mesh %dx%d, want --cp-ulysses 1's 1x4", *r.Ulysses, *r.Ring)
		}
		// Efficiency: 4 in-process ranks share the host; the kernel alone at 32 tokens
		// was measured in the run; the pass was timed again without transfers.
		if r.RanksPerDevice == nil || *r.RanksPerDevice != 4 || r.DeviceTFLOPs == nil || *r.DeviceTFLOPs != 4**r.TFLOPs {
			t.Fatalf("ranks per device %v, device TFLOP/s %v for %v per rank", r.RanksPerDevice, r.DeviceTFLOPs, *r.TFLOPs)
		}
		if r.KernelTFLOPs == nil || *r.KernelTFLOPs <= 0 || r.KernelTFLOPsFrom != "measured" || r.CPEfficiency == nil ||
			*r.CPEfficiency != *r.DeviceTFLOPs / *r.KernelTFLOPs || r.NoCommMs == nil || *r.NoCommMs <= 0 {
			t.Fatalf("efficiency columns: kernel %v from %q, efficiency %v, no-comm %v", r.KernelTFLOPs, r.KernelTFLOPsFrom, r.CPEfficiency, r.NoCommMs)
		}
	}
	if !strings.Contains(out, "(TFLOP/s)") || !strings.Contains(out, "# Cases: 8  Rows: 16") || !strings.Contains(out, "4 ranks share one device") {
		t.Fatalf("table without its units row, summary or shared-device line:\n%s", out)
	}
	if !strings.Contains(out, "usp") || !strings.Contains(out, " OK") {
		t.Fatalf("table:\n%s", out)
	}
}

// TestCPLayoutRecorded: balanced's key layout is a setting recorded in every row
// (cp_layout): blocks by default with the ref kernel (it runs any mask in one call), thd
// when asked, every row checked; the other methods leave it empty.
func TestCPLayoutRecorded(t *testing.T) {
	for _, layout := range []string{"auto", "thd"} {
		dir := filepath.Join(t.TempDir(), "cp")
		_, errOut, code := captureRun(t, "--log-level", "warn", "cp", "--ranks", "4", "--methods", "balanced,ring-p2p",
			"--masks", "causal_document", "--tokens-per-rank", "32", "--heads", "4:2", "--head-dim", "8",
			"--samples", "1", "-w", "0", "-n", "1", "--passes", "fwd,bwd", "--cp-layout", layout, "--out", dir)
		if code != 0 {
			t.Fatalf("--cp-layout %s: exit %d: %s", layout, code, errOut)
		}
		rows, _, err := results.ReadRows(results.MergedPath(dir, filepath.Base(dir)))
		if err != nil {
			t.Fatal(err)
		}
		want := map[string]string{"auto": "blocks", "thd": "thd"}[layout]
		for _, r := range rows {
			if r.Status != results.StatusOK || r.CheckPass == nil || !*r.CheckPass {
				t.Fatalf("--cp-layout %s: %s row %s: %s", layout, r.Method, r.Status, r.Reason)
			}
			if r.Method == "balanced" && !strings.HasPrefix(r.CPLayout, want) || r.Method != "balanced" && r.CPLayout != "" {
				t.Fatalf("--cp-layout %s: %s row with cp_layout %q", layout, r.Method, r.CPLayout)
			}
		}
	}
}

func TestCPWrongResultExitsNonZero(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "cp")
	out, errOut, code := captureRun(t, "--log-level", "warn", "cp", "--ranks", "2", "--methods", "ring-p2p",
		"--masks", "causal", "--tokens-per-rank", "32", "--heads", "2:2", "--head-dim", "8",
		"--samples", "1", "-n", "1", "--passes", "fwd", "--kernel", "cp-test-wrong", "--out", dir)
	if code != 1 || !strings.Contains(errOut, "failed the check") || !strings.Contains(out, "WRONG") {
		t.Fatalf("exit %d, stderr %q, stdout %q; want exit 1 and a WRONG row", code, errOut, out)
	}
}

// TestCPSkippedMeshIsARow: a mesh a method cannot run here (Ulysses over 4 ranks with 2
// query heads) is an unsupported row on every rank, not a log line, and the others run.
func TestCPSkippedMeshIsARow(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "cp")
	out, errOut, code := captureRun(t, "--log-level", "warn", "cp", "--ranks", "4", "--methods", "ring-p2p,ulysses",
		"--masks", "causal", "--tokens-per-rank", "16", "--heads", "2:2", "--head-dim", "8", "--samples", "2",
		"-w", "0", "-n", "1", "--passes", "fwd", "--baseline", "none", "--out", dir)
	// --methods names ulysses, which cannot run at all: a usage error naming the heads.
	if code != 2 || !strings.Contains(errOut, "2 query heads do not split over 4") {
		t.Fatalf("exit %d, stderr %q", code, errOut)
	}
	out, errOut, code = captureRun(t, "--log-level", "warn", "cp", "--ranks", "4", "--masks", "causal", "--tokens-per-rank", "16",
		"--heads", "2:2", "--head-dim", "8", "--samples", "2", "-w", "0", "-n", "1", "--passes", "fwd", "--baseline", "none", "--out", dir)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	rows, _, err := results.ReadRows(results.MergedPath(dir, filepath.Base(dir)))
	if err != nil {
		t.Fatal(err)
	}
	unsupported := map[string]int{}
	for _, r := range rows {
		if r.Status == results.StatusUnsupported {
			unsupported[r.Method]++
			if !strings.Contains(r.Reason, "do not split") || r.MedianMs != nil {
				t.Fatalf("unsupported row %+v", r)
			}
		} else if r.Status != results.StatusOK {
			t.Fatalf("row %s %s: %s %q", r.Method, r.Mask, r.Status, r.Reason)
		}
	}
	// ulysses (4x1) cannot split 2 heads (usp and loongtrain on 2x2 can): one row per
	// rank (a skipped case is written once, not per sample).
	if len(unsupported) != 1 || unsupported["ulysses"] != 4 {
		t.Fatalf("unsupported rows by method: %v\n%s", unsupported, out)
	}
	if !strings.Contains(out, "unsupported") {
		t.Fatalf("table does not show the unsupported cases:\n%s", out)
	}
}

// fakeGPU is the host posing as another device: a kernel on it is a device kernel that
// is not a cp.DeviceKernel.
type fakeGPU struct{ tensor.CPU }

func (*fakeGPU) Name() string { return "fake-gpu" }

type fakeGPUKernel struct {
	*ref.Kernel
	dev *fakeGPU
}

func (k fakeGPUKernel) Name() string          { return "cp-test-gpu" }
func (k fakeGPUKernel) Device() tensor.Device { return k.dev }

func init() {
	kernels.Register("cp-test-gpu", "test only: ref on a device that is not internal/cuda", func(kernels.Options) (kernels.Kernel, error) {
		return fakeGPUKernel{ref.New(ref.Options{}), &fakeGPU{}}, nil
	})
}

// TestCPStagedOnlyWhenAsked: a device kernel the methods cannot keep on its device is
// refused (exit 2, naming --staged) unless --staged, and then its rows say so and name
// the device it computed on.
func TestCPStagedOnlyWhenAsked(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "cp")
	args := []string{"--log-level", "warn", "cp", "--ranks", "2", "--methods", "ring-p2p", "--masks", "causal",
		"--tokens-per-rank", "16", "--heads", "2:2", "--head-dim", "8", "--samples", "1", "-w", "0", "-n", "1",
		"--passes", "fwd", "--baseline", "none", "--kernel", "cp-test-gpu", "--out", dir}
	_, errOut, code := captureRun(t, args...)
	checkUsageError(t, args, code, errOut, "--staged")
	_, errOut, code = captureRun(t, append(args, "--staged")...)
	if code != 0 {
		t.Fatalf("with --staged: exit %d: %s", code, errOut)
	}
	rows, _, err := results.ReadRows(results.MergedPath(dir, filepath.Base(dir)))
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rows {
		if r.Kernel != "cp-test-gpu+staged" || r.Status != results.StatusOK {
			t.Fatalf("row kernel %q status %s %q", r.Kernel, r.Status, r.Reason)
		}
		// the device the kernel computes on, not the host its tensors pass through (the rows
		// said "cpu"); the two in-process ranks share it
		if r.Device != "fake-gpu" || r.DeviceIndex == nil || r.RanksPerDevice == nil || *r.RanksPerDevice != 2 {
			t.Fatalf("row device %q index %v ranks_per_device %v, want fake-gpu, 0, 2", r.Device, r.DeviceIndex, r.RanksPerDevice)
		}
	}
}

// TestCPOnUserDocuments: --counts and --max-doc reach the masks of every sample, the rows
// record the source (with a hash of the counts) and the cap, and a case of several
// samples carries its spread.
func TestCPOnUserDocuments(t *testing.T) {
	tmp := t.TempDir()
	counts := filepath.Join(tmp, "my_counts.txt")
	if err := os.WriteFile(counts, []byte("# tokens per document\n7\n50\n90\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(tmp, "cp")
	_, errOut, code := captureRun(t, "--log-level", "warn", "cp", "--ranks", "4", "--methods", "ring-p2p",
		"--masks", "causal_document", "--tokens-per-rank", "32", "--heads", "4:2", "--head-dim", "8", "--counts", counts,
		"--max-doc", "0.25", "--samples", "3", "-w", "0", "-n", "1", "--passes", "fwd", "--baseline", "none", "--out", dir)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	rows, _, err := results.ReadRows(results.MergedPath(dir, filepath.Base(dir)))
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 3*4 {
		t.Fatalf("%d rows, want 3 samples x 4 ranks", len(rows))
	}
	for _, r := range rows {
		if r.Status != results.StatusOK || !strings.HasPrefix(r.DocSource, "counts:my_counts.txt@") || r.MaxDoc == nil || *r.MaxDoc != 32 {
			t.Fatalf("row: status %s, doc_source %q, max_doc %v; want ok, counts:my_counts.txt@HASH, 32", r.Status, r.DocSource, r.MaxDoc)
		}
		var p map[string]string
		if err := json.Unmarshal([]byte(r.MaskParams), &p); err != nil {
			t.Fatal(err)
		}
		for _, f := range strings.Split(p["doc_lengths"], ",") {
			n, _ := strconv.Atoi(f)
			// Drawn from {7, 50, 90} and cut at 32: 7, 32, 18, 26 (or shorter where S ends).
			if n < 1 || n > 32 {
				t.Fatalf("document of %d tokens in %s: not cut at the cap of 32", n, p["doc_lengths"])
			}
		}
		want := r.Sample + 1
		if r.SamplesN == nil || *r.SamplesN != want || !(*r.SamplesTFLOPsMin <= *r.SamplesTFLOPsMedian && *r.SamplesTFLOPsMedian <= *r.SamplesTFLOPsMax) {
			t.Fatalf("sample %d: spread columns n=%v median=%v min=%v max=%v", r.Sample, r.SamplesN, r.SamplesTFLOPsMedian, r.SamplesTFLOPsMin, r.SamplesTFLOPsMax)
		}
	}
	for _, bad := range [][]string{
		{"--max-doc", "2.5"}, {"--max-doc", "-3"}, {"--dist", "nope"}, {"--dist", "pile", "--counts", counts}, {"--counts", filepath.Join(tmp, "absent.txt")},
	} {
		args := append([]string{"cp", "--dry-run", "--ranks", "2"}, bad...)
		_, errOut, code := captureRun(t, args...)
		checkUsageError(t, args, code, errOut, bad[0])
	}
}

// A 2-D method named beside others on a rank count without a 2-D mesh (usp and
// loongtrain on one rank: spmd/cp/overhead.sh names every method) gives unsupported rows
// and the others run; named alone, nothing can run: a usage error.
func TestCPNamedMethodWithoutMeshIsARow(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "cp")
	_, errOut, code := captureRun(t, "--log-level", "warn", "cp", "--methods", "ring-p2p,usp,loongtrain",
		"--masks", "causal", "--tokens-per-rank", "32", "--heads", "2:2", "--head-dim", "8", "--samples", "1",
		"-w", "0", "-n", "1", "--passes", "fwd", "--baseline", "none", "--out", dir)
	if code != 0 {
		t.Fatalf("exit %d, stderr %q", code, errOut)
	}
	rows, _, err := results.ReadRows(results.MergedPath(dir, filepath.Base(dir)))
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]results.Status{}
	for _, r := range rows {
		got[r.Method] = r.Status
		if r.Status == results.StatusUnsupported && !strings.Contains(r.Reason, "2-D mesh") {
			t.Fatalf("%s: reason %q", r.Method, r.Reason)
		}
	}
	if got["ring-p2p"] != results.StatusOK || got["usp"] != results.StatusUnsupported || got["loongtrain"] != results.StatusUnsupported {
		t.Fatalf("statuses by method: %v", got)
	}
	_, errOut, code = captureRun(t, "--log-level", "warn", "cp", "--methods", "usp", "--masks", "causal", "--tokens-per-rank", "32",
		"--heads", "2:2", "--head-dim", "8", "--samples", "1", "-w", "0", "-n", "1", "--passes", "fwd", "--out", filepath.Join(t.TempDir(), "u"))
	if code != 2 || !strings.Contains(errOut, "2-D mesh") {
		t.Fatalf("usp alone on one rank: exit %d, stderr %q", code, errOut)
	}
}

// Rank 0's progress lines of `longca cp` carry the estimate's time left (eta), which
// ends at 0s with the last row.
func TestCPProgressETA(t *testing.T) {
	args := []string{"--log-format", "json", "cp", "--ranks", "2", "--kernel", "ref", "--methods", "ring-p2p", "--masks", "causal,full",
		"--tokens-per-rank", "128", "--heads", "2:1", "--head-dim", "16", "--samples", "2", "-w", "0", "-n", "1", "--baseline", "none",
		"--out", t.TempDir()}
	_, errOut, code := captureRun(t, args...)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var etas []string
	for _, l := range strings.Split(errOut, "\n") {
		if !strings.Contains(l, `"message":"cp"`) {
			continue
		}
		i := strings.Index(l, `"eta":"`)
		if i < 0 {
			t.Fatalf("a progress line without eta: %s", l)
		}
		etas = append(etas, strings.SplitN(l[i+7:], `"`, 2)[0])
	}
	if len(etas) != 8 { // 2 masks x 2 samples x 2 passes
		t.Fatalf("%d progress lines, want 8:\n%s", len(etas), errOut)
	}
	if etas[len(etas)-1] != "0s" {
		t.Errorf("the last row's eta is %s, want 0s", etas[len(etas)-1])
	}
}

// --sharding changes a CP result (padding, balance), so every row records it as the
// method resolved it (cp_sharding): the default is zigzag for ring-p2p and contiguous for
// ulysses; --sharding contiguous makes ring-p2p contiguous.
func TestCPRowsRecordSharding(t *testing.T) {
	for _, c := range []struct {
		flag string
		want map[string]string
	}{
		{"default", map[string]string{"ring-p2p": "zigzag", "ulysses": "contiguous"}},
		{"contiguous", map[string]string{"ring-p2p": "contiguous", "ulysses": "contiguous"}},
	} {
		dir := t.TempDir()
		args := []string{"cp", "--ranks", "2", "--kernel", "ref", "--methods", "ring-p2p,ulysses", "--masks", "causal", "--sharding", c.flag,
			"--tokens-per-rank", "64", "--heads", "2:2", "--head-dim", "8", "--samples", "1", "-w", "0", "-n", "1", "--passes", "fwd",
			"--no-check", "--baseline", "none", "--out", dir}
		if _, errOut, code := runCLI(t, args...); code != 0 {
			t.Fatalf("%v: exit %d: %s", args, code, errOut)
		}
		rows, err := results.Load(dir)
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]string{}
		for _, r := range rows {
			got[r.Method] = r.CPSharding
		}
		for m, w := range c.want {
			if got[m] != w {
				t.Errorf("--sharding %s: %s rows record cp_sharding %q, want %q", c.flag, m, got[m], w)
			}
		}
	}
}

// A dispatch block longer than a rank's tokens is fine on a Ulysses mesh (a unit holds U
// ranks' tokens); only one past the whole sequence is refused (the review of the fourth
// hardening pass: bounding it by a rank's tokens refused a 2 x 4 mesh's 1K block).
func TestCPBlockBoundIsTheSequence(t *testing.T) {
	args := []string{"cp", "--kernel", "ref", "--ranks", "8", "--methods", "balanced", "--cp-ulysses", "2", "--heads", "4:2",
		"--tokens-per-rank", "512", "--cp-block", "1024", "--dry-run"}
	if _, errOut, code := captureRun(t, args...); code != 0 {
		t.Errorf("%v: exit %d: %s", args, code, errOut)
	}
	args = []string{"cp", "--kernel", "ref", "--ranks", "4", "--tokens-per-rank", "128", "--cp-block", "1024", "--dry-run"}
	_, errOut, code := captureRun(t, args...)
	checkUsageError(t, args, code, errOut, "--cp-block 1024: give at most the sequence's 512 tokens (4 ranks of --tokens-per-rank 128)")
}

// nondetKernel is the reference saying it has no deterministic backward (as cuDNN's).
type nondetKernel struct{ *ref.Kernel }

func (nondetKernel) Name() string                { return "cp-test-nondet" }
func (nondetKernel) DeterministicBackward() bool { return false }

func init() {
	kernels.Register("cp-test-nondet", "test only: ref without a deterministic backward", func(kernels.Options) (kernels.Kernel, error) {
		return nondetKernel{ref.New(ref.Options{})}, nil
	})
}

// cp --deterministic with a kernel that has no deterministic backward: its backward rows
// would have timed the ordinary backward and said nothing (a kernel sweep gives them
// unsupported rows); cp has one kernel, so it is bad input, said once, exit 2. Forward
// only, or the reference (deterministic), runs.
func TestCPDeterministicNeedsSuchABackward(t *testing.T) {
	out := t.TempDir()
	base := []string{"--log-level", "warn", "cp", "--ranks", "2", "--methods", "ring-p2p", "--masks", "causal", "--tokens-per-rank", "16", "--heads", "2:1",
		"--head-dim", "8", "--samples", "1", "-w", "0", "-n", "1", "--baseline", "none", "--deterministic"}
	args := append(append([]string{}, base...), "--kernel", "cp-test-nondet", "--out", filepath.Join(out, "x"))
	_, errOut, code := captureRun(t, args...)
	checkUsageError(t, args, code, errOut, "--deterministic: kernel cp-test-nondet has no deterministic backward here", "time --passes fwd")
	for i, extra := range [][]string{{"--kernel", "ref"}, {"--kernel", "cp-test-nondet", "--passes", "fwd"}} {
		args := append(append(append([]string{}, base...), extra...), "--out", filepath.Join(out, "ok"+strconv.Itoa(i)))
		if _, errOut, code := captureRun(t, args...); code != 0 {
			t.Fatalf("%v: exit %d: %s", args, code, errOut)
		}
	}
}

// cp --baseline FILE: a case the file has no ok kernel row for (here a kernel run at
// another length than each rank's) gets rows without kernel_tflops, as before, and now a
// warning naming the case (it was a silent null); so does a file whose rows drew other
// documents (it had served); a file at each rank's length and the run's documents serves.
func TestCPBaselineFileWarnsOfMissingCases(t *testing.T) {
	tmp := t.TempDir()
	kernelRun := func(name, seqlen string, extra ...string) string {
		dir := filepath.Join(tmp, name)
		args := []string{"--log-level", "warn", "kernel", "--kernels", "ref", "--seqlens", seqlen, "--heads", "2:1", "--head-dim", "8", "-w", "0", "-n", "1",
			"--masks", "causal_document_long", "--passes", "fwd", "--out", dir}
		args = append(args, extra...)
		if _, errOut, code := captureRun(t, args...); code != 0 {
			t.Fatalf("%v: exit %d: %s", args, code, errOut)
		}
		return dir
	}
	other, same, docs := kernelRun("other", "128"), kernelRun("same", "64"), kernelRun("docs", "64", "--dist", "prolong64k")
	for _, tc := range []struct {
		base string
		want bool
		warn string
	}{{other, false, "no ok kernel row of this case"}, {same, true, ""}, {docs, false, "with documents prolong64k and this run's on cpu with documents pile"}} {
		dir := filepath.Join(tmp, "cp-"+filepath.Base(tc.base))
		args := []string{"cp", "--ranks", "2", "--tokens-per-rank", "64", "--heads", "2:1", "--head-dim", "8", "-w", "0", "-n", "1", "--samples", "1",
			"--masks", "causal_document_long", "--methods", "ring-p2p", "--passes", "fwd", "--baseline", tc.base, "--out", dir}
		_, errOut, code := captureRun(t, args...)
		if code != 0 {
			t.Fatalf("%v: exit %d: %s", args, code, errOut)
		}
		if warned := strings.Contains(errOut, "--baseline: "); warned == tc.want || !strings.Contains(errOut, tc.warn) {
			t.Fatalf("baseline %s: warned %v, want %v (%q):\n%s", tc.base, warned, !tc.want, tc.warn, errOut)
		}
		rows, _, err := results.ReadRows(results.MergedPath(dir, filepath.Base(dir)))
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range rows {
			if (r.KernelTFLOPs != nil) != tc.want || (r.CPEfficiency != nil) != tc.want {
				t.Fatalf("baseline %s: row kernel_tflops %v cp_efficiency %v, want set %v", tc.base, r.KernelTFLOPs, r.CPEfficiency, tc.want)
			}
		}
	}
}

// cp --baseline FILE on causal_document with the default documents: the whole length
// (16K) draws prolong64k and each rank's (8K) pile, which the kernel file at 8K drew too; the
// file serves (the first version of the documents' match compared the run's source and
// refused it, where --baseline measure times pile at 8K as the file did).
func TestCPBaselineFileDefaultDocuments(t *testing.T) {
	tmp := t.TempDir()
	kdir := filepath.Join(tmp, "k")
	args := []string{"--log-level", "warn", "kernel", "--kernels", "ref", "--seqlens", "8K", "--heads", "1:1", "--head-dim", "8", "-w", "0", "-n", "1",
		"--masks", "causal_document", "--passes", "fwd", "--settle", "0", "--check=false", "--out", kdir}
	if _, errOut, code := captureRun(t, args...); code != 0 {
		t.Fatalf("%v: exit %d: %s", args, code, errOut)
	}
	dir := filepath.Join(tmp, "cp")
	args = []string{"--log-level", "warn", "cp", "--ranks", "2", "--tokens-per-rank", "8K", "--heads", "1:1", "--head-dim", "8", "-w", "0", "-n", "1", "--samples", "1",
		"--masks", "causal_document", "--methods", "ring-p2p", "--passes", "fwd", "--check=false", "--baseline", kdir, "--out", dir}
	_, errOut, code := captureRun(t, args...)
	if code != 0 || strings.Contains(errOut, "--baseline: ") {
		t.Fatalf("%v: exit %d, want the file taken without a warning:\n%s", args, code, errOut)
	}
	rows, _, err := results.ReadRows(results.MergedPath(dir, filepath.Base(dir)))
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rows {
		if r.DocSource != "prolong64k" || r.CPEfficiency == nil {
			t.Fatalf("row doc_source %q cp_efficiency %v, want prolong64k and an efficiency", r.DocSource, r.CPEfficiency)
		}
	}
}

// A folder of kernel runs at two head dims: report keeps them apart (causal_d16 beside
// causal_d8, each its own rate, never their mean), and --masks takes those labels.
func TestReportKeepsHeadDimsApart(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "runs")
	for _, d := range []string{"8", "16"} {
		args := []string{"--log-level", "warn", "kernel", "--kernels", "ref", "--masks", "causal", "--seqlens", "64", "--heads", "2:1", "--head-dim", d,
			"-w", "0", "-n", "1", "--passes", "fwd", "--out", dir, "--run-id", "d" + d}
		if _, errOut, code := captureRun(t, args...); code != 0 {
			t.Fatalf("%v: exit %d: %s", args, code, errOut)
		}
	}
	out, errOut, code := captureRun(t, "report", dir)
	if code != 0 || !strings.Contains(out, "\n  causal_d8 ") || !strings.Contains(out, "\n  causal_d16 ") || !strings.Contains(out, "Cases: 2  Rows: 2") {
		t.Fatalf("report: exit %d %s\n%s", code, errOut, out)
	}
	out, errOut, code = captureRun(t, "report", dir, "--masks", "causal_d16")
	if code != 0 || !strings.Contains(out, "Cases: 1  Rows: 1") {
		t.Fatalf("report --masks causal_d16: exit %d %s\n%s", code, errOut, out)
	}
}
