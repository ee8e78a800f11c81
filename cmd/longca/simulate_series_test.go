package main

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/longca/longca/harness"
	"github.com/longca/longca/present"
	"github.com/longca/longca/results"
)

// TestSimulateMeshChosenPerSample: the probe's case (causal_document_long bwd, 64:8, 8
// GPUs, 5 samples), where balanced's plan (--cp-ulysses 0, the default) takes 1x8 on
// some samples and 2x4 on another: the table's balanced cell is the median and range of
// all 5 of its rows, the meshes it took listed, and each row's samples_n is its sample
// index + 1. The table showed "423.6", a 2x4 of 1 sample, and samples_n was null there.
func TestSimulateMeshChosenPerSample(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "sim")
	out, errOut, code := captureRun(t, "--log-level", "warn", "simulate", "--gpus", "8", "--masks", "causal_document_long",
		"--methods", "balanced", "--passes", "bwd", "--out", dir)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	rows, _, err := results.ReadRows(results.MergedPath(dir, filepath.Base(dir)))
	if err != nil {
		t.Fatal(err)
	}
	var rates []float64
	meshes := map[string]int{}
	for _, r := range rows {
		if r.Method != "balanced" || r.TFLOPs == nil {
			continue
		}
		rates = append(rates, *r.TFLOPs)
		meshes[fmt.Sprintf("%dx%d", *r.Ulysses, *r.Ring)]++
		if n := r.SamplesN; n == nil || *n != r.Sample+1 {
			got := "null"
			if n != nil {
				got = fmt.Sprint(*n)
			}
			t.Errorf("sample %d (mesh %dx%d): samples_n %s, want %d", r.Sample, *r.Ulysses, *r.Ring, got, r.Sample+1)
		}
	}
	if len(rates) != 5 {
		t.Fatalf("%d balanced rows with a rate, want 5", len(rates))
	}
	if len(meshes) < 2 {
		t.Fatalf("balanced took one mesh on every sample (%v): the case no longer shows a choice per sample", meshes)
	}
	med, lo, hi := harness.Spread(rates)
	cell := fmt.Sprintf("%s* (%s-%s)", present.FormatRate(med), present.FormatRate(lo), present.FormatRate(hi))
	if !strings.Contains(out, cell) {
		t.Errorf("the table lacks balanced's median over its 5 samples, %q:\n%s", cell, out)
	}
	for m := range meshes {
		if !strings.Contains(out, fmt.Sprintf("%s x%d", m, meshes[m])) {
			t.Errorf("the mesh table does not list %s x%d:\n%s", m, meshes[m], out)
		}
	}
}
