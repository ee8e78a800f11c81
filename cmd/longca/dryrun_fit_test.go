package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/longca/longca/kernels/external"
	"github.com/longca/longca/session"
)

// A dry run (kernel, sparse) says what the run would: a case that does not fit this
// machine's memory is named in the run's own words as the plan's last line (exit status 0:
// a dry run may list a GPU sweep on a smaller machine); a sweep that fits says so and about
// how long it takes. A worker's kernel (exec:) is not started for it. The dry run had
// listed the plan alone: the README's sparse example passed its dry run and was then
// refused for memory (the s44-D probe).
func TestDryRunSaysTheFit(t *testing.T) {
	withMachine(t, 16<<30)
	for _, args := range [][]string{
		{"kernel", "--kernels", "ref", "--seqlens", "1M", "--masks", "causal"},
		// the README's example, on a host of 16 GiB: the masks fit, the run does not
		{"sparse", "--kernels", "ref", "--block", "64,128", "--ratios", "0.2,0.5,0.8", "--scores", "content", "--seqlens", "32K,64K"},
	} {
		_, runErr, runCode := runCLI(t, append(args, "--out", t.TempDir())...)
		out, dryErr, dryCode := runCLI(t, append(args, "--dry-run")...)
		if runCode != 2 || dryCode != 0 {
			t.Fatalf("%v: exit %d run, %d dry run; want 2 and 0: %s / %s", args, runCode, dryCode, runErr, dryErr)
		}
		want := "# the run would be refused on this machine: " + strings.TrimPrefix(last(runErr), "longca: ")
		if last(out) != want || !strings.Contains(want, "host memory") {
			t.Errorf("%v: the dry run's last line %q, want %q", args, last(out), want)
		}
		if !strings.Contains(out, "dry run: nothing was run") {
			t.Errorf("%v: no plan before the verdict:\n%s", args, out)
		}
	}

	dir := t.TempDir()
	marker := filepath.Join(dir, "started")
	worker := filepath.Join(dir, "worker.sh")
	if err := os.WriteFile(worker, []byte("#!/bin/sh\ntouch '"+marker+"'\nexit 1\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	args := []string{"kernel", "--kernels", "ref,exec:" + worker, "--seqlens", "512", "--masks", "causal", "--heads", "2:1",
		"--head-dim", "8", "--passes", "fwd", "--dry-run"}
	out, errs, code := runCLI(t, args...)
	if code != 0 {
		t.Fatalf("%v: exit %d: %s", args, code, errs)
	}
	if !strings.Contains(out, "# fits this machine's memory; about ") || !strings.Contains(out, "exec:"+worker+" counted as on a GPU") {
		t.Errorf("%v: no fit, time or worker's kernel said:\n%s", args, out)
	}
	if _, err := os.Stat(marker); err == nil {
		t.Errorf("%v: the dry run started the exec: worker", args)
	}
}

// A dry run of a worker's kernel alone counts the host memory longca holds for its cases
// whatever the worker's device: a case the run refuses for that is refused in the dry run
// too. Left out of the fit, a 1M-token case of the fake worker "fit" a 16 GiB host (about
// 0s) where the run was refused for 88 GiB.
func TestDryRunCountsWorkerKernels(t *testing.T) {
	withMachine(t, 16<<30)
	w := fakeWorker(t, "ok")
	args := []string{"kernel", "--kernels", "exec:" + w + ":ref", "--seqlens", "1M", "--masks", "causal", "--passes", "fwd"}
	_, runErr, runCode := runCLI(t, append(args, "--out", t.TempDir())...)
	external.CloseAll()
	session.ForgetKernels()
	out, dryErr, dryCode := runCLI(t, append(args, "--dry-run")...)
	if runCode != 2 || dryCode != 0 {
		t.Fatalf("exit %d run, %d dry run; want 2 and 0: %s / %s", runCode, dryCode, runErr, dryErr)
	}
	if l := last(out); !strings.HasPrefix(l, "# the run would be refused on this machine: --seqlens 1M") || !strings.Contains(l, "host memory") {
		t.Errorf("the dry run's last line %q; the run: %s", l, runErr)
	}
}

// cp's dry run says the run's memory fit as kernel's does (no time: the run says it).
func TestCPDryRunSaysTheFit(t *testing.T) {
	withMachine(t, 16<<30)
	args := []string{"cp", "--ranks", "64", "--tokens-per-rank", "64K", "--kernel", "ref"}
	_, runErr, runCode := runCLI(t, append(args, "--out", t.TempDir())...)
	out, dryErr, dryCode := runCLI(t, append(args, "--dry-run")...)
	if runCode != 2 || dryCode != 0 {
		t.Fatalf("%v: exit %d run, %d dry run; want 2 and 0: %s / %s", args, runCode, dryCode, runErr, dryErr)
	}
	if want := "# the run would be refused on this machine: " + strings.TrimPrefix(last(runErr), "longca: "); last(out) != want {
		t.Errorf("%v: the dry run's last line %q, want %q", args, last(out), want)
	}
	args = []string{"cp", "--ranks", "2", "--tokens-per-rank", "256", "--kernel", "ref", "--heads", "2:1", "--head-dim", "8", "--dry-run"}
	if out, errs, code := runCLI(t, args...); code != 0 || last(out) != "# fits this machine's memory (the run says its time when it starts)" {
		t.Errorf("%v: exit %d, last line %q: %s", args, code, last(out), errs)
	}
}

// last is s's last line.
func last(s string) string {
	s = strings.TrimRight(s, "\n")
	return s[strings.LastIndex(s, "\n")+1:]
}

// cp's dry run says the run's refusal of a kernel or a backend that cannot run on this
// machine, as the run words it (exit 2 there, 0 in the dry run). It said "fits this
// machine's memory" for --kernel cuda and --backend nccl on a host without CUDA, where the
// run exits 2: the memory fit passes over a kernel it cannot make.
func TestCPDryRunSaysTheRunsRefusal(t *testing.T) {
	small := []string{"cp", "--tokens-per-rank", "256", "--heads", "2:1", "--head-dim", "8", "--masks", "causal",
		"--methods", "ring-p2p", "--samples", "1", "--timeout", "20s"}
	for _, extra := range [][]string{{"--kernel", "cuda"}, {"--kernel", "cudnn"}, {"--kernel", "ref", "--backend", "nccl"}} {
		args := append(append([]string{}, small...), extra...)
		_, runErr, runCode := runCLI(t, append(args, "--out", t.TempDir())...)
		if runCode != 2 || !strings.Contains(runErr, "cannot run here") {
			t.Logf("%v: not refused here (exit %d): a machine with CUDA", extra, runCode)
			continue
		}
		out, dryErr, dryCode := runCLI(t, append(args, "--dry-run")...)
		// the run's line, less what it says of opening the backend (spmd: open nccl backend for rank 0 of 1)
		said, ok := strings.CutPrefix(last(out), "# the run would be refused on this machine: ")
		if dryCode != 0 || !ok || !strings.HasSuffix(last(runErr), ": "+said) || !strings.HasPrefix(said, extra[len(extra)-2]+" ") {
			t.Errorf("%v: dry run exit %d, last line %q; the run's refusal %q: %s", extra, dryCode, last(out), last(runErr), dryErr)
		}
	}
	// a --variant the run refuses is bad input in its dry run too (it passed, exit 0)
	args := append(append([]string{}, small...), "--kernel", "ref", "--variant", "cuda=sm90")
	_, runErr, runCode := runCLI(t, append(args, "--out", t.TempDir())...)
	_, dryErr, dryCode := runCLI(t, append(args, "--dry-run")...)
	if runCode != 2 || dryCode != 2 || last(dryErr) != last(runErr) || !strings.Contains(dryErr, "--variant") {
		t.Errorf("--variant cuda=sm90 with --kernel ref: exit %d run, %d dry run: %q / %q", runCode, dryCode, runErr, dryErr)
	}
}
