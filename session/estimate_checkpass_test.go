package session

import (
	"context"
	"runtime"
	"strings"
	"testing"

	"github.com/longca/longca/harness"
	"github.com/longca/longca/kernels"
	"github.com/longca/longca/spmd"
)

// kernel --kernels ref --counts ONES --seqlens S --masks causal_document --heads 8:2
// --head-dim 64 --passes P -w 1 -n 1 (ONES: 1-token documents, so the check runs at the
// full length) on the 2-core build machine, 2026-12-07: the peak resident size
// (/usr/bin/time -v), the process's CPU time (user and system) and its wall time, of the
// slowest of the runs (a load average of 4-6 from other work for most of them, under 2
// for the last of each). The check was counted as a forward and backward's whatever the
// pass (64K fwd 8.2 GB, 256K fwd 32.6 GB: 2.7x, and the case refused where 11.7 GB
// fits), and the time estimate left out the check's drawing of its inputs and comparing
// of its outputs (16K fwd estimated at 1.6 s, 64K fwd at 5.9 s).
var onesCheckRuns = []struct {
	seqlen    int
	pass      kernels.Pass
	peakKB    float64
	cpu, wall float64 // seconds
}{
	{16 << 10, kernels.Fwd, 781348, 3.96, 4.28},
	{16 << 10, kernels.Bwd, 1119328, 6.69, 8.53},
	{64 << 10, kernels.Fwd, 2968788, 13.85, 18.48},
	{64 << 10, kernels.Bwd, 4370192, 28.36, 31.44},
	{256 << 10, kernels.Fwd, 11737452, 57.11, 69.25},
	{256 << 10, kernels.Bwd, 16884248, 117.41, 181.91},
}

// TestFitKernelsCountsTheCheckByPass: each run above is estimated at no less than its
// peak, a forward within 2x of it (its check counted as a forward's: q, k, v, out and
// lse, and a forward's working set); on the build machine's host (21.7 GiB available)
// 256K's forward fits and its backward is refused naming --check-budget.
func TestFitKernelsCountsTheCheckByPass(t *testing.T) {
	var pl place
	pl.k, pl.onDevice, pl.isRef, pl.devBytes, pl.ok = KernelPlace("ref", kernels.Options{})
	for _, r := range onesCheckRuns {
		withHost(t, 1<<40)
		k := shortDocSweep("causal_document", r.seqlen, harness.Heads{Q: 8, KV: 2}, 64, r.pass, []int{1})
		cs := k.Sweep.Cases()[0]
		f, area := fitFootprint(cs, k, pl, Machine(), planCache{})
		peak := r.peakKB * 1024
		if area == nil || f.Host < peak {
			t.Errorf("%s: estimated at %s, under the %s measured", cs, harness.FormatBytes(f.Host), harness.FormatBytes(peak))
		}
		if r.pass == kernels.Fwd && f.Host > 2*peak {
			t.Errorf("%s: estimated at %s, %.1fx the %s measured: a forward's check counted as a backward's", cs, harness.FormatBytes(f.Host), f.Host/peak, harness.FormatBytes(peak))
		}
		if r.seqlen != 256<<10 {
			continue
		}
		withHost(t, 21.7*(1<<30))
		s := New("kernel", "", "", spmd.World{Size: 1}, "test", nil, nil, nil)
		_, err := s.FitKernels(context.Background(), k)
		switch {
		case r.pass == kernels.Fwd && err != nil:
			t.Errorf("%s on the build machine: %v", cs, err)
		case r.pass != kernels.Fwd && (err == nil || !strings.Contains(err.Error(), "give --check-budget")):
			t.Errorf("%s on the build machine: %v, want a refusal naming --check-budget", cs, err)
		}
	}
}

// TestKernelEstimateCountsTheCheckOfShortDocuments: each run above is estimated (at the
// reference's assumed rate, as a sweep under a minute is) at no less than its CPU time
// over 1.25 (its two cores' time: the estimate is of the wall time, 3.3 s for 16K's
// forward where the machine idle took 3.4 s, 3.96 s of CPU), and no less than its wall
// time (under load) over 1.5. The check's drawing of 84M elements and comparing of 34M at
// 64K were not counted: 5.9 s for 13.9 s of CPU, 1.6 s at 16K.
// The 256K backward (an estimate over a minute, made at the rate calibrated here) is held
// to its CPU time only: its timed backwards ran at 2x what the reference's shape says
// (harness.RefShape), with the machine loaded.
func TestKernelEstimateCountsTheCheckOfShortDocuments(t *testing.T) {
	var pl place
	pl.k, pl.onDevice, pl.isRef, pl.devBytes, pl.ok = KernelPlace("ref", kernels.Options{})
	m := harness.Machine{HostBytes: 1 << 40, DeviceFLOPs: harness.DefaultDeviceFLOPs, RefFLOPs: harness.DefaultRefFLOPs}
	for _, r := range onesCheckRuns {
		k := shortDocSweep("causal_document", r.seqlen, harness.Heads{Q: 8, KV: 2}, 64, r.pass, []int{1})
		est := (&Session{}).newEstimate(k, k.Sweep.Cases(), map[string]place{"ref": pl}, m)
		got := est.Seconds(0)
		if got < r.cpu/1.25 {
			t.Errorf("%s: estimated at %.1f s, for %.1f s of CPU", k.Sweep.Cases()[0], got, r.cpu)
		}
		if r.seqlen < 256<<10 || r.pass == kernels.Fwd {
			if got < r.wall/1.5 {
				t.Errorf("%s: estimated at %.1f s, for %.1f s of wall time", k.Sweep.Cases()[0], got, r.wall)
			}
		}
	}
}

// onesQuietWall is the wall time of each run of onesCheckRuns with the machine quiet (a
// load average of 0.5-2), 2026-12-07 19:22-19:27.
var onesQuietWall = map[int]map[kernels.Pass]float64{
	16 << 10:  {kernels.Fwd: 3.40, kernels.Bwd: 6.13},
	64 << 10:  {kernels.Fwd: 12.0, kernels.Bwd: 22.2},
	256 << 10: {kernels.Fwd: 46.9, kernels.Bwd: 102.2},
}

// TestKernelEstimateAtACalibratedRate: each run above, estimated at a rate calibrated on
// the 2-core build machine (2.5-4.2 GFLOP/s, CalibrateRef) on 2 cores, is at least its
// quiet wall time over 1.2. The reference's conversions of elements run on one core;
// counted over both, 256K's backward was estimated at 67-68 s for 102 s, 16K's forward at
// 2.5 s for 3.4 s.
func TestKernelEstimateAtACalibratedRate(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(2))
	var pl place
	pl.k, pl.onDevice, pl.isRef, pl.devBytes, pl.ok = KernelPlace("ref", kernels.Options{})
	for _, rate := range []float64{2.5e9, 4.2e9} {
		m := harness.Machine{HostBytes: 1 << 40, DeviceFLOPs: harness.DefaultDeviceFLOPs, RefFLOPs: rate}
		for _, r := range onesCheckRuns {
			k := shortDocSweep("causal_document", r.seqlen, harness.Heads{Q: 8, KV: 2}, 64, r.pass, []int{1})
			est := (&Session{}).newEstimate(k, k.Sweep.Cases(), map[string]place{"ref": pl}, m)
			wall := onesQuietWall[r.seqlen][r.pass]
			if got := est.Seconds(0); got < wall/1.2 {
				t.Errorf("%s at %.1f GFLOP/s: estimated at %.1f s, for %.1f s of wall time", k.Sweep.Cases()[0], rate/1e9, got, wall)
			}
		}
	}
}
