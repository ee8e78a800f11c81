package cp

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/longca/longca/kernels"
	"github.com/longca/longca/kernels/check"
	"github.com/longca/longca/kernels/cudnn"
	"github.com/longca/longca/mask"
	"github.com/longca/longca/tensor"
)

// cudnnCalls counts the calls of cuDNN's attention a mask takes (kernels/cudnn's cut,
// pure Go: no GPU).
type cudnnCalls struct{}

func (cudnnCalls) Calls(m mask.Mask) (int, error) { return cudnn.Calls(m) }

// TestBalancedTHDCudnnCalls: with cuDNN's own cut (kernels/cudnn, pure Go: no GPU),
// every rank's sub-mask in the THD layout is at most 2 calls of cuDNN's attention on the
// CP masks at 8 and 64 ranks, 8K tokens per rank, one stage, while the blocks layout takes
// many on causal and the document masks (both counts in the log); and auto, with the cut
// as the kernel's count, takes on each rank the layout with fewer calls (THD within
// maxDocsGrowth), blocks without a count or when forced.
func TestBalancedTHDCudnnCalls(t *testing.T) {
	for _, n := range []int{8, 64} {
		for _, name := range []string{"full", "causal", "full_document_long", "causal_document_long"} {
			m := cpMask(t, name, n*8192, 7)
			// One query head: the dispatch runs over all n ranks (no Ulysses inside a node).
			p := kernels.Problem{HeadsQ: 1, HeadsKV: 1, HeadDim: 128, DType: tensor.BF16, Mask: m}
			t0 := time.Now()
			pl, err := Balanced{}.Plan(Config{Ranks: n, Stages: 1, Calls: cudnnCalls{}}, p)
			if err != nil {
				t.Fatal(err)
			}
			el := time.Since(t0)
			lr := pl.Layout.Local
			growth := [2]float64{1e9, 0}
			topB, topD, rowsB, rowsD, runs, fill := 0, 0, 0, 0, 0, 0
			for r := range n {
				rows, bm := pl.oneMask(r)
				nb, err := cudnn.Calls(bm)
				if err != nil {
					t.Fatal(err)
				}
				dl, err := thdLayout(m, pl.Layout.Shards[r], lr, pl.oneKeys(r))
				if err != nil {
					t.Fatal(err)
				}
				nd, err := cudnn.Calls(dl.Mask)
				if err != nil {
					t.Fatal(err)
				}
				if nd > 2 {
					t.Errorf("%s n%d rank %d: the THD sub-mask takes %d calls of cuDNN (want at most 2)", name, n, r, nd)
				}
				want := nd < nb && dl.Rows <= maxDocsGrowth*rows
				if got := pl.docsOf(r) != nil; got != want {
					t.Errorf("%s n%d rank %d: auto took thd %v with %d calls in blocks, %d in thd, %d rows against %d", name, n, r, got, nb, nd, dl.Rows, rows)
				}
				rowsB, rowsD, runs, fill = max(rowsB, rows), max(rowsD, dl.Rows), max(runs, len(dl.Fill)), max(fill, len(dl.Sum))
				g := float64(dl.Rows) / float64(rows)
				growth = [2]float64{min(growth[0], g), max(growth[1], g)}
				topB, topD = max(topB, nb), max(topD, nd)
			}
			t.Logf("%-21s n%-3d cuDNN calls per rank, most: blocks %3d, thd %d; auto: %s; key rows, most: blocks %d, thd %d (%.2f-%.2fx per rank); copies %d in %d waves back; plan %v",
				name, n, topB, topD, pl.KVLayoutName(), rowsB, rowsD, growth[0], growth[1], runs, fill, el.Round(time.Millisecond))
			if name != "full" && topB <= 2 {
				t.Errorf("%s n%d: the blocks layout takes only %d calls: the test shows nothing", name, n, topB)
			}
			if name != "full" && n == 8 && pl.KVLayoutName() != "thd" {
				t.Errorf("%s n%d: auto took %s, want thd on every rank", name, n, pl.KVLayoutName())
			}
			for _, cfg := range []Config{{Ranks: n, Stages: 1}, {Ranks: n, Stages: 1, Calls: cudnnCalls{}, KVLayout: KVBlocks}} {
				if pl, err := (Balanced{}).Plan(cfg, p); err != nil || pl.KVLayoutName() != "blocks" {
					t.Fatalf("%s n%d: layout %v, count %v: %v", name, n, cfg.KVLayout, cfg.Calls != nil, err)
				}
			}
		}
	}
}

// thdMasks are the masks the THD layout is checked on: the CP masks and windows.
func thdMasks() []string {
	return append(mask.CPMasks(), "sliding_window_causal", "sliding_window")
}

// TestBalancedTHDMatchesReference: balanced with the THD layout forced (--cp-layout thd)
// on the CP masks and the window masks, 2, 4 and 8 ranks (and 4 and 8 in Ulysses groups of
// 2: the layout on head shards), forward and backward with the ref kernel against the
// single-device reference; most dispatch ranks take the layout (the rest are past
// maxDocsGrowth or have no work), and each rank sends what RankCommBytesOf says (the
// layout moves nothing more).
func TestBalancedTHDMatchesReference(t *testing.T) {
	m, _ := New("balanced")
	var cache refCache
	for mi, name := range thdMasks() {
		spec, err := mask.Build(name, testSeq, testMaskOptions(uint64(31+mi)))
		if err != nil {
			t.Fatal(err)
		}
		p := kernels.Problem{HeadsQ: 4, HeadsKV: 2, HeadDim: 16, DType: tensor.BF16, Mask: spec.Mask}
		for ci, c := range [][2]int{{2, 1}, {4, 1}, {8, 1}, {4, 2}, {8, 2}} {
			n, u := c[0], c[1]
			t.Run(fmt.Sprintf("%s/n%d-u%d", name, n, u), func(t *testing.T) {
				pl, err := m.Plan(Config{Ranks: n, Ulysses: u, KVLayout: KVDocs}, p)
				if err != nil {
					t.Fatal(err)
				}
				if pl.Config.Ulysses != u {
					t.Fatalf("mesh %s, want Ulysses %d", pl.Config.Mesh(), u)
				}
				took, work := 0, 0
				for r := range pl.Dispatch.Ranks {
					if _, bm := pl.oneMask(r); len(bm.Slices) > 0 {
						work++
					}
					if pl.docsOf(r) != nil {
						took++
					}
				}
				if 4*took < 3*work {
					t.Fatalf("only %d of %d ranks with work took the THD layout (%s)", took, work, pl.KVLayoutName())
				}
				q, k, v, dout := inputs(p, uint64(300+10*mi+ci))
				exact, naive := cache.get(t, fmt.Sprint(mi, ci), p, q, k, v, dout)
				got, counted := runCase(t, m, pl, q, k, v, dout)
				if rep := check.CompareOutputs(got, exact, naive, kernels.FwdBwd); !rep.Pass {
					t.Fatalf("thd layout (%s): %s", pl.KVLayoutName(), rep)
				}
				for r, cb := range counted {
					if fwd, bwd := RankCommBytesOf(pl, r, kernels.Fwd), RankCommBytesOf(pl, r, kernels.Bwd); cb != [2]int64{fwd, bwd} {
						t.Fatalf("rank %d sent %v; RankCommBytesOf says %d, %d", r, cb, fwd, bwd)
					}
				}
			})
		}
	}
}

// TestBalancedTHDBufferBytes: with the THD layout, the device memory balanced's buffers
// take on the emulated device (its peak, less the pass's inputs and outputs) is what
// BufferBytes estimates before the run, within a fifth, never more; the memory guard's
// bound with the THD layout is at least that, and without it below (so the bound counts
// the copies).
func TestBalancedTHDBufferBytes(t *testing.T) {
	m, _ := New("balanced")
	for _, name := range thdMasks() {
		for _, n := range []int{4, 8} {
			spec, err := mask.Build(name, n*64, testMaskOptions(5))
			if err != nil {
				t.Fatal(err)
			}
			p := kernels.Problem{HeadsQ: 8, HeadsKV: 2, HeadDim: 16, DType: tensor.BF16, Mask: spec.Mask}
			pl, err := m.Plan(Config{Ranks: n, Ulysses: 1, KVLayout: KVDocs}, p)
			if err != nil {
				t.Fatal(err)
			}
			if pl.KVLayoutName() == "blocks" {
				t.Fatalf("%s n%d: no rank took the THD layout", name, n)
			}
			got := balancedBufferPeak(t, m, pl, p, 13, true) // the tables kept, as on a GPU
			want := Balanced{}.BufferBytes(pl, kernels.FwdBwd)
			if got > want || float64(got) < 0.8*float64(want) {
				t.Fatalf("%s n%d (%s): buffers took %d bytes at the peak, BufferBytes says %d", name, n, pl.KVLayoutName(), got, want)
			}
			passes := []kernels.Pass{kernels.Fwd, kernels.Bwd}
			if bound := MethodBufferBound(nil, pl.Tokens, n, 8, 2, 16, tensor.BF16, passes, 0, true); bound < float64(want) {
				t.Fatalf("%s n%d: the guard's bound %g is below the plan's %d", name, n, bound, want)
			}
			if MethodBufferBound(nil, pl.Tokens, n, 8, 2, 16, tensor.BF16, passes, 0, true) <= MethodBufferBound(nil, pl.Tokens, n, 8, 2, 16, tensor.BF16, passes, 0, false) {
				t.Fatalf("the guard's bound does not grow with the THD layout")
			}
		}
	}
}

// TestBalancedTHDOnDevice: the THD layout through the device path (row views, batched
// copies and gradient sums over runs tables) on the emulated device: eager with bf16
// partials (as cudnn writes them) and a table uploaded per call, eager without the
// batched kernels (run by run), deferred and event-ordered with fp32 partials and the
// tables kept for the run; on the CP masks at 2, 4 and 8 ranks, checked against the
// reference (bf16 partials within 1.1x the rule's tolerance, as
// TestDeviceOpsBF16Partials), each rank's bytes as CommBytes says, nothing left allocated
// after Close, no host wait on a stream-ordered communicator, and the batched launches
// used where they can run.
func TestBalancedTHDOnDevice(t *testing.T) {
	m, _ := New("balanced")
	var cache refCache
	modes := []struct {
		mode          deviceMode
		part          tensor.DType
		limit         float64
		keep, noBatch bool
	}{{eager, tensor.BF16, 1.1, false, false}, {eager, tensor.FP32, 1, false, true},
		{deferred, tensor.FP32, 1, true, false}, {ordered, tensor.FP32, 1, true, false}}
	for mi, name := range mask.CPMasks() {
		spec, err := mask.Build(name, testSeq, testMaskOptions(uint64(61+mi)))
		if err != nil {
			t.Fatal(err)
		}
		p := kernels.Problem{HeadsQ: 8, HeadsKV: 2, HeadDim: 16, DType: tensor.BF16, Mask: spec.Mask}
		for ci, n := range []int{2, 4, 8} {
			pl, err := m.Plan(Config{Ranks: n, Ulysses: 1, KVLayout: KVDocs}, p)
			if err != nil {
				t.Fatal(err)
			}
			q, k, v, dout := inputs(p, uint64(700+10*mi+ci))
			exact, naive := cache.get(t, fmt.Sprint(mi, ci), p, q, k, v, dout)
			for _, md := range modes {
				what := fmt.Sprintf("%s n%d mode %d (%s partials, tables kept %v, batched %v, %s)", name, n, md.mode, md.part, md.keep, !md.noBatch, pl.KVLayoutName())
				got, counted, leaked, marks, calls := runFakeDeviceWith(t, m, pl, md.part, md.mode, md.keep, md.noBatch, q, k, v, dout)
				if md.mode == ordered && marks != 0 {
					t.Fatalf("%s: %d transfers waited on the host (Mark) on a stream-ordered communicator", what, marks)
				}
				rep := check.CompareOutputs(got, exact, naive, kernels.FwdBwd)
				for _, f := range rep.Figures {
					if ratio := f.Err / f.Tol; f.NaNs > 0 || !(ratio <= md.limit) {
						t.Fatalf("%s: %s error %.3g is %.3fx its tolerance; %s", what, f.Name, f.Err, ratio, rep)
					}
				}
				for r, c := range counted {
					if want := RankCommBytesOf(pl, r, kernels.FwdBwd); c != want {
						t.Fatalf("%s: rank %d sent %d bytes; CommBytes says %d", what, r, c, want)
					}
				}
				for r, l := range leaked {
					if l != 0 {
						t.Fatalf("%s: rank %d left %d device bytes allocated", what, r, l)
					}
				}
				if thd := pl.KVLayoutName() != "blocks"; thd && (calls["copy-runs"] > 0) == md.noBatch {
					t.Fatalf("%s: %d batched copies", what, calls["copy-runs"])
				}
			}
		}
	}
}

// TestBalancedTHDOneStageOnly: past one stage the layout is blocks (auto) or a one-line
// error naming --cp-stages (thd forced).
func TestBalancedTHDOneStageOnly(t *testing.T) {
	m := cpMask(t, "causal_document_long", 16*512, 3)
	p := kernels.Problem{HeadsQ: 1, HeadsKV: 1, HeadDim: 16, DType: tensor.BF16, Mask: m}
	pl, err := Balanced{}.Plan(Config{Ranks: 16, Stages: 3, Calls: cudnnCalls{}}, p)
	if err != nil {
		t.Fatal(err)
	}
	if pl.Config.Stages < 2 || pl.KVLayoutName() != "blocks" {
		t.Fatalf("%d stages, layout %s: want several stages and blocks", pl.Config.Stages, pl.KVLayoutName())
	}
	_, err = Balanced{}.Plan(Config{Ranks: 16, Stages: 3, KVLayout: KVDocs}, p)
	if err == nil || !strings.Contains(err.Error(), "--cp-stages 1") {
		t.Fatalf("thd forced on %d stages: %v, want an error naming --cp-stages 1", pl.Config.Stages, err)
	}
	if _, err := ParseKVLayout("zigzag"); err == nil || !strings.Contains(err.Error(), "--cp-layout") {
		t.Fatalf("ParseKVLayout(zigzag): %v", err)
	}
}
