package cuda

import (
	"context"
	_ "embed"
	"encoding/binary"
	"fmt"
	"hash/fnv"
	"math"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/longca/longca/internal/cuda"
	"github.com/longca/longca/kernels"
	"github.com/longca/longca/mask"
	"github.com/longca/longca/tensor"
)

//go:embed attention.cu
var source string

//go:embed attention_sm90.cu
var sourceSM90 string

//go:embed wgmma.cuh
var wgmmaHeader string

//go:embed worklist.cuh
var worklistHeader string

// Source is the sm_80 kernel's CUDA C source with the shared work-list header inlined,
// as NVRTC compiles it.
func Source() string { return strings.Replace(source, `#include "worklist.cuh"`, worklistHeader, 1) }

// SourceSM90 is the Hopper kernel's CUDA C source with its generated wgmma wrappers
// inlined, as NVRTC compiles it.
func SourceSM90() string {
	s := strings.Replace(sourceSM90, `#include "wgmma.cuh"`, wgmmaHeader, 1)
	return strings.Replace(s, `#include "worklist.cuh"`, worklistHeader, 1)
}

//go:generate go run gen_wgmma.go

// variant is one entry point of the CUDA source with its tile shape.
type variant struct {
	fn             string // entry point prefix
	qTile, kTile   int
	qStep          int // the sm_90 backward's queries a step where it is not qTile (sm90d64: 128, two of the list's tiles)
	threads        int
	sharedPerDim   int // dynamic shared memory is sharedPerDim*headDim + sharedFixed
	sharedFixed    int
	transposedList bool
	swizzledDQ     bool     // the sm_90 backward stages dQ in 128-byte-swizzled boxes of 32 columns
	convC          bool     // dQ's fragment order converted through shared memory, a 64 x 64 chunk a block (sm90 since call 15)
	lean           bool     // the sm_90 forward's lean softmax (sm90 since call 15; a positive softmax scale only)
	oneItem        bool     // the sm_90 forward has no persistent entry (a work item a block: fwd90n's one Q tile)
	at64           *variant // the entry at head dim 64, when it is another (sm90: the forward's three consumer warpgroups, the backward's bwd90f)
}

func (v variant) shared(d int) int { return v.sharedPerDim*d + v.sharedFixed }

// at is the entry point v runs at head dim d.
func (v variant) at(d int) variant {
	if d == 64 && v.at64 != nil {
		return *v.at64
	}
	return v
}

// withConvC is v with dQ converted through shared memory (dq90_convertc).
func (v variant) withConvC() variant { v.convC = true; return v }

// withFn is v with another entry point of the same tiles and resources.
func (v variant) withFn(fn string) variant { v.fn = fn; return v }

// withAt64 is v with the entry point f at head dim 64.
func (v variant) withAt64(f *variant) variant { v.at64 = f; return v }

// withBars is v with n more mbarriers in its shared memory.
func (v variant) withBars(n int) variant { v.sharedFixed += 8 * n; return v }

// splitEntry is the sm_90 backward v's split entry at head dim 128 (LONGCA_BWD_SPLIT128:
// bwd90es, the same resources).
func (v variant) splitEntry() variant { return v.withFn(v.fn + "s") }

// pairedEntry is the sm_90 backward v's entry that walks pairs in a module without
// LONGCA_BWD_PAIRS (LONGCA_BWD_PAIRS_ENTRY: bwd90ep, bwd90esp), with the pairs' barrier
// (emptyKV).
func (v variant) pairedEntry() variant { return v.withFn(v.fn + "p").withBars(1) }

// The kernel's entry points (docs/perf.md). sm_80 (attention.cu): the forward keeps Q in
// registers, 8 warps of 16 query rows over 64-key tiles, mma.sync; the backward owns 128
// keys with 8 warps. sm_90 (attention_sm90.cu): the forward is TMA + wgmma with one
// producer and two consumer warpgroups over 128 x 128 tiles.
var (
	fwdSM80 = variant{fn: "fwd", qTile: 128, kTile: 64, threads: 256, sharedPerDim: (128 + 4*64) * 2}
	bwdSM80 = variant{fn: "bwd", qTile: 64, kTile: 128, threads: 256, sharedPerDim: (2*128 + 4*64) * 2, sharedFixed: 128*64*2 + 4*64*4, transposedList: true}
	// sm_90 forward: Q 2 x 128 x D, K and V 2 stages of 128 x D, 12 barriers, 1 KB of
	// alignment slack (SmemLayout in attention_sm90.cu); the consumer warpgroups take
	// turns on the tensor cores (pingpong).
	fwdSM90 = variant{fn: "fwd90", qTile: 128, kTile: 128, threads: 384, sharedPerDim: (2*128 + 4*128) * 2, sharedFixed: 8*12 + 1024}
	// sm_90 backward: K and V 128 x D, Q and dO 2 stages of 64 x D; dS^T 2 x 128 x 64 bf16,
	// dQ stages 2 x 64 x 64 fp32, lse and Dsum 2 stages of 64 fp32, 9 barriers, 1 KB slack
	// (BwdLayout in attention_sm90.cu). Since call 13 dQ is staged unscaled in the
	// accumulator's fragment order (8 conflict-free 16-byte stores a thread) and added by one
	// 1-D bulk reduction a warpgroup, issued by a warp of the producer warpgroup;
	// dq90_convertf undoes the order and scales (FlashAttention-3's way).
	bwdSM90F = variant{fn: "bwd90f", qTile: 64, kTile: 128, threads: 384, sharedPerDim: (2*128 + 4*64) * 2,
		sharedFixed: 2*128*64*2 + 2*64*64*4 + 2*2*64*4 + 8*9 + 1024, transposedList: true, swizzledDQ: true}
	// sm90 since call 15 (docs/perf.md "Call 15"): the forward's lean softmax (the scale
	// folded into the exponent, the rescale skipped when no row of a warp has a new maximum;
	// fwdSM90 where the scale is not a positive normal float), and dQ's conversion through
	// shared memory.
	fwdSM90L = variant{fn: "fwd90l", qTile: 128, kTile: 128, threads: 384, sharedPerDim: fwdSM90.sharedPerDim, sharedFixed: fwdSM90.sharedFixed, lean: true}
	bwdSM90C = bwdSM90F.withConvC()
	// sm90 since call 26 (docs/perf.md "Call 25"): at head dim 64 the lean forward with
	// three consumer warpgroups over 192 x 128 tiles (Q 2 x 192 x D), taking turns in a ring,
	// 160 registers a consumer, 32 the producer (LONGCA_FWD_THREE); at head dim 128 the
	// lean forward with the next tile's softmax under this tile's P V (LONGCA_FWD_OVL).
	fwdSM90M  = variant{fn: "fwd90m", qTile: 192, kTile: 128, threads: 512, sharedPerDim: (2*192 + 4*128) * 2, sharedFixed: fwdSM90.sharedFixed, lean: true}
	fwdSM90O  = fwdSM90L.withFn("fwd90o")
	fwdSM90OM = fwdSM90O.withAt64(&fwdSM90M)
	// sm90's since call 55 (experiment sm90d64's forward, LONGCA_FWD_THREE_OVL): at head dim 64 fwd90m's three consumer
	// warpgroups with fwd90o's overlap within a turn (the next tile's softmax under this
	// tile's P V; FlashAttention-3's choice at head dim 64: three warpgroups and the overlap)
	fwdSM90MO  = fwdSM90M.withFn("fwd90mo")
	fwdSM90OMO = fwdSM90O.withAt64(&fwdSM90MO)
	// the overlapped forward over 128 x 64 tiles at both head dims (LONGCA_FWD_K64): K and V
	// 2 stages of 64 x D (sm90 where keyTile64Pays says so, sm90s always; calls 29-30)
	fwdSM90S = variant{fn: "fwd90s", qTile: 128, kTile: 64, threads: 384, sharedPerDim: (2*128 + 4*64) * 2, sharedFixed: fwdSM90.sharedFixed, lean: true}
	// sm90's since call 62 (LONGCA_FWD_WIDE): the overlapped forward at head dim 128 over 128
	// x 176 tiles, one Q tile and K and V 2 stages of 176 x D (SmemLayout<128, 128, 176>:
	// 214,112 bytes), never persistent (wideForward)
	fwdSM90N = variant{fn: "fwd90n", qTile: 128, kTile: 176, threads: 384, sharedPerDim: (128 + 4*176) * 2, sharedFixed: fwdSM90.sharedFixed, lean: true, oneItem: true}
	// the backward with the next step's S^T and dP^T issued behind this step's dK
	// (LONGCA_BWD_EARLY)
	bwdSM90E = bwdSM90C.withFn("bwd90e")
	// sm90 since call 38 (docs/perf.md "Calls 37-42"; experiment sm90b3): at head dim 64 the
	// backward over blocks of 192 keys with three consumer warpgroups of 64 keys (160
	// registers each, 32 the producer; LONGCA_BWD_THREE): K and V 192 x D, dS^T 2 x 192 x 64
	// bf16, three dQ stages of 64 x 64 fp32, 11 barriers; +6 to +12% from 16K or 32K on
	// full, causal and causal_document, -3 to +1% at 8K
	bwdSM90T = variant{fn: "bwd90t", qTile: 64, kTile: 192, threads: 512, sharedPerDim: (2*192 + 4*64) * 2,
		sharedFixed: 2*192*64*2 + 3*64*64*4 + 2*2*64*4 + 8*11 + 1024, transposedList: true, swizzledDQ: true, convC: true}
	bwdSM90ET = bwdSM90E.withAt64(&bwdSM90T)
	// sm90's since call 50 (LONGCA_BWD_PAIRS): bwdSM90ET with one barrier more (emptyKV: K
	// and V loaded again for a block's second key tile); every backward of a module compiled
	// with LONGCA_BWD_PAIRS has it
	bwdSM90TP  = bwdSM90T.withBars(1)
	bwdSM90ETP = bwdSM90ET.withBars(1).withAt64(&bwdSM90TP)
	// sm90's since call 55 (experiment sm90d64's backward, LONGCA_BWD_Q2): at head dim 64 the early backward over 128 keys and
	// 128 queries a step (two of the list's 64-query tiles), two consumer warpgroups: K and V
	// 128 x D, Q and dO 2 stages of 128 x D, dS^T 2 x 128 x 128 bf16, two dQ stages of 64 x
	// 64 fp32, lse and Dsum 2 stages of 128 fp32, 9 barriers and the pairs' one
	bwdSM90Q    = variant{fn: "bwd90qq", qTile: 64, kTile: 128, qStep: 128, threads: 384, sharedPerDim: (2*128 + 4*128) * 2, sharedFixed: 2*128*128*2 + 2*64*64*4 + 2*2*128*4 + 8*9 + 1024, transposedList: true, swizzledDQ: true, convC: true}
	bwdSM90QP   = bwdSM90Q.withBars(1)
	bwdSM90ETQP = bwdSM90ET.withBars(1).withAt64(&bwdSM90QP)
	// sm90's since call 59 (experiment sm90pe): the backward in a module without
	// LONGCA_BWD_PAIRS (no emptyKV barrier in the unpaired entries; the pairs' own entries,
	// LONGCA_BWD_PAIRS_ENTRY, add it)
	bwdSM90ETQ = bwdSM90ET.withAt64(&bwdSM90Q)
)

// archVariant is a code path of the kernel: the entry points of its forward and backward
// and the compute capability it needs.
type archVariant struct {
	name     string
	doc      string
	major    int  // the least compute capability major version
	exact    bool // only that major version (sm_90a code runs on 9.0 alone)
	fwd, bwd variant
	// persist, on sm90: 0 runs the forward persistent by the rule (persistentForward),
	// 1 always, -1 never (the variants that time both sides of the rule on every case)
	persist int
	// shortRows, on sm90 (0: the rule's shortRows): the mean 128-key tiles a query tile below
	// which the rule runs the forward persistent (experiment sm90pr)
	shortRows int
	// fwdDyn (sm90's since the twenty-seventh session's sm90dy; LONGCA_FWD_DYN in defines): the head-dim-64 forward (fwd90mo)
	// where the rule does not run it persistent runs persistent by a counter instead
	// (fwd90mopd: a block per SM, each drawing its next item at run time), not a block an item
	fwdDyn bool
	// fwdDynP (sm90's since the twenty-eighth session's sm90dw; LONGCA_FWD_DYN_P in defines; with fwdDyn): the overlapped
	// forwards (fwd90o at head dim 128, fwd90mo at 64) where the rule runs them persistent
	// draw their items by the counter too (fwd90opd, fwd90mopd), not by the static walk
	// blockIdx.x, + gridDim.x, ...
	fwdDynP bool
	// k64, on sm90: the forward over 128 x 64 tiles (fwdSM90S) where keyTile64Pays says
	// so, the variant's forward elsewhere
	k64 bool
	// wide (sm90's since call 62), on sm90 at head dim 128: the forward over 128 x 176 tiles
	// (fwdSM90N) wherever it does not run persistent, k64 keeps 128-key tiles and
	// widerTilesPay says the 176-key tiles visit at most 3% more keys
	wide bool
	// sched, on sm90's backward (an int32 argument of the kernel): bit 0 no rotation of the
	// blocks' first query tiles, bit 1 key tiles the grid's fast index (schedRotate,
	// schedNoRot, schedKTFast), or schedByRule for backwardOrder's choice
	sched int32
	// gsplit, on sm90's backward at head dim 64: split a KV head's query heads over blocks
	// where the block-scheduler model says short rows leave the last wave part-empty
	// (groupSplit; call 44, experiment sm90bg)
	gsplit bool
	// pairs, on sm90's backward (LONGCA_BWD_PAIRS in defines): a block walks two key tiles,
	// the heaviest unplaced with the lightest, heads inner, where pairsPay says so (not when
	// deterministic)
	pairs bool
	// docPairs, on a pairs variant where pairsPay does not pair: the backward's key tiles
	// in endAlignedPairs's pairs (two tiles whose walks end at the same query tile, a
	// document's), the key tiles of a head together, where docPairsPay says so
	// (docPairsByRule) or wherever the rows' lengths vary at head dim 128 (docPairsAlways)
	docPairs int8
	// split128 (LONGCA_BWD_SPLIT128 in defines: the bwd90es entries): at head dim 128 the
	// backward splits each KV head's query heads into this many blocks a key tile (dK and dV
	// from fp32 partials), the key tiles of a head the grid's fast index; 0 or 1 never. With
	// split128Rule only where split128Parts says so (sm90 since call 56), else always (sm90g2, sm90g8)
	split128     int
	split128Rule bool
	// split128Maps (sm90's since call 67, with split128Rule and split128 8): the rule tries 2, 4
	// and 8 parts (split128Parts) and lets block-sparse maps (a list a KV head) through its
	// gate on rows that vary
	split128Maps bool
	// orderL2 (sm90's since call 61), on sm90's backward at head dim 128 by the order rule, MHA
	// only (a group of one): the key tiles of a KV head together after all where heaviest
	// first over all heads would thrash L2 at a small cost in evenness (orderThrashes)
	orderL2 bool
	// pairsEntry (sm90 since call 59, LONGCA_BWD_PAIRS_ENTRY in defines, LONGCA_BWD_PAIRS not):
	// the pairs walked by entries of their own at head dim 128 (bwd90ep, bwd90esp: the
	// backward's fn, "s" where split, then "p", one barrier more), the unpaired blocks by
	// entries without the pairs' code
	pairsEntry bool
	// ragged (sm90's since call 74's sm90rg, with LONGCA_FWD_RAGGED in defines): the forward's lists of one
	// mask start their tiles at its segments (BuildRaggedWorkList) where that visits 2% fewer
	// tiles (raggedPays)
	ragged bool
	// defines are defined (as 1) at the top of attention_sm90.cu for this variant: a
	// choice inside code every entry point shares (LONGCA_TILE_BITS_SPAN), or entry points
	// a module that does not run them need not compile (LONGCA_FWD_LEAN)
	defines []string
}

// compiles says whether the variant compiles define (its entries' code is what the host may
// launch: LONGCA_BWD_TAIL, the unpaired tail entries over the backward's 1-D grids, and
// LONGCA_BWD_TAIL_PAIRS, the same for the pairs; sm90nt and sm90-c75 compile neither).
func (v archVariant) compiles(define string) bool { return slices.Contains(v.defines, define) }

// tails says whether the variant compiles the tail's entries (LONGCA_BWD_TAIL, built with the
// early split backward's LONGCA_BWD_SPLIT128): tailPlan's and BackwardPartials's condition.
func (v archVariant) tails() bool {
	return v.compiles("LONGCA_BWD_TAIL") && v.compiles("LONGCA_BWD_SPLIT128")
}

// archVariant.docPairs's values.
const (
	docPairsNever  int8 = 0
	docPairsByRule int8 = 1
	docPairsAlways int8 = 2
	docPairsBytes  int8 = 3 // docPairsByRule or docPairsBytesPay (sm90's since call 69's sm90dq)
)

// sm90Default is the default variant on compute capability 9.0 (archVariants' first).
var sm90Default = archVariant{name: "sm90", doc: "Hopper: TMA + wgmma, warp-specialised (a producer and consumer warpgroups); forward at head dim 128 over 128x128 tiles with two consumer warpgroups taking turns (pingpong) and, within a turn, the next tile's Q K^T and this tile's P V as two groups with the next tile's softmax under P V (FlashAttention-3's order); at head dim 64 over 192x128 tiles with three consumer warpgroups taking turns in a ring, with the same overlap within a turn (since call 55); a lean softmax (the scale folded into the exponent, the rescale skipped when no row of a warp has a new maximum); persistent when rows are short; the forward over 128 x 64 tiles instead where the 128-key tiles visit 1.2x the keys (64-token block-sparse maps at kept 0.5 and below; rows say k64-fwd); backward over 128 keys x 64 queries at head dim 128 (the next step's S^T and dP^T issued behind dK) and 128 keys x 128 queries at head dim 64 (two of the work list's 64-query tiles a step, two consumer warpgroups of 64 keys; since call 55), dS^T stored by stmatrix, dQ staged in fragment order while dK runs, the pairs' code only in the entries that walk pairs (bwd90ep, bwd90esp; call 59's sm90pe), added by bulk reductions and converted through shared memory; the backward's blocks a head's key tiles together unless a model of the block scheduler says they fill the SMs 2% less evenly than heaviest first over all heads (short causal and document rows); at head dim 64 a KV head's query heads split over 2 or 4 blocks a key tile where that model says it shortens the pass 2% or more (short full and causal rows: gsplit-N), dK and dV then summed from fp32 partials; at head dim 128 in 2, 4 or 8, a head's key tiles together (2 since call 57, 4 and 8 since call 67's sm90g4 / sm90g8: block-sparse maps at 64K, whose blocks' drift thrashes L2 unsplit, +32 to +51% on an H100, level at 32K): the fewest parts the rule takes, more where they halve the modelled DRAM bytes again, block-sparse maps through its gate whatever their rows' spread; on unpaired uneven rows where that model says the tail grows 2.5% at most and a model of L2 says the split halves the DRAM bytes read, saving 8 GB or more (prefix_lm_causal and causal_blockwise at 48K, causal_blockwise 32K), on rows paired within documents where the tail shortens 1% or more (share_question 48K, causal_document and prefix_lm_document 32K); at head dim 128 on causal-shaped rows (uneven rows that pair evenly) a block walks two key tiles, the heaviest with the lightest, down then up, the group's heads inner, so that the blocks running together share Q, dO and dQ in L2, and on causal rows within documents (causal_document, prefix_lm_document, the long documents at 32K and up) the same within each document where a model of the block scheduler says the half-size grid's tail costs at most 8%, or (since call 69's sm90dq) where the paired pass, split as the split rule splits it, models at most 25% longer (13% until call 71's sm90dt: share_question 32K +9.9%; still 13% where the pairs are not split) and the L2 model has it read at most half the DRAM bytes of the unpaired plan that would run instead, split as the rule splits it (since call 71: causal_blockwise 48K's pairs split 4 lost 2.1% to its unpaired split 2), 4 GB or more (causal_document, prefix_lm_document, causal_blockwise and causal_document_long at 16K: +12 to +28% on an H100); the forward's warpgroup index read through a warp shuffle (wgmma descriptors in uniform registers); partial tiles' allowed columns by interval arithmetic; wgmma descriptors one add from per-step bases; at head dim 128 the forward over 128 x 176 tiles where it is not persistent (call 62's sm90n; rows say wide-fwd), its work items a KV head's together (call 69's sm90kv: the blocks running at once read one or two KV heads' K and V; d128 full 16K's DRAM read 7.3 -> 0.34 GB); the forward's next work-list entry read a turn ahead of its softmax (call 72's sm90ea: d64 +0.6 to +2.1%, d128 level to +3%); the backward's block order weighs L2 at head dim 128 (orderThrashes: call 61's sm90mo); at head dim 128 the unpaired backward reads lse and Dsum as 8-byte pairs (call 61's sm90bl); the forward's tiles started at the mask's documents where that visits 2% fewer tiles (call 74's sm90rg: full_document and causal_document 8K-16K +4 to +8% on an H100; rows say ragged-fwd); at head dim 128 the softmax's subtraction point moved only where a tile's maximum passes it by more than 8 in log2 units (call 75's sm90lz, FlashAttention-4's conditional rescaling: the rescale of O about never after a row's first tile, +1.5 to +2%); the backward's dQ stage published to the writer (proxy fence and arrival) after the next step's S^T and dP^T are issued (call 79's sm90qf in the unpaired entries: d64 backward +1.6 to +4.9%, d128 unpaired +0.5 to +2% on an H100; call 80's sm90qp in the pairs' entries too: the paired d128 cells +1.2 to +2.6%, 11 of 13 up, on an H100); at head dim 128 the backward's last, partial wave split over the group's query heads in 2, 4 or 8 parts where that shortens the pass 1% or more by a model of the waves (tailParts), on unsplit plans of one list, a head's key tiles together, whose blocks are of one weight (full's key tiles, causal's pairs): the whole waves' blocks in entries over a 1-D grid, the last wave's items split in a second launch, their fp32 partials of dK and dV summed for those items only (calls 85-86's sm90tp: full 16K-48K +0.2 / +1.3 / +1.1%, causal 32K / 48K +0.8 / +1.3%, five runs each on an H100; rows say tail-N); at head dim 64 the forward, where the rule does not run it persistent (rows of 32 tiles and more: full, causal and the long rows), persistent by a counter instead of a block an item: a block per SM, each taking its next work item by an atomic add as it loads the current item's Q, so that a block's start, first tile and epilogue overlap the next item's loads (docs/d64-forward-study.md; the twenty-seventh session's sm90dy: full / causal 8K-16K +1.5 to +2.5%, 36 cells of 12 masks at 8K-32K geomean +0.9%, none below -0.7%, two interleaved runs each on an H100; rows say dyn-fwd); and, where the rule runs the forward persistent (rows under 32 tiles: the documents, the windows, causal_blockwise, share_question, prefix_lm_document at 8K-32K), its items drawn by the same counter (fwd90opd at head dim 128, fwd90mopd at 64) instead of the static walk blockIdx.x, + gridDim.x, ..., whose blocks' loads depend on the item count modulo the grid (the twenty-eighth session's sm90dw, calls 101-102 on an H100: on those 23 cells at each head dim geomean +2.7% at 128 and +2.4% at 64 over two runs of four processes, causal_blockwise 16K +14.3 / +15.6%, lowest -0.95%; one rank's zigzag-padded document rows 0.88-0.90 -> 0.99 of the kernel alone; rows say dyn-fwd)", major: 9, exact: true, fwd: fwdSM90OMO, bwd: bwdSM90ETQ, gsplit: true, pairs: true, pairsEntry: true, docPairs: docPairsBytes, split128: 8, split128Rule: true, split128Maps: true, sched: schedByRule, orderL2: true, k64: true, wide: true, ragged: true, fwdDyn: true, fwdDynP: true, defines: sm90Defines}

// sm90With is a variant that is sm90 but for what it tells: sm90Default named name, doc its
// line in longca list, defines added to sm90's (an experiment's code compiled in), then edit
// applied (nil: none; one side of a rule of sm90's, another plan), so that it follows sm90
// through every promotion.
func sm90With(name, doc string, edit func(*archVariant), defines ...string) archVariant {
	v := sm90Default
	v.name, v.doc = name, doc
	v.defines = append(slices.Clone(sm90Default.defines), defines...)
	if edit != nil {
		edit(&v)
	}
	return v
}

// archVariants are the kernel's variants: the default on a device is the first it can run
// (sm90 on compute capability 9.0, sm80 elsewhere); the experiments and the variants that
// time one side of a rule stand between them.
var archVariants = []archVariant{
	sm90Default,
	{name: "sm90-c54", doc: "sm90 as it was before call 56 (head dim 64: the backward over 192-key blocks with three consumer warpgroups, the forward's three consumer warpgroups without the overlap; head dim 128: never split): kept to time the new default against", major: 9, exact: true, fwd: fwdSM90OM, bwd: bwdSM90ETP, gsplit: true, pairs: true, docPairs: docPairsByRule, sched: schedByRule, k64: true, shortRows: 32, defines: sm90DefinesC54},
	{name: "sm90-prev", doc: "sm90 as it was before call 26 (call 23's kernel: the forward's softmax after its products within a turn, two consumer warpgroups at head dim 64 too): kept to time the new default against", major: 9, exact: true, fwd: fwdSM90L, bwd: bwdSM90C, sched: schedByRule, shortRows: 32, defines: []string{"LONGCA_FWD_LEAN", "LONGCA_TILE_BITS_SPAN"}},
	sm90With("sm90-c75", "sm90 as it was before the nineteenth and twentieth sessions' promotions (the forward's tiles always at the multiples, the running maximum moved as every tile's at head dim 128, the backward's dQ stage published straight after its stores): kept to time the new default against; without the last wave's split of calls 85-86 too", func(v *archVariant) {
		v.shortRows = 32 // the rule of its day
		v.ragged = false
		v.defines = slices.DeleteFunc(slices.Clone(sm90Defines), func(d string) bool {
			return d == "LONGCA_FWD_RAGGED" || d == "LONGCA_FWD_LAZY_MAX" || d == "LONGCA_BWD_LATE_FENCE" || d == "LONGCA_BWD_LATE_FENCE_PAIRS" ||
				d == "LONGCA_BWD_TAIL" || d == "LONGCA_BWD_TAIL_PAIRS"
		})
	}),
	sm90With("sm90-persist", "sm90 with the forward always persistent (a block per SM walking the work items; on the overlapped forwards by the work counter since the twenty-eighth session's sm90dw, sm90-static's walk before), whatever the rows: to time both sides of sm90's rule", func(v *archVariant) { v.persist = 1 }),
	sm90With("sm90-nodyn", "sm90 with the head-dim-64 forward a block an item where the rule does not run it persistent, as sm90 ran it before the twenty-seventh session's promotion of sm90dy (no work counter: LONGCA_FWD_DYN and LONGCA_FWD_DYN_P not defined; the rule's persistent forwards by the static walk): the other side of the counter", func(v *archVariant) {
		v.fwdDyn, v.fwdDynP = false, false
		v.defines = slices.DeleteFunc(v.defines, func(d string) bool { return d == "LONGCA_FWD_DYN" || d == "LONGCA_FWD_DYN_P" })
	}),
	sm90With("sm90-static", "sm90 with the forward, where the rule runs it persistent, walking its items statically (blockIdx.x, + gridDim.x, ...; no LONGCA_FWD_DYN_P), as sm90 ran it before the twenty-eighth session's promotion of sm90dw: the other side of the counter on the rule's persistent lists (calls 101-102: the static walk loses up to 13% on causal_blockwise 16K; on 8 ranks sharing one GPU the counter read 2-4% lower, call 101b)", func(v *archVariant) {
		v.fwdDynP = false
		v.defines = slices.DeleteFunc(v.defines, func(d string) bool { return d == "LONGCA_FWD_DYN_P" })
	}),
	sm90With("sm90-r32", "sm90 with the forward's persistence rule at 32 tiles a row (shortRows), as sm90 ran it before the thirtieth session's promotion of sm90p60 (60): the other side of the refit (call 107 on an H100, on the six cells the two rules split, causal, full_document, global_sliding_window and prefix_lm_causal 8K, full_document and share_question 32K: sm90p60 +1.66% over them by the medians of three runs, -0.67 to +3.69% a cell)", func(v *archVariant) { v.shortRows = 32 }),
	sm90With("sm90-plain", "sm90 with the forward never persistent (a block per query tile, no work counter at head dim 64), whatever the rows: to time both sides of sm90's rule", func(v *archVariant) { v.persist, v.fwdDyn, v.fwdDynP = -1, false, false }),
	sm90With("sm90fk", "sm90 with the backward's key tiles of a head always together (one side of sm90's order rule; no pairs within documents, which set the order)", func(v *archVariant) { v.sched, v.docPairs, v.orderL2 = schedKTFast, docPairsNever, false }),
	sm90With("sm90fn", "sm90 with the backward's key tiles always heaviest first over all heads (the other side of sm90's order rule; no pairs within documents, which set the order, and no split at head dim 128, which keeps a head's key tiles together)", func(v *archVariant) {
		v.sched, v.docPairs, v.orderL2 = schedNoRot, docPairsNever, false
		v.split128, v.split128Rule, v.split128Maps = 0, false, false
	}),
	sm90With("sm90dp", "sm90 with the backward's key tiles paired within documents wherever their rows' lengths vary at head dim 128, whatever the tail (the other side of sm90's document-pairs rule; call 53: causal_document 16K / 32K / 48K +3 / +6 / +12%, share_question 16K -46%); with sm90's split rule at head dim 128, which takes other cells where the pairs differ", func(v *archVariant) { v.docPairs = docPairsAlways }),
	sm90With("sm90g2", "sm90 with the backward at head dim 128 always split in 2 (a block walks 4 of a KV head's 8 query heads, dK and dV summed from fp32 partials, a head's key tiles together), whatever the rule (one side of sm90's split rule; call 54 against sm90 before the rule: causal_blockwise 32K +5%, prefix_lm_causal 48K +6%, causal_document 32K +3%, share_question 16K / 32K -12 / -5%, full -1 to -2%); rows say gsplit-2; pairs within documents by the tail rule alone (docPairsByRule, sm90's before call 69: the bytes rule models the parts sm90's split rule gives, not a forced split)", func(v *archVariant) {
		v.docPairs, v.split128, v.split128Rule, v.split128Maps = docPairsByRule, 2, false, false
	}),
	sm90With("sm90g8", "sm90 with the backward at head dim 128 always split in 8 where the group divides (a block a query head, dK and dV summed from fp32 partials, a head's key tiles together), whatever the rule (the other side of sm90's widened split rule; call 67 on an H100: 128-token block-sparse maps at 64K +51 / +32% at kept 0.2 / 0.5 against sm90 before the widening, at 32K -1.0 / +0.5%; sm90g4 +50 / +32% and -1.2 / +0.2%); rows say gsplit-8; pairs within documents by the tail rule alone (docPairsByRule, sm90's before call 69: the bytes rule models the parts sm90's split rule gives, not a forced split)", func(v *archVariant) {
		v.docPairs, v.split128, v.split128Rule, v.split128Maps = docPairsByRule, 8, false, false
	}),
	sm90With("sm90rm", "sm90 with the d128 forward's work items in the grid's order before call 69 (heads fastest, then the row tiles heaviest first; LONGCA_FWD_KVMAJOR128 not defined), the other side of the KV-major order: calls 74, 77 and 78 on an H100 read causal_blockwise 16K +7.9 / +7.7 / +8.1% (the persistent walk's balance), the other masks at 8K-32K -7.5 to +1.0%, full and causal 48K -2.5 / -3.1%", func(v *archVariant) { v.defines = slices.Clone(sm90DefinesRM) }),
	sm90With("sm90nt", "sm90 never splitting the head-dim-128 backward's last, partial wave (LONGCA_BWD_TAIL and LONGCA_BWD_TAIL_PAIRS not defined: the other side of sm90's tail rule; sm90 as it was before calls 85-86 promoted sm90tp: full and causal 16K-48K +0.2 to +1.3% on the cells the rule splits, five runs each on an H100)", func(v *archVariant) {
		v.defines = slices.DeleteFunc(slices.Clone(sm90Defines), func(d string) bool { return d == "LONGCA_BWD_TAIL" || d == "LONGCA_BWD_TAIL_PAIRS" })
	}),
	sm90With("sm90ns", "sm90 never splitting the backward at head dim 128 (the other side of sm90's split rule; the last wave's split, sm90's tail rule, still taken: sm90nt is that rule's other side)", func(v *archVariant) { v.split128, v.split128Rule, v.split128Maps = 0, false, false }),
	sm90With("sm90np", "sm90 with the backward never walking key tiles in pairs (the other side of sm90's pairing rule; sm90 as it was before call 50 but for the pairing's code); with sm90's split rule at head dim 128, which takes other cells where the pairs differ", func(v *archVariant) { v.pairs, v.pairsEntry, v.docPairs = false, false, docPairsNever }),
	sm90With("sm90s", "sm90 with the forward always over 128-query x 64-key tiles, at both head dims (one side of sm90's tile rule)", func(v *archVariant) { v.fwd, v.k64, v.wide = fwdSM90S, false, false }),
	sm90With("sm90probe-noexp", "PROBE, wrong by design (its checks fail; time it with --no-check, never a result): sm90 with the head-dim-64 forward's exponentials left out (the exponent's FFMA kept, no MUFU.EX2), what the tile costs without the multi-function unit's share (the forty-fifth session's d64 study, scripts/device/d64-halves.sh)", nil, "LONGCA_PROBE_FWD_NOEXP"),
	sm90With("sm90probe-nomma", "PROBE, wrong by design (its checks fail; time it with --no-check, never a result): sm90 with the head-dim-64 forward's products left out (no wgmma issued; the turns, waits and loads kept), what the tile costs without the tensor cores' share (the forty-fifth session's d64 study, scripts/device/d64-halves.sh)", nil, "LONGCA_PROBE_FWD_NOMMA"),
	{name: "sm90-c29", doc: "sm90 as it was before call 31 (call 29's default: 128 x 128 forward tiles on every mask, bwd90f's backward at both head dims; the block order by sm90's rule): kept to time the new default against", major: 9, exact: true, fwd: fwdSM90OM, bwd: bwdSM90C.withBars(1), sched: schedByRule, shortRows: 32, defines: sm90DefinesC54},
	{name: "sm80", doc: "Ampere and later: mma.sync forward and backward (cp.async double buffering)", major: 8, fwd: fwdSM80, bwd: bwdSM80},
}

// sm90Defines are the default's defines (calls 15, 25, 31, 38, 40, 44, 50, 54 and 55's
// winners): the forward's warpgroup index in uniform registers (call 44, experiment sm90u's
// forward), the overlapped forward's entry points (d128), the three-consumer forward with
// the overlap (d64, call 55's sm90d64), the forward over 128 x 64 tiles (block-sparse maps),
// the early backward's (d128), the backward over 128 queries a step (d64, call 55's
// sm90d64), the split backward at head dim 128 (call 54's sm90g2), the backward's dS^T by
// stmatrix (call 40, experiment sm90bs: +2 to +5% at both head dims), the partial tiles'
// bits by interval arithmetic, the pairs (call 50) in entries of their own (call 59), the
// d128 forward's items a KV head's together (call 69), the forward's next entry read a turn
// ahead (call 72's sm90ea), the forward's tiles at the documents (call 74's sm90rg), the lazy
// subtraction point at head dim 128 (call 75's sm90lz) and the backward's dQ stage published
// after the next step's products are issued (call 79's sm90qf; in the pairs' entries too since
// call 80's sm90qp), and the d128 backward's last, partial wave split over the group's query
// heads in entries of their own (calls 85-86's sm90tp: bwd90et, bwd90est, bwd90ept, bwd90espt),
// and the d64 forward persistent by a work counter where the rule runs it a block an item (the
// twenty-seventh session's sm90dy: fwd90mopd), and the rule's persistent forwards' items drawn
// by that counter too (the twenty-eighth session's sm90dw: fwd90opd at head dim 128).
var sm90Defines = []string{"LONGCA_FWD_UNIFORM", "LONGCA_FWD_OVL", "LONGCA_FWD_THREE_OVL", "LONGCA_FWD_K64", "LONGCA_BWD_EARLY", "LONGCA_BWD_Q2", "LONGCA_BWD_SPLIT128", "LONGCA_BWD_STSM", "LONGCA_TILE_BITS_SPAN", "LONGCA_BWD_PAIRS_ENTRY", "LONGCA_FWD_WIDE", "LONGCA_BWD_LV2", "LONGCA_FWD_KVMAJOR128", "LONGCA_FWD_ENTRY_AHEAD", "LONGCA_FWD_RAGGED", "LONGCA_FWD_LAZY_MAX", "LONGCA_BWD_LATE_FENCE", "LONGCA_BWD_LATE_FENCE_PAIRS", "LONGCA_BWD_TAIL", "LONGCA_BWD_TAIL_PAIRS", "LONGCA_FWD_DYN", "LONGCA_FWD_DYN_P"}

// sm90DefinesRM are experiment sm90rm's: sm90's without the d128 forward's KV-major item
// order (LONGCA_FWD_KVMAJOR128).
var sm90DefinesRM = slices.DeleteFunc(slices.Clone(sm90Defines), func(d string) bool { return d == "LONGCA_FWD_KVMAJOR128" })

// sm90DefinesC54 are sm90's defines before call 56 (sm90-c54, sm90-c29): the three-consumer
// forward (fwd90m) and backward (bwd90t) at head dim 64, no split at 128.
var sm90DefinesC54 = []string{"LONGCA_FWD_UNIFORM", "LONGCA_FWD_OVL", "LONGCA_FWD_THREE", "LONGCA_FWD_K64", "LONGCA_BWD_EARLY", "LONGCA_BWD_THREE", "LONGCA_BWD_STSM", "LONGCA_TILE_BITS_SPAN", "LONGCA_BWD_PAIRS"}

// sourceSM90 is attention_sm90.cu as this variant compiles it: its defines first.
func (v archVariant) sourceSM90() string {
	var b strings.Builder
	for _, d := range v.defines {
		b.WriteString("#define " + d + " 1\n")
	}
	return b.String() + SourceSM90()
}

// Variants names the kernel's variants with a line each, for longca list.
func Variants() []string {
	var out []string
	for _, v := range archVariants {
		out = append(out, v.name+": "+v.doc)
	}
	return out
}

// pickVariant chooses the named variant ("" for the best one the device runs), or says
// why it cannot run on a device of compute capability major.minor.
func pickVariant(name string, major, minor int) (archVariant, error) {
	var names []string
	for _, v := range archVariants {
		names = append(names, v.name)
		runs := major >= v.major && (!v.exact || major == v.major && minor == 0)
		if name == "" && runs || name == v.name {
			if !runs {
				return v, fmt.Errorf("cuda: variant %s needs compute capability %d.0%s, the device has %d.%d (--variant)",
					v.name, v.major, map[bool]string{true: " exactly", false: " or later"}[v.exact], major, minor)
			}
			return v, nil
		}
	}
	if name == "" {
		return archVariant{}, fmt.Errorf("cuda: no variant runs on compute capability %d.%d (sm_80 or later needed)", major, minor)
	}
	return archVariant{}, fmt.Errorf("cuda: unknown variant %q (--variant): use one of %s", name, strings.Join(names, ", "))
}

// knownVariant checks a variant name before any device is opened.
func knownVariant(name string) error {
	if name == "" {
		return nil
	}
	for _, v := range archVariants {
		if v.name == name {
			return nil
		}
	}
	_, err := pickVariant(name, 0, 0)
	return err
}

func init() {
	kernels.RegisterVariants("cuda", Variants())
	kernels.Register("cuda", "longca's flash attention (NVRTC), any mask through tile work lists; bf16/fp16, head dim 64/128; variants sm90 (TMA + wgmma), sm80 (mma.sync)", func(o kernels.Options) (kernels.Kernel, error) {
		if o.Device < 0 {
			return nil, fmt.Errorf("cuda: device index %d must not be negative (--device)", o.Device)
		}
		if err := knownVariant(o.Variant); err != nil {
			return nil, err
		}
		g, err := cuda.Open(o.Device)
		if err != nil {
			return nil, err
		}
		k, err := NewVariant(g, o.Variant)
		if err != nil {
			return nil, err
		}
		k.det = o.Deterministic
		return k, nil
	})
}

// Kernel is the "cuda" kernel on one device.
type Kernel struct {
	dev   *cuda.Device
	mod   *cuda.Module // attention.cu
	mod90 *cuda.Module // attention_sm90.cu, on Hopper
	// Log is NVRTC's log from the compilation (empty when the cache answered).
	Log string

	arch     archVariant
	fwd, bwd variant
	det      bool // the deterministic backward (Options.Deterministic; sm90 only)
	// fwdBlocks (tests only; 0: no cap) caps the persistent sm90 forward's grid, so that each
	// block walks several work items (the GPU tests' problems have fewer items than an H100
	// has SMs: without it no block ever reaches a second item)
	fwdBlocks int
	// tailLaunches counts the backward passes launched with their last wave split (the GPU
	// tests read it: a row's tail-N label comes from the plan, not from the launch)
	tailLaunches atomic.Int64
	maps         map[tmaKey]*cuda.TensorMap

	mu    sync.Mutex
	fns   map[string]*cuda.Function
	lists map[uint64]*deviceList
	// byIdent finds a list by its masks' identity (listIdent); identMasks holds those
	// masks so the identity stays unique while the entry stands.
	byIdent    map[string]*deviceList
	identMasks map[string][]mask.Mask
	scratch    *cuda.ScratchPool
}

var _ kernels.Kernel = (*Kernel)(nil)

// Options are the NVRTC options the kernel is compiled with on g.
func Options(g *cuda.Device) []string {
	return g.Options("--use_fast_math", "-lineinfo")
}

// New compiles (or loads from the cache) the kernel for device g with its best variant.
func New(g *cuda.Device) (*Kernel, error) { return NewVariant(g, "") }

// NewVariant compiles (or loads from the cache) the kernel for device g with the named
// variant ("" for the best one the device runs).
func NewVariant(g *cuda.Device, name string) (*Kernel, error) {
	av, err := pickVariant(name, g.Props.Major, g.Props.Minor)
	if err != nil {
		return nil, err
	}
	k := &Kernel{dev: g, arch: av, fwd: av.fwd, bwd: av.bwd, fns: map[string]*cuda.Function{}, lists: map[uint64]*deviceList{}, byIdent: map[string]*deviceList{}, identMasks: map[string][]mask.Mask{},
		scratch: cuda.NewScratchPool(g), maps: map[tmaKey]*cuda.TensorMap{}}
	if k.mod, k.Log, err = load(g, Source(), "longca_attention.cu"); err != nil {
		return nil, err
	}
	if strings.HasPrefix(av.name, "sm90") {
		var log string
		if k.mod90, log, err = load(g, av.sourceSM90(), "longca_attention_sm90.cu"); err != nil {
			return nil, err
		}
		k.Log += log
	}
	return k, nil
}

// inSM90 says whether an entry point is in attention_sm90.cu (fwd90*, bwd90*, dq90*).
func inSM90(name string) bool {
	for _, p := range []string{"fwd90", "bwd90", "dq90"} {
		if strings.HasPrefix(name, p) {
			return true
		}
	}
	return false
}

// load compiles (or finds in the cache) one source for g and loads it.
func load(g *cuda.Device, src, name string) (*cuda.Module, string, error) {
	img, log, _, err := cuda.CompileCached(src, name, Options(g), g.Props.Name+" "+g.Arch())
	if err != nil {
		return nil, log, err
	}
	var mod *cuda.Module
	if err := g.Do(func() error {
		var err error
		mod, err = cuda.LoadModule(img)
		return err
	}); err != nil {
		return nil, log, fmt.Errorf("cuda: loading %s: %w", name, err)
	}
	return mod, log, nil
}

// Variant is the name of the variant in use (sm90, sm80).
func (k *Kernel) Variant() string { return k.arch.name }

// DeterministicBackward says whether the backward adds dQ in a fixed order (made with
// Options.Deterministic, on the sm90 variants).
func (k *Kernel) DeterministicBackward() bool { return k.det && inSM90(k.bwd.fn) }

// BackwardPartials is the most parts this kernel's backward splits a KV head's group of
// query heads into at head dimension d, each part holding fp32 partials of dK and dV (the
// memory session.FitKernels adds to a case's footprint before anything is allocated): at
// head dim 64 on the sm90 variants that split (gsplit) 4 or 2 of groupSplit's parts, at
// 128 the variant's split128 where it divides the group (sm90 2, 4 or 8 by its rule; sm90g8
// 8 always), or at 128 the last wave's split (tailPlan: 2, 4 or 8 dividing the group, its
// compact partials fewer than as many whole ones) where the variant compiles it and that is
// more (sm90ns); 1 for the deterministic backward, other head dims and the other variants.
// The mirror of backwardPlan's and tailPlan's conditions; an upper bound, as a rule may not
// split.
func (k *Kernel) BackwardPartials(group, d int) int {
	if k.det || !inSM90(k.bwd.fn) || group < 2 {
		return 1
	}
	g := k.groupPartials(group, d)
	always := k.arch.split128 > 1 && !k.arch.split128Rule && group%k.arch.split128 == 0 // sm90g2 / g8: never unsplit, so never a tail
	if d == 128 && !always && k.arch.tails() {
		g = max(g, mostParts(split128Tries, 8, group))
	}
	return g
}

// groupPartials is BackwardPartials's bound for the group split alone.
func (k *Kernel) groupPartials(group, d int) int {
	switch {
	case d == 64 && k.arch.gsplit:
		return mostParts(groupSplitParts, group, group)
	case d == 128 && k.arch.split128 > 1 && !k.arch.split128Rule:
		if group%k.arch.split128 == 0 {
			return k.arch.split128
		}
	case d == 128 && k.arch.split128 > 1:
		return mostParts(split128Tries, k.arch.split128, group)
	}
	return 1
}

// Describe names the variant that serves the problem and the architecture it was built
// for; on sm90 a forward run persistent (short rows) says so ("sm90 persistent-fwd"), and
// one over other tiles than the variant's (k64-fwd, and forwardLabel's: wide-fwd) or over tiles
// started at the documents (ragged-fwd: sm90's since call 74's sm90rg), a
// deterministic backward too ("sm90 deterministic"), and a backward its group split ("sm90
// gsplit-4"), its key-tile pairs ("sm90 pairs-bwd"; "sm90 doc-pairs-bwd" within documents) and
// its last wave's split ("tail-8").
func (k *Kernel) Describe(p kernels.Problem, pass kernels.Pass) kernels.Info {
	info := kernels.Info{Variant: k.arch.name, Versions: map[string]string{"arch": k.dev.Arch()}}
	if k.DeterministicBackward() && pass != kernels.Fwd {
		info.Variant += " deterministic"
	}
	if fv := k.forwardFor(p); inSM90(fv.fn) && pass != kernels.Bwd { // a backward row times the backward alone
		if dl, err := k.list(p, fv.qTile, fv.kTile, false); err == nil {
			if k.dynForward(fv, dl.w) {
				info.Variant += " dyn-fwd"
			} else if k.forwardPersistent(fv, dl.w) {
				info.Variant += " persistent-fwd"
			}
			if dl.w.Ragged {
				info.Variant += " ragged-fwd"
			}
		}
		if k.arch.k64 && fv.kTile == 64 {
			info.Variant += " k64-fwd"
		}
		if l := forwardLabel(fv); l != "" {
			info.Variant += " " + l
		}
	}
	if (k.arch.gsplit || k.arch.pairs || k.arch.split128 > 1) && pass != kernels.Fwd && p.HeadsKV > 0 { // the backward's plan
		bv := k.bwd.at(p.HeadDim)
		if dl, err := k.list(p, bv.qTile, bv.kTile, true); err == nil {
			sched, g := k.backwardPlan(dl, p.HeadsKV, p.HeadsQ/p.HeadsKV, p.HeadDim)
			if g > 1 {
				info.Variant += fmt.Sprintf(" gsplit-%d", g)
			}
			if tp := k.tailPlan(dl, sched, g, p.HeadsKV, p.HeadsQ/p.HeadsKV, p.HeadDim); tp > 1 {
				info.Variant += fmt.Sprintf(" tail-%d", tp)
			}
			if sched&schedDocPairs != 0 {
				info.Variant += " doc-pairs-bwd"
			} else if sched&8 != 0 {
				info.Variant += " pairs-bwd"
			}
		}
	}
	return info
}

// forwardLabel is what a row run by the sm90 forward fv says of it beyond the variant's name
// (Describe): wide-fwd for the wide forward (128 x 176 tiles at head dim 128); "" else.
func forwardLabel(fv variant) string {
	switch fv.fn {
	case fwdSM90N.fn:
		return "wide-fwd"
	}
	return ""
}

// Name is "cuda".
func (k *Kernel) Name() string { return "cuda" }

// Device is the GPU the kernel runs on.
func (k *Kernel) Device() tensor.Device { return k.dev }

// CUDADevice is the GPU as its concrete type.
func (k *Kernel) CUDADevice() *cuda.Device { return k.dev }

// Supports accepts bf16 and fp16 at head dim 64 or 128.
func (k *Kernel) Supports(p kernels.Problem) error {
	if err := p.Validate(); err != nil {
		return err
	}
	if p.DType != tensor.BF16 && p.DType != tensor.FP16 {
		return fmt.Errorf("cuda kernel takes bf16 or fp16, not %s (--dtype)", p.DType)
	}
	if p.HeadDim != 64 && p.HeadDim != 128 {
		return fmt.Errorf("cuda kernel takes head dim 64 or 128, not %d (--head-dim)", p.HeadDim)
	}
	return nil
}

func dtypeName(d tensor.DType) string {
	if d == tensor.FP16 {
		return "fp16"
	}
	return "bf16"
}

// function returns a kernel of the module, raising its shared-memory limit once.
func (k *Kernel) function(name string, shared int) (*cuda.Function, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if f, ok := k.fns[name]; ok {
		return f, nil
	}
	var f *cuda.Function
	err := k.dev.Do(func() error {
		var err error
		mod := k.mod
		if inSM90(name) {
			mod = k.mod90
		}
		if mod == nil {
			return fmt.Errorf("cuda: %s needs the sm_90 module, not loaded for variant %s", name, k.arch.name)
		}
		if f, err = mod.Function(name); err != nil {
			return err
		}
		if shared > 48<<10 {
			if shared > k.dev.SharedPerBlockOpt {
				return fmt.Errorf("cuda: %s needs %d bytes of shared memory, the device allows %d", name, shared, k.dev.SharedPerBlockOpt)
			}
			return f.SetMaxDynamicShared(shared)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	k.fns[name] = f
	return f, nil
}

// deviceList is a work list in device memory.
type deviceList struct {
	w                                                  *WorkList
	order, start, entries, refs, slices, ranks, bounds *cuda.Buffer
	// pairOrder, on a backward list of a docPairs variant: endAlignedPairs's order
	pairOrder *cuda.Buffer
	// tilesPay, on a forward list: otherTilesPay's decisions by the other tiles' key tile
	// (64 on 128 x 128: keyTile64Pays; the wide forward's 176 on 128 x 128: widerTilesPay),
	// 1 they pay, -1 not; absent, not yet decided
	tilesPay map[int]int8
	// sched and split, on a backward list: backwardPlan's order and group split for planFor
	// (heads, group, slots, head dim); sched 0 when not yet decided
	sched   int32
	split   int
	planFor [4]int
}

// listKey hashes what a work list depends on: the tile shape and every slice's values
// (binary, no formatting: a block-sparse mask has 10^5 slices and the key is taken on
// every call of an uncached mask).
func listKey(ms []mask.Mask, qt, kt int, tr bool) uint64 {
	h := fnv.New64a()
	buf := make([]byte, 0, 4096)
	put := func(vs ...int) {
		for _, v := range vs {
			buf = binary.LittleEndian.AppendUint64(buf, uint64(v))
		}
		if len(buf) >= 4000 {
			h.Write(buf)
			buf = buf[:0]
		}
	}
	trb := 0
	if tr {
		trb = 1
	}
	put(qt, kt, trb, len(ms))
	for _, m := range ms {
		put(m.SeqQ, m.SeqK, len(m.Slices))
		for _, s := range m.Slices {
			put(s.Q.Start, s.Q.End, s.K.Start, s.K.End, int(s.Kind))
		}
	}
	h.Write(buf)
	return h.Sum64()
}

// listIdent names a list by the identity of its masks' slice arrays (address and length
// of each), the tile shape and the orientation: the fast path of list, which a repeated
// call of the same problem (a timed repetition, a CP step) takes without reading the
// slices. The cache entry keeps the masks, so their arrays cannot be freed and their
// addresses reused while the entry stands; masks are values never changed in place.
func listIdent(ms []mask.Mask, qt, kt int, tr bool) string {
	b := make([]byte, 0, 8*(4+3*len(ms)))
	put := func(v uint64) { b = binary.LittleEndian.AppendUint64(b, v) }
	trb := uint64(0)
	if tr {
		trb = 1
	}
	put(uint64(qt))
	put(uint64(kt))
	put(trb)
	put(uint64(len(ms)))
	for _, m := range ms {
		var p uintptr
		if len(m.Slices) > 0 {
			p = uintptr(unsafe.Pointer(&m.Slices[0]))
		}
		put(uint64(p))
		put(uint64(len(m.Slices)))
		put(uint64(m.SeqQ)<<32 | uint64(uint32(m.SeqK)))
	}
	return string(b)
}

// masksOf is the one mask, or the per-KV-head masks.
func masksOf(p kernels.Problem) []mask.Mask {
	if len(p.HeadMasks) > 0 {
		return p.HeadMasks
	}
	return []mask.Mask{p.Mask}
}

// list builds (or finds) a work list and puts it in device memory: by the masks'
// identity first (no pass over the slices), then by their content.
func (k *Kernel) list(p kernels.Problem, qt, kt int, tr bool) (*deviceList, error) {
	return k.listBuilt(p, qt, kt, tr, nil)
}

// listBuilt is list with w, when not nil, the work list already built on the host for
// these tiles (otherTilesPay builds the other tiles' one to decide), used instead of building it
// again where the list is not in device memory yet.
func (k *Kernel) listBuilt(p kernels.Problem, qt, kt int, tr bool, w *WorkList) (*deviceList, error) {
	ms := masksOf(p)
	id := listIdent(ms, qt, kt, tr)
	k.mu.Lock()
	dl, ok := k.byIdent[id]
	k.mu.Unlock()
	if ok {
		return dl, nil
	}
	key := listKey(ms, qt, kt, tr)
	k.mu.Lock()
	dl, ok = k.lists[key]
	k.mu.Unlock()
	if !ok {
		if w == nil {
			var err error
			if w, err = BuildWorkList(ms, qt, kt, tr); err != nil {
				return nil, err
			}
			if k.arch.ragged && !tr && len(ms) == 1 {
				w = raggedOr(w, ms[0], qt, kt)
			}
		}
		dl = &deviceList{w: w}
		type upload struct {
			dst  **cuda.Buffer
			vals []int32
		}
		bufs := []upload{{&dl.order, w.Order}, {&dl.start, w.Start}, {&dl.entries, w.Entries}, {&dl.refs, w.Refs}, {&dl.slices, w.Slices}, {&dl.ranks, w.Ranks}}
		if w.Ragged { // only a ragged list's launch reads its bounds (forward90)
			bufs = append(bufs, upload{&dl.bounds, w.Bounds})
		}
		if tr && k.arch.docPairs != docPairsNever {
			bufs = append(bufs, upload{&dl.pairOrder, endAlignedPairs(w)})
		}
		for _, f := range bufs {
			vals := f.vals
			if len(vals) == 0 {
				vals = []int32{0}
			}
			b, err := k.dev.AllocBuffer(tensor.FP32, len(vals))
			if err != nil {
				return nil, err
			}
			h := tensor.NewHost(tensor.FP32, len(vals))
			for i, v := range vals {
				binary.LittleEndian.PutUint32(h.Data[4*i:], uint32(v))
			}
			if err := k.dev.CopyIn(b, h); err != nil {
				return nil, err
			}
			*f.dst = b
		}
	}
	k.mu.Lock()
	k.lists[key] = dl
	if len(k.byIdent) > 4096 { // identities of masks long gone: let them go
		clear(k.byIdent)
		clear(k.identMasks)
	}
	k.byIdent[id] = dl
	k.identMasks[id] = ms // keeps the arrays the identity names alive
	k.mu.Unlock()
	return dl, nil
}

func (dl *deviceList) args() []any {
	per := 0
	if dl.w.Lists > 1 {
		per = 1
	}
	return []any{dl.order, dl.start, dl.entries, dl.refs, dl.slices, dl.w.RowTiles, per}
}

// pairedArgs is args with the backward's key tiles in endAlignedPairs's order where the plan
// pairs within documents (schedDocPairs; the list of a docPairs variant has the order).
func (dl *deviceList) pairedArgs(sched int32) []any {
	a := dl.args()
	if sched&schedDocPairs != 0 && dl.pairOrder != nil {
		a[0] = dl.pairOrder
	}
	return a
}

// Forward writes out and lse.
func (k *Kernel) Forward(ctx context.Context, p kernels.Problem, q, kk, v, out, lse tensor.Tensor) error {
	if err := k.Supports(p); err != nil {
		return err
	}
	bs, err := kernels.ForwardArgs[*cuda.Buffer]("cuda", p, q, kk, v, out, lse)
	if err != nil {
		return err
	}
	fv := k.forwardFor(p)
	dl, err := k.list(p, fv.qTile, fv.kTile, false)
	if err != nil {
		return err
	}
	if strings.HasPrefix(fv.fn, "fwd90") {
		return k.forward90(p, bs, dl, fv)
	}
	shared := fv.shared(p.HeadDim)
	f, err := k.function(fmt.Sprintf("%s_%s_d%d", fv.fn, dtypeName(p.DType), p.HeadDim), shared)
	if err != nil {
		return err
	}
	scaleLog2 := float32(p.SoftmaxScale() * math.Log2E)
	args := append([]any{bs[0], bs[1], bs[2], bs[3], bs[4], p.Mask.SeqQ, p.Mask.SeqK, p.HeadsQ, p.HeadsKV, scaleLog2}, dl.args()...)
	return k.dev.Do(func() error {
		return f.Launch(cuda.Dim3{X: p.HeadsQ, Y: dl.w.RowTiles}, cuda.Dim3{X: fv.threads}, shared, k.dev.Stream(), args...)
	})
}

// scratchBuf is the kernel's fp32 device buffer of the named role with at least n
// elements (internal/cuda's ScratchPool: one per role, grown when a larger problem
// comes, so a sweep over lengths holds only the largest).
func (k *Kernel) scratchBuf(role string, n int) (*cuda.Buffer, error) {
	return k.scratch.Get(role, tensor.FP32, n)
}

// Backward writes dq, dk and dv.
func (k *Kernel) Backward(ctx context.Context, p kernels.Problem, q, kk, v, out, lse, dout, dq, dk, dv tensor.Tensor) error {
	if err := k.Supports(p); err != nil {
		return err
	}
	bs, err := kernels.BackwardArgs[*cuda.Buffer]("cuda", p, q, kk, v, out, lse, dout, dq, dk, dv)
	if err != nil {
		return err
	}
	bv := k.bwd.at(p.HeadDim) // the entry at this head dim, with its own tiles (192 keys at 64 on sm90)
	dl, err := k.list(p, bv.qTile, bv.kTile, true)
	if err != nil {
		return err
	}
	if strings.HasPrefix(k.bwd.fn, "bwd90") {
		return k.backward90(p, bs, dl)
	}
	sq, hq, d := p.Mask.SeqQ, p.HeadsQ, p.HeadDim
	dsum, err := k.scratchBuf("dsum", hq*sq)
	if err != nil {
		return err
	}
	dqacc, err := k.scratchBuf("dqacc", sq*hq*d)
	if err != nil {
		return err
	}
	dt := dtypeName(p.DType)
	pre, err := k.function(fmt.Sprintf("bwd_pre_%s_d%d", dt, d), 0)
	if err != nil {
		return err
	}
	shared := bv.shared(d)
	main, err := k.function(fmt.Sprintf("%s_%s_d%d", bv.fn, dt, d), shared)
	if err != nil {
		return err
	}
	conv, err := k.function("dq_convert_"+dt, 0)
	if err != nil {
		return err
	}
	scale := p.SoftmaxScale()
	if err := k.dev.Memset(dqacc, 4, 0); err != nil {
		return err
	}
	return k.dev.Do(func() error {
		st := k.dev.Stream()
		rows := sq * hq
		if err := pre.Launch(cuda.Dim3{X: (rows + 7) / 8}, cuda.Dim3{X: 256}, 0, st, bs[3], bs[5], dsum, sq, hq); err != nil {
			return err
		}
		args := append([]any{bs[0], bs[1], bs[2], bs[5], bs[4], dsum, dqacc, bs[7], bs[8], sq, p.Mask.SeqK, hq, p.HeadsKV,
			float32(scale), float32(scale * math.Log2E)}, dl.args()...)
		if err := main.Launch(cuda.Dim3{X: p.HeadsKV, Y: dl.w.RowTiles}, cuda.Dim3{X: bv.threads}, shared, st, args...); err != nil {
			return err
		}
		n := sq * hq * d
		return conv.Launch(cuda.Dim3{X: max(1, min(k.dev.SMs*8, (n+255)/256))}, cuda.Dim3{X: 256}, 0, st, dqacc, bs[6], uint64(n))
	})
}

// Resources reports registers, stack frame and blocks per SM of each kernel of the
// variant in use.
func (k *Kernel) Resources() (string, error) {
	type entry struct {
		name            string
		threads, shared int
	}
	var es []entry
	for _, dt := range []string{"bf16", "fp16"} {
		for _, d := range []int{64, 128} {
			bv := k.bwd.at(d)
			vs := []variant{k.fwd.at(d), bv}
			if k.arch.k64 { // the forward the tile rule picks on 64-token block-sparse maps
				vs = append(vs, fwdSM90S)
			}
			if k.arch.wide && d == 128 { // the forward on long rows
				vs = append(vs, fwdSM90N)
			}
			if k.arch.split128 > 1 && d == 128 { // the split's own entry
				vs = append(vs, bv.splitEntry())
			}
			if k.arch.pairsEntry && d == 128 { // the pairs' own entries (bwd90ep, bwd90esp)
				vs = append(vs, bv.pairedEntry())
				if k.arch.split128 > 1 {
					vs = append(vs, bv.splitEntry().pairedEntry())
				}
			}
			for _, v := range vs {
				es = append(es, entry{fmt.Sprintf("%s_%s_d%d", v.fn, dt, d), v.threads, v.shared(d)})
			}
			es = append(es, entry{fmt.Sprintf("bwd_pre_%s_d%d", dt, d), 256, 0})
		}
		es = append(es, entry{"dq_convert_" + dt, 256, 0})
	}
	var s string
	for _, e := range es {
		f, err := k.function(e.name, e.shared)
		if err != nil {
			return s, err
		}
		var regs, local, occ int
		err = k.dev.Do(func() error {
			var err error
			if regs, local, err = f.Registers(); err != nil {
				return err
			}
			occ, err = f.Occupancy(e.threads, e.shared)
			return err
		})
		if err != nil {
			return s, err
		}
		s += fmt.Sprintf("%-20s threads %3d  regs %3d  stack %4d B  shared %6d B  blocks/SM %d\n", e.name, e.threads, regs, local, e.shared, occ)
	}
	return s, nil
}
