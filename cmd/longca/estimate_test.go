package main

import (
	"io"
	"os"
	"strings"
	"testing"

	"github.com/longca/longca/harness"
	"github.com/longca/longca/session"
)

// withMachine runs the test against a host of hostBytes (the estimates do not depend on
// the machine running the tests).
func withMachine(t *testing.T, hostBytes float64) {
	t.Helper()
	old := session.Machine
	session.Machine = func() harness.Machine {
		return harness.Machine{HostBytes: hostBytes, RefFLOPs: 1e9, DeviceFLOPs: harness.DefaultDeviceFLOPs}
	}
	t.Cleanup(func() { session.Machine = old })
}

// TestSizesRefusedBeforeAllocating: the requests that ran out of memory (or for hours)
// are refused at once with one line naming the flag and the limit, exit status 2.
func TestSizesRefusedBeforeAllocating(t *testing.T) {
	withMachine(t, 24<<30)
	out := t.TempDir()
	for _, c := range []struct {
		args  []string
		wants []string
	}{
		{[]string{"kernel", "--kernels", "ref", "--seqlens", "1M"}, []string{"--seqlens 1M", "host memory", "24.0 GiB available"}},
		{[]string{"kernel", "--kernels", "ref", "--seqlens", "16K", "--heads", "1024:1"}, []string{"--heads 1024:1", "host memory"}},
		// past the flags' bounds: refused by name before any estimate
		{[]string{"kernel", "--kernels", "ref", "--seqlens", "1K", "--heads", "1000000000:1"}, []string{`"1000000000:1": at most 1024`}},
		{[]string{"kernel", "--kernels", "ref", "--seqlens", "1K", "--head-dim", "100000"}, []string{"--head-dim 100000: must be 1 to 1024"}},
		{[]string{"kernel", "--kernels", "ref", "-b", "1K", "-e", "1M"}, []string{"-b/-e 32K", "needs about"}},
		// the default heads (64:8 and 64:64) with a huge head dim: either alone fits
		{[]string{"kernel", "--kernels", "ref", "--seqlens", "4K", "--head-dim", "1000"}, []string{"--heads 64:64 or --head-dim 1000", "host memory"}},
		{[]string{"sparse", "--kernels", "ref", "--seqlens", "1M"}, []string{"1M", "host memory"}},
		{[]string{"cp", "--ranks", "64", "--tokens-per-rank", "64K", "--kernel", "ref"}, []string{"--tokens-per-rank 64K", "host memory"}},
		{[]string{"cp", "--ranks", "100000"}, []string{"--ranks 100000", "host memory"}},
		{[]string{"cp", "--ranks", "100000", "--tokens-per-rank", "1", "--heads", "1", "--head-dim", "1"}, []string{"--ranks 100000"}},
		{[]string{"cp", "--ranks", "2", "--tokens-per-rank", "64K", "--heads", "1024:1024", "--head-dim", "1024"}, []string{"--heads 1024:1024, --head-dim 1024", "host memory"}},
	} {
		args := append(c.args, "--out", out)
		_, errs, code := runCLI(t, args...)
		checkUsageError(t, args, code, errs, c.wants...)
	}
}

// TestSlowSweepSaysHowLong: a sweep that fits but would run for hours says so, once,
// before it starts (and the CPU reference's rate is measured here for it).
func TestSlowSweepSaysHowLong(t *testing.T) {
	withMachine(t, 24<<30)
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	stderr := os.Stderr
	os.Stderr = w
	// The run's file exists already, so the sweep stops when it creates it, after the
	// estimate has been said; nothing runs.
	dir := t.TempDir()
	os.WriteFile(dir+"/slow.rank-0-of-1.arrow", nil, 0o644)
	_, errs, code := runCLI(t, "--log-format", "json", "kernel", "--kernels", "ref", "--seqlens", "64K", "--heads", "8:2", "--head-dim", "64",
		"--masks", "full", "--passes", "bwd", "-n", "20", "--out", dir, "--run-id", "slow")
	w.Close()
	os.Stderr = stderr
	logged, _ := io.ReadAll(r)
	if code == 0 || !strings.Contains(errs, "exists") {
		t.Fatalf("exit %d: %s", code, errs)
	}
	if !strings.Contains(string(logged), "this sweep will take about") || !strings.Contains(string(logged), `"longest_case":"ref full S=64K`) {
		t.Errorf("no estimate logged:\n%s", logged)
	}
}

// TestDocumentMasksEstimated: a document mask's slices grow with its documents, up to one a
// token (--max-doc 1): masks --seqlen 16M --max-doc 1 built 2^24 documents (3.5 GB) and
// its JSON held 10 GB, with no estimate (its memory was a flat 1 MB); on a host of 2 GiB
// both masks and a dry run's --mask-json are refused first, and 16K documents are not.
func TestDocumentMasksEstimated(t *testing.T) {
	withMachine(t, 2<<30)
	for _, c := range []struct {
		args  []string
		wants []string
	}{
		{[]string{"masks", "--mask", "causal_document", "--seqlen", "16M", "--max-doc", "1", "--format", "json"}, []string{"--seqlen 16M", "the mask causal_document at 16M", "2.0 GiB available"}},
		{[]string{"kernel", "--dry-run", "--masks", "full_document", "--seqlens", "16M", "--max-doc", "1", "--mask-json", t.TempDir()}, []string{"the mask of case", "full_document"}},
		// one slice a block: --block-size 1 at 2G tokens grew past 3 GB in 20 s, unestimated
		// (the twelfth pass); at 16M it is 2.9 GB, over this host's 2 GiB
		{[]string{"masks", "--mask", "block_causal_document", "--seqlen", "16M", "--block-size", "1", "--format", "json"}, []string{"--seqlen 16M", "the mask block_causal_document at 16M", "a larger --block-size"}},
	} {
		_, errs, code := runCLI(t, c.args...)
		checkUsageError(t, c.args, code, errs, c.wants...)
	}
	if _, errs, code := runCLI(t, "masks", "--mask", "causal_document", "--seqlen", "16K", "--max-doc", "1", "--format", "json"); code != 0 {
		t.Errorf("masks at 16K: exit %d: %s", code, errs)
	}
	if _, errs, code := runCLI(t, "masks", "--mask", "block_causal_document", "--seqlen", "16K", "--block-size", "1", "--format", "json"); code != 0 {
		t.Errorf("block_causal_document, 1-token blocks at 16K: exit %d: %s", code, errs)
	}
}
