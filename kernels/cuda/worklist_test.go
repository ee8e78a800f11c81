package cuda

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/longca/longca/internal/hostcc"
	"github.com/longca/longca/mask"
)

// randomMask is a packed sequence of documents, each with a random kind, plus (sometimes)
// a full block of shared prefix: the shapes of the 12 masks, from a seed.
func randomMask(rng *rand.Rand, s int) mask.Mask {
	m := mask.Mask{SeqQ: s, SeqK: s}
	for at := 0; at < s; {
		n := min(s-at, 1+rng.IntN(s/2+1))
		kind := mask.Kind(rng.IntN(4))
		m.Slices = append(m.Slices, mask.Slice{Q: mask.Range{Start: at, End: at + n}, K: mask.Range{Start: at, End: at + n}, Kind: kind})
		// a shared question: later rows of this doc also see an earlier doc
		if at > 0 && rng.IntN(3) == 0 {
			p := rng.IntN(at) + 1
			m.Slices = append(m.Slices, mask.Slice{Q: mask.Range{Start: at, End: at + n}, K: mask.Range{Start: 0, End: p}, Kind: mask.Full})
		}
		at += n
	}
	return m
}

// checkList compares every tile of a work list with the brute-force classification.
func checkList(t *testing.T, w *WorkList, m mask.Mask, l, qTile, kTile int) {
	t.Helper()
	nqt, nkt := (m.SeqQ+qTile-1)/qTile, (m.SeqK+kTile-1)/kTile
	seen := map[[2]int]int32{}
	for r := 0; r < w.RowTiles; r++ {
		row := w.Row(l, r)
		prev := -1
		for i := 0; i < len(row); i += 2 {
			c := int(row[i])
			if c <= prev {
				t.Fatalf("list %d row %d: column tiles not ascending", l, r)
			}
			prev = c
			qt, kt := r, c
			if w.Transposed {
				qt, kt = c, r
			}
			seen[[2]int{qt, kt}] = row[i+1]
		}
	}
	for qt := 0; qt < nqt; qt++ {
		for kt := 0; kt < nkt; kt++ {
			n, all := 0, 0
			ref, listed := seen[[2]int{qt, kt}]
			for q := qt * qTile; q < min(m.SeqQ, (qt+1)*qTile); q++ {
				for k := kt * kTile; k < min(m.SeqK, (kt+1)*kTile); k++ {
					all++
					want := m.Allowed(q, k)
					if want {
						n++
					}
					if listed && ref >= 0 && w.Allowed(ref, q, k) != want {
						t.Fatalf("tile (%d,%d) pair (%d,%d): slice test %v, mask %v", qt, kt, q, k, !want, want)
					}
				}
			}
			switch {
			case n == 0 && listed:
				t.Fatalf("empty tile (%d,%d) is visited", qt, kt)
			case n > 0 && !listed:
				t.Fatalf("tile (%d,%d) with %d allowed pairs is not visited", qt, kt, n)
			case listed && ref == -1 && (n != all || all != qTile*kTile):
				t.Fatalf("tile (%d,%d) marked full with %d of %d allowed", qt, kt, n, all)
			case listed && ref >= 0 && n == qTile*kTile:
				t.Fatalf("full tile (%d,%d) marked partial", qt, kt)
			}
		}
	}
	checkOrder(t, w, l)
}

// checkOrder checks list l's order of row tiles: a permutation, heaviest first.
func checkOrder(t *testing.T, w *WorkList, l int) {
	t.Helper()
	order := w.Order[l*w.RowTiles : (l+1)*w.RowTiles]
	hit := make([]bool, w.RowTiles)
	for i, r := range order {
		hit[r] = true
		if i > 0 && len(w.Row(l, int(order[i-1]))) < len(w.Row(l, int(r))) {
			t.Fatalf("order not heaviest first at %d", i)
		}
	}
	for r, h := range hit {
		if !h {
			t.Fatalf("row tile %d missing from the order", r)
		}
	}
}

// trialMask is a random document pack of 1-300 tokens (randomMask), every third trial a
// random window of it (SeqQ != SeqK, as a context-parallel step sees); false where the
// window holds nothing.
func trialMask(rng *rand.Rand, trial int) (mask.Mask, bool) {
	s := 1 + rng.IntN(300)
	m := randomMask(rng, s)
	if trial%3 == 2 {
		q0, k0 := rng.IntN(s), rng.IntN(s)
		q1, k1 := q0+1+rng.IntN(s-q0), k0+1+rng.IntN(s-k0)
		m = m.Window(mask.Range{Start: q0, End: q1}, mask.Range{Start: k0, End: k1})
	}
	return m, len(m.Slices) > 0
}

func TestWorkListBruteForce(t *testing.T) {
	rng := rand.New(rand.NewPCG(42, 6))
	for trial := 0; trial < 40; trial++ {
		m, ok := trialMask(rng, trial)
		if !ok {
			continue
		}
		qTile, kTile := []int{16, 32, 64}[rng.IntN(3)], []int{16, 32, 64, 192}[rng.IntN(4)] // 192: sm90's key tiles at head dim 64
		for _, tr := range []bool{false, true} {
			w, err := BuildWorkList([]mask.Mask{m}, qTile, kTile, tr)
			if err != nil {
				t.Fatal(err)
			}
			checkList(t, w, m, 0, qTile, kTile)
		}
	}
}

// Per-KV-head masks give one list each, sharing one slice table.
func TestWorkListPerHead(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 7))
	ms := []mask.Mask{randomMask(rng, 200), randomMask(rng, 200), {SeqQ: 200, SeqK: 200}}
	w, err := BuildWorkList(ms, 32, 16, false)
	if err != nil {
		t.Fatal(err)
	}
	if w.Lists != 3 || len(w.Order) != 3*w.RowTiles || len(w.Start) != 3*(w.RowTiles+1) {
		t.Fatalf("lists %d order %d start %d", w.Lists, len(w.Order), len(w.Start))
	}
	for l, m := range ms {
		checkList(t, w, m, l, 32, 16)
	}
	if _, err := BuildWorkList([]mask.Mask{{SeqQ: 10, SeqK: 10}, {SeqQ: 10, SeqK: 12}}, 16, 16, false); err == nil {
		t.Fatal("masks of different sizes accepted")
	}
}

func TestBandArea(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for i := 0; i < 500; i++ {
		q := mask.Range{Start: rng.IntN(50), End: 0}
		q.End = q.Start + rng.IntN(40)
		k := mask.Range{Start: rng.IntN(50), End: 0}
		k.End = k.Start + rng.IntN(40)
		lo, hi := rng.IntN(80)-40, rng.IntN(80)-40
		var want int64
		for a := q.Start; a < q.End; a++ {
			for b := k.Start; b < k.End; b++ {
				if b-a >= lo && b-a <= hi {
					want++
				}
			}
		}
		if got := bandArea(q, k, lo, hi); got != want {
			t.Fatalf("bandArea(%v,%v,%d,%d) = %d want %d", q, k, lo, hi, got, want)
		}
	}
}

// The sm90 forward runs persistent on short rows (windows, short documents) and not on
// long ones (full, causal at length), by the mean key tiles per query tile.
func TestPersistentForwardByRowLength(t *testing.T) {
	for _, c := range []struct {
		mask string
		s    int
		want bool
		// sm90-r32's rule, at 32 tiles a row (sm90's before the thirtieth session): causal 8K
		// (32.5 a row) and full 6K (48) plain
		want32 bool
	}{{"full", 16384, false, false}, {"causal", 16384, false, false}, {"sliding_window_causal", 16384, true, true}, {"full", 2048, true, true}, {"full", 3072, true, true}, {"full", 6144, true, false}, {"full", 7168, true, false}, {"full", 7680, false, false}, {"full", 8192, false, false}, {"causal", 8192, true, false}, {"full", 10240, false, false}} {
		spec, err := mask.Build(c.mask, c.s, mask.Options{Seed: 42})
		if err != nil {
			t.Fatal(err)
		}
		w, err := BuildWorkList([]mask.Mask{spec.Mask}, 128, 128, false)
		if err != nil {
			t.Fatal(err)
		}
		if got := persistentForward(w); got != c.want {
			t.Errorf("%s %d: persistent %v, want %v (%d entries over %d row tiles)", c.mask, c.s, got, c.want, len(w.Entries)/2, w.RowTiles)
		}
		// sm90s's 64-key tiles: twice the tiles a row, the same decision
		w64, err := BuildWorkList([]mask.Mask{spec.Mask}, 128, 64, false)
		if err != nil {
			t.Fatal(err)
		}
		if got := persistentForward(w64); got != c.want {
			t.Errorf("%s %d, 64-key tiles: persistent %v, want %v (%d entries over %d row tiles)", c.mask, c.s, got, c.want, len(w64.Entries)/2, w64.RowTiles)
		}
		// the variants that time both sides of the rule: sm90-persist always, sm90-plain never
		for _, v := range []struct {
			name string
			want bool
		}{{"sm90", c.want}, {"sm90-persist", true}, {"sm90-plain", false}, {"sm90-r32", c.want32}, {"sm90-c75", c.want32}} {
			k := &Kernel{arch: variantNamed(t, v.name)}
			if got := k.persistent(w); got != v.want {
				t.Errorf("%s %s %d: persistent %v, want %v", v.name, c.mask, c.s, got, v.want)
			}
		}
	}
}

// sm90-static (sm90 as it was after the twenty-seventh session's sm90dy, before sm90dw) runs the
// head-dim-64 forward persistent by a counter exactly where sm90-nodyn runs it a block an item
// (rows of 32 tiles and more); never at head dim 128 (another entry), never where the rule
// already runs it persistent; sm90-nodyn and sm90-plain never (sm90 itself: TestDynPersistRule).
// Every variant that takes the counter compiles its entry.
func TestDynForwardRule(t *testing.T) {
	dy, plain := &Kernel{arch: variantNamed(t, "sm90-static")}, &Kernel{arch: variantNamed(t, "sm90-nodyn")}
	never := &Kernel{arch: variantNamed(t, "sm90-plain")}
	if slices.Contains(plain.arch.defines, "LONGCA_FWD_DYN") || plain.arch.fwdDyn {
		t.Fatal("sm90-nodyn compiles or takes the counter")
	}
	for _, v := range archVariants {
		if v.fwdDyn && !slices.Contains(v.defines, "LONGCA_FWD_DYN") { // (the entries by name: TestVariantsDefineTheirEntries)
			t.Errorf("%s takes the counter but compiles no fwd90mopd (LONGCA_FWD_DYN)", v.name)
		}
	}
	for _, c := range []struct {
		mask string
		s    int
		want bool // sm90 at head dim 64
	}{{"full", 8192, true}, {"causal", 16384, true}, {"full", 2048, false}, {"sliding_window_causal", 16384, false}} {
		spec, err := mask.Build(c.mask, c.s, mask.Options{Seed: 42})
		if err != nil {
			t.Fatal(err)
		}
		w, err := BuildWorkList([]mask.Mask{spec.Mask}, fwdSM90MO.qTile, fwdSM90MO.kTile, false)
		if err != nil {
			t.Fatal(err)
		}
		fv := dy.arch.fwd.at(64)
		if fv.fn != "fwd90mo" {
			t.Fatalf("sm90's forward at head dim 64 is %s, want fwd90mo", fv.fn)
		}
		if got := dy.dynForward(fv, w); got != c.want || got == dy.forwardPersistent(fv, w) && got {
			t.Errorf("sm90-static %s %d: dyn %v (persistent by rule %v), want %v", c.mask, c.s, got, dy.forwardPersistent(fv, w), c.want)
		}
		if c.want != !plain.forwardPersistent(fv, w) {
			t.Errorf("%s %d: sm90-nodyn persistent %v; the counter should take exactly its plain lists", c.mask, c.s, plain.forwardPersistent(fv, w))
		}
		if plain.dynForward(fv, w) || never.dynForward(fv, w) || dy.dynForward(dy.arch.fwd.at(128), w) {
			t.Errorf("%s %d: the counter taken by sm90-nodyn or sm90-plain, or at head dim 128", c.mask, c.s)
		}
	}
}

func variantNamed(t *testing.T, name string) archVariant {
	t.Helper()
	for _, v := range archVariants {
		if v.name == name {
			return v
		}
	}
	t.Fatalf("no variant %q", name)
	return archVariant{}
}

// sm90's backward runs the key tiles of a head together unless the model of the block
// scheduler says heaviest first over all heads fills the SMs more than 2% more evenly: at
// 8K on causal and the document masks (a head's light key tiles last, the next head's
// heavy ones first), on long rows of causal and full_document, where both orders fill them
// about evenly, a head's blocks together; full and the windows together from 16K; sm90fk
// and sm90fn pin one side; sm90-prev and sm90-c29 follow the rule too.
func TestBackwardOrderRule(t *testing.T) {
	for _, c := range []struct {
		masks []string
		s     int
		want  int32
	}{
		{[]string{"full"}, 16384, schedKTFast},
		{[]string{"full"}, 1000, schedKTFast}, // 8 x 8 = 64 equal blocks, one wave either way
		{[]string{"causal"}, 8192, schedNoRot},
		{[]string{"causal"}, 49152, schedKTFast},
		{[]string{"causal_document"}, 16384, schedNoRot},
		{[]string{"prefix_lm_causal"}, 8192, schedNoRot},
		{[]string{"share_question"}, 16384, schedNoRot},
		{[]string{"prefix_lm_document"}, 16384, schedNoRot},
		{[]string{"block_causal_document"}, 16384, schedNoRot},
		{[]string{"sliding_window_causal"}, 16384, schedKTFast},
		{[]string{"global_sliding_window"}, 16384, schedKTFast},
		{[]string{"full", "full"}, 4096, schedKTFast},
		{[]string{"causal", "causal"}, 4096, schedNoRot},
	} {
		w := backwardList(t, 7, c.s, c.masks...)
		if got := backwardOrder(w, 8, 8, 132); got != c.want {
			t.Errorf("%v %d: order %d, want %d (balance: together %.3f, heaviest first %.3f)", c.masks, c.s, got, c.want,
				schedBalance(w, 8, 8, 132, schedKTFast), schedBalance(w, 8, 8, 132, schedNoRot))
		}
		for _, v := range []struct {
			name string
			want int32
		}{{"sm90", c.want}, {"sm90fk", schedKTFast}, {"sm90fn", schedNoRot}, {"sm90-prev", c.want}, {"sm90-c29", c.want}} {
			k := &Kernel{arch: variantNamed(t, v.name)}
			got, _ := k.backwardPlan(&deviceList{w: w}, 8, 8, 128)
			// pairs within documents (where pairsPay's do not pair) set their own order, a head's
			// key tiles together (TestDocPairsBytes); where the variant's rules take them
			a := k.arch
			docRule := a.pairs && !pairsPay(w, 128) && (a.docPairs == docPairsByRule || a.docPairs == docPairsBytes) && docPairsPay(w, 128, 8, 8, 132, 50<<20, v.want) ||
				a.pairs && !pairsPay(w, 128) && a.docPairs == docPairsBytes && docPairsBytesPay(w, 128, 8, 8, 132, 50<<20, v.want, a.split128, unsplitRead(w, 8, 8, 132, 50<<20, v.want), unpairedPlanRead(w, a, v.want))
			if docPaired := got&schedDocPairs != 0; docPaired != docRule {
				t.Errorf("%s %v %d: plan %#x paired within documents %v, the rules %v", v.name, c.masks, c.s, got, docPaired, docRule)
			}
			if got&schedDocPairs != 0 {
				if got != schedKTFast|8|schedDocPairs {
					t.Errorf("%s %v %d: paired within documents in order %#x, want %#x", v.name, c.masks, c.s, got, schedKTFast|8|schedDocPairs)
				}
				continue
			}
			if got&^8 != v.want { // the order's bits (bit 3, the pairs: TestPairsPay)
				t.Errorf("%s %v %d: order %d, want %d", v.name, c.masks, c.s, got&^8, v.want)
			}
			if paired := got&8 != 0; paired != (k.arch.pairs && pairsPay(w, 128)) {
				t.Errorf("%s %v %d: paired %v, pairsPay %v", v.name, c.masks, c.s, paired, pairsPay(w, 128))
			}
		}
	}
}

// Call 37's cells (the benchmark's documents, seed 42; docs/perf.md "Calls 37-42"), where
// the model's order ran ahead of the coefficient-of-variation rule it replaced: heaviest
// first on block_causal_document at 8K (+13%), a head's key tiles together on
// full_document and causal_blockwise at 48K (+8%, +3%).
func TestBackwardOrderCall37(t *testing.T) {
	for _, c := range []struct {
		mask string
		s    int
		want int32
	}{
		{"block_causal_document", 8192, schedNoRot},
		{"full_document", 49152, schedKTFast},
		{"causal_blockwise", 49152, schedKTFast},
	} {
		w := backwardList(t, 42, c.s, c.mask)
		if got := backwardOrder(w, 8, 8, 132); got != c.want {
			t.Errorf("%s %d: order %d, want %d", c.mask, c.s, got, c.want)
		}
	}
}

// Block-sparse maps (one mask per KV head) have key tiles of about even load at every
// kept ratio and block layout the benchmark runs (coefficient of variation 0.01-0.31): the
// key tiles together, which call 30 measured 10-37% ahead.
func TestBackwardOrderSparse(t *testing.T) {
	for _, c := range []struct {
		block, avg int
		ratio      float64
	}{{64, 0, 0.1}, {64, 0, 0.8}, {128, 0, 0.1}, {128, 0, 0.5}, {0, 256, 0.2}, {0, 512, 0.5}} {
		w := sparseBackwardList(t, 32768, mask.SparseOptions{Seed: 11, Block: c.block, AvgBlock: c.avg, Ratio: c.ratio, HeadsKV: 4})
		if got := backwardOrder(w, 4, 8, 132); got != schedKTFast {
			t.Errorf("block %d avg %d kept %v: order %d, want %d (key tiles together)", c.block, c.avg, c.ratio, got, schedKTFast)
		}
	}
	if got := backwardOrder(&WorkList{}, 8, 8, 132); got != schedKTFast {
		t.Errorf("empty list: order %d, want %d (both balance 1)", got, schedKTFast)
	}
}

// sm90's tile rule: 128 x 64 forward tiles on 64-token block-sparse maps at kept 0.5 and
// below, where 128-key tiles are often half empty, and 128 x 128 ones on the dense, causal
// and document masks, 64-token maps at kept 0.8, 128-token and variable-block maps.
func TestKeyTile64Rule(t *testing.T) {
	lists := func(m mask.Mask) (*WorkList, *WorkList) {
		a, err := BuildWorkList([]mask.Mask{m}, 128, 128, false)
		if err != nil {
			t.Fatal(err)
		}
		b, err := BuildWorkList([]mask.Mask{m}, 128, 64, false)
		if err != nil {
			t.Fatal(err)
		}
		return a, b
	}
	for _, name := range mask.KernelMasks() {
		spec, err := mask.Build(name, 8192, mask.Options{Seed: 42})
		if err != nil {
			t.Fatal(err)
		}
		if a, b := lists(spec.Mask); keyTile64Pays(a, b) {
			t.Errorf("%s: 64-key tiles chosen (%d x 128 against %d x 64 keys)", name, len(a.Entries)/2, len(b.Entries)/2)
		}
	}
	for _, c := range []struct {
		block int
		ratio float64
		want  bool
		avg   int
	}{{64, 0.1, true, 0}, {64, 0.2, true, 0}, {64, 0.5, true, 0}, {64, 0.8, false, 0}, {128, 0.2, false, 0}, {0, 0.2, false, 256}, {0, 0.5, false, 256}} {
		sp, err := mask.BlockSparse(32768, mask.SparseOptions{Seed: 3, Block: c.block, AvgBlock: c.avg, Ratio: c.ratio, HeadsKV: 1}, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		if a, b := lists(sp.Heads[0]); keyTile64Pays(a, b) != c.want {
			t.Errorf("block %d avg %d kept %v: 64-key tiles %v, want %v (%d x 128 against %d x 64 keys)", c.block, c.avg, c.ratio, !c.want, c.want, len(a.Entries)/2, len(b.Entries)/2)
		}
	}
}

// The model of the block scheduler: equal blocks fill the waves they need (1,024 on 132
// slots: 7.76 of 8), causal's unequal ones balance in the heaviest-first order and, at 8K,
// not with a head's key tiles together (its lightest key tiles last, then the next head's
// heaviest: 0.81 at 8K).
func TestSchedBalance(t *testing.T) {
	build := func(name string, s int) *WorkList { return backwardList(t, 42, s, name) }
	full := build("full", 16384)
	for _, sched := range []int32{schedKTFast, schedNoRot} {
		if got, want := schedBalance(full, 8, 8, 132, sched), 1024.0/132/8; math.Abs(got-want) > 1e-9 {
			t.Errorf("full 16K order %d: balance %.4f, want %.4f (7.76 of 8 waves)", sched, got, want)
		}
	}
	if got := schedBalance(full, 8, 8, 128, schedNoRot); math.Abs(got-1) > 1e-9 {
		t.Errorf("full 16K on 128 slots: balance %.4f, want 1 (8 waves exactly)", got)
	}
	causal := build("causal", 8192)
	kt, nr := schedBalance(causal, 8, 8, 132, schedKTFast), schedBalance(causal, 8, 8, 132, schedNoRot)
	if nr < 0.99 || kt > 0.85 {
		t.Errorf("causal 8K: heaviest first %.3f (want at least 0.99), key tiles together %.3f (want under 0.85)", nr, kt)
	}
	if got := backwardOrder(causal, 8, 8, 132); got != schedNoRot {
		t.Errorf("causal 8K: order %d, want heaviest first", got)
	}
	if got := backwardOrder(build("causal", 49152), 8, 8, 132); got != schedKTFast {
		t.Errorf("causal 48K: order %d, want the key tiles together (both orders balance)", got)
	}
	if got := schedBalance(&WorkList{}, 8, 8, 132, schedNoRot); got != 1 {
		t.Errorf("empty list: balance %v, want 1", got)
	}
}

// At 16K the model's order is call 30's faster side on every mask where the two orders
// differed by 2% or more (docs/perf.md "Calls 29-32") but one: the key tiles together on
// full and global_sliding_window, heaviest first on causal_document, share_question,
// causal_blockwise, prefix_lm_document and block_causal_document. The miss, sliding_window
// (heaviest first 2.8% faster, balancing only 0.7% better), the coefficient-of-variation
// rule misses too. sm90's plan at head dim 128 pairs causal_document, causal_blockwise and
// prefix_lm_document within documents since call 69 (+19 to +28% against this order).
func TestBackwardOrderCall30(t *testing.T) {
	const docPaired = schedKTFast | 8 | schedDocPairs
	for _, c := range []struct {
		mask       string
		want, plan int32
	}{
		{"full", schedKTFast, schedKTFast}, {"global_sliding_window", schedKTFast, schedKTFast},
		{"causal_document", schedNoRot, docPaired}, {"share_question", schedNoRot, schedNoRot}, {"causal_blockwise", schedNoRot, docPaired},
		{"prefix_lm_document", schedNoRot, docPaired}, {"block_causal_document", schedNoRot, schedNoRot},
	} {
		w := backwardList(t, 42, 16384, c.mask)
		if got := backwardOrder(w, 8, 8, 132); got != c.want {
			t.Errorf("%s 16K: order %d, want %d (call 30's faster)", c.mask, got, c.want)
		}
		k := &Kernel{arch: variantNamed(t, "sm90")}
		if got, _ := k.backwardPlan(&deviceList{w: w}, 8, 8, 128); got != c.plan {
			t.Errorf("sm90 %s 16K: plan %#x, want %#x", c.mask, got, c.plan)
		}
	}
}

// A device list keeps the model's order for its head shape and decides again for another.
func TestBackwardPlanCaches(t *testing.T) {
	w := backwardList(t, 42, 8192, "causal")
	k := &Kernel{arch: variantNamed(t, "sm90np")} // (the order alone: sm90 pairs causal's key tiles too)
	dl := &deviceList{w: w}
	if got, _ := k.backwardPlan(dl, 8, 8, 128); got != schedNoRot || dl.sched != schedNoRot || dl.planFor != [4]int{8, 8, 132, 128} {
		t.Fatalf("causal 8K, 8 KV heads: order %d, kept %d for %v; want heaviest first kept for [8 8 132 128]", got, dl.sched, dl.planFor)
	}
	dl.sched = schedKTFast // what the list kept is what it answers for the same shape
	if got, _ := k.backwardPlan(dl, 8, 8, 128); got != schedKTFast {
		t.Errorf("same shape: order %d, want the kept %d", got, schedKTFast)
	}
	want := backwardOrder(w, 66, 1, 132)
	if k.arch.orderL2 && want == schedNoRot && orderThrashes(w, 66, 1, 132, k.l2Bytes()) { // (the L2 order rule, sm90's since call 61)
		want = schedKTFast
	}
	if got, _ := k.backwardPlan(dl, 66, 1, 128); got != want || dl.planFor != [4]int{66, 1, 132, 128} {
		t.Errorf("another head shape: order %d kept for %v, want the model's for [66 1 132 128]", got, dl.planFor)
	}
	k2 := &Kernel{arch: variantNamed(t, "sm90fk")}
	if got, _ := k2.backwardPlan(&deviceList{w: w}, 8, 8, 128); got&^8 != schedKTFast {
		t.Errorf("sm90fk: order %d, want its own %d", got&^8, schedKTFast)
	}
}

// With per-head lists (a mask per KV head) each head's blocks cost what its own list says:
// on more slots than blocks the balance is the blocks' total over slots x the largest.
func TestSchedBalancePerHead(t *testing.T) {
	w := backwardList(t, 7, 4096, "full", "causal")
	if w.Lists != 2 {
		t.Fatalf("%d lists, want 2", w.Lists)
	}
	const group, slots = 4, 10000
	var sum, largest float64
	for l := 0; l < 2; l++ {
		for r := 0; r < w.RowTiles; r++ {
			c := float64(w.Start[l*(w.RowTiles+1)+r+1]-w.Start[l*(w.RowTiles+1)+r])*group + 2
			sum, largest = sum+c, max(largest, c)
		}
	}
	for _, sched := range []int32{schedKTFast, schedNoRot} {
		if got, want := schedBalance(w, 2, group, slots, sched), sum/slots/largest; math.Abs(got-want) > 1e-12 {
			t.Errorf("order %d: balance %g, want %g (full's list for head 0, causal's for head 1)", sched, got, want)
		}
	}
}

// backwardList is the sm90 backward's work list (64-query x 128-key tiles, transposed) of
// the named masks at length s, a mask per KV head when there are several.
func backwardList(t *testing.T, seed uint64, s int, names ...string) *WorkList {
	t.Helper()
	return backwardListKeys(t, seed, s, 128, names...)
}

// sparseBackwardList is the backward's work list (64-query x 128-key tiles, transposed) of a
// block-sparse map of s tokens, one mask per KV head.
func sparseBackwardList(t *testing.T, s int, o mask.SparseOptions) *WorkList {
	t.Helper()
	sp, err := mask.BlockSparse(s, o, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	return listOf(t, sp.Heads, 64, 128, true)
}

// backwardListKeys is backwardList over kTile-key tiles (192 in the head-dim-64 backward).
func backwardListKeys(t *testing.T, seed uint64, s, kTile int, names ...string) *WorkList {
	t.Helper()
	return namedList(t, seed, s, 64, kTile, true, names...)
}

// namedList is the work list in qt x kt tiles (transposed with tr) of the named masks at
// length s, a mask per KV head when there are several.
func namedList(t *testing.T, seed uint64, s, qt, kt int, tr bool, names ...string) *WorkList {
	t.Helper()
	var ms []mask.Mask
	for _, name := range names {
		spec, err := mask.Build(name, s, mask.Options{Seed: seed})
		if err != nil {
			t.Fatal(err)
		}
		ms = append(ms, spec.Mask)
	}
	return listOf(t, ms, qt, kt, tr)
}

// listOf is BuildWorkList of ms, failing t where it cannot be built.
func listOf(t *testing.T, ms []mask.Mask, qt, kt int, tr bool) *WorkList {
	t.Helper()
	w, err := BuildWorkList(ms, qt, kt, tr)
	if err != nil {
		t.Fatal(err)
	}
	return w
}

// The group split (sm90's at head dim 64): 192-key blocks of full fill 0.87 of their waves
// at 8K and 16K (344 and 688 blocks on 132 slots), split 4 ways 0.95 and 0.99; at 48K (2,048
// blocks, 15.5 of 16 waves) and on 128-key blocks at 16K (1,024, 7.76 of 8) no split pays;
// causal's blocks balance in the heaviest-first order from 16K. Call 44 measured each
// split below against no split: full 8K/16K/32K +11/+10/+3%, causal 8K +10%, and
// sliding_window_causal at 32K and 48K -1 and -1.5% split 2 ways (short rows, where each
// split block's fixed work, splitSteps, outweighs the fuller last wave): no split there.
// Split 1 is schedBalance.
func TestGroupSplit(t *testing.T) {
	for _, c := range []struct {
		mask        string
		s, kTile    int
		want        int
		withinSplit float64 // the chosen split's balance at least this
	}{
		{"full", 8192, 192, 4, 0.94},
		{"full", 16384, 192, 4, 0.98},
		{"full", 32768, 192, 2, 0.98},
		{"full", 49152, 192, 1, 0},
		{"causal", 8192, 192, 2, 0.97},
		{"sliding_window_causal", 32768, 192, 1, 0},
		{"sliding_window_causal", 49152, 192, 1, 0},
		{"full", 16384, 128, 1, 0},
		{"causal", 16384, 128, 1, 0},
	} {
		w := backwardListKeys(t, 42, c.s, c.kTile, c.mask)
		sched := backwardOrder(w, 8, 8, 132)
		if got := groupSplit(w, 8, 8, 132, sched); got != c.want {
			t.Errorf("%s %d, %d-key blocks: split %d, want %d (balance 1: %.3f, 2: %.3f, 4: %.3f)", c.mask, c.s, c.kTile, got, c.want,
				splitBalance(w, 8, 8, 1, 132, sched), splitBalance(w, 8, 8, 2, 132, sched), splitBalance(w, 8, 8, 4, 132, sched))
		}
		if b := splitBalance(w, 8, 8, c.want, 132, sched); b < c.withinSplit {
			t.Errorf("%s %d: split %d balances %.3f, want at least %.3f", c.mask, c.s, c.want, b, c.withinSplit)
		}
		if a, b := splitBalance(w, 8, 8, 1, 132, sched), schedBalance(w, 8, 8, 132, sched); a != b {
			t.Errorf("%s %d: split 1 balance %v, schedBalance %v", c.mask, c.s, a, b)
		}
	}
	// a group of one query head (MHA) or an odd group has nothing to split
	w := backwardListKeys(t, 42, 8192, 192, "full")
	if got := groupSplit(w, 64, 1, 132, schedKTFast); got != 1 {
		t.Errorf("MHA: split %d, want 1", got)
	}
	if got := groupSplit(w, 8, 3, 132, schedKTFast); got != 1 {
		t.Errorf("group of 3: split %d, want 1", got)
	}
}

// sm90 splits at head dim 64 only (its kernel splits nothing at 128), never its
// deterministic backward nor sm80; a device list keeps the split for its head shape.
func TestGroupSplitPlan(t *testing.T) {
	w := backwardListKeys(t, 42, 8192, 192, "full")
	k := &Kernel{arch: variantNamed(t, "sm90")}
	dl := &deviceList{w: w}
	if _, got := k.backwardPlan(dl, 8, 8, 64); got != 4 || dl.split != 4 || dl.planFor != [4]int{8, 8, 132, 64} {
		t.Errorf("sm90 d64: split %d, kept %d for %v; want 4 kept for [8 8 132 64]", got, dl.split, dl.planFor)
	}
	dl.split = 2 // what the list kept is what it answers for the same shape
	if _, got := k.backwardPlan(dl, 8, 8, 64); got != 2 {
		t.Errorf("same shape: split %d, want the kept 2", got)
	}
	if _, got := k.backwardPlan(dl, 8, 8, 128); got != 1 || dl.planFor != [4]int{8, 8, 132, 128} {
		t.Errorf("sm90 d128: split %d for %v, want 1 for [8 8 132 128]", got, dl.planFor)
	}
	for _, name := range []string{"sm90-prev", "sm90-c29", "sm80"} {
		if _, got := (&Kernel{arch: variantNamed(t, name)}).backwardPlan(&deviceList{w: w}, 8, 8, 64); got != 1 {
			t.Errorf("%s: split %d, want 1", name, got)
		}
	}
	if _, got := (&Kernel{arch: variantNamed(t, "sm90"), det: true}).backwardPlan(&deviceList{w: w}, 8, 8, 64); got != 1 {
		t.Errorf("sm90 deterministic: split %d, want 1", got)
	}
}

// The GPU tests' small problems at head dim 64 are split by the model (a few blocks on 132
// SMs), so the partials path runs against the float64 reference there: TestLongRows' 2:1
// (8,192 tokens, 192-key blocks) and TestHeadMasks' per-head lists, 6:3 (512 tokens).
func TestGroupSplitGPUTestShapes(t *testing.T) {
	for _, c := range []struct {
		mask             string
		s, kTile         int
		heads, group, ok int
	}{{"full", 8192, 192, 1, 2, 2}, {"causal", 8192, 192, 1, 2, 2}, {"full", 8192, 128, 1, 2, 2}, {"causal", 8192, 128, 1, 2, 2}} { // 128: sm90's blocks since call 55, 192: sm90-c54's
		w := backwardListKeys(t, 1, c.s, c.kTile, c.mask)
		if got := groupSplit(w, c.heads, c.group, 132, backwardOrder(w, c.heads, c.group, 132)); got != c.ok {
			t.Errorf("%s %d %d:%d: split %d, want %d", c.mask, c.s, c.heads*c.group, c.heads, got, c.ok)
		}
	}
	for _, kt := range []int{192, 128} {
		w := backwardListKeys(t, 1, 512, kt, "full", "causal", "sliding_window")
		if got := groupSplit(w, 3, 2, 132, backwardOrder(w, 3, 2, 132)); got != 2 {
			t.Errorf("per-head lists 6:3 at 512, %d-key tiles: split %d, want 2", kt, got)
		}
	}
}

// sm90's pairing rule pairs causal's rows at head dim 128, every length of call 49's, and
// none of the four other masks timed there (where pairs lost), nor anything at head dim 64;
// the plan carries it as sched bit 3 only on a variant that pairs and not when deterministic.
func TestPairsPay(t *testing.T) {
	for _, s := range []int{8192, 16384, 32768, 49152} {
		for _, m := range []string{"causal", "full", "sliding_window_causal", "full_document", "causal_document"} {
			w := backwardList(t, 42, s, m)
			if got, want := pairsPay(w, 128), m == "causal"; got != want {
				t.Errorf("%s %d at head dim 128: pairs %v, want %v", m, s, got, want)
			}
			if pairsPay(w, 64) {
				t.Errorf("%s %d at head dim 64: paired", m, s)
			}
		}
	}
	w := backwardList(t, 42, 16384, "causal")
	dl := &deviceList{w: w}
	for _, c := range []struct {
		variant string
		det     bool
		d       int
		want    bool
	}{{"sm90", false, 128, true}, {"sm90", true, 128, false}, {"sm90", false, 64, false}, {"sm90np", false, 128, false}, {"sm90fk", false, 128, true}} {
		av, err := pickVariant(c.variant, 9, 0)
		if err != nil {
			t.Fatal(err)
		}
		k := &Kernel{arch: av, det: c.det}
		dl.planFor = [4]int{}
		sched, _ := k.backwardPlan(dl, 8, 8, c.d)
		if got := sched&8 != 0; got != c.want {
			t.Errorf("%s (deterministic %v) at head dim %d: sched %#x, paired %v, want %v", c.variant, c.det, c.d, sched, got, c.want)
		}
	}
}

// The backward's pairs (PAIRS in attention_sm90.cu) walk order[x] first and order[rows-1-x]
// second and assume the first has at least the second's entries (the kernel would write an
// empty first tile's dK and dV into the wrong rows otherwise): every mask's transposed list,
// per head too, keeps its key tiles heaviest first.
func TestPairsNeverEmptyFirst(t *testing.T) {
	for _, s := range []int{4096, 16384} {
		for _, m := range mask.Names() {
			for _, w := range []*WorkList{backwardList(t, 3, s, m), backwardList(t, 3, s, m, "full", "causal")} {
				checkPairsHeavierFirst(t, fmt.Sprintf("%s %d", m, s), w, w.Order)
			}
		}
	}
}

// checkPairsHeavierFirst fails where a pair of order (order[x] and order[rows-1-x] of each
// list, as the backward's pairs take them) has its first tile lighter than its second.
func checkPairsHeavierFirst(t *testing.T, what string, w *WorkList, order []int32) {
	t.Helper()
	r := w.RowTiles
	for l := 0; l < w.Lists; l++ {
		n := func(i int) int { return len(w.Row(l, int(order[l*r+i]))) / 2 }
		for x := 0; x < r-1-x; x++ {
			if n(x) < n(r-1-x) {
				t.Fatalf("%s list %d: order[%d] has %d entries, its pair order[%d] %d", what, l, x, n(x), r-1-x, n(r-1-x))
			}
		}
	}
}

// endAlignedPairs (experiment sm90dp) orders every key tile once, the first of each pair
// never lighter than the second (the kernel's pairs assume it), causal's pairs as even as
// pairsPay's, and causal_document's pairs within one document but for at most one tile a
// document; the L2 model then reads a third of the rule's DRAM bytes or less at 16K-48K.
func TestEndAlignedPairs(t *testing.T) {
	for _, s := range []int{4096, 16384} {
		for _, m := range mask.Names() {
			for _, w := range []*WorkList{backwardList(t, 5, s, m), backwardList(t, 5, s, m, "causal_document")} {
				o, r := endAlignedPairs(w), w.RowTiles
				for l := 0; l < w.Lists; l++ {
					ol := o[l*r : (l+1)*r]
					seen := make([]bool, r)
					for _, kt := range ol {
						if kt < 0 || int(kt) >= r || seen[kt] {
							t.Fatalf("%s %d list %d: %v is not an order of %d key tiles", m, s, l, ol, r)
						}
						seen[kt] = true
					}
				}
				checkPairsHeavierFirst(t, fmt.Sprintf("%s %d, end-aligned", m, s), w, o)
			}
		}
		w := backwardList(t, 5, s, "causal")
		o, r := endAlignedPairs(w), w.RowTiles
		for x := 0; x < r/2; x++ {
			if a, b := len(w.Row(0, int(o[x])))/2, len(w.Row(0, int(o[r-1-x])))/2; a+b != s/64+2 {
				t.Errorf("causal %d: pair %d walks %d + %d query tiles, want %d", s, x, a, b, s/64+2)
			}
		}
		w = backwardList(t, 5, s, "causal_document")
		o, r = endAlignedPairs(w), w.RowTiles
		end := func(kt int32) int32 { row := w.Row(0, int(kt)); return row[len(row)-2] }
		ends := map[int32]bool{}
		apart := 0
		for x := 0; x < r-1-x; x++ {
			ends[end(o[x])] = true
			if end(o[x]) != end(o[r-1-x]) {
				apart++
			}
		}
		if apart > len(ends) {
			t.Errorf("causal_document %d: %d pairs end apart, more than its %d documents", s, apart, len(ends))
		}
	}
	for _, s := range []int{16384, 32768} {
		w := backwardList(t, 42, s, "causal_document")
		rule, _, _ := l2Traffic(w, 8, 8, 132, 128, backwardOrder(w, 8, 8, 132), 50<<20, 0.02)
		wp := *w
		wp.Order = endAlignedPairs(w)
		paired, _, _ := l2Traffic(&wp, 8, 8, 132, 128, schedKTFast|8, 50<<20, 0.02)
		t.Logf("causal_document %d: modelled DRAM read %.2f GB by the rule, %.2f paired in documents", s, float64(rule)/1e9, float64(paired)/1e9)
		if paired*3 > rule {
			t.Errorf("causal_document %d: the document pairs read %.2f GB, the rule %.2f: not a third", s, float64(paired)/1e9, float64(rule)/1e9)
		}
	}
	// the plan: sm90dp pairs causal_document at head dim 128 only, the key tiles together;
	// sm90 by docPairsPay (at 32K) or docPairsBytesPay (at 16K, since call 69), never when
	// deterministic
	for _, c := range []struct {
		variant string
		s, d    int
		det     bool
		want    int32
	}{
		{"sm90dp", 16384, 128, false, schedKTFast | 8 | schedDocPairs}, {"sm90dp", 16384, 64, false, -1},
		{"sm90", 16384, 128, false, schedKTFast | 8 | schedDocPairs}, {"sm90", 32768, 128, false, schedKTFast | 8 | schedDocPairs},
		{"sm90", 32768, 64, false, -1}, {"sm90", 32768, 128, true, -1}, {"sm90np", 32768, 128, false, -1},
	} {
		w := backwardList(t, 42, c.s, "causal_document")
		k := &Kernel{arch: variantNamed(t, c.variant), det: c.det}
		got, _ := k.backwardPlan(&deviceList{w: w}, 8, 8, c.d)
		if c.want >= 0 && got != c.want || c.want < 0 && got&8 != 0 {
			t.Errorf("%s causal_document %d at head dim %d (deterministic %v): sched %#x", c.variant, c.s, c.d, c.det, got)
		}
	}
}

// docPairsPay (sm90's pairs within documents) takes call 53's winners and leaves its
// losers (docs/perf.md "Call 53": sm90dp against sm90, d128, 64:8): causal_document 32K /
// 48K +6 / +12%, causal_document_long and prefix_lm_document 48K +10%, share_question 48K
// +1% taken; share_question 16K -46%, block_causal_document 16K -11%, prefix_lm_document 16K
// -8%, full_document 16K / 32K / 48K -8 / -6 / -1.5%, causal_document_long 16K -4% left;
// also left: one document (prefix_lm_causal, causal_blockwise: pairsPay's to decide), 4K
// (a KV head's Q, dO and dQ fit in L2), head dim 64, causal (pairsPay pairs it first).
func TestDocPairsPay(t *testing.T) {
	for _, c := range []struct {
		mask string
		s, d int
		want bool
	}{
		{"causal_document", 32768, 128, true}, {"causal_document", 49152, 128, true},
		{"causal_document_long", 49152, 128, true}, {"prefix_lm_document", 49152, 128, true},
		{"share_question", 49152, 128, true},
		{"share_question", 16384, 128, false}, {"block_causal_document", 16384, 128, false},
		{"prefix_lm_document", 16384, 128, false}, {"causal_document_long", 16384, 128, false},
		{"full_document", 16384, 128, false}, {"full_document", 32768, 128, false}, {"full_document", 49152, 128, false},
		{"causal_document", 16384, 128, false}, {"causal_document", 4096, 128, false},
		{"prefix_lm_causal", 49152, 128, false}, {"causal_blockwise", 49152, 128, false},
		{"causal_document", 49152, 64, false}, {"full", 32768, 128, false},
	} {
		w := backwardList(t, 42, c.s, c.mask)
		if got := docPairsPay(w, c.d, 8, 8, 132, 50<<20, backwardOrder(w, 8, 8, 132)); got != c.want {
			t.Errorf("%s %d at head dim %d: docPairsPay %v, want %v", c.mask, c.s, c.d, got, c.want)
		}
	}
	// fillSlots's pairs: the same work as unpaired (both tiles' steps and loads), on half as
	// many blocks (causal's pairs even: the pass as long as its work over the slots, within
	// one pair)
	w := backwardList(t, 42, 16384, "causal")
	t0, _ := fillSlots(w, 8, 8, 1, 132, schedKTFast, 0)
	t1, l1 := fillSlots(w, 8, 8, 1, 132, schedKTFast|8, 0)
	pair := float64(len(w.Row(0, int(w.Order[0])))/2+len(w.Row(0, int(w.Order[w.RowTiles-1])))/2)*8 + 4
	if t0 != t1 || l1 > t1/132+pair || l1 < t1/132 {
		t.Errorf("causal 16K: paired work %v (unpaired %v), pass %v, want within one pair (%v) of %v", t1, t0, l1, pair, t1/132)
	}
	if v := docRowsVary(backwardList(t, 42, 32768, "full_document")); v > 0.05 {
		t.Errorf("full_document 32K: rows vary %.3f within documents, want about 0", v)
	}
	if v := docRowsVary(backwardList(t, 42, 32768, "causal_document")); v < 0.4 {
		t.Errorf("causal_document 32K: rows vary %.3f within documents, want about 0.5", v)
	}
}

// unpairedPlanRead is the DRAM bytes the L2 model has variant a's head-dim-128 backward of w
// read unpaired in order o at 64:8, split as a's split rule splits it (the bytes the pairs by
// bytes weigh theirs against), written out here from split128Parts and dramRead.
func unpairedPlanRead(w *WorkList, a archVariant, o int32) func() int64 {
	return func() int64 {
		p := 1
		switch {
		case a.split128 > 1 && a.split128Rule:
			p, _ = split128Parts(w, 8, 8, 132, 50<<20, o, a.split128, a.split128Maps, unsplitRead(w, 8, 8, 132, 50<<20, o))
		case a.split128 > 1:
			p = a.split128
		}
		if p == 1 {
			return dramRead(w, 8, 8, 132, 50<<20, o)
		}
		return dramRead(w, 8, 8, 132, 50<<20, o|schedKTFast|int32(p)<<4)
	}
}

// checkRagged checks a ragged forward list against the mask pair by pair as the kernel reads
// it: the bounds partition the rows and columns, each segment's tiles start at its start and
// never cross its end; every allowed pair lies in exactly one visited tile's valid rows and
// columns; a full tile has every valid pair allowed over a whole column tile; a partial
// tile's slice test agrees with the mask on its valid rows over the whole nominal column
// tile (the keys past its end, another segment's, read disallowed); every row tile is in the
// order, heaviest first.
func checkRagged(t *testing.T, w *WorkList, m mask.Mask, qTile, kTile int) {
	t.Helper()
	if !w.Ragged || w.Transposed || len(w.Bounds) != 2*w.RowTiles+w.ColTiles {
		t.Fatalf("ragged %v transposed %v, %d bounds for %d x %d tiles", w.Ragged, w.Transposed, len(w.Bounds), w.RowTiles, w.ColTiles)
	}
	rs, re, cs := w.Bounds[:w.RowTiles], w.Bounds[w.RowTiles:2*w.RowTiles], w.Bounds[2*w.RowTiles:]
	ce := func(c int) int {
		if c+1 < w.ColTiles {
			return int(cs[c+1])
		}
		return m.SeqK
	}
	rows, cols := segments(m)
	isRow, isCol := map[int]bool{}, map[int]bool{}
	for _, x := range rows {
		isRow[x] = true
	}
	for _, x := range cols {
		isCol[x] = true
	}
	for r := 0; r < w.RowTiles; r++ {
		next := m.SeqQ
		if r+1 < w.RowTiles {
			next = int(rs[r+1])
		}
		n := int(re[r] - rs[r])
		if r == 0 && rs[0] != 0 || int(re[r]) != next || n <= 0 || n > qTile || n < qTile && !isRow[int(re[r])] {
			t.Fatalf("row tile %d: %d .. %d, the next at %d (tile %d)", r, rs[r], re[r], next, qTile)
		}
	}
	for c := 0; c < w.ColTiles; c++ {
		n := ce(c) - int(cs[c])
		if c == 0 && cs[0] != 0 || n <= 0 || n > kTile || n < kTile && !isCol[ce(c)] {
			t.Fatalf("column tile %d: %d .. %d (tile %d)", c, cs[c], ce(c), kTile)
		}
	}
	covered := make(map[[2]int]bool)
	for r := 0; r < w.RowTiles; r++ {
		row := w.Row(0, r)
		for i := 0; i < len(row); i += 2 {
			c, ref := int(row[i]), row[i+1]
			n, all := 0, 0
			for q := int(rs[r]); q < int(re[r]); q++ {
				for k := int(cs[c]); k < int(cs[c])+kTile && k < m.SeqK; k++ {
					want := m.Allowed(q, k) && k < ce(c)
					all++
					if want {
						n++
						if covered[[2]int{q, k}] {
							t.Fatalf("pair (%d,%d) in two tiles", q, k)
						}
						covered[[2]int{q, k}] = true
					}
					if ref >= 0 && w.Allowed(ref, q, k) != want {
						t.Fatalf("row tile %d column tile %d pair (%d,%d): slice test %v, want %v", r, c, q, k, !want, want)
					}
				}
			}
			switch {
			case n == 0:
				t.Fatalf("empty tile (%d,%d) is visited", r, c)
			case ref == -1 && (n != all || ce(c)-int(cs[c]) != kTile):
				t.Fatalf("tile (%d,%d) marked full with %d of %d allowed", r, c, n, all)
			}
		}
	}
	for q := 0; q < m.SeqQ; q++ {
		for k := 0; k < m.SeqK; k++ {
			if m.Allowed(q, k) && !covered[[2]int{q, k}] {
				t.Fatalf("allowed pair (%d,%d) in no visited tile", q, k)
			}
		}
	}
	checkOrder(t, w, 0)
}

// The ragged forward list (BuildRaggedWorkList) on random document packs and their
// context-parallel windows, and on the named document masks; the packed list's bounds are
// the multiples of the tiles.
func TestRaggedWorkList(t *testing.T) {
	rng := rand.New(rand.NewPCG(42, 7))
	for trial := 0; trial < 40; trial++ {
		m, ok := trialMask(rng, trial)
		if !ok {
			continue
		}
		qTile, kTile := []int{16, 32, 64}[rng.IntN(3)], []int{16, 32, 64, 176}[rng.IntN(4)]
		w, err := BuildRaggedWorkList(m, qTile, kTile)
		if err != nil {
			t.Fatal(err)
		}
		checkRagged(t, w, m, qTile, kTile)
		p, err := BuildWorkList([]mask.Mask{m}, qTile, kTile, false)
		if err != nil {
			t.Fatal(err)
		}
		for r := 0; r < p.RowTiles; r++ {
			if p.Bounds[r] != int32(r*qTile) || p.Bounds[p.RowTiles+r] != int32(min((r+1)*qTile, m.SeqQ)) {
				t.Fatalf("packed row tile %d bounds %d .. %d", r, p.Bounds[r], p.Bounds[p.RowTiles+r])
			}
		}
		for c := 0; c < p.ColTiles; c++ {
			if p.Bounds[2*p.RowTiles+c] != int32(c*kTile) {
				t.Fatalf("packed column tile %d starts at %d", c, p.Bounds[2*p.RowTiles+c])
			}
		}
	}
	for _, name := range []string{"full_document", "causal_document"} {
		spec, err := mask.Build(name, 4096, mask.Options{Seed: 42})
		if err != nil {
			t.Fatal(err)
		}
		w, err := BuildRaggedWorkList(spec.Mask, 128, 128)
		if err != nil {
			t.Fatal(err)
		}
		checkRagged(t, w, spec.Mask, 128, 128)
	}
	if _, err := buildWorkList([]mask.Mask{{SeqQ: 4, SeqK: 4}}, 2, 2, true, true); err == nil {
		t.Errorf("a transposed ragged list was built")
	}
	// a 64-token block-sparse map in 128-token tiles: ragged, every tile halved (4x the tile
	// table): not worth building; the document masks are
	sp, err := mask.BlockSparse(4096, mask.SparseOptions{Seed: 3, Block: 64, Ratio: 0.5, HeadsKV: 1}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if raggedWorth(sp.Heads[0], 128, 128) {
		t.Errorf("a 64-token map's ragged tiles are worth building")
	}
	for _, name := range []string{"full_document", "causal_document"} {
		spec, _ := mask.Build(name, 16384, mask.Options{Seed: 42})
		if !raggedWorth(spec.Mask, 128, 128) || !raggedWorth(spec.Mask, 192, 128) {
			t.Errorf("%s 16K: the ragged tiles are not worth building", name)
		}
	}
}

// raggedPays takes the document masks at 8K and 16K (3-4% fewer tiles ragged at seed 42)
// and leaves them at 32K (1%), and full and causal (one segment: the same list).
func TestRaggedPays(t *testing.T) {
	for _, c := range []struct {
		mask string
		s    int
		want bool
	}{{"full_document", 8192, true}, {"full_document", 16384, true}, {"causal_document", 8192, true},
		{"causal_document", 16384, true}, {"causal_document", 32768, false}, {"full", 8192, false}, {"causal", 16384, false}} {
		spec, err := mask.Build(c.mask, c.s, mask.Options{Seed: 42})
		if err != nil {
			t.Fatal(err)
		}
		p, _ := BuildWorkList([]mask.Mask{spec.Mask}, 128, 128, false)
		r, err := BuildRaggedWorkList(spec.Mask, 128, 128)
		if err != nil {
			t.Fatal(err)
		}
		if got := raggedPays(p, r); got != c.want {
			t.Errorf("%s %d: ragged pays %v (%d tiles against %d), want %v", c.mask, c.s, got, len(r.Entries)/2, len(p.Entries)/2, c.want)
		}
	}
}

// The GPU tests' forward cases that reach the ragged tiles (forwardEntries: smallMask's
// full_document 2048 at 128 x 128 and 192 x 128, causal_document 1024 at 192 x 128) do, so
// that sm90rg's GPU tests run its ragged forward at both head dims.
func TestRaggedGPUTestShapes(t *testing.T) {
	for _, c := range []struct {
		name   string
		s      int
		qt, kt int
	}{{"full_document", 2048, 128, 128}, {"full_document", 2048, 192, 128}, {"causal_document", 1024, 192, 128}} {
		spec, err := mask.Build(c.name, c.s, mask.Options{Seed: 42, Window: min(150, c.s), BlockSize: 128})
		if err != nil {
			t.Fatal(err)
		}
		p, _ := BuildWorkList([]mask.Mask{spec.Mask}, c.qt, c.kt, false)
		r, err := BuildRaggedWorkList(spec.Mask, c.qt, c.kt)
		if err != nil {
			t.Fatal(err)
		}
		if !raggedWorth(spec.Mask, c.qt, c.kt) || !raggedPays(p, r) {
			t.Errorf("%s %d at %dx%d: the ragged list (%d tiles against %d) is not taken", c.name, c.s, c.qt, c.kt, len(r.Entries)/2, len(p.Entries)/2)
		}
	}
}

// The forward's tile positions as the kernel reads them (fwd_row0, fwd_row_end, fwd_col0,
// compiled on the host from attention_sm90.cu with and without LONGCA_FWD_RAGGED) against
// the Go list's Bounds: with the define, every row tile of a ragged causal_document list at
// 128 x 128 starts, ends and every key tile starts where the Go tiling puts them (the
// kernel's indexing of Bounds is the builder's layout); without it, or with it and no bounds
// (a packed list's launch passes a null pointer), at the multiples of the tiles, rows to sq.
func TestRaggedBoundsOnHost(t *testing.T) {
	spec, err := mask.Build("causal_document", 4096, mask.Options{Seed: 42})
	if err != nil {
		t.Fatal(err)
	}
	w, err := BuildRaggedWorkList(spec.Mask, 128, 128)
	if err != nil {
		t.Fatal(err)
	}
	if w.RowTiles == 4096/128 {
		t.Fatalf("the ragged list has the packed list's %d row tiles", w.RowTiles)
	}
	src := SourceSM90()
	wl := extract(t, worklistHeader, "struct WorkList {", "\n};\n")
	helpers := extract(t, src, "#if defined(LONGCA_FWD_RAGGED)", "2 * wl.row_tiles + kt] : kt * tile; }\n")
	var bounds strings.Builder
	for i, b := range w.Bounds {
		if i > 0 {
			bounds.WriteString(", ")
		}
		fmt.Fprintf(&bounds, "%d", b)
	}
	main := fmt.Sprintf(`
int main() {
  static const int bounds[] = {%s};
  WorkList w{};
  w.row_tiles = %d, w.bounds = bounds;
#ifdef NULL_BOUNDS
  w.bounds = nullptr;  // a packed list's launch passes none
#endif
  for (int r = 0; r < %d; r++) printf("r %%d %%d %%d\n", r, fwd_row0(w, r, 128), fwd_row_end(w, r, 4096));
  for (int c = 0; c < %d; c++) printf("c %%d %%d\n", c, fwd_col0(w, c, 128));
  return 0;
}
`, bounds.String(), w.RowTiles, w.RowTiles, w.ColTiles)
	for _, mode := range []struct{ define, null bool }{{true, false}, {false, false}, {true, true}} {
		ragged := mode.define && !mode.null // the tiles at the bounds; else at the multiples
		prog := "#include <cstdio>\n#define DEV\n"
		if mode.define {
			prog += "#define LONGCA_FWD_RAGGED 1\n"
		}
		if mode.null {
			prog += "#define NULL_BOUNDS 1\n"
		}
		prog += wl + helpers + main
		out := strings.TrimSpace(hostcc.Output(t, "raggedbounds", prog))
		var want []string
		for r := 0; r < w.RowTiles; r++ {
			r0, r1 := r*128, 4096
			if ragged {
				r0, r1 = int(w.Bounds[r]), int(w.Bounds[w.RowTiles+r])
			}
			want = append(want, fmt.Sprintf("r %d %d %d", r, r0, r1))
		}
		for c := 0; c < w.ColTiles; c++ {
			c0 := c * 128
			if ragged {
				c0 = int(w.Bounds[2*w.RowTiles+c])
			}
			want = append(want, fmt.Sprintf("c %d %d", c, c0))
		}
		if out != strings.Join(want, "\n") {
			t.Errorf("define %v, null bounds %v: the kernel's tile positions differ from the list's:\n%s\nwant\n%s", mode.define, mode.null, out, strings.Join(want, "\n"))
		}
	}
	// and the ragged bounds are the documents' tiles: each row tile within one document
	docs, _ := spec.Docs()
	for r := 0; r < w.RowTiles; r++ {
		r0, r1 := int(w.Bounds[r]), int(w.Bounds[w.RowTiles+r])
		in := false
		for _, d := range docs {
			in = in || r0 >= d.Start && r1 <= d.End
		}
		if !in {
			t.Errorf("row tile %d (%d .. %d) crosses a document's edge", r, r0, r1)
		}
	}
}
