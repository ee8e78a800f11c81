package dataset

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestParseCap(t *testing.T) {
	for in, want := range map[string]Cap{"": {}, "16K": {Tokens: 16384}, "4096": {Tokens: 4096}, "0.25": {Fraction: 0.25}, " 0.5 ": {Fraction: 0.5}} {
		got, err := ParseCap(in)
		if err != nil || got != want {
			t.Errorf("ParseCap(%q) = %+v, %v; want %+v", in, got, err, want)
		}
	}
	for _, bad := range []string{"-1", "1.5", "0.0", "abc", "1e3", "-0.25", "16Q", "0", "0K"} {
		if c, err := ParseCap(bad); err == nil {
			t.Errorf("ParseCap(%q) = %+v, want an error", bad, c)
		}
	}
	if got := (Cap{Fraction: 0.25}).Resolve(1 << 19); got != 1<<17 {
		t.Errorf("0.25 of 512K = %d, want 131072", got)
	}
	if got := (Cap{Tokens: 100}).Resolve(10); got != 100 {
		t.Errorf("a token cap does not depend on S: got %d", got)
	}
}

// sumAndMax checks that docs fill s exactly and returns the longest.
func sumAndMax(t *testing.T, what string, docs []int, s int) int {
	t.Helper()
	sum, top := 0, 0
	for _, d := range docs {
		if d < 1 {
			t.Fatalf("%s: document of length %d", what, d)
		}
		sum += d
		top = max(top, d)
	}
	if sum != s {
		t.Fatalf("%s: lengths sum to %d, want %d", what, sum, s)
	}
	return top
}

func TestPackDocsCapSplits(t *testing.T) {
	d, _ := Builtin(ProLong512K)
	const s = 1 << 19
	for seed := uint64(0); seed < 5; seed++ {
		// No cap: Pack, draw for draw.
		if a, b := PackDocs(d, s, 0, NewRand(seed)), Pack(d, s, NewRand(seed)); !slices.Equal(a, b) {
			t.Fatalf("seed %d: PackDocs without a cap differs from Pack", seed)
		}
		uncapped := Pack(d, s, NewRand(seed))
		capped := PackDocs(d, s, 4096, NewRand(seed))
		if top := sumAndMax(t, "capped", capped, s); top > 4096 {
			t.Errorf("seed %d: a document of %d tokens passed the cap of 4096", seed, top)
		}
		// The same draws, split: re-joining the chunks of each drawn document gives the
		// uncapped documents (the cap splits, it does not redraw).
		var joined []int
		i := 0
		for _, want := range uncapped {
			n := 0
			for n < want {
				n += capped[i]
				i++
			}
			joined = append(joined, n)
		}
		if !slices.Equal(joined, uncapped) || i != len(capped) {
			t.Errorf("seed %d: capped documents are not the uncapped ones split", seed)
		}
	}
}

func TestMagiAttentionPreset(t *testing.T) {
	d, err := Builtin(MagiAttention)
	if err != nil {
		t.Fatal(err)
	}
	if d.Packing != PackingStream || d.Cap != (Cap{Fraction: 0.25}) || len(d.Bins) != 14 {
		t.Fatalf("preset: packing %q, cap %+v, %d bins; want stream, 0.25, 14", d.Packing, d.Cap, len(d.Bins))
	}
	for _, s := range []int{1 << 16, 1 << 19} {
		cp := DefaultCap(d).Resolve(s)
		// The pieces a corpus of bin middles cut at the cap gives.
		allowed := map[int]bool{}
		for _, b := range d.Bins {
			m := (b.Lo + b.Hi - 1) / 2
			if m <= cp {
				allowed[m] = true
			} else {
				allowed[cp] = true
				if m%cp > 0 {
					allowed[m%cp] = true
				}
			}
		}
		cut := 0
		for seed := uint64(0); seed < 50; seed++ {
			docs := PackDocs(d, s, cp, NewRand(seed))
			if top := sumAndMax(t, "magiattention", docs, s); top > cp {
				t.Fatalf("S=%d seed %d: a document of %d > the cap %d", s, seed, top, cp)
			}
			for i, n := range docs {
				if !allowed[n] && i != 0 && i != len(docs)-1 {
					t.Fatalf("S=%d seed %d: document %d has length %d, not a piece of the corpus", s, seed, i, n)
				}
			}
			if !allowed[docs[0]] {
				cut++ // a pack starts inside a piece, as a window of the stream does
			}
			if again := PackDocs(d, s, cp, NewRand(seed)); !slices.Equal(again, docs) {
				t.Fatalf("S=%d seed %d: not reproducible", s, seed)
			}
		}
		if cut == 0 {
			t.Errorf("S=%d: no pack of 50 started inside a piece: the window is not a stream's", s)
		}
	}
	// The cap is what splits: no cap at 512K keeps the 163840-token documents whole.
	found := false
	for seed := uint64(0); seed < 20 && !found; seed++ {
		found = slices.Contains(PackDocs(d, 1<<20, 0, NewRand(seed)), 163840)
	}
	if !found {
		t.Errorf("without a cap, no 160K document in 20 packs of 1M")
	}
}

func TestSourceIDsDifferByContent(t *testing.T) {
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a"), filepath.Join(dir, "b")
	os.MkdirAll(a, 0o755)
	os.MkdirAll(b, 0o755)
	os.WriteFile(filepath.Join(a, "d.json"), []byte(`{"[1,100)": 1}`), 0o644)
	os.WriteFile(filepath.Join(b, "d.json"), []byte(`{"[1,200)": 1}`), 0o644)
	da, err1 := LoadDist(filepath.Join(a, "d.json"))
	db, err2 := LoadDist(filepath.Join(b, "d.json"))
	if err1 != nil || err2 != nil {
		t.Fatal(err1, err2)
	}
	if SourceID(da) == SourceID(db) {
		t.Errorf("two files of one name, different content, share the id %s", SourceID(da))
	}
	os.WriteFile(filepath.Join(a, "c.txt"), []byte("10\n20\n"), 0o644)
	os.WriteFile(filepath.Join(b, "c.txt"), []byte("10\n30\n"), 0o644)
	ca, _ := LoadCounts(filepath.Join(a, "c.txt"), "")
	cb, _ := LoadCounts(filepath.Join(b, "c.txt"), "")
	if SourceID(ca) == SourceID(cb) || SourceID(ca)[:7] != "counts:" {
		t.Errorf("counts ids %q and %q", SourceID(ca), SourceID(cb))
	}
	p, _ := Builtin(Pile)
	if SourceID(p) != Pile {
		t.Errorf("preset id %q, want pile", SourceID(p))
	}
}

// A sequence of very short documents is refused before anything is drawn (it used to
// take gigabytes: --max-doc 1 at --seqlen 1G, a counts file of ones), and the sources
// users pack from pass at the lengths they run.
func TestCheckDocs(t *testing.T) {
	ones := &Empirical{Name: "ones", ID: "counts:ones", Counts: []int{1, 1, 1}}
	if m := MeanPiece(ones, 0); m != 1 {
		t.Errorf("MeanPiece(ones) = %v, want 1", m)
	}
	if m := MeanPiece(&Empirical{Counts: []int{10, 30}}, 4); m != 40.0/11 { // 3 + 8 pieces
		t.Errorf("MeanPiece of 10 and 30 under a cap of 4 = %v, want %v", m, 40.0/11)
	}
	if err := CheckDocs(ones, 1<<30, 0); err == nil || !strings.Contains(err.Error(), "--max-doc") {
		t.Errorf("1G tokens of one-token documents: %v, want a refusal naming --max-doc", err)
	}
	if err := CheckDocs(ones, 1<<20, 0); err != nil {
		t.Errorf("1M tokens of one-token documents: %v", err)
	}
	for _, name := range []string{"pile", "prolong64k", "prolong512k"} {
		d, err := Builtin(name)
		if err != nil {
			t.Fatal(err)
		}
		if err := CheckDocs(d, 1<<27, DefaultCap(d).Resolve(1<<27)); err != nil {
			t.Errorf("%s at 128M tokens: %v", name, err)
		}
		if err := CheckDocs(d, 1<<30, 1); err == nil {
			t.Errorf("%s at 1G tokens split at 1: not refused", name)
		}
	}
}
