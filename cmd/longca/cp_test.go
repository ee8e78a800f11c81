package main

import (
	"context"
	"path/filepath"
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
		{[]string{"--tokens-per-rank", "0"}, "--tokens-per-rank"},
		{[]string{"--seqlen", "4K", "--tokens-per-rank", "1K"}, "both given"},
		{[]string{"--samples", "0"}, "--samples"},
		{[]string{"--passes", "sideways"}, "--passes"},
		{[]string{"--kernel", "nope"}, "--kernel"},
		{[]string{"--ranks", "0"}, "--ranks"},
		{[]string{"--ranks", "8", "--backend", "nccl"}, "--ranks 8 with --backend nccl"},
	}
	for _, c := range cases {
		args := append([]string{"cp", "--dry-run"}, c.args...)
		_, errOut, code := captureRun(t, args...)
		checkUsageError(t, args, code, errOut, c.want)
	}
}

func TestCPDryRun(t *testing.T) {
	out, errOut, code := captureRun(t, "cp", "--dry-run", "--ranks", "8", "--masks", "causal", "--heads", "64:8")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	// ring-allgather, ring-p2p, ulysses: one mesh; usp and loongtrain: 2x4 and 4x2.
	var meshes []string
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		if !strings.HasPrefix(l, "#") {
			f := strings.Fields(l)
			meshes = append(meshes, f[0]+" "+f[1])
		}
	}
	want := "loongtrain 2x4 loongtrain 4x2 ring-allgather 1x8 ring-p2p 1x8 ulysses 8x1 usp 2x4 usp 4x2"
	if got := strings.Join(meshes, " "); got != want {
		t.Fatalf("cases %q, want %q\n%s", got, want, out)
	}
	if !strings.Contains(out, "seqlen 65536") {
		t.Fatalf("weak scaling: want seqlen 8 x 8K = 65536 in\n%s", out)
	}
}

func TestCPInProcessRun(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "cp")
	out, errOut, code := captureRun(t, "--log-level", "warn", "cp", "--ranks", "4", "--methods", "ring-p2p,usp,loongtrain",
		"--masks", "causal_document", "--tokens-per-rank", "32", "--heads", "4:2", "--head-dim", "8",
		"--samples", "2", "-w", "0", "-n", "2", "--passes", "fwd,bwd", "--windows", "2", "--out", dir)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	rows, _, err := results.ReadRows(filepath.Join(dir, "merged.arrow"))
	if err != nil {
		t.Fatal(err)
	}
	// 3 cases (usp and loongtrain on 2x2) x 2 samples x 2 passes x 4 ranks.
	if len(rows) != 3*2*2*4 {
		t.Fatalf("%d rows, want 48", len(rows))
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
	}
	if !strings.Contains(out, "usp") || !strings.Contains(out, " OK") {
		t.Fatalf("table:\n%s", out)
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
