package cp

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/longca/longca/comm"
	"github.com/longca/longca/comm/local"
	"github.com/longca/longca/dataset"
	"github.com/longca/longca/kernels"
	"github.com/longca/longca/kernels/check"
	"github.com/longca/longca/kernels/ref"
	"github.com/longca/longca/mask"
	"github.com/longca/longca/tensor"
)

// testSeq is the sequence length of the correctness table: small enough for the CPU
// reference, long enough for several documents per rank.
const testSeq = 256

// testMaskOptions shrink the masks' windows, blocks and documents to testSeq.
func testMaskOptions(seed uint64) mask.Options {
	return mask.Options{
		Seed: seed, Window: 24, BlockSize: 32, LongMin: 24, LongMax: 80,
		Source: &dataset.Empirical{Name: "test", Counts: []int{3, 17, 40, 61, 90}},
	}
}

// tableMeshes are what the table asks each method for (Method.Meshes): 2, 4 and 8 ranks
// with the sharding, the placement and the windows varied; on 4 ranks a 2-D method is
// asked for the double ring 1 x 4 in 2 windows. (One rank: TestSmoke and
// TestMethodsOverNCCL.)
var tableMeshes = []Config{
	{Ranks: 2, Sharding: Contiguous},
	{Ranks: 4, Sharding: Zigzag, HeadFirst: true, Ulysses: 1, Windows: 2},
	{Ranks: 8, Sharding: Zigzag, Windows: 2},
}

// meshes are the configurations of the table for method m: what m says it runs on for
// each of tableMeshes, without repeats. No test switches on a method's name.
func meshes(m Method) []Config {
	var out []Config
	seen := map[string]bool{}
	for _, fixed := range tableMeshes {
		for _, c := range m.Meshes(fixed) {
			key := fmt.Sprintf("%d %d %d %d %v %v", c.Ranks, c.Ulysses, c.Ring, c.Windows, c.HeadFirst, c.Sharding)
			if !seen[key] {
				seen[key] = true
				out = append(out, c)
			}
		}
	}
	return out
}

// meshName names a table configuration in subtest names.
func meshName(c Config) string {
	s := fmt.Sprintf("n%d-%dx%d", c.Ranks, c.Ulysses, c.Ring)
	if c.Windows > 1 {
		s += fmt.Sprintf("-w%d", c.Windows)
	}
	if c.HeadFirst {
		s += "-hf"
	}
	return s + "-" + c.Sharding.String()
}

// heads are the head settings: GQA with more ranks than KV heads (replicated under
// Ulysses), GQA with 8 KV heads, and MHA.
var heads = [][2]int{{8, 2}, {16, 8}, {8, 8}}

// refCache computes each problem's references once for all methods and meshes.
type refCache struct {
	mu sync.Mutex
	m  map[string][2]Outputs
}

func (c *refCache) get(t *testing.T, key string, p kernels.Problem, q, k, v, dout *tensor.Host) (exact, naive Outputs) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if r, ok := c.m[key]; ok {
		return r[0], r[1]
	}
	exact, naive, err := check.References(context.Background(), p, q, k, v, dout, true)
	if err != nil {
		t.Fatal(err)
	}
	if c.m == nil {
		c.m = map[string][2]Outputs{}
	}
	c.m[key] = [2]Outputs{exact, naive}
	return exact, naive
}

// runCase runs one method on in-process ranks and returns the gathered global outputs
// and every rank's bytes sent by the method (forward, backward) as counted.
func runCase(t *testing.T, m Method, pl *Plan, q, k, v, dout *tensor.Host) (Outputs, [][2]int64) {
	t.Helper()
	n := pl.Config.Ranks
	var got Outputs
	counted := make([][2]int64, n)
	err := local.Run(n, func(c comm.Comm) error {
		r, err := NewRun(pl, ref.New(ref.Options{}), c)
		if err != nil {
			return err
		}
		rank := c.Rank()
		lq, lk, lv, ldo := pl.Shard(q, rank), pl.Shard(k, rank), pl.Shard(v, rank), pl.Shard(dout, rank)
		o := Outputs{Out: poisoned(pl.Problem.DType, lq.Shape()), LSE: poisoned(tensor.FP32, []int{pl.Problem.HeadsQ, pl.Tokens}),
			DQ: poisoned(pl.Problem.DType, lq.Shape()), DK: poisoned(pl.Problem.DType, lk.Shape()), DV: poisoned(pl.Problem.DType, lk.Shape())}
		c0 := r.Counters().BytesSent
		if err := m.Forward(context.Background(), r, lq, lk, lv, o.Out, o.LSE); err != nil {
			return err
		}
		c1 := r.Counters().BytesSent
		if err := m.Backward(context.Background(), r, lq, lk, lv, o.Out, o.LSE, ldo, o.DQ, o.DK, o.DV); err != nil {
			return err
		}
		counted[rank] = [2]int64{c1 - c0, r.Counters().BytesSent - c1}
		g, err := GatherOutputs(c, pl, o, true)
		if rank == 0 {
			got = g
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return got, counted
}

// TestMethodsMatchReference is the must-show table: every method x every mask x its
// world sizes and meshes x GQA and MHA, forward (out, lse) and backward (dq, dk, dv)
// against the single-device reference by the rule of MASKS.md, with fresh inputs from
// a seed per case; and the bytes each rank counted equal CommBytes.
func TestMethodsMatchReference(t *testing.T) {
	var cache refCache
	for mi, maskName := range mask.Names() {
		for hi, h := range heads {
			spec, err := mask.Build(maskName, testSeq, testMaskOptions(uint64(1+mi)))
			if err != nil {
				t.Fatal(err)
			}
			docs, err := spec.Docs()
			if err != nil {
				t.Fatal(err)
			}
			p := kernels.Problem{HeadsQ: h[0], HeadsKV: h[1], HeadDim: 16, DType: tensor.BF16, Mask: spec.Mask}
			for _, name := range Names() {
				m, _ := New(name)
				for ci, mc := range meshes(m) {
					// The 16:8 setting runs on the 8-rank meshes only, to keep the table fast.
					if hi == 1 && mc.Ranks != 8 {
						continue
					}
					t.Run(fmt.Sprintf("%s/%d:%d/%s/%s", maskName, h[0], h[1], name, meshName(mc)), func(t *testing.T) {
						cfg := mc
						cfg.Docs = docs
						pl, err := m.Plan(cfg, p)
						if err != nil {
							t.Fatal(err)
						}
						// One input seed per (mask, heads, mesh index): fresh inputs per case,
						// and the reference computed once for the methods that share it.
						inSeed := uint64(1000*mi + 10*hi + ci)
						q, k, v, dout := inputs(p, inSeed)
						exact, naive := cache.get(t, fmt.Sprint(mi, hi, ci), p, q, k, v, dout)
						got, counted := runCase(t, m, pl, q, k, v, dout)
						if rep := check.CompareOutputs(got, exact, naive, kernels.FwdBwd); !rep.Pass {
							t.Fatalf("%s", rep)
						}
						var most [2]int64
						for r, c := range counted {
							fwd, bwd := RankCommBytesOf(pl, r, kernels.Fwd), RankCommBytesOf(pl, r, kernels.Bwd)
							if c[0] != fwd || c[1] != bwd {
								t.Fatalf("rank %d sent %d bytes forward and %d backward; CommBytes says %d and %d", r, c[0], c[1], fwd, bwd)
							}
							most = [2]int64{max(most[0], fwd), max(most[1], bwd)}
						}
						if got := [2]int64{m.CommBytes(pl, kernels.Fwd), m.CommBytes(pl, kernels.Bwd)}; got != most {
							t.Fatalf("CommBytes %v is not the most any rank sends, %v", got, most)
						}
						// (balanced fetches only what is needed, which may be nothing:
						// TestDispatchFetchesExactlyWhatIsNeeded checks that.)
						if mc.Ranks > 1 && most[0] == 0 && pl.Dispatch == nil {
							t.Fatalf("CommBytes forward is 0 on %d ranks", mc.Ranks)
						}
					})
				}
			}
		}
	}
}
