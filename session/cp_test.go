package session

import (
	"context"
	"errors"
	"io"
	"net"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/longca/longca/harness"
	"github.com/longca/longca/kernels"
	"github.com/longca/longca/kernels/kerneltest"
	_ "github.com/longca/longca/kernels/ref"
	"github.com/longca/longca/results"
	"github.com/longca/longca/spmd"
	"github.com/longca/longca/tensor"
)

// A CP run stopped by Ctrl-C (its context cancelled) stops every rank at the same case,
// still merges the rank files and exits 130, as kernel sweeps do; before, the error
// returned before the merge, and nothing caught the signal.
func TestCPInterruptedKeepsRows(t *testing.T) {
	sw := harness.CPSweep{Methods: []string{"ring-p2p"}, Masks: []string{"causal", "full"}, SeqLen: 128, Heads: []harness.Heads{{Q: 2, KV: 1}},
		HeadDim: 8, DType: tensor.FP32, Passes: []kernels.Pass{kernels.Fwd}, Samples: 1, Seed: 42, Kernel: "ref"}
	cases, err := sw.Cases(2)
	if err != nil {
		t.Fatal(err)
	}
	k, err := kernels.New("ref", kernels.Options{})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	s := New("cp", dir, "x", spmd.World{Size: 1}, "test", nil, io.Discard, io.Discard)
	ctx, cancel := context.WithCancel(context.Background())
	cancel() // Ctrl-C before the first case
	err = s.CP(ctx, CPRun{Sweep: sw, Cases: cases, Ranks: 2, InProcess: true, Kernel: k, Warmup: 0, Iters: 1})
	var ee *ExitError
	if !errors.As(err, &ee) || ee.Code != 130 {
		t.Fatalf("interrupted CP run: %v, want an exit 130", err)
	}
	if _, err := results.Load(results.MergedPath(dir, "x")); err != nil {
		t.Errorf("the rank files were not merged: %v", err)
	}
}

// Two TCP ranks, one of them interrupted inside a case's backward (a signal that reached
// that rank alone, or reached it first): both stop at the agreement after the iteration,
// each exits 130 keeping its rows, well before --timeout. The interrupted rank used to
// leave the exchange its peer was inside, and both waited the whole --timeout, then exited
// 1 with a timeout (the probe of pass 13, finding 3); the other rank, stopped for its peer,
// exited 1 even when the stop was prompt.
func TestCPInterruptOnOneTCPRankExits130OnEvery(t *testing.T) {
	const timeout = 20 * time.Second
	sw := harness.CPSweep{Methods: []string{"ring-p2p"}, Masks: []string{"causal"}, SeqLen: 128, Heads: []harness.Heads{{Q: 4, KV: 2}},
		HeadDim: 8, DType: tensor.FP32, Passes: []kernels.Pass{kernels.Fwd, kernels.Bwd}, Samples: 3, Seed: 1, Kernel: "ref"}
	cases, err := sw.Cases(2)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	dir := t.TempDir()
	errs := make([]error, 2)
	start := time.Now()
	var wg sync.WaitGroup
	for r := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			ref, err := kernels.New("ref", kernels.Options{})
			if err != nil {
				errs[r] = err
				return
			}
			k := &kerneltest.CancelAt{Kernel: ref, Cancel: cancel}
			if r == 1 {
				k.At = 14 // the first sample's backward
			}
			w := spmd.World{Launcher: "torchrun", Rank: r, Size: 2, LocalRank: r, LocalSize: 2,
				MasterAddr: "127.0.0.1", MasterPort: port, Job: "cp-interrupt", Token: spmd.Secret("t")}
			s := New("cp", dir, "x", w, "test", nil, io.Discard, io.Discard)
			errs[r] = s.CP(ctx, CPRun{Sweep: sw, Cases: cases, Ranks: 2, Kernel: k, Warmup: 1, Iters: 3,
				Options: spmd.Options{Backend: "tcp", Timeout: timeout}})
		}()
	}
	wg.Wait()
	if took := time.Since(start); took > timeout/2 {
		t.Errorf("the ranks returned after %v (--timeout %v): a rank waited for its interrupted peer", took.Round(time.Millisecond), timeout)
	}
	for r, err := range errs {
		var ee *ExitError
		if !errors.As(err, &ee) || ee.Code != 130 {
			t.Errorf("rank %d: %v, want an exit 130 (interrupted)", r, err)
		}
	}
	res, err := results.Merge(dir, results.MergeOptions{Runs: []string{"x"}, Out: filepath.Join(dir, "merged.arrow")})
	if err != nil || res.Rows == 0 {
		t.Errorf("merging the rank files: %d rows, %v: want the rows written before the stop", res.Rows, err)
	}
}

// The merge command cp prints under a launcher is one to copy and paste: a folder with
// a space or a quote is quoted for the shell.
func TestShellWord(t *testing.T) {
	for in, want := range map[string]string{
		"out/cp-8gpu-12": "out/cp-8gpu-12", "/tmp/res dir": "'/tmp/res dir'", "it's": `'it'\''s'`, "": "''",
	} {
		if got := shellWord(in); got != want {
			t.Errorf("shellWord(%q) = %s, want %s", in, got, want)
		}
	}
}
