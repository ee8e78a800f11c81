package mask

import (
	"strconv"

	"github.com/longca/longca/dataset"
)

// The builders of the 14 masks of MASKS.md. Each lays out non-overlapping slices, one or
// a handful per document.

// all is the whole sequence [0, s).
func all(s int) Range { return Range{0, s} }

func buildFull(st *build) error {
	st.rect(all(st.s), all(st.s), Full)
	return nil
}

func buildCausal(st *build) error {
	st.rect(all(st.s), all(st.s), Causal)
	return nil
}

// docs packs the documents: from the distribution, or for the *_long masks a share of S
// from the distribution and the rest long documents, shuffled.
func (st *build) docs() []Range {
	if !st.b.long() {
		return st.setDocs(packLens(st))
	}
	short := int(st.o.LongFraction*float64(st.s) + 0.5)
	lens := packLensN(st, short)
	for left := st.s - short; left > 0; {
		n := min(st.randint(st.o.LongMin, st.o.LongMax), left)
		left -= n
		for st.cap > 0 && n > st.cap { // the cap splits long documents too
			lens = append(lens, st.cap)
			n -= st.cap
		}
		lens = append(lens, n)
	}
	st.rng.Shuffle(len(lens), func(i, j int) { lens[i], lens[j] = lens[j], lens[i] })
	st.params["long_fraction"] = strconv.FormatFloat(st.o.LongFraction, 'g', -1, 64)
	st.params["long_min"] = strconv.Itoa(st.o.LongMin)
	st.params["long_max"] = strconv.Itoa(st.o.LongMax)
	return st.setDocs(lens)
}

func packLens(st *build) []int { return packLensN(st, st.s) }

// packLensN packs n tokens from the source under the cap (dataset.PackDocs: with no cap
// and MASKS.md's packing, draw for draw what it always was).
func packLensN(st *build, n int) []int {
	return dataset.PackDocs(st.src, n, st.cap, st.rng)
}

func buildFullDocument(st *build) error {
	for _, d := range st.docs() {
		st.rect(d, d, Full)
	}
	return nil
}

func buildCausalDocument(st *build) error {
	for _, d := range st.docs() {
		st.rect(d, d, Causal)
	}
	return nil
}

func buildSlidingWindowCausal(st *build) error {
	w := st.o.Window
	st.params["window"] = strconv.Itoa(w)
	st.add(all(st.s), all(st.s), -w, 0)
	return nil
}

func buildSlidingWindow(st *build) error {
	w := st.o.Window
	st.params["window"] = strconv.Itoa(w)
	st.add(all(st.s), all(st.s), -w, w)
	return nil
}

func buildShareQuestion(st *build) error {
	docs := st.docs()
	q0 := docs[0]
	st.rect(q0, q0, Causal)
	// Every later query sees the whole question: one Full slice under d0.
	st.rect(Range{q0.End, st.s}, q0, Full)
	for _, d := range docs[1:] {
		st.rect(d, d, Causal)
	}
	return nil
}

func buildCausalBlockwise(st *build) error {
	docs := st.docs()
	last := docs[len(docs)-1]
	for _, d := range docs[:len(docs)-1] {
		st.rect(d, d, Causal)
	}
	// The last document's queries see everything before them (k <= q): one Causal slice
	// over all keys, bottom-right aligned at (S, S).
	st.rect(last, all(st.s), Causal)
	return nil
}

func buildPrefixLMCausal(st *build) error {
	p := st.randint(1, st.s)
	st.params["prefix"] = strconv.Itoa(p)
	st.rect(Range{0, p}, Range{0, p}, Full)
	st.rect(Range{p, st.s}, all(st.s), Causal)
	return nil
}

func buildPrefixLMDocument(st *build) error {
	docs := st.docs()
	p := st.randint(1, docs[0].Len())
	st.params["prefix"] = strconv.Itoa(p)
	for _, d := range docs {
		if d.Len() <= p {
			st.rect(d, d, Full)
			continue
		}
		pre := Range{d.Start, d.Start + p}
		st.rect(pre, pre, Full)
		st.rect(Range{pre.End, d.End}, d, Causal)
	}
	return nil
}

func buildGlobalSlidingWindow(st *build) error {
	w := 1
	if hi := st.s/3 - 1; hi >= 1 {
		w = st.randint(1, hi)
	}
	g := 2 * w
	st.params["w"] = strconv.Itoa(w)
	st.params["g"] = strconv.Itoa(g)
	gg := min(g, st.s)
	st.rect(Range{0, gg}, all(st.s), Full)          // global queries see every key
	st.rect(Range{gg, st.s}, Range{0, gg}, Full)    // every query sees the global keys
	st.add(Range{gg, st.s}, Range{gg, st.s}, -w, w) // the band elsewhere
	return nil
}

func buildBlockCausalDocument(st *build) error {
	bs := st.o.BlockSize
	if st.s%bs != 0 {
		return inputErr("--block-size", "block_causal_document: its block of %d tokens (longca masks --block-size) does not divide the sequence length %d: give a length that is a multiple of %d (such as %d), or leave the mask out", bs, st.s, bs, (st.s/bs+1)*bs)
	}
	st.params["block_size"] = strconv.Itoa(bs)
	var lens []int
	for left := st.s / bs; left > 0; {
		n := min(st.randint(1, 8), left)
		lens = append(lens, n*bs)
		left -= n
	}
	for _, d := range st.setDocs(lens) {
		for b := d.Start; b < d.End; b += bs {
			st.rect(Range{b, b + bs}, Range{d.Start, b + bs}, Full)
		}
	}
	return nil
}
