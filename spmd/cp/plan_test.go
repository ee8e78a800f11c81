package cp

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/longca/longca/comm"
	"github.com/longca/longca/comm/local"
	"github.com/longca/longca/kernels"
	"github.com/longca/longca/kernels/check"
	"github.com/longca/longca/kernels/ref"
	"github.com/longca/longca/mask"
	"github.com/longca/longca/tensor"
)

func causal(s int) mask.Mask {
	return mask.Mask{SeqQ: s, SeqK: s, Slices: []mask.Slice{{Q: mask.Range{End: s}, K: mask.Range{End: s}, Kind: mask.Causal}}}
}

func TestImpossibleConfigurationsFail(t *testing.T) {
	p := func(hq, hkv, s int) kernels.Problem {
		return kernels.Problem{HeadsQ: hq, HeadsKV: hkv, HeadDim: 128, DType: tensor.BF16, Mask: causal(s)}
	}
	cases := []struct {
		method string
		cfg    Config
		p      kernels.Problem
		want   string // a fragment of the one-line error
	}{
		{"ulysses", Config{Ranks: 96}, p(64, 8, 96*8192), "64 query heads do not split over 96 Ulysses ranks (--heads, --ulysses or --ranks: the Ulysses group is every rank)"},
		{"ulysses", Config{Ranks: 16}, p(64, 12, 16*64), "64:12"}, // invalid GQA
		{"ulysses", Config{Ranks: 16}, p(48, 12, 16*64), "12 KV heads neither split over nor replicate evenly onto 16 Ulysses ranks (--heads, --ulysses or --ranks"},
		{"usp", Config{Ranks: 6, Ulysses: 3, Ring: 2}, p(64, 8, 6*1024), "64 query heads do not split over 3 Ulysses ranks (--heads, --ulysses)"}, // a group of part of the world: not --ranks
		{"usp", Config{Ranks: 8, Ulysses: 2, Ring: 3}, p(64, 8, 8192), "mesh 2x3 (--ulysses x --ring) has 6 ranks, not the 8"},
		{"loongtrain", Config{Ranks: 8, Ulysses: 2, Ring: 4, Windows: 3}, p(64, 8, 8192), "3 windows (--windows) do not divide a ring of 4"},
		{"ring-p2p", Config{Ranks: 8, Sharding: Contiguous}, p(64, 8, 1001), "1001 tokens do not split over 8 ranks"},
		{"ring-allgather", Config{Ranks: 0}, p(64, 8, 1000), "0 ranks"},
	}
	for _, c := range cases {
		m, err := New(c.method)
		if err != nil {
			t.Fatal(err)
		}
		_, err = m.Plan(c.cfg, c.p)
		if err == nil || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%s %+v: got %v, want one line containing %q", c.method, c.cfg, err, c.want)
		}
	}
	if _, err := New("ring-nope"); err == nil || !strings.Contains(err.Error(), "ring-p2p") {
		t.Errorf("unknown method: %v", err)
	}
}

func TestZigzagPadding(t *testing.T) {
	// Documents of 5, 16 and 11 tokens on a ring of 2, padded to multiples of 2N = 8:
	// 8 + 16 + 16 = 40 tokens, 8 of them padding; chunks of 2, 4 and 4.
	docs := []mask.Range{{Start: 0, End: 5}, {Start: 5, End: 21}, {Start: 21, End: 32}}
	l, err := ZigzagLayout(docs, 32, 2, 8)
	if err != nil {
		t.Fatal(err)
	}
	if l.Padded != 40 || l.Padding() != 8 || l.Local != 20 {
		t.Fatalf("padded %d, padding %d, local %d; want 40, 8, 20", l.Padded, l.Padding(), l.Local)
	}
	want := [][]Piece{
		// rank 0: doc0 chunk 0 (chunk 3 is padding); doc1 chunks 0 and 3; doc2 chunk 0
		// (its chunk 3 is padding).
		{{mask.Range{Start: 0, End: 2}, 0}, {mask.Range{Start: 5, End: 9}, 4}, {mask.Range{Start: 17, End: 25}, 8}}, // doc1's last chunk and doc2's first are adjacent: one piece
		{{mask.Range{Start: 2, End: 5}, 0}, {mask.Range{Start: 9, End: 17}, 4}, {mask.Range{Start: 25, End: 32}, 12}},
	}
	for r := range want {
		if len(l.Shards[r]) != len(want[r]) {
			t.Fatalf("rank %d pieces %v, want %v", r, l.Shards[r], want[r])
		}
		for i := range want[r] {
			if l.Shards[r][i] != want[r][i] {
				t.Fatalf("rank %d pieces %v, want %v", r, l.Shards[r], want[r])
			}
		}
	}
	// Every real token is placed exactly once; shard then gather is the identity.
	g := tensor.NewHost(tensor.FP32, 32, 3)
	for i := range g.Numel() {
		g.Set(i, float64(i+1))
	}
	locals := []*tensor.Host{l.ShardTokens(g, 0, 0, 0, 20), l.ShardTokens(g, 1, 0, 0, 20)}
	back := tensor.NewHost(tensor.FP32, 32, 3)
	for r, loc := range locals {
		l.GatherTokens(back, loc, r, 0, 0, 20)
	}
	for i := range g.Numel() {
		if back.At(i) != g.At(i) {
			t.Fatalf("element %d: %v after shard+gather, want %v", i, back.At(i), g.At(i))
		}
	}
	// Padding rows are zero: 40 local rows, 32 real, so 8 rows of zeros.
	zeros := 0
	for _, loc := range locals {
		for row := range 20 {
			if loc.At(3*row) == 0 {
				zeros++
			}
		}
	}
	if zeros != 8 {
		t.Fatalf("%d zero (padding) rows, want 8", zeros)
	}
	// The plan reports the same padding: 3 docs at 4 ranks pad to multiples of 8.
	pl, err := RingP2P{}.Plan(Config{Ranks: 4, Docs: docs}, kernels.Problem{HeadsQ: 1, HeadsKV: 1, HeadDim: 4, DType: tensor.BF16, Mask: causal(32)})
	if err != nil {
		t.Fatal(err)
	}
	if pl.Padding() != 8 || pl.Tokens != 10 {
		t.Fatalf("plan padding %d, tokens %d; want 8, 10", pl.Padding(), pl.Tokens)
	}
}

// On a ring of one rank the default sharding is contiguous: zigzag's chunks would be the
// documents in order and its padding (each document to a multiple of 2N) all it adds (call
// 98a: 8,196 rows for 8,192 tokens, 0.89-0.90 of the kernel alone on documents). A ring of
// two ranks or more, or zigzag asked for, keeps zigzag and its padding.
func TestOneRankRingIsNotPadded(t *testing.T) {
	docs := []mask.Range{{Start: 0, End: 13}, {Start: 13, End: 14}, {Start: 14, End: 32}} // 13 and 1 odd
	p := kernels.Problem{HeadsQ: 4, HeadsKV: 2, HeadDim: 4, DType: tensor.BF16, Mask: causal(32)}
	for _, c := range []struct {
		method   string
		cfg      Config
		sharding Sharding
		padding  int
	}{
		{"ring-p2p", Config{Ranks: 1, Docs: docs}, Contiguous, 0},
		{"ring-allgather", Config{Ranks: 1, Docs: docs}, Contiguous, 0},
		{"loongtrain", Config{Ranks: 1, Docs: docs}, Contiguous, 0},
		{"usp", Config{Ranks: 2, Ulysses: 2, Ring: 1, Docs: docs}, Contiguous, 0},
		{"ring-allgather", Config{Ranks: 1, Docs: docs, Sharding: Zigzag}, Zigzag, 2},
		{"ring-allgather", Config{Ranks: 2, Docs: docs}, Zigzag, 8},
		{"usp", Config{Ranks: 2, Ulysses: 1, Ring: 2, Docs: docs}, Zigzag, 8},
	} {
		meth, err := New(c.method)
		if err != nil {
			t.Fatal(err)
		}
		pl, err := meth.Plan(c.cfg, p)
		if err != nil {
			t.Fatalf("%s %+v: %v", c.method, c.cfg, err)
		}
		if pl.Config.Sharding != c.sharding || pl.Padding() != c.padding {
			t.Errorf("%s ranks %d ring %d: sharding %v, padding %d; want %v, %d", c.method, c.cfg.Ranks, pl.Config.Ring, pl.Config.Sharding, pl.Padding(), c.sharding, c.padding)
		}
		if g := pl.GatherMask(0); c.padding == 0 && pl.Config.Ring == 1 && (g.SeqQ != 32 || g.Area() != p.Mask.Area()) {
			t.Errorf("%s on one ring rank: the gathered mask is %dx%d of area %d, want the problem's 32x32 of %d", c.method, g.SeqQ, g.SeqK, g.Area(), p.Mask.Area())
		}
	}
}

func TestSubMaskMatchesGlobalMask(t *testing.T) {
	// Brute force: every local pair of every (q shard, k shard) allows exactly what the
	// global mask allows of the tokens there, and padding allows nothing.
	spec, err := mask.Build("share_question", 96, testMaskOptions(3))
	if err != nil {
		t.Fatal(err)
	}
	docs, _ := spec.Docs()
	l, err := ZigzagLayout(docs, 96, 3, 6)
	if err != nil {
		t.Fatal(err)
	}
	token := func(ps []Piece, local int) int {
		for _, p := range ps {
			if local >= p.At && local < p.At+p.Src.Len() {
				return p.Src.Start + local - p.At
			}
		}
		return -1 // padding
	}
	for a := range 3 {
		for b := range 3 {
			sub := SubMask(spec.Mask, l.Shards[a], l.Local, l.Shards[b], l.Local)
			if err := sub.Validate(); err != nil {
				t.Fatal(err)
			}
			var area int64
			for i := range l.Local {
				for j := range l.Local {
					gi, gj := token(l.Shards[a], i), token(l.Shards[b], j)
					want := gi >= 0 && gj >= 0 && spec.Mask.Allowed(gi, gj)
					if sub.Allowed(i, j) != want {
						t.Fatalf("shards %d,%d local (%d,%d) = global (%d,%d): allowed %v, want %v", a, b, i, j, gi, gj, !want, want)
					}
					if want {
						area++
					}
				}
			}
			if sub.Area() != area {
				t.Fatalf("shards %d,%d: area %d, brute force %d (overlapping slices?)", a, b, sub.Area(), area)
			}
		}
	}
}

func TestMergeLSEFullyMaskedRows(t *testing.T) {
	// Two partials over 3 tokens x 1 head x 2 dims: row 0 seen by both, row 1 by the
	// second only, row 2 by neither.
	mk := func(lse []float64, out []float64) (*tensor.Host, *tensor.Host) {
		o, l := tensor.NewHost(tensor.FP32, 3, 1, 2), tensor.NewHost(tensor.FP32, 1, 3)
		o.SetFloat64s(out)
		l.SetFloat64s(lse)
		return o, l
	}
	inf := math.Inf(-1)
	o1, l1 := mk([]float64{math.Log(1), inf, inf}, []float64{1, 2, 0, 0, 0, 0})
	o2, l2 := mk([]float64{math.Log(3), 0.5, inf}, []float64{5, 6, 7, 8, 0, 0})
	out, lse := tensor.NewHost(tensor.FP32, 3, 1, 2), tensor.NewHost(tensor.FP32, 1, 3)
	if err := MergeLSE([]*tensor.Host{o1, o2}, []*tensor.Host{l1, l2}, out, lse); err != nil {
		t.Fatal(err)
	}
	want := []float64{0.25*1 + 0.75*5, 0.25*2 + 0.75*6, 7, 8, 0, 0}
	for i, w := range want {
		if math.Abs(out.At(i)-w) > 1e-6 {
			t.Fatalf("out %v, want %v", out.Float64s(), want)
		}
	}
	if math.Abs(lse.At(0)-math.Log(4)) > 1e-6 || math.Abs(lse.At(1)-0.5) > 1e-6 || !math.IsInf(lse.At(2), -1) {
		t.Fatalf("lse %v, want [log 4, 0.5, -inf]", lse.Float64s())
	}
	// Huge lse values do not overflow.
	o3, l3 := mk([]float64{800, 800, inf}, []float64{1, 1, 1, 1, 0, 0})
	o4, l4 := mk([]float64{800, -800, inf}, []float64{3, 3, 3, 3, 0, 0})
	if err := MergeLSE([]*tensor.Host{o3, o4}, []*tensor.Host{l3, l4}, out, lse); err != nil {
		t.Fatal(err)
	}
	if math.Abs(out.At(0)-2) > 1e-6 || math.Abs(out.At(2)-1) > 1e-6 || math.Abs(lse.At(0)-(800+math.Log(2))) > 1e-3 {
		t.Fatalf("out %v lse %v", out.Float64s(), lse.Float64s())
	}
	for _, v := range out.Float64s() {
		if math.IsNaN(v) {
			t.Fatal("NaN in merged out")
		}
	}
}

// TestFullyMaskedRowsEndToEnd: a mask where some queries see nothing (an empty top-left
// block) gives out 0 and lse -inf there through every method, not NaN.
func TestFullyMaskedRowsEndToEnd(t *testing.T) {
	s := 64
	m := mask.Mask{SeqQ: s, SeqK: s, Slices: []mask.Slice{{Q: mask.Range{Start: 40, End: 64}, K: mask.Range{Start: 0, End: 30}, Kind: mask.Full}}}
	p := kernels.Problem{HeadsQ: 4, HeadsKV: 2, HeadDim: 8, DType: tensor.BF16, Mask: m}
	q, k, v, dout := inputs(p, 5)
	exact, naive, err := check.References(context.Background(), p, q, k, v, dout, true)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range Names() {
		meth, _ := New(name)
		pl, err := meth.Plan(Config{Ranks: 4, Ulysses: 2, Ring: 2, Windows: 2}, p)
		if err != nil {
			t.Fatal(err)
		}
		got, _ := runCase(t, meth, pl, q, k, v, dout)
		if rep := check.CompareOutputs(got, exact, naive, kernels.FwdBwd); !rep.Pass {
			t.Fatalf("%s: %s", name, rep)
		}
		if !math.IsInf(got.LSE.At(0), -1) || got.Out.At(0) != 0 {
			t.Fatalf("%s: row 0 has lse %v, out %v; want -inf, 0", name, got.LSE.At(0), got.Out.At(0))
		}
	}
}

// dropStep is a kernel that silently skips one sub-step: the check must catch it.
type dropStep struct {
	kernels.Kernel
	calls int
}

func (d *dropStep) Forward(ctx context.Context, p kernels.Problem, q, k, v, out, lse tensor.Tensor) error {
	d.calls++
	if d.calls == 2 {
		lse.(*tensor.Host).Fill(math.Inf(-1)) // pretends the step saw nothing
		return nil
	}
	return d.Kernel.Forward(ctx, p, q, k, v, out, lse)
}

func TestCheckCatchesAMissingStep(t *testing.T) {
	p := kernels.Problem{HeadsQ: 2, HeadsKV: 2, HeadDim: 8, DType: tensor.BF16, Mask: causal(64)}
	pl, err := RingP2P{}.Plan(Config{Ranks: 2}, p)
	if err != nil {
		t.Fatal(err)
	}
	var pass [2]bool
	err = local.Run(2, func(c comm.Comm) error {
		r, err := NewRun(pl, &dropStep{Kernel: ref.New(ref.Options{})}, c)
		if err != nil {
			return err
		}
		rep, err := CheckRank(context.Background(), RingP2P{}, r, CheckOptions{Seed: 9, Backward: false})
		pass[c.Rank()] = rep.Pass
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if pass[0] || pass[1] {
		t.Fatalf("a ring that skipped a step passed the check (rank 0 %v, rank 1 %v)", pass[0], pass[1])
	}
	// And the honest kernel passes on every rank.
	err = local.Run(2, func(c comm.Comm) error {
		r, err := NewRun(pl, ref.New(ref.Options{}), c)
		if err != nil {
			return err
		}
		rep, err := CheckRank(context.Background(), RingP2P{}, r, CheckOptions{Seed: 9, Backward: true})
		if err == nil && !rep.Pass {
			err = errors.New(rep.String())
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestMissingRankFailsMethod: a rank that never joins the forward makes the others fail
// with a timeout naming it, instead of hanging.
func TestMissingRankFailsMethod(t *testing.T) {
	p := kernels.Problem{HeadsQ: 4, HeadsKV: 4, HeadDim: 8, DType: tensor.BF16, Mask: causal(64)}
	for _, name := range []string{"ring-p2p", "ulysses", "ring-allgather"} {
		m, _ := New(name)
		pl, err := m.Plan(Config{Ranks: 4}, p)
		if err != nil {
			t.Fatal(err)
		}
		q, k, v, dout := inputs(p, 1)
		errs := make([]error, 4)
		_ = local.Run(4, func(c comm.Comm) error {
			r, err := NewRun(pl, ref.New(ref.Options{}), c)
			if err != nil || c.Rank() == 3 {
				return err // rank 3 leaves after setup
			}
			_, errs[c.Rank()] = Execute(context.Background(), m, r, q, k, v, dout, false)
			return nil
		}, local.WithTimeout(300*time.Millisecond))
		for rank := range 3 {
			var pe *comm.PeerError
			if !errors.As(errs[rank], &pe) || !errors.Is(errs[rank], comm.ErrTimeout) {
				t.Fatalf("%s rank %d: %v, want a timeout", name, rank, errs[rank])
			}
		}
	}
}

func TestUlyssesBackwardNeedsForward(t *testing.T) {
	p := kernels.Problem{HeadsQ: 4, HeadsKV: 2, HeadDim: 8, DType: tensor.BF16, Mask: causal(32)}
	pl, err := Ulysses{}.Plan(Config{Ranks: 2}, p)
	if err != nil {
		t.Fatal(err)
	}
	err = local.Run(2, func(c comm.Comm) error {
		r, err := NewRun(pl, ref.New(ref.Options{}), c)
		if err != nil {
			return err
		}
		q := tensor.NewHost(tensor.BF16, pl.Tokens, 4, 8)
		kv := tensor.NewHost(tensor.BF16, pl.Tokens, 2, 8)
		lse := tensor.NewHost(tensor.FP32, 4, pl.Tokens)
		err = Ulysses{}.Backward(context.Background(), r, q, kv, kv, q, lse, q, q.Clone(), kv.Clone(), kv.Clone())
		if err == nil || !strings.Contains(err.Error(), "needs the forward") {
			return fmt.Errorf("backward without forward: %v", err)
		}
		return nil
	}, local.WithTimeout(time.Second))
	if err != nil {
		t.Fatal(err)
	}
}
