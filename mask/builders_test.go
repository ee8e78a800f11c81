package mask

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/longca/longca/dataset"
)

// oracle is an independent statement of a MASKS.md predicate, built from the spec's
// recorded documents and parameters.
func oracle(t *testing.T, sp Spec) func(q, k int) bool {
	t.Helper()
	s := sp.Mask.SeqQ
	docs, err := sp.Docs()
	if err != nil {
		t.Fatal(err)
	}
	param := func(key string) int {
		v, err := strconv.Atoi(sp.Params[key])
		if err != nil {
			t.Fatalf("%s: param %q = %q", sp.Name, key, sp.Params[key])
		}
		return v
	}
	docOf := make([]int, s)
	for i, d := range docs {
		for p := d.Start; p < d.End; p++ {
			docOf[p] = i
		}
	}
	same := func(q, k int) bool { return docOf[q] == docOf[k] }
	abs := func(x int) int {
		if x < 0 {
			return -x
		}
		return x
	}
	switch sp.Name {
	case "full":
		return func(q, k int) bool { return true }
	case "causal":
		return func(q, k int) bool { return k <= q }
	case "full_document", "full_document_long":
		return same
	case "causal_document", "causal_document_long":
		return func(q, k int) bool { return same(q, k) && k <= q }
	case "sliding_window_causal":
		w := param("window")
		return func(q, k int) bool { return q-w <= k && k <= q }
	case "sliding_window":
		w := param("window")
		return func(q, k int) bool { return abs(q-k) <= w }
	case "share_question":
		return func(q, k int) bool {
			return (same(q, k) && k <= q) || (docOf[q] != 0 && docOf[k] == 0)
		}
	case "causal_blockwise":
		last := len(docs) - 1
		return func(q, k int) bool {
			return (same(q, k) && k <= q) || (docOf[q] == last && k <= q)
		}
	case "prefix_lm_causal":
		p := param("prefix")
		if p < 1 || p > s {
			t.Fatalf("%s S=%d: prefix %d outside [1, S]", sp.Name, s, p)
		}
		return func(q, k int) bool { return (q < p && k < p) || (q >= p && k <= q) }
	case "prefix_lm_document":
		p := param("prefix")
		if p < 1 || p > docs[0].Len() {
			t.Fatalf("%s S=%d: prefix %d outside [1, len(d0)=%d]", sp.Name, s, p, docs[0].Len())
		}
		return func(q, k int) bool {
			if !same(q, k) {
				return false
			}
			d := docs[docOf[q]]
			if d.Len() <= p {
				return true
			}
			qi, ki := q-d.Start, k-d.Start
			return (qi < p && ki < p) || (qi >= p && k <= q)
		}
	case "global_sliding_window":
		w := param("w")
		g := 2 * w // MASKS.md: g = 2w, whatever the params say
		if hi := s/3 - 1; w < 1 || (hi >= 1 && w > hi) || (hi < 1 && w != 1) {
			t.Fatalf("%s S=%d: w = %d outside [1, S/3-1]", sp.Name, s, w)
		}
		return func(q, k int) bool { return abs(q-k) <= w || q < g || k < g }
	case "block_causal_document":
		b := param("block_size")
		return func(q, k int) bool {
			return same(q, k) && k < (q/b+1)*b
		}
	}
	t.Fatalf("no oracle for %s", sp.Name)
	return nil
}

// smallSource draws lengths 1..40 so that small S holds several documents.
var smallSource = &dataset.Dist{Name: "small", Bins: []dataset.Bin{{Lo: 0, Hi: 8, P: 0.5}, {Lo: 8, Hi: 41, P: 0.5}}}

func checkAgainstOracle(t *testing.T, sp Spec, rng *rand.Rand) {
	t.Helper()
	m := sp.Mask
	if err := m.Validate(); err != nil {
		t.Fatalf("%s S=%d: %v", sp.Name, m.SeqQ, err)
	}
	allowed := oracle(t, sp)
	s := m.SeqQ
	// The pair-by-pair comparison, and the cover count: slices never overlap.
	cover := make([]uint8, s*s)
	for _, sl := range m.Slices {
		for q := sl.Q.Start; q < sl.Q.End; q++ {
			for k := sl.K.Start; k < sl.K.End; k++ {
				if sl.Allowed(q, k) {
					cover[q*s+k]++
				}
			}
		}
	}
	var area int64
	for q := 0; q < s; q++ {
		for k := 0; k < s; k++ {
			want := allowed(q, k)
			if want {
				area++
			}
			if got := m.Allowed(q, k); got != want {
				t.Fatalf("%s S=%d seed %d params %v: Allowed(%d,%d) = %v, MASKS.md says %v; slices %v", sp.Name, s, sp.Seed, sp.Params, q, k, got, want, m.Slices)
			}
			if cover[q*s+k] > 1 {
				t.Fatalf("%s S=%d seed %d: (%d,%d) covered by %d slices", sp.Name, s, sp.Seed, q, k, cover[q*s+k])
			}
		}
	}
	if got := m.Area(); got != area {
		t.Fatalf("%s S=%d seed %d: Area = %d, brute force %d", sp.Name, s, sp.Seed, got, area)
	}
	for it := 0; it < 4; it++ {
		q0, k0 := rng.IntN(s), rng.IntN(s)
		wq := Range{q0, q0 + 1 + rng.IntN(s-q0)}
		wk := Range{k0, k0 + 1 + rng.IntN(s-k0)}
		win := m.Window(wq, wk)
		var warea int64
		for q := wq.Start; q < wq.End; q++ {
			for k := wk.Start; k < wk.End; k++ {
				want := allowed(q, k)
				if want {
					warea++
				}
				if win.Allowed(q-wq.Start, k-wk.Start) != want {
					t.Fatalf("%s S=%d: window %v x %v wrong at (%d,%d)", sp.Name, s, wq, wk, q, k)
				}
			}
		}
		if win.Area() != warea {
			t.Fatalf("%s S=%d: window %v x %v area %d, brute force %d", sp.Name, s, wq, wk, win.Area(), warea)
		}
	}
}

func TestBuildMatchesMasksMD(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	sizes := []int{1, 2, 3, 5, 7, 16, 31, 64, 97, 128, 200, 300}
	for _, name := range Names() {
		for _, s := range sizes {
			for seed := uint64(0); seed < 4; seed++ {
				o := Options{Seed: seed, Source: smallSource, Window: 1 + rng.IntN(s), LongMin: 20, LongMax: 60}
				if name == "block_causal_document" {
					bs := []int{1, 2, 4, 8, 16}[rng.IntN(5)]
					if s%bs != 0 {
						bs = 1
					}
					o.BlockSize = bs
				}
				sp, err := Build(name, s, o)
				if err != nil {
					t.Fatalf("Build(%s, %d): %v", name, s, err)
				}
				if sp.Name != name || sp.Seed != seed || sp.Mask.SeqQ != s || sp.Mask.SeqK != s {
					t.Fatalf("Build(%s, %d) = spec %q seed %d %dx%d", name, s, sp.Name, sp.Seed, sp.Mask.SeqQ, sp.Mask.SeqK)
				}
				if w, ok := sp.Params["window"]; ok && w != strconv.Itoa(o.Window) {
					t.Fatalf("%s: window param %s, asked for %d", name, w, o.Window)
				}
				checkAgainstOracle(t, sp, rng)
			}
		}
	}
}

// The built-in distributions (no Source) at a size where documents are many.
func TestBuildDefaultDistributions(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for _, name := range []string{"causal_document", "share_question", "prefix_lm_document", "full_document_long"} {
		sp, err := Build(name, 600, Options{Seed: 42, LongMin: 100, LongMax: 200})
		if err != nil {
			t.Fatal(err)
		}
		checkAgainstOracle(t, sp, rng)
	}
	cases := []struct {
		name string
		s    int
		o    Options
		dist string
	}{
		{"causal_document", 12288, Options{}, "pile"},
		{"causal_document", 12289, Options{}, "prolong64k"},
		{"causal_document", 65536, Options{}, "prolong64k"},
		{"causal_document", 65536, Options{Purpose: PurposeCP}, "prolong512k"},
		{"causal_document_long", 65536, Options{}, "prolong512k"},
		{"causal_document_long", 32768, Options{}, "prolong64k"},
		{"full_document_long", 65536, Options{Purpose: PurposeKernel}, "prolong64k"},
		{"full_document", 1000, Options{Source: smallSource}, "small"},
	}
	for _, c := range cases {
		sp, err := Build(c.name, c.s, c.o)
		if err != nil {
			t.Fatal(err)
		}
		if sp.Params["dist"] != c.dist {
			t.Errorf("%s S=%d purpose %d: dist %q, want %q", c.name, c.s, c.o.Purpose, sp.Params["dist"], c.dist)
		}
	}
}

// The long variants: about 40% of S in documents from the distribution, the rest in
// documents of [LongMin, LongMax] (all but possibly one clipped), shuffled.
func TestLongSplit(t *testing.T) {
	const s = 1 << 20
	for seed := uint64(0); seed < 3; seed++ {
		sp, err := Build("causal_document_long", s, Options{Seed: seed})
		if err != nil {
			t.Fatal(err)
		}
		docs, _ := sp.Docs()
		inLong, firstLong, lastLong := 0, -1, -1
		for i, d := range docs {
			if d.Len() >= DefaultLongMin && d.Len() <= DefaultLongMax {
				inLong += d.Len()
				if firstLong < 0 {
					firstLong = i
				}
				lastLong = i
			}
		}
		// Short documents from ProLong512K fall in [8K, 30K] now and then, and one long
		// document may be clipped: allow a few percent.
		if frac := float64(inLong) / s; frac < 0.57 || frac > 0.66 {
			t.Errorf("seed %d: %.3f of S in documents of 8K-30K, want about 0.6", seed, frac)
		}
		if firstLong > len(docs)/4 || lastLong < 3*len(docs)/4 {
			t.Errorf("seed %d: long documents at %d..%d of %d: not shuffled", seed, firstLong, lastLong, len(docs))
		}
	}
}

func TestBuildDeterministic(t *testing.T) {
	for _, name := range Names() {
		a, err := Build(name, 4096, Options{Seed: 7, BlockSize: 256})
		if err != nil {
			t.Fatal(err)
		}
		b, _ := Build(name, 4096, Options{Seed: 7, BlockSize: 256})
		if len(a.Mask.Slices) != len(b.Mask.Slices) || a.Params["doc_lengths"] != b.Params["doc_lengths"] || a.Mask.Area() != b.Mask.Area() {
			t.Errorf("%s: two builds with seed 7 differ", name)
		}
		if Describe(name) == "" {
			t.Errorf("%s: no description", name)
		}
	}
	if len(Names()) != 14 || len(KernelMasks()) != 12 || len(CPMasks()) != 4 {
		t.Errorf("Names %d, KernelMasks %d, CPMasks %d; want 14, 12, 4", len(Names()), len(KernelMasks()), len(CPMasks()))
	}
	for _, n := range CPMasks() {
		if Describe(n) == "" {
			t.Errorf("CP mask %s is not a known mask", n)
		}
	}
}

// Slices stay few: a handful per document, never one per row.
func TestBuildFewSlices(t *testing.T) {
	const s = 1 << 16
	for _, name := range Names() {
		sp, err := Build(name, s, Options{Seed: 1})
		if err != nil {
			t.Fatal(err)
		}
		docs, _ := sp.Docs()
		limit := 3*len(docs) + 5
		if name == "block_causal_document" {
			limit = s / DefaultBlockSize
		}
		if n := len(sp.Mask.Slices); n > limit {
			t.Errorf("%s: %d slices for %d documents", name, n, len(docs))
		}
	}
	sp, _ := Build("causal", 1<<22, Options{})
	if want := int64(1<<22) * (1<<22 + 1) / 2; sp.Mask.Area() != want {
		t.Errorf("causal at 4M: area %d, want %d", sp.Mask.Area(), want)
	}
}

func TestBuildErrors(t *testing.T) {
	cases := []struct {
		name string
		s    int
		o    Options
		flag string
		want string
	}{
		{"nope", 1024, Options{}, "--mask", "causal_document_long"},
		{"causal", 0, Options{}, "--seqlen", "at least 1"},
		{"full", MaxSeqLen + 1, Options{}, "--seqlen", "over the 2147483648 tokens"},
		{"sliding_window", 1024, Options{Window: 2048}, "--window", "larger than --seqlen"},
		{"sliding_window", 1024, Options{Window: -1}, "--window", "at least 1"},
		{"block_causal_document", 1000, Options{}, "--block-size", "such as 1024"},
		{"block_causal_document", 96, Options{BlockSize: 64}, "--block-size", "does not divide"},
		{"full_document_long", 1024, Options{LongFraction: 1.5}, "--long-fraction", "[0, 1]"},
	}
	for _, c := range cases {
		_, err := Build(c.name, c.s, c.o)
		var ie *InputError
		if err == nil || !IsInputError(err) {
			t.Errorf("Build(%s, %d, %+v) err = %v, want an InputError", c.name, c.s, c.o, err)
			continue
		}
		ie = err.(*InputError)
		if ie.Flag != c.flag || !strings.Contains(err.Error(), c.flag) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Build(%s, %d) err = %q (flag %s), want one naming %s and %q", c.name, c.s, err, ie.Flag, c.flag, c.want)
		}
	}
}

// TestMaxDocCapsEveryDocument: --max-doc splits every document longer than the cap (the
// long masks' 8K-30K documents too), records the cap, and leaves the default untouched.
func TestMaxDocCapsEveryDocument(t *testing.T) {
	const s = 1 << 16
	for _, name := range []string{"causal_document", "full_document_long", "causal_document_long", "share_question"} {
		for _, c := range []dataset.Cap{{Tokens: 3000}, {Fraction: 0.05}} {
			sp, err := Build(name, s, Options{Seed: 7, Purpose: PurposeCP, MaxDoc: c})
			if err != nil {
				t.Fatal(err)
			}
			want := c.Resolve(s)
			if sp.Params["max_doc"] != strconv.Itoa(want) {
				t.Errorf("%s cap %v: max_doc %q, want %d", name, c, sp.Params["max_doc"], want)
			}
			docs, err := sp.Docs()
			if err != nil {
				t.Fatal(err)
			}
			for _, d := range docs {
				if d.Len() > want {
					t.Fatalf("%s cap %v: a document of %d tokens", name, c, d.Len())
				}
			}
		}
		sp, _ := Build(name, s, Options{Seed: 7, Purpose: PurposeCP})
		if _, ok := sp.Params["max_doc"]; ok {
			t.Errorf("%s: max_doc recorded without a cap", name)
		}
	}
	magi, _ := dataset.Builtin(dataset.MagiAttention)
	sp, err := Build("causal_document", s, Options{Seed: 1, Source: magi})
	if err != nil || sp.Params["dist"] != "magiattention" || sp.Params["max_doc"] != strconv.Itoa(s/4) {
		t.Errorf("magiattention preset: params %v, err %v; want its own cap S/4", sp.Params, err)
	}
}

// TestAreaAtMaxSeqLen: the closed-form area stays exact up to MaxSeqLen tokens. At 2G a full
// mask's area read -2^62 (n (w0 + w1) overflowed before it was halved) and its FLOPs were
// negative; a causal mask's is S (S + 1) / 2, a window's S w - w (w - 1) / 2.
func TestAreaAtMaxSeqLen(t *testing.T) {
	const s = int64(MaxSeqLen)
	for _, c := range []struct {
		sl   Slice
		want int64
	}{
		{Slice{Q: Range{0, int(s)}, K: Range{0, int(s)}, Kind: Full}, s * s},
		{Slice{Q: Range{0, int(s)}, K: Range{0, int(s)}, Kind: Causal}, s / 2 * (s + 1)},
		{Slice{Q: Range{0, int(s) - 1}, K: Range{0, int(s) - 1}, Kind: Causal}, (s - 1) * (s / 2)},
	} {
		if got := c.sl.Area(); got != c.want {
			t.Errorf("%v: area %d, want %d", c.sl, got, c.want)
		}
	}
	for _, name := range []string{"full", "causal"} {
		if _, err := Build(name, MaxSeqLen, Options{}); err != nil {
			t.Errorf("%s at MaxSeqLen: %v", name, err)
		}
	}
}

// TestWriteJSONForm: WriteJSON, a slice at a time, writes exactly what json.Marshal and
// json.MarshalIndent wrote of the whole spec (the form before it streamed), for a mask of
// many slices, one, and none; and MarshalJSON reads back.
func TestWriteJSONForm(t *testing.T) {
	doc, err := Build("causal_document", 4096, Options{Seed: 3})
	if err != nil {
		t.Fatal(err)
	}
	full, _ := Build("full", 64, Options{})
	empty := Spec{Name: "none", Mask: Mask{SeqQ: 8, SeqK: 16}}
	for _, sp := range []Spec{doc, full, empty} {
		sl := make([]jsonSlice, len(sp.Mask.Slices))
		for i, s := range sp.Mask.Slices {
			sl[i] = jsonSlice{[2]int{s.Q.Start, s.Q.End}, [2]int{s.K.Start, s.K.End}, s.Kind.String()}
		}
		whole := struct {
			Name   string            `json:"name"`
			SeqLen int               `json:"seqlen"`
			SeqK   int               `json:"seqlen_k,omitempty"`
			Seed   uint64            `json:"seed"`
			Area   int64             `json:"area"`
			Params map[string]string `json:"params,omitempty"`
			Slices []jsonSlice       `json:"slices"`
		}{sp.Name, sp.Mask.SeqQ, seqK(sp.Mask), sp.Seed, sp.Mask.Area(), sp.Params, sl}
		for _, indent := range []bool{false, true} {
			want, _ := json.Marshal(whole)
			if indent {
				want, _ = json.MarshalIndent(whole, "", "  ")
			}
			var b bytes.Buffer
			if err := sp.WriteJSON(&b, indent); err != nil {
				t.Fatal(err)
			}
			if got := b.String(); got != string(want)+"\n" {
				t.Errorf("%s (%d slices), indent %v: WriteJSON wrote\n%.300s\nwant\n%.300s", sp.Name, len(sl), indent, got, want)
			}
		}
		b, err := json.Marshal(sp)
		var back Spec
		if err == nil {
			err = json.Unmarshal(b, &back)
		}
		if err != nil || back.Mask.Area() != sp.Mask.Area() || len(back.Mask.Slices) != len(sp.Mask.Slices) {
			t.Errorf("%s: read back %v, %d slices, err %v", sp.Name, back.Mask.Area(), len(back.Mask.Slices), err)
		}
	}
	if len(doc.Mask.Slices) < 3 {
		t.Fatalf("causal_document 4096: %d slices, want several", len(doc.Mask.Slices))
	}
}

// TestReadsAsDeclared holds each mask's declared Reads to its builder: every option is
// changed in turn, and a mask that does not declare it must build the same slices and
// params, one that does must build others (for each field of the option, some change
// does). The CLI refuses an option no mask of its run reads on this declaration.
func TestReadsAsDeclared(t *testing.T) {
	const s = 1 << 16 // past the kernel threshold (prolong64k) and a long document's 30K
	type field struct {
		reads    Reads
		name     string
		variants []func(*Options)
	}
	fields := []field{
		{ReadsSeed, "Seed", []func(*Options){func(o *Options) { o.Seed = 43 }}},
		{ReadsWindow, "Window", []func(*Options){func(o *Options) { o.Window = 100 }}},
		{ReadsBlockSize, "BlockSize", []func(*Options){func(o *Options) { o.BlockSize = 2048 }}},
		{ReadsDocuments, "Source", []func(*Options){func(o *Options) {
			o.Source = &dataset.Empirical{Name: "t", Counts: []int{300, 5000}}
		}}},
		{ReadsDocuments, "Purpose", []func(*Options){
			func(o *Options) { o.Purpose = PurposeKernel }, func(o *Options) { o.Purpose = PurposeCP }}},
		{ReadsDocuments, "MaxDoc", []func(*Options){func(o *Options) { o.MaxDoc = dataset.Cap{Tokens: 512} }}},
		{ReadsLong, "LongFraction", []func(*Options){func(o *Options) { o.LongFraction = 0.9 }}},
		{ReadsLong, "LongMin/LongMax", []func(*Options){func(o *Options) { o.LongMin, o.LongMax = 1000, 2000 }}},
	}
	var every Reads
	for _, f := range fields {
		every |= f.reads
	}
	same := func(a, b Spec) bool {
		return reflect.DeepEqual(a.Mask, b.Mask) && reflect.DeepEqual(a.Params, b.Params)
	}
	base := Options{Seed: 42}
	for _, name := range Names() {
		reads := ReadsOf(name)
		if reads&^every != 0 {
			t.Errorf("%s declares options %b this test does not change", name, reads&^every)
		}
		want, err := Build(name, s, base)
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range fields {
			changed := false
			for _, v := range f.variants {
				o := base
				v(&o)
				got, err := Build(name, s, o)
				if err != nil {
					t.Fatalf("%s with %s changed: %v", name, f.name, err)
				}
				changed = changed || !same(got, want)
			}
			switch declared := reads.Has(f.reads); {
			case declared && !changed:
				t.Errorf("%s declares it reads %s, and changing it changed nothing", name, f.name)
			case !declared && changed:
				t.Errorf("%s reads %s, and does not declare it", name, f.name)
			}
		}
	}
	if got := Reading(ReadsWindow); !reflect.DeepEqual(got, []string{"sliding_window_causal", "sliding_window"}) {
		t.Errorf("Reading(ReadsWindow) = %v", got)
	}
	if !DrawsDocuments("causal_document") || DrawsDocuments("block_causal_document") || ReadsOf("nope") != 0 {
		t.Error("DrawsDocuments or ReadsOf disagree with the registry")
	}
}
