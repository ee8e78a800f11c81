package main

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/longca/longca/results"
)

func TestSparseDryRunCounts(t *testing.T) {
	for _, c := range []struct {
		args []string
		want int
	}{
		{nil, 2 * 3 * 3 * 2 * 2}, // blocks 64,128 x ratios x 32K..128K x heads x passes
		{[]string{"--block", "128", "--avg-block", "256,512", "--ratios", "0.5", "--heads", "64:8"}, 3 * 3 * 1 * 2},
		{[]string{"-b", "32K", "-e", "128K", "-f", "2", "--block", "64", "--passes", "fwd"}, 3 * 3 * 2},
	} {
		out, errs, code := runCLI(t, append([]string{"sparse", "--dry-run", "--kernels", "ref"}, c.args...)...)
		if code != 0 {
			t.Fatalf("%v: exit %d: %s", c.args, code, errs)
		}
		if got := len(dataLines(out)); got != c.want {
			t.Errorf("%v: %d cases, want %d", c.args, got, c.want)
		}
	}
	for _, c := range []struct {
		args []string
		flag string
	}{
		{[]string{"--ratios", "0"}, "--ratios"},
		{[]string{"--ratios", "1.5"}, "--ratios"},
		{[]string{"--block", "x"}, "--block"},
		{[]string{"--avg-block", "64"}, "--avg-block"},
		{[]string{"--scores", "best"}, "--scores"},
	} {
		_, errs, code := runCLI(t, append([]string{"sparse", "--dry-run"}, c.args...)...)
		if code != 2 || !strings.Contains(errs, c.flag) || strings.Count(strings.TrimSpace(errs), "\n") != 0 {
			t.Errorf("%v: exit %d, %q", c.args, code, errs)
		}
	}
}

func TestSparseRows(t *testing.T) {
	dir := t.TempDir()
	out, errs, code := runCLI(t, "sparse", "--kernels", "ref", "--seqlens", "256", "--heads", "4:2", "--head-dim", "16",
		"--block", "32", "--avg-block", "128", "--ratios", "0.25,1", "--scores", "content", "-w", "0", "-n", "1", "--out", dir)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	if n := len(dataLines(out)); n != 2*2*2 {
		t.Fatalf("%d table rows:\n%s", n, out)
	}
	rows, _, err := results.ReadRows(filepath.Join(dir, results.FileName(filepath.Base(dir), 0, 1)))
	if err != nil || len(rows) != 8 {
		t.Fatalf("%d rows: %v", len(rows), err)
	}
	for _, r := range rows {
		if r.Status != results.StatusOK || r.Bench != "sparse" || r.BlockSize == nil || r.KeptRatio == nil || r.CheckPass == nil || !*r.CheckPass {
			t.Fatalf("row %+v", r)
		}
		full := int64(256 * 256)
		if *r.KeptRatio == 1 && r.MaskArea != full {
			t.Errorf("%s ratio 1: area %d, want %d", r.Mask, r.MaskArea, full)
		}
		if *r.KeptRatio == 0.25 && (r.MaskArea > full/2 || r.MaskArea <= 0) {
			t.Errorf("%s ratio 0.25: area %d of %d", r.Mask, r.MaskArea, full)
		}
		if !strings.Contains(r.MaskParams, `"scores":"content"`) {
			t.Errorf("params %s", r.MaskParams)
		}
	}
}
