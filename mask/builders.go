package mask

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"

	"github.com/longca/longca/dataset"
)

// Purpose says which rule picks the document-length distribution when Options.Source is
// nil.
type Purpose uint8

const (
	// PurposeDefault is the MASKS.md rule per mask: the 12 kernel masks use
	// dataset.ForKernel(S), the two *_long masks dataset.ForCP(S).
	PurposeDefault Purpose = iota
	// PurposeKernel uses dataset.ForKernel(S) for every mask.
	PurposeKernel
	// PurposeCP uses dataset.ForCP(S) for every mask.
	PurposeCP
)

// Defaults of Options (MASKS.md).
const (
	DefaultWindow       = 1024
	DefaultBlockSize    = 1024
	DefaultLongFraction = 0.4
	DefaultLongMin      = 8192
	DefaultLongMax      = 30720
)

// Options are the parameters of the mask builders; zero values take the defaults.
type Options struct {
	// Seed seeds the one generator every random choice of the mask comes from.
	Seed uint64
	// Window is the half-width of sliding_window and sliding_window_causal (default 1024,
	// clipped to S when left at the default; an explicit window larger than S is an error).
	Window int
	// BlockSize is block_causal_document's block (default 1024); S must be a multiple.
	BlockSize int
	// LongFraction is, for the *_long masks, the fraction of S packed from the
	// length distribution (default 0.4, MASKS.md's 40%); the rest of S is filled with
	// long documents of length uniform in [LongMin, LongMax].
	LongFraction float64
	// LongMin and LongMax bound the long documents' lengths (default 8K and 30K).
	LongMin, LongMax int
	// Source gives document lengths; nil picks a built-in distribution by Purpose.
	Source dataset.Source
	// Purpose picks the built-in distribution when Source is nil.
	Purpose Purpose
	// MaxDoc caps document lengths (a token count or a fraction of S): a longer document
	// is split into chunks of the cap. Zero takes the source's own cap (the magiattention
	// preset's S/4), else none. Recorded in Params as max_doc (tokens).
	MaxDoc dataset.Cap
}

// InputError is bad user input to a builder; its message names the flag to fix
// (--mask, --seqlen, --window, --block-size, ...).
type InputError struct {
	Flag string
	Msg  string
}

func (e *InputError) Error() string { return e.Msg }

// IsInputError says whether err is (or wraps) an InputError.
func IsInputError(err error) bool {
	var ie *InputError
	return errors.As(err, &ie)
}

func inputErr(flag, format string, args ...any) error {
	return &InputError{Flag: flag, Msg: fmt.Sprintf(format, args...)}
}

// Reads is a set of the Options a mask's builder reads; an option outside a mask's set
// leaves its slices and params as they are (TestReadsAsDeclared builds every mask with
// each option changed), so that a command can refuse one the mask would ignore.
type Reads uint8

const (
	// ReadsSeed: Seed (any random choice: documents, a prefix, a window, blocks).
	ReadsSeed Reads = 1 << iota
	// ReadsWindow: Window.
	ReadsWindow
	// ReadsBlockSize: BlockSize.
	ReadsBlockSize
	// ReadsDocuments: Source, Purpose and MaxDoc, the documents drawn from a length
	// distribution.
	ReadsDocuments
	// ReadsLong: LongFraction, LongMin and LongMax, the *_long masks' long documents.
	ReadsLong
)

// Has says whether r holds every option of o.
func (r Reads) Has(o Reads) bool { return r&o == o }

const (
	readsDocs = ReadsSeed | ReadsDocuments
	readsLong = readsDocs | ReadsLong
)

// builder is one named mask: a description, the options it reads and the function that
// lays out its slices.
type builder struct {
	name, desc string
	reads      Reads // the Options build reads: declared here, beside it
	build      func(b *build) error
}

// long says whether b is a *_long mask (CP benchmark): its own default distribution and
// long documents.
func (b *builder) long() bool { return b.reads.Has(ReadsLong) }

// registry lists the 14 masks in MASKS.md order; a new mask is one line here.
var registry = []builder{
	{"full", "one Full slice over S x S", 0, buildFull},
	{"causal", "one Causal slice over S x S (k <= q)", 0, buildCausal},
	{"full_document", "packed documents, Full within each", readsDocs, buildFullDocument},
	{"causal_document", "packed documents, Causal within each", readsDocs, buildCausalDocument},
	{"sliding_window_causal", "q-w <= k <= q (w = --window, 1024)", ReadsWindow, buildSlidingWindowCausal},
	{"sliding_window", "|q-k| <= w (w = --window, 1024)", ReadsWindow, buildSlidingWindow},
	{"share_question", "documents Causal on themselves; every query after d0 also sees all of d0", readsDocs, buildShareQuestion},
	{"causal_blockwise", "documents Causal on themselves; the last document's queries see every earlier token", readsDocs, buildCausalBlockwise},
	{"prefix_lm_causal", "Full on a random prefix [0,p), then k <= q", ReadsSeed, buildPrefixLMCausal},
	{"prefix_lm_document", "documents; Full on each one's first p tokens (p from d0), then causal", readsDocs, buildPrefixLMDocument},
	{"global_sliding_window", "|q-k| <= w or q < 2w or k < 2w, w random in [1, S/3-1]", ReadsSeed, buildGlobalSlidingWindow},
	{"block_causal_document", "documents of 1-8 blocks (--block-size, 1024); a query sees its document up to the end of its block", ReadsSeed | ReadsBlockSize, buildBlockCausalDocument},
	{"full_document_long", "40% of S from the distribution, 60% documents of 8K-30K, shuffled; Full within each", readsLong, buildFullDocument},
	{"causal_document_long", "as full_document_long, Causal within each", readsLong, buildCausalDocument},
}

// Names lists the 14 masks of MASKS.md in its order.
func Names() []string {
	out := make([]string, len(registry))
	for i, b := range registry {
		out[i] = b.name
	}
	return out
}

// KernelMasks lists the 12 static masks of the kernel benchmark.
func KernelMasks() []string {
	var out []string
	for _, b := range registry {
		if !b.long() {
			out = append(out, b.name)
		}
	}
	return out
}

// CPMasks lists the masks of the context-parallel benchmark (MASKS.md).
func CPMasks() []string {
	return []string{"full", "causal", "full_document_long", "causal_document_long"}
}

// Describe is a one-line description of the named mask ("" for an unknown name).
func Describe(name string) string {
	if b := lookup(name); b != nil {
		return b.desc
	}
	return ""
}

// DrawsDocuments says whether the named mask packs documents drawn from a length
// distribution: its slices grow with the documents, up to one a token (--max-doc 1).
func DrawsDocuments(name string) bool {
	return ReadsOf(name).Has(ReadsDocuments)
}

// ReadsOf is the set of options the named mask reads (none for an unknown name).
func ReadsOf(name string) Reads {
	if b := lookup(name); b != nil {
		return b.reads
	}
	return 0
}

// Reading lists the masks that read every option of o, in MASKS.md order.
func Reading(o Reads) []string {
	var out []string
	for _, b := range registry {
		if b.reads.Has(o) {
			out = append(out, b.name)
		}
	}
	return out
}

func lookup(name string) *builder {
	for i := range registry {
		if registry[i].name == name {
			return &registry[i]
		}
	}
	return nil
}

// build is the state of one Build call.
type build struct {
	s      int
	o      Options
	b      *builder
	rng    *rand.Rand
	src    dataset.Source
	cap    int // document cap in tokens (0: none)
	params map[string]string
	slices []Slice
}

// MaxSeqLen bounds a mask's tokens: 2G, so that an area (at most S^2 = 2^62 pairs) and its
// FLOPs stay within int64 (at 2G a full mask's area read -2^62, at 4G 0).
const MaxSeqLen = 1 << 31

// checkSeqLen refuses a length over MaxSeqLen, naming --seqlen (Build and BlockSparse).
func checkSeqLen(seqlen int) error {
	if seqlen > MaxSeqLen {
		return inputErr("--seqlen", "--seqlen %d is over the %d tokens (2G) a mask may have", seqlen, MaxSeqLen)
	}
	return nil
}

// Build lays out the named mask over seqlen tokens from the options' seed.
func Build(name string, seqlen int, o Options) (Spec, error) {
	b := lookup(name)
	if b == nil {
		return Spec{}, inputErr("--mask", "--mask: unknown mask %q: use one of %s", name, strings.Join(Names(), ", "))
	}
	if seqlen < 1 {
		return Spec{}, inputErr("--seqlen", "--seqlen must be at least 1, got %d", seqlen)
	}
	if err := checkSeqLen(seqlen); err != nil {
		return Spec{}, err
	}
	o, err := o.withDefaults(seqlen)
	if err != nil {
		return Spec{}, err
	}
	st := &build{s: seqlen, o: o, b: b, rng: dataset.NewRand(o.Seed), params: map[string]string{}}
	if b.reads.Has(ReadsDocuments) {
		if st.src, err = st.source(); err != nil {
			return Spec{}, err
		}
	}
	if err := b.build(st); err != nil {
		return Spec{}, err
	}
	m := Mask{SeqQ: seqlen, SeqK: seqlen, Slices: st.slices}
	if err := m.Validate(); err != nil {
		return Spec{}, fmt.Errorf("mask %s at S=%d: %w", name, seqlen, err)
	}
	return Spec{Name: name, Seed: o.Seed, Params: st.params, Mask: m}, nil
}

// withDefaults fills zero options and checks the rest.
func (o Options) withDefaults(s int) (Options, error) {
	switch {
	case o.Window == 0:
		o.Window = min(DefaultWindow, s)
	case o.Window < 1:
		return o, inputErr("--window", "--window must be at least 1, got %d", o.Window)
	case o.Window > s:
		return o, inputErr("--window", "--window %d is larger than --seqlen %d: use a window of at most %d", o.Window, s, s)
	}
	if o.BlockSize == 0 {
		o.BlockSize = DefaultBlockSize
	} else if o.BlockSize < 1 {
		return o, inputErr("--block-size", "--block-size must be at least 1, got %d", o.BlockSize)
	}
	if o.LongFraction == 0 {
		o.LongFraction = DefaultLongFraction
	} else if o.LongFraction < 0 || o.LongFraction > 1 {
		return o, inputErr("--long-fraction", "--long-fraction must be in [0, 1], got %v", o.LongFraction)
	}
	if o.LongMin == 0 {
		o.LongMin = DefaultLongMin
	}
	if o.LongMax == 0 {
		o.LongMax = max(DefaultLongMax, o.LongMin)
	}
	if o.LongMin < 1 || o.LongMax < o.LongMin {
		return o, inputErr("--long-min", "--long-min %d and --long-max %d must satisfy 1 <= min <= max", o.LongMin, o.LongMax)
	}
	return o, nil
}

// source is the options' Source, or the built-in distribution MASKS.md assigns.
func (st *build) source() (dataset.Source, error) {
	src := st.o.Source
	if src == nil {
		name := dataset.ForKernel(st.s)
		if st.o.Purpose == PurposeCP || (st.o.Purpose == PurposeDefault && st.b.long()) {
			name = dataset.ForCP(st.s)
		}
		d, err := dataset.Builtin(name)
		if err != nil {
			return nil, fmt.Errorf("mask %s: %w", st.b.name, err)
		}
		src = d
	}
	st.params["dist"] = dataset.SourceID(src)
	c := st.o.MaxDoc
	if c.IsZero() {
		c = dataset.DefaultCap(src)
	}
	if st.cap = c.Resolve(st.s); st.cap > 0 {
		st.params["max_doc"] = strconv.Itoa(st.cap)
	}
	if err := dataset.CheckDocs(src, st.s, st.cap); err != nil { // before a document is drawn
		return nil, inputErr("--max-doc", "mask %s: %v", st.b.name, err)
	}
	return src, nil
}

// add appends the slices of the pairs q in Q, k in K with lo <= k-q <= hi.
func (st *build) add(q, k Range, lo, hi int) {
	pieces(q, k, lo, hi, func(s Slice) { st.slices = append(st.slices, s) })
}

// rect appends one slice as is (skipping an empty one).
func (st *build) rect(q, k Range, kind Kind) {
	if q.Len() > 0 && k.Len() > 0 {
		st.slices = append(st.slices, Slice{q, k, kind})
	}
}

// randint is Python's randint: uniform in [a, b], inclusive.
func (st *build) randint(a, b int) int { return a + st.rng.IntN(b-a+1) }

// setDocs records the documents' lengths in Params and returns their ranges.
func (st *build) setDocs(lens []int) []Range {
	st.params["doc_count"] = strconv.Itoa(len(lens))
	var sb strings.Builder
	out := make([]Range, len(lens))
	at := 0
	for i, n := range lens {
		if i > 0 {
			sb.WriteByte(',')
		}
		sb.WriteString(strconv.Itoa(n))
		out[i] = Range{at, at + n}
		at += n
	}
	st.params["doc_lengths"] = sb.String()
	return out
}

// Docs returns the documents recorded in the spec's params (doc_lengths) as ranges of
// the packed sequence; nil when the mask has no documents.
func (s Spec) Docs() ([]Range, error) {
	v, ok := s.Params["doc_lengths"]
	if !ok || v == "" {
		return nil, nil
	}
	var out []Range
	at := 0
	for _, f := range strings.Split(v, ",") {
		n, err := strconv.Atoi(f)
		if err != nil || n < 1 {
			return nil, fmt.Errorf("mask %s: doc_lengths entry %q is not a positive integer", s.Name, f)
		}
		out = append(out, Range{at, at + n})
		at += n
	}
	if at != s.Mask.SeqQ {
		return nil, fmt.Errorf("mask %s: doc_lengths sum to %d, not the sequence length %d", s.Name, at, s.Mask.SeqQ)
	}
	return out, nil
}
