package sim

import (
	"context"
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/longca/longca/kernels"
	"github.com/longca/longca/mask"
	"github.com/longca/longca/spmd/cp"
	"github.com/longca/longca/tensor"
)

var allPasses = []kernels.Pass{kernels.Fwd, kernels.Bwd, kernels.FwdBwd}

// problem builds a CP problem of the named mask at seqlen (documents for zigzag).
func problem(t *testing.T, name string, seqlen, hq, hkv, dim int) (kernels.Problem, []mask.Range) {
	t.Helper()
	spec, err := mask.Build(name, seqlen, mask.Options{Seed: 7, Purpose: mask.PurposeCP})
	if err != nil {
		t.Fatal(err)
	}
	docs, err := spec.Docs()
	if err != nil {
		t.Fatal(err)
	}
	return kernels.Problem{HeadsQ: hq, HeadsKV: hkv, HeadDim: dim, DType: tensor.BF16, Mask: spec.Mask}, docs
}

// configs are the meshes of 4 and 8 ranks the tests run every method on.
func configs(method string, n int) []cp.Config {
	switch method {
	case "usp":
		return []cp.Config{{Ranks: n, Ulysses: 2, Ring: n / 2, HeadFirst: true}, {Ranks: n, Ulysses: n / 2, Ring: 2}}
	case "loongtrain":
		return []cp.Config{{Ranks: n, Ulysses: 2, Ring: n / 2, Windows: 2, HeadFirst: true}, {Ranks: n, Ulysses: 1, Ring: n, Windows: 2}}
	}
	return []cp.Config{{Ranks: n, HeadFirst: true}}
}

// TestTracedBytesMatchCommBytes: the bytes every traced rank's communicators count (as
// comm/local counts them) are the bytes the method's CommBytes claims, for every method
// and mesh, CP mask and pass: the trace moves what the method moves.
func TestTracedBytesMatchCommBytes(t *testing.T) {
	o := Options{Machine: MachinePresets["h100-ib"], Kernel: KernelPresets["fa3-h100"], PartialDType: tensor.FP32}
	for _, n := range []int{4, 8} {
		for _, mk := range mask.CPMasks() {
			for _, heads := range [][2]int{{8, 2}, {8, 8}} {
				p, docs := problem(t, mk, n*256, heads[0], heads[1], 16)
				for _, name := range cp.Names() {
					m, _ := cp.New(name)
					for _, cfg := range configs(name, n) {
						cfg.Docs = docs
						pl, err := m.Plan(cfg, p)
						if err != nil {
							t.Fatalf("%s %s: %v", name, cfg.Mesh(), err)
						}
						traced := make([]int, n)
						for i := range traced {
							traced[i] = i
						}
						rec, counted, err := record(context.Background(), m, pl, traced, allPasses, o)
						if err != nil {
							t.Fatal(err)
						}
						for pi, pass := range allPasses {
							for r, got := range counted[pi] {
								if want := cp.RankCommBytesOf(pl, r, pass); got != want {
									t.Fatalf("%s %s %s %d:%d %s rank %d: traced %d bytes, CommBytes %d", name, pl.Config.Mesh(), mk, heads[0], heads[1], pass, r, got, want)
								}
							}
							if len(rec.byPass[pi]) != n || len(rec.byPass[pi][0].events) == 0 {
								t.Fatalf("%s %s: no trace of %s", name, pl.Config.Mesh(), pass)
							}
						}
					}
				}
			}
		}
	}
}

// flatMachine has every rank on its own node: one inter link of bw bytes/s and latency
// lat, free helpers.
func flatMachine(bw, lat float64) Machine {
	return Machine{Name: "flat", GPUsPerNode: 1, RanksPerGPU: 1,
		Local: Link{BandwidthGBs: 1000}, Intra: Link{BandwidthGBs: 1000}, Inter: Link{BandwidthGBs: bw / 1e9, LatencyUs: lat * 1e6},
		Collectives: CollNCCL, Rendezvous: true, Helpers: Helpers{BandwidthGBs: 1e12}}
}

// fixedKernel costs launch seconds a call, whatever the mask.
func fixedKernel(launch float64) KernelModel {
	return KernelModel{Name: "fixed", TileQ: 128, TileK: 128, SMs: 1, Fwd: PassModel{LaunchUs: launch * 1e6}, Bwd: PassModel{LaunchUs: launch * 1e6}}
}

// TestRingForwardSchedule checks the simulated ring against its schedule worked out by
// hand: R steps, the transfer of step i+1's block overlapped with step i's kernel, so
// each of the first R-1 steps takes max(kernel, transfer) and the last its kernel; a
// transfer is K then V through one port, plus the latency.
func TestRingForwardSchedule(t *testing.T) {
	const n, seq, bw, lat = 4, 4 * 256, 1e9, 5e-6
	p, docs := problem(t, "full", seq, 8, 2, 16)
	m, _ := cp.New("ring-p2p")
	kvBytes := float64(256 * 2 * 16 * 2) // one K block: tokens x KV heads x dim x bf16
	transfer := 2*kvBytes/bw + lat
	for _, kernel := range []float64{transfer / 3, 2 * transfer} {
		o := Options{Machine: flatMachine(bw, lat), Kernel: fixedKernel(kernel)}
		_, pr, err := Predict(context.Background(), m, cp.Config{Ranks: n, Docs: docs}, p, []kernels.Pass{kernels.Fwd}, o)
		if err != nil {
			t.Fatal(err)
		}
		want := (n-1)*max(kernel, transfer) + kernel
		if got := pr[0].Seconds; math.Abs(got-want) > 1e-12 {
			t.Errorf("kernel %.3g s, transfer %.3g s: ring forward %.6g s, want %.6g", kernel, transfer, got, want)
		}
		if kernel > transfer && pr[0].Bottleneck != "compute" {
			t.Errorf("kernel longer than the transfer: bottleneck %q, want compute", pr[0].Bottleneck)
		}
		if kernel < transfer && (pr[0].Bottleneck != "inter" || pr[0].ExposedShare < 0.5) {
			t.Errorf("transfer 3x the kernel: bottleneck %q, exposed %.2f; want inter, most of the time", pr[0].Bottleneck, pr[0].ExposedShare)
		}
	}
}

// TestSampledAgreesWithExact: at 64 GPUs a sample of ranks simulated with mirrored peers
// gives the time of every rank simulated, within 3% (zigzag sharding makes the ranks
// alike; the sample holds the node boundaries).
func TestSampledAgreesWithExact(t *testing.T) {
	const n = 64
	p, docs := problem(t, "causal_document_long", n*1024, 64, 8, 128)
	for _, name := range []string{"ring-p2p", "usp", "ring-allgather"} {
		m, _ := cp.New(name)
		cfg := cp.Config{Ranks: n, HeadFirst: true, Docs: docs}
		if name == "usp" {
			cfg.Ulysses, cfg.Ring = 8, 8
		}
		var got [2][]Prediction
		for i, exact := range []int{n, 8} {
			o := Options{Machine: MachinePresets["h100-ib"], Kernel: KernelPresets["fa3-h100"], ExactRanks: exact}
			_, pr, err := Predict(context.Background(), m, cfg, p, []kernels.Pass{kernels.Fwd, kernels.Bwd}, o)
			if err != nil {
				t.Fatal(err)
			}
			got[i] = pr
		}
		for pi := range got[0] {
			e, s := got[0][pi], got[1][pi]
			if e.Sampled || !s.Sampled || s.Traced >= n {
				t.Fatalf("%s: exact sampled=%v, sampled sampled=%v traced %d", name, e.Sampled, s.Sampled, s.Traced)
			}
			if r := s.Seconds / e.Seconds; math.Abs(r-1) > 0.03 {
				t.Errorf("%s %s: sampled %.3f ms, exact %.3f ms (%+.1f%%)", name, e.Pass, s.Seconds*1e3, e.Seconds*1e3, 100*(r-1))
			}
		}
	}
}

// TestCollectivesInBusBandwidth: at large sizes a ring all-gather's bus bandwidth is the
// link's (NVLink inside a node; 8 NICs of a node across nodes), all-to-all's the share
// of the bytes that cross nodes over the NIC, and a shared NIC divides by the node's
// GPUs; at small sizes the time is the steps' latencies.
func TestCollectivesInBusBandwidth(t *testing.T) {
	m := MachinePresets["h100-ib"]
	busbw := func(m Machine, n int, kind collKind, size int64) float64 {
		w := newTraceWorld(n)
		nw := newNetwork(m, w)
		send := size
		if kind == collAllGather {
			send = size / int64(n)
		}
		c := nw.collective(w.root, kind, send)
		return float64(size) / c.seconds / 1e9 * float64(n-1) / float64(n)
	}
	const big = 1 << 34
	near := func(name string, got, want float64) {
		t.Helper()
		if math.Abs(got/want-1) > 0.01 {
			t.Errorf("%s: bus bandwidth %.1f GB/s, want %.1f", name, got, want)
		}
	}
	near("all-gather, 8 GPUs of a node", busbw(m, 8, collAllGather, big), m.Intra.BandwidthGBs)
	near("reduce-scatter, 8 GPUs of a node", busbw(m, 8, collReduceScatter, big), m.Intra.BandwidthGBs)
	near("all-gather, 2 nodes", busbw(m, 16, collAllGather, big), min(m.Intra.BandwidthGBs, 8*m.Inter.BandwidthGBs))
	// All-to-all over 16 GPUs: each sends 8/16 of the buffer across nodes, through its NIC.
	near("all-to-all, 2 nodes", busbw(m, 16, collAllToAll, big), m.Inter.BandwidthGBs*15/16/(8.0/16))
	shared := m
	shared.Inter.Shared = true
	near("all-to-all, 2 nodes, one NIC per node", busbw(shared, 16, collAllToAll, big), m.Inter.BandwidthGBs/8*15/16/(8.0/16))
	// Tiny: 7 ring steps of the NVLink latency.
	w := newTraceWorld(8)
	c := newNetwork(m, w).collective(w.root, collAllGather, 8)
	if want := 7 * m.Intra.LatencyUs * 1e-6; math.Abs(c.seconds/want-1) > 0.01 {
		t.Errorf("8-byte all-gather on 8 GPUs: %.2f us, want %.2f (7 steps of latency)", c.seconds*1e6, want*1e6)
	}
	var b strings.Builder
	if err := WriteCollectives(&b, m, 16, 1024, 1<<20); err != nil {
		t.Fatal(err)
	}
	for _, op := range []string{"all_gather_perf", "reduce_scatter_perf", "alltoall_perf", "all_reduce_perf", "busbw"} {
		if !strings.Contains(b.String(), op) {
			t.Errorf("collectives table has no %s:\n%s", op, b.String())
		}
	}
}

// TestSharedNICSlowsUlysses: Ulysses across two nodes moves half its all-to-all bytes
// between nodes; with one NIC per node instead of one per GPU the all-to-alls take
// several times longer (every rank's blocks queue at the node's port).
func TestSharedNICSlowsUlysses(t *testing.T) {
	p, docs := problem(t, "full", 16*2048, 64, 8, 128)
	m, _ := cp.New("ulysses")
	cfg := cp.Config{Ranks: 16, Docs: docs}
	run := func(mc Machine) Prediction {
		_, pr, err := Predict(context.Background(), m, cfg, p, []kernels.Pass{kernels.Fwd}, Options{Machine: mc, Kernel: fixedKernel(0)})
		if err != nil {
			t.Fatal(err)
		}
		return pr[0]
	}
	perGPU := run(MachinePresets["h100-ib"])
	sh := MachinePresets["h100-ib"]
	sh.Inter.Shared = true
	shared := run(sh)
	if r := shared.Seconds / perGPU.Seconds; r < 4 || r > 9 {
		t.Errorf("shared NIC / per-GPU NIC: %.2f (%.3f ms / %.3f ms), want 4 to 9", r, shared.Seconds*1e3, perGPU.Seconds*1e3)
	}
	if perGPU.Bottleneck != "inter" {
		t.Errorf("Ulysses with free compute across nodes: bottleneck %q, want inter", perGPU.Bottleneck)
	}
}

// TestFitRecoversCoefficients: samples made by a known model (with 2% alternating
// error) are fitted from a prior off by 2x back to within 5% of its times.
func TestFitRecoversCoefficients(t *testing.T) {
	truth := KernelPresets["fa3-h100"]
	prior := truth
	prior.Fwd = PassModel{LaunchUs: 2 * truth.Fwd.LaunchUs, FullTileNs: 0.5 * truth.Fwd.FullTileNs, PartialTileNs: 2 * truth.Fwd.PartialTileNs, RowNs: 0.5 * truth.Fwd.RowNs}
	var samples []Sample
	i := 0
	for _, mk := range []string{"full", "causal", "full_document", "causal_document", "sliding_window_causal"} {
		for _, s := range []int{2048, 8192, 16384} {
			spec, err := mask.Build(mk, s, mask.Options{Seed: 3})
			if err != nil {
				t.Fatal(err)
			}
			tl := TilesOf(spec.Mask, truth.TileQ, truth.TileK)
			noise := 1 + 0.02*float64(1-2*(i%2))
			i++
			samples = append(samples, Sample{Label: mk, Pass: kernels.Fwd, Tiles: tl, Heads: 64, Dim: 128, Seconds: truth.timeOf(kernels.Fwd, tl, 64, 128) * noise})
		}
	}
	fit, rep, err := Fit(prior, samples, "test")
	if err != nil {
		t.Fatal(err)
	}
	if rep.Samples[0] != len(samples) || rep.Samples[1] != 0 || rep.RMSRel[0] > 0.03 {
		t.Fatalf("fit report %+v", rep)
	}
	for _, s := range samples {
		if r := fit.timeOf(kernels.Fwd, s.Tiles, 64, 128) / truth.timeOf(kernels.Fwd, s.Tiles, 64, 128); math.Abs(r-1) > 0.05 {
			t.Errorf("%s: fitted time / true time %.3f", s.Label, r)
		}
	}
	if fit.Bwd != prior.Bwd {
		t.Errorf("no backward samples, but the backward changed: %+v", fit.Bwd)
	}
	if _, _, err := Fit(prior, nil, "nothing"); err == nil {
		t.Error("a fit to no samples succeeded")
	}
}

func TestMachineFiles(t *testing.T) {
	m, err := ParseMachine([]byte(`{"preset": "h100-ib", "gpus_per_node": 4, "inter": {"bandwidth_gbs": 25, "latency_us": 10, "shared": true}}`), "f.json")
	if err != nil {
		t.Fatal(err)
	}
	if m.GPUsPerNode != 4 || m.Inter.BandwidthGBs != 25 || !m.Inter.Shared || m.Intra != MachinePresets["h100-ib"].Intra || m.Name != "f.json" {
		t.Fatalf("preset with overrides: %+v", m)
	}
	for _, c := range []struct{ js, want string }{
		{`{"preset": "h100-ib", "gpus_per_nod": 4}`, "gpus_per_nod"},
		{`{"preset": "nope"}`, "unknown preset"},
		{`{"preset": "h100-ib", "inter": {"bandwidth_gbs": 0}}`, "inter: bandwidth_gbs 0"},
		{`{"preset": "h100-ib", "collectives": "mpi"}`, "collectives"},
		{`{"preset": "h100-ib", "ranks_per_gpu": 0}`, "ranks_per_gpu"},
		{`{"gpus_per_node": 8`, "f.json"},
	} {
		if _, err := ParseMachine([]byte(c.js), "f.json"); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want one naming %q", c.js, err, c.want)
		}
	}
	if _, err := LoadMachine("no-such-preset-or-file"); err == nil || !strings.Contains(err.Error(), "h100-ib") {
		t.Errorf("unknown machine: %v, want the presets listed", err)
	}
	for _, name := range PresetNames() {
		p := MachinePresets[name]
		if err := p.Validate(); err != nil {
			t.Errorf("preset %s: %v", name, err)
		}
		if _, err := KernelPreset(p.Kernel); err != nil {
			t.Errorf("preset %s: %v", name, err)
		}
	}
}

// TestUnmatchedMessageIsAnError: a receive no rank sends is reported, not a hang or a
// zero time.
func TestUnmatchedMessageIsAnError(t *testing.T) {
	w := newTraceWorld(2)
	nw := newNetwork(flatMachine(1e9, 0), w)
	traces := []rankTrace{
		{rank: 0, events: []event{{kind: evP2P, grp: w.root, msgs: []message{{peer: 1, bytes: 8}}}}},
		{rank: 1, events: []event{{kind: evKernel, name: "attention fwd", dur: 1e-3}}},
	}
	_, err := newSimulator(flatMachine(1e9, 0), nw, traces, false).run()
	if err == nil || !strings.Contains(err.Error(), "rank 0 never finished") {
		t.Fatalf("unmatched receive: %v", err)
	}
}

// TestStepOverheadAndContention: the two measured terms on the hand-worked ring of
// TestRingForwardSchedule (compute-bound: every step's kernel twice its transfer). A
// step overhead adds its time to each of the n kernel calls; contention stretches the
// n-1 kernels that start while the next block is on the wire, not the last one.
func TestStepOverheadAndContention(t *testing.T) {
	const n, seq, bw, lat = 4, 4 * 256, 1e9, 5e-6
	p, docs := problem(t, "full", seq, 8, 2, 16)
	m, _ := cp.New("ring-p2p")
	kernel := 2 * (2*float64(256*2*16*2)/bw + lat)
	for _, c := range []struct {
		stepUs, contention, want float64
	}{
		{0, 0, n * kernel},
		{30, 0, n * (kernel + 30e-6)},
		{0, 0.25, (n-1)*kernel*1.25 + kernel},
	} {
		mc := flatMachine(bw, lat)
		mc.StepUs, mc.Contention = c.stepUs, c.contention
		_, pr, err := Predict(context.Background(), m, cp.Config{Ranks: n, Docs: docs}, p, []kernels.Pass{kernels.Fwd}, Options{Machine: mc, Kernel: fixedKernel(kernel)})
		if err != nil {
			t.Fatal(err)
		}
		if got := pr[0].Seconds; math.Abs(got-c.want) > 1e-9 {
			t.Errorf("step %g us, contention %g: %.6g s, want %.6g", c.stepUs, c.contention, got, c.want)
		}
	}
}

// TestFitFollowsRowsFarFromThePrior: rows far from the prior's level (a kernel at 100
// TFLOP/s against the fa3-h100 preset; GPU rows against the CPU reference's preset) are
// fitted to their own level. The ridge had held the fit 40% fast on the first and 10^4x
// slow on the second.
func TestFitFollowsRowsFarFromThePrior(t *testing.T) {
	for _, c := range []struct {
		prior  string
		tflops float64
	}{{"fa3-h100", 100}, {"fa2-a100", 1000}, {"cpu-ref", 600}, {"fa2-a100", 100}} {
		prior := KernelPresets[c.prior]
		var samples []Sample
		for _, mk := range []string{"full", "causal"} {
			for _, n := range []int{4096, 8192} {
				spec, err := mask.Build(mk, n, mask.Options{Seed: 1})
				if err != nil {
					t.Fatal(err)
				}
				p := kernels.Problem{HeadsQ: 64, HeadsKV: 8, HeadDim: 128, DType: tensor.BF16, Mask: spec.Mask}
				for _, pass := range []kernels.Pass{kernels.Fwd, kernels.Bwd} {
					samples = append(samples, Sample{Label: fmt.Sprintf("%s %d %s", mk, n, pass), Pass: pass, Tiles: TilesOf(spec.Mask, prior.TileQ, prior.TileK),
						Heads: 64, Dim: 128, Seconds: p.FLOPs(pass) / (c.tflops * 1e12)})
				}
			}
		}
		fit, rep, err := Fit(prior, samples, "test")
		if err != nil {
			t.Fatal(err)
		}
		// the level within 5%; each row within 15% (one rate on full and causal alike is
		// not every preset's shape)
		var logSum float64
		for _, s := range samples {
			r := fit.TimeOn(s.Pass, s.Tiles, s.Heads, s.Dim) / s.Seconds
			logSum += math.Log(r)
			if math.Abs(r-1) > 0.15 {
				t.Errorf("%s at %.0f TFLOP/s: %s: fitted time / measured %.3f (%s)", c.prior, c.tflops, s.Label, r, rep)
			}
		}
		if g := math.Exp(logSum / float64(len(samples))); math.Abs(g-1) > 0.05 {
			t.Errorf("%s at %.0f TFLOP/s: fitted times / measured, geomean %.3f (%s)", c.prior, c.tflops, g, rep)
		}
	}
}
