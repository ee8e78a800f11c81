package harness

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"sync"
	"testing"

	"github.com/longca/longca/dataset"
	"github.com/longca/longca/internal/heaptest"
	"github.com/longca/longca/kernels"
	"github.com/longca/longca/kernels/check"
	"github.com/longca/longca/spmd/cp"
	"github.com/longca/longca/tensor"
)

// TestCPEstimateCountsHostPrepHere: the host preparation the CP estimate charges a sample
// of short documents (1-token and 1-to-64-token documents, causal_document and
// full_document, 4 and 8 in-process ranks of 4K-8K tokens; a check of such a mask runs at
// the full length, its area being small) is at least what that preparation takes on this
// host: every rank's tensors of each pass (hostPassTensors, as CPRunner.passTensors makes
// them) and every rank's draw of the check's global inputs (check.Inputs, as
// cp.CheckRank draws them). It runs on one core (GOMAXPROCS 1, the estimate told so) and
// is measured by the process's CPU time, so that other processes on the host do not
// count. The estimate had that work at HostPrepBytes, the H200 host's rate (about 2x this
// host's), and the check's draw at half a pass's bytes a token: 0.35-0.6x of it here, and
// `cp` of 1-token documents 1.5x low.
func TestCPEstimateCountsHostPrepHere(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	hostPrep.once = sync.Once{} // measured here, on one core, as the sweep below
	rate := HostPrepRate()
	ones := make([]int, 64)
	for i := range ones {
		ones[i] = 1
	}
	var upTo64 []int
	for i := 1; i <= 64; i++ {
		upTo64 = append(upTo64, i)
	}
	for _, c := range []struct {
		ranks, tokens int
		counts        []int
		mask          string
	}{
		{8, 4096, ones, "causal_document"},
		{4, 8192, ones, "full_document"},
		{4, 8192, upTo64, "causal_document"},
		{8, 4096, upTo64, "full_document"},
	} {
		name := fmt.Sprintf("1-to-%d", c.counts[len(c.counts)-1])
		docs := Docs{Source: dataset.NewCounts(name, c.counts)}
		t.Run(fmt.Sprintf("%s-%s-%dx%d", name, c.mask, c.ranks, c.tokens), func(t *testing.T) {
			s := CPSweep{Methods: []string{"ring-p2p"}, Masks: []string{c.mask}, SeqLen: c.ranks * c.tokens, Heads: []Heads{{4, 1}}, HeadDim: 32,
				DType: tensor.BF16, Passes: []kernels.Pass{kernels.Fwd, kernels.Bwd}, Samples: 1, Seed: 42, Kernel: "ref",
				Mesh: cp.Config{HeadFirst: true, Sharding: cp.Contiguous}, Build: docs.CPBuilder(), Docs: docs}
			cases, err := s.Cases(c.ranks)
			if err != nil {
				t.Fatal(err)
			}
			_, pl, _, err := s.PlanSample(cases[0], 0)
			if err != nil {
				t.Fatal(err)
			}
			seqlen, h := s.checkShape(cases[0], pl, c.ranks, 0)
			if seqlen != s.SeqLen {
				t.Fatalf("checked at %d tokens, want the full %d: the case tests the check of short documents", seqlen, s.SeqLen)
			}
			e := CPEstimateSetup{Ranks: c.ranks, InProcess: true, Cores: 1, HostPrep: rate}
			passes := e.prepSeconds(hostPrepBytes(float64(pl.Tokens), pl.Problem.HeadsQ, pl.Problem.HeadsKV, s.HeadDim, s.DType))
			checked := e.prepSeconds(checkHostBytes(seqlen, float64(pl.Tokens), c.ranks, h, s.HeadDim, s.DType, true))

			c0 := heaptest.CPUTime(t).Seconds()
			for rank := range c.ranks {
				for p := range s.Passes {
					hostPassTensors(rand.New(rand.NewPCG(uint64(p), uint64(rank))), s.DType, pl.Tokens, pl.Problem.HeadsQ, pl.Problem.HeadsKV, s.HeadDim)
				}
			}
			c1 := heaptest.CPUTime(t).Seconds()
			global := kernels.Problem{HeadsQ: h.Q, HeadsKV: h.KV, HeadDim: s.HeadDim, DType: s.DType, Mask: pl.Problem.Mask}
			for range c.ranks {
				check.Inputs(global, s.Seed)
			}
			c2 := heaptest.CPUTime(t).Seconds()
			gotPasses, gotCheck := c1-c0, c2-c1
			t.Logf("passes: estimated %.2f s, measured %.2f s (%.2fx); check's inputs: estimated %.2f s, measured %.2f s (%.2fx); preparing %.3g B/s",
				2*passes, gotPasses, 2*passes/gotPasses, checked, gotCheck, checked/gotCheck, rate)
			if want, got := 2*passes+checked, gotPasses+gotCheck; want < got {
				t.Errorf("host preparation estimated at %.2f s, measured %.2f s", want, got)
			}
		})
	}
}
