package cuda

import (
	"fmt"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/longca/longca/internal/cuda"
	"github.com/longca/longca/internal/hostcc"
	"github.com/longca/longca/kernels"
	"github.com/longca/longca/mask"
	"github.com/longca/longca/tensor"
)

// Without a GPU the registered kernel fails to start with the driver's reason, and the
// harness records the case as unsupported rather than crashing.
func TestRegisteredWithoutGPU(t *testing.T) {
	found := false
	for _, n := range kernels.Names() {
		found = found || n == "cuda"
	}
	if !found {
		t.Fatal(`"cuda" is not registered`)
	}
	if cuda.Available() == nil {
		t.Log("a GPU is present: the GPU tests (tag gpu) cover this machine")
		return
	}
	if _, err := kernels.New("cuda", kernels.Options{}); err == nil || !strings.Contains(err.Error(), "libcuda") {
		t.Fatalf(`kernels.New("cuda") without a driver: %v`, err)
	}
	if _, err := kernels.New("cuda", kernels.Options{Variant: "v9"}); err == nil || !strings.Contains(err.Error(), "--variant") {
		t.Fatalf("bad variant: %v", err)
	}
	if _, err := kernels.New("cuda", kernels.Options{Device: -1}); err == nil || !strings.Contains(err.Error(), "--device") {
		t.Fatalf("bad device: %v", err)
	}
}

func TestSupportsNamesTheFlag(t *testing.T) {
	k := &Kernel{}
	m := mask.Mask{SeqQ: 8, SeqK: 8, Slices: []mask.Slice{{Q: mask.Range{End: 8}, K: mask.Range{End: 8}}}}
	for _, c := range []struct {
		p    kernels.Problem
		flag string
	}{
		{kernels.Problem{HeadsQ: 2, HeadsKV: 2, HeadDim: 96, DType: tensor.BF16, Mask: m}, "--head-dim"},
		{kernels.Problem{HeadsQ: 2, HeadsKV: 2, HeadDim: 64, DType: tensor.FP32, Mask: m}, "--dtype"},
		{kernels.Problem{HeadsQ: 3, HeadsKV: 2, HeadDim: 64, DType: tensor.BF16, Mask: m}, "--heads"},
	} {
		err := k.Supports(c.p)
		if err == nil || !strings.Contains(err.Error(), c.flag) {
			t.Errorf("%+v: %v, want a reason naming %s", c.p, err, c.flag)
		}
	}
	for _, dt := range []tensor.DType{tensor.BF16, tensor.FP16} {
		for _, d := range []int{64, 128} {
			if err := k.Supports(kernels.Problem{HeadsQ: 8, HeadsKV: 2, HeadDim: d, DType: dt, Mask: m}); err != nil {
				t.Errorf("%s d%d: %v", dt, d, err)
			}
		}
	}
}

// Every variant's shared memory fits the H200's 227 KB opt-in limit, and the sources
// instantiate each variant's entry points for both dtypes and head dims.
func TestVariantsMatchSource(t *testing.T) {
	for _, av := range archVariants {
		vs := []variant{av.fwd, av.bwd}
		for _, v := range []variant{av.fwd, av.bwd} {
			if v.at64 != nil {
				vs = append(vs, *v.at64)
			}
		}
		for i, v := range vs {
			d := 128 // the entries past the first two run at head dim 64 only (at64)
			if i >= 2 {
				d = 64
			}
			if sh := v.shared(d); sh > 227<<10 {
				t.Errorf("%s %s: %d bytes of shared memory at head dim %d", av.name, v.fn, sh, d)
			}
			src := Source()
			if inSM90(v.fn) {
				src = SourceSM90()
			}
			if !strings.Contains(src, v.fn+"_##NAME##_d##D(") && !regexp.MustCompile(`SM90_(FWD|FWD_NC|FWD_X|FWD_B|FWD_R|FWD_PS|BWD|BWD_X|BWD_N|BWD_G|BWD_Q|BWD_PAIR)\(`+v.fn+`, `).MatchString(src) {
				t.Errorf("variant %s: no entry point %s", av.name, v.fn)
			}
		}
	}
	for _, dt := range []string{"ENTRIES(bf16, __nv_bfloat16, 64)", "ENTRIES(bf16, __nv_bfloat16, 128)", "ENTRIES(fp16, __half, 64)", "ENTRIES(fp16, __half, 128)"} {
		if !strings.Contains(source, dt) || !strings.Contains(SourceSM90(), "SM90_"+dt) {
			t.Errorf("a source does not instantiate %s", dt)
		}
	}
	if strings.Contains(SourceSM90(), `#include "wgmma.cuh"`) || !strings.Contains(SourceSM90(), "wgmma_rs_bf16_n128") {
		t.Error("the sm90 source does not inline its wgmma wrappers")
	}
}

// The Hopper backward's shared memory as BwdLayout<D, NB> lays it out (attention_sm90.cu,
// compiled with the host C++ compiler) is what the variants ask for at launch: the kernel
// has no check of its own, and a short allocation would be overrun. The variants' key tiles
// and threads are the layout's (a consumer warpgroup per 64 keys, two at D = 128, and the
// producer).
func TestBackwardSharedMatchesLayout(t *testing.T) {
	src := SourceSM90()
	prog := "#include <cstdio>\n" + extract(t, src, "constexpr int SBM = 128", "\n") + extract(t, src, "constexpr int CHUNK = 64;", "\n") +
		extract(t, src, "constexpr int BBM9 = 64", "\n") + extract(t, src, "template <int D, int NB = BBN9, int ST = STAGES, int XB = 0, int QS = BBM9> struct BwdLayout {", "\n};\n") + `
template <int D, int NB, int ST, int XB, int QS = 64> void show() { printf("%d %d %d %d %d %d %d\n", D, NB, ST, XB, QS, BwdLayout<D, NB, ST, XB, QS>::kBytes, BwdLayout<D, NB, ST, XB, QS>::kNC); }
int main() { show<64, 128, 2, 0>(); show<128, 128, 2, 0>(); show<64, 192, 2, 0>();
  show<64, 128, 2, 1>(); show<128, 128, 2, 1>(); show<64, 192, 2, 1>(); show<64, 128, 2, 1, 128>(); show<64, 128, 2, 0, 128>(); return 0; }
`
	out := hostcc.Output(t, "bwdlayout", prog)
	type key struct{ d, nb, st, xb, qs int }
	layout := map[key][2]int{}
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		var d, nb, st, xb, qs, bytes, nc int
		if _, err := fmt.Sscan(line, &d, &nb, &st, &xb, &qs, &bytes, &nc); err != nil {
			t.Fatalf("line %q: %v", line, err)
		}
		layout[key{d, nb, st, xb, qs}] = [2]int{bytes, nc}
	}
	for _, c := range []struct {
		v                 variant
		d, nb, st, xb, qs int
	}{{bwdSM90F, 64, 128, 2, 0, 64}, {bwdSM90F, 128, 128, 2, 0, 64}, {bwdSM90C, 128, 128, 2, 0, 64}, {bwdSM90E, 128, 128, 2, 0, 64}, {bwdSM90T, 64, 192, 2, 0, 64},
		{bwdSM90ETP, 128, 128, 2, 1, 64}, {*bwdSM90ETP.at64, 64, 192, 2, 1, 64}, {*bwdSM90ETQP.at64, 64, 128, 2, 1, 128}} {
		l, ok := layout[key{c.d, c.nb, c.st, c.xb, c.qs}]
		if !ok {
			t.Fatalf("no layout for D %d NB %d stages %d extra barriers %d, %d queries a step in %q", c.d, c.nb, c.st, c.xb, c.qs, out)
		}
		if got := c.v.shared(c.d); got != l[0] {
			t.Errorf("%s at head dim %d, %d stages: the variant asks for %d bytes, BwdLayout<%d, %d, %d> takes %d", c.v.fn, c.d, c.st, got, c.d, c.nb, c.st, l[0])
		}
		if c.v.kTile != c.nb || c.v.threads != 128*(1+l[1]) {
			t.Errorf("%s at head dim %d: %d keys, %d threads; the layout has %d keys and %d consumer warpgroups", c.v.fn, c.d, c.v.kTile, c.v.threads, c.nb, l[1])
		}
	}
	// every sm90 variant's backward at both head dims: a module compiled with
	// LONGCA_BWD_PAIRS lays out one barrier more (emptyKV), and only such a module pairs
	paired := 0
	for _, av := range archVariants {
		if av.major != 9 {
			continue
		}
		xb := 0
		if slices.Contains(av.defines, "LONGCA_BWD_PAIRS") {
			xb, paired = 1, paired+1
		} else if av.pairs && !av.pairsEntry {
			t.Errorf("%s pairs the backward's key tiles without LONGCA_BWD_PAIRS or the pairs' own entries", av.name)
		}
		if av.pairsEntry && xb == 1 {
			t.Errorf("%s has the pairs' own entries and LONGCA_BWD_PAIRS: every entry would carry the pairs' code", av.name)
		}
		if av.pairsEntry { // the pairs' own entries lay out the extra barrier
			pv := av.bwd.at(128).pairedEntry()
			if l, ok := layout[key{128, pv.kTile, 2, 1, max(pv.qTile, pv.qStep)}]; !ok || pv.shared(128) != l[0] {
				t.Errorf("%s's pairs' own entry at head dim 128: %d bytes asked, its layout %v", av.name, pv.shared(128), l)
			}
		}
		for _, d := range []int{64, 128} {
			bv := av.bwd.at(d)
			l, ok := layout[key{d, bv.kTile, 2, xb, max(bv.qTile, bv.qStep)}]
			if !ok {
				t.Errorf("%s at head dim %d: no layout for %d keys, %d extra barriers", av.name, d, bv.kTile, xb)
				continue
			}
			if bv.shared(d) != l[0] {
				t.Errorf("%s at head dim %d: the backward asks for %d bytes, its layout (%d extra barriers) takes %d", av.name, d, bv.shared(d), xb, l[0])
			}
		}
	}
	if paired == 0 {
		t.Error("no variant defines LONGCA_BWD_PAIRS: the check above checked nothing")
	}
}

// The Hopper forward's shared memory as SmemLayout<D, QM, BN> lays it out
// (attention_sm90.cu, compiled with the host C++ compiler) is what every sm90 variant's
// forward asks for at launch, at both head dims, for the 128 x 64 tiles and the wide
// forward's 128 x 176: the kernel has no check of its own.
// forwardsOf lists the forwards a Hopper variant may launch at head dim d: its own, the 128 x
// 64 tiles (k64) and the wide forward (wide, at 128).
func forwardsOf(av archVariant, d int) []variant {
	vs := []variant{av.fwd.at(d)}
	if av.k64 {
		vs = append(vs, fwdSM90S)
	}
	if av.wide && d == 128 {
		vs = append(vs, fwdSM90N)
	}
	return vs
}

func TestForwardSharedMatchesLayout(t *testing.T) {
	src := SourceSM90()
	prog := "#include <cstdio>\n" + extract(t, src, "constexpr int SBM = 128", "\n") + extract(t, src, "constexpr int CHUNK = 64;", "\n") +
		extract(t, src, "template <int D, int QM = SBM, int BN = SBN> struct SmemLayout {", "\n};\n") + `
template <int D, int QM, int BN> void show() { printf("%d %d %d %d\n", D, QM, BN, SmemLayout<D, QM, BN>::kBytes); }
int main() { show<64, 128, 128>(); show<128, 128, 128>(); show<64, 192, 128>();
  show<64, 128, 64>(); show<128, 128, 64>(); show<128, 128, 176>(); return 0; }
`
	// the layout the kernel takes: its query rows a tile (64 a consumer warpgroup) and key tile
	for _, rule := range []string{"using L = SmemLayout<D, QM, BN>;", "constexpr int QM = 64 * NC"} {
		if !strings.Contains(src, rule) {
			t.Fatalf("attention_sm90.cu no longer says %q: the layout rule this test copies has moved", rule)
		}
	}
	out := hostcc.Output(t, "fwdlayout", prog)
	type key struct{ d, qm, bn int }
	layout := map[key]int{}
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		var k key
		var bytes int
		if _, err := fmt.Sscan(line, &k.d, &k.qm, &k.bn, &bytes); err != nil {
			t.Fatalf("line %q: %v", line, err)
		}
		layout[k] = bytes
	}
	wide := 0
	for _, av := range archVariants {
		if av.major != 9 {
			continue
		}
		for _, d := range []int{64, 128} {
			vs := forwardsOf(av, d)
			if av.wide && d == 128 {
				wide++
			}
			for _, v := range vs {
				if v.shared(d) > 232448 { // cudaDevAttrMaxSharedMemoryPerBlockOptin on sm_90
					t.Errorf("%s %s at head dim %d: %d bytes of shared memory, past the 232,448 a block may have", av.name, v.fn, d, v.shared(d))
				}
				l, ok := layout[key{d, v.qTile, v.kTile}]
				if !ok {
					t.Errorf("%s %s at head dim %d: no layout for %d x %d tiles", av.name, v.fn, d, v.qTile, v.kTile)
					continue
				}
				if v.shared(d) != l {
					t.Errorf("%s %s at head dim %d: the forward asks for %d bytes, SmemLayout<%d, %d, %d> takes %d", av.name, v.fn, d, v.shared(d), d, v.qTile, v.kTile, l)
				}
				if want := 128 * (1 + v.qTile/64); v.threads != want {
					t.Errorf("%s %s: %d threads for %d query rows (a consumer warpgroup per 64 and the producer: %d)", av.name, v.fn, v.threads, v.qTile, want)
				}
			}
		}
	}
	// the wide forward's layout (sm90's at head dim 128) was checked above
	if wide == 0 && slices.ContainsFunc(archVariants, func(a archVariant) bool { return a.wide }) {
		t.Error("a variant runs the wide forward, and its check above checked nothing")
	}
}

// The variant follows the compute capability, and a variant the device cannot run is a
// reason naming --variant.
func TestPickVariant(t *testing.T) {
	for _, c := range []struct {
		name         string
		major, minor int
		want, err    string
	}{
		{"", 9, 0, "sm90", ""}, {"", 8, 0, "sm80", ""}, {"", 8, 9, "sm80", ""}, {"", 10, 0, "sm80", ""},
		{"sm80", 9, 0, "sm80", ""}, {"sm90", 8, 6, "", "--variant"}, {"sm90", 10, 0, "", "--variant"},
		{"v1", 9, 0, "", "unknown variant"}, {"", 7, 5, "", "sm_80 or later"},
	} {
		v, err := pickVariant(c.name, c.major, c.minor)
		switch {
		case c.err != "" && (err == nil || !strings.Contains(err.Error(), c.err)):
			t.Errorf("%q on %d.%d: %v, want an error with %q", c.name, c.major, c.minor, err, c.err)
		case c.err == "" && (err != nil || v.name != c.want):
			t.Errorf("%q on %d.%d: %s %v, want %s", c.name, c.major, c.minor, v.name, err, c.want)
		}
	}
}

// Both sources compile as device code (clang, every template instantiated), and the sm90
// source with each variant's define: a kernel edit that breaks the C++ fails here, not in
// a device call.
func TestSourcesCompile(t *testing.T) {
	hostcc.CheckDevice(t, "attention", Source(), "sm_80")
	hostcc.CheckDevice(t, "attention_sm90", SourceSM90(), "sm_80")
	for _, v := range archVariants {
		if len(v.defines) > 0 {
			hostcc.CheckDevice(t, "attention_sm90_"+v.name, v.sourceSM90(), "sm_80")
		}
	}
}

// Every entry point sm90.go asks for by a literal name is looked up in the sm90 module
// (inSM90): a new entry whose prefix inSM90 does not know would be looked for in
// attention.cu and fail on the GPU only (the split backward's reduction once did).
func TestSM90EntriesInSM90Module(t *testing.T) {
	src, err := os.ReadFile("sm90.go")
	if err != nil {
		t.Fatal(err)
	}
	re := regexp.MustCompile(`k\.function\((?:fmt\.Sprintf\()?"([A-Za-z0-9_]+)`)
	names := re.FindAllStringSubmatch(string(src), -1)
	for _, lit := range regexp.MustCompile(`(?:convFn|fn) :?= "([A-Za-z0-9_]+)"`).FindAllStringSubmatch(string(src), -1) {
		names = append(names, lit)
	}
	if len(names) < 3 {
		t.Fatalf("found %d literal entry names in sm90.go, want at least 3 (the pattern no longer matches the code?)", len(names))
	}
	for _, m := range names {
		if !inSM90(m[1]) {
			t.Errorf("sm90.go asks for %q, which inSM90 sends to attention.cu", m[1])
		}
		if !strings.Contains(SourceSM90(), strings.TrimSuffix(m[1], "_")) && !strings.Contains(SourceSM90(), strings.SplitN(m[1], "_", 2)[0]) {
			t.Errorf("%q: not in attention_sm90.cu", m[1])
		}
	}
}

// Every entry point a variant runs is compiled into its module: attention_sm90.cu defines
// most entries only under a define (#ifdef X, or #if defined(X) && defined(Y)), and a
// variant whose defines lack one would find its entry missing on the GPU only, at its first
// launch. The entries a variant runs: its forward and backward at both head dims (with the
// persistent forward's and the deterministic backward's twins, named by suffix in the same
// block), the 64-key-tile forward where it has the tile rule, the split backward where it
// splits at head dim 128.
func TestVariantsDefineTheirEntries(t *testing.T) {
	needs := map[string][]string{} // entry prefix (the FN of an SM90_* macro) -> the defines around it
	var conds [][]string
	inst := regexp.MustCompile(`SM90_[A-Z0-9_]+\(([a-z][a-z0-9]*), `)
	for _, line := range strings.Split(SourceSM90(), "\n") {
		switch l := strings.TrimSpace(line); {
		case strings.HasPrefix(l, "#ifdef "):
			conds = append(conds, []string{strings.TrimSpace(strings.TrimPrefix(l, "#ifdef "))})
		case strings.HasPrefix(l, "#if "):
			var c []string
			for _, m := range regexp.MustCompile(`defined\((\w+)\)`).FindAllStringSubmatch(l, -1) {
				c = append(c, m[1])
			}
			conds = append(conds, c)
		case strings.HasPrefix(l, "#ifndef "):
			conds = append(conds, nil)
		case strings.HasPrefix(l, "#else"):
			if len(conds) > 0 && len(conds[len(conds)-1]) > 0 {
				conds[len(conds)-1] = []string{"!else"} // no entry point lives in an #else
			}
		case strings.HasPrefix(l, "#endif"):
			if len(conds) == 0 {
				t.Fatal("attention_sm90.cu: an #endif without its #if")
			}
			conds = conds[:len(conds)-1]
		default:
			for _, m := range inst.FindAllStringSubmatch(l, -1) {
				var all []string
				for _, c := range conds {
					all = append(all, c...)
				}
				needs[m[1]] = all
			}
		}
	}
	for _, fn := range []string{"fwd90", "bwd90f", "bwd90e", "bwd90t", "fwd90m"} {
		if _, ok := needs[fn]; !ok {
			t.Fatalf("no SM90_* entry %s found in attention_sm90.cu (the pattern no longer matches the source?)", fn)
		}
	}
	for _, a := range archVariants {
		if a.major != 9 {
			continue
		}
		var used []string
		for _, d := range []int{64, 128} {
			used = append(used, a.fwd.at(d).fn, a.bwd.at(d).fn)
			if a.k64 {
				used = append(used, fwdSM90S.fn)
			}
			if a.wide && d == 128 {
				used = append(used, fwdSM90N.fn)
			}
			if a.split128 > 1 && d == 128 {
				used = append(used, a.bwd.at(d).splitEntry().fn)
			}
			// the counter's entries (dynForward): fwd90mopd at 64 (fwdDyn), fwd90opd at 128 (fwdDynP)
			if fn := a.fwd.at(d).fn; a.counterWalks(fn, true) || a.counterWalks(fn, false) {
				used = append(used, fn+"pd")
			}
			if a.pairsEntry && d == 128 {
				used = append(used, a.bwd.at(d).pairedEntry().fn)
				if a.split128 > 1 {
					used = append(used, a.bwd.at(d).splitEntry().pairedEntry().fn)
				}
			}
		}
		for _, fn := range used {
			req, ok := needs[fn]
			if !ok {
				t.Errorf("%s runs %s, which no SM90_* macro instantiates", a.name, fn)
				continue
			}
			for _, d := range req {
				if !slices.Contains(a.defines, d) {
					t.Errorf("%s runs %s, compiled only with %s, which it does not define", a.name, fn, d)
				}
			}
		}
	}
}

// Every variant has a name of its own: --variant, list, pickVariant and the offline compile
// find a variant by its name (two of one name: each found a different one, the twenty-eighth
// session's sm90dw first named as call 53's sm90dp).
func TestVariantNamesUnique(t *testing.T) {
	seen := map[string]bool{}
	for _, a := range archVariants {
		if seen[a.name] {
			t.Errorf("two variants named %s", a.name)
		}
		seen[a.name] = true
	}
}

// A variant whose backward at head dim 64 takes 128 queries a step (sm90 since call 55) runs
// the bwd90qq entries: the source has them for both dtypes with their deterministic twins
// (that the module defines them is TestVariantsDefineTheirEntries's), and its plan there must
// not pair (the kernel walks no pairs at 128 queries a step).
func TestQ2Variants(t *testing.T) {
	n := 0
	for _, a := range archVariants {
		bv := a.bwd.at(64)
		if bv.qStep != 128 {
			if strings.HasPrefix(bv.fn, "bwd90qq") {
				t.Errorf("%s runs %s at head dim 64 without 128 queries a step", a.name, bv.fn)
			}
			continue
		}
		n++
		if bv.fn != "bwd90qq" {
			t.Errorf("%s: 128 queries a step at head dim 64 run by %s, not bwd90qq", a.name, bv.fn)
		}
		for _, e := range []string{"SM90_BWD_Q(bwd90qq, bf16", "SM90_BWD_Q(bwd90qqd, bf16", "SM90_BWD_Q(bwd90qq, fp16", "SM90_BWD_Q(bwd90qqd, fp16"} {
			if !strings.Contains(SourceSM90(), e) {
				t.Errorf("attention_sm90.cu has no %s...) entry", e)
			}
		}
		k := &Kernel{arch: a}
		for _, m := range mask.KernelMasks() {
			for _, s := range []int{8192, 49152} {
				if o, _ := k.backwardPlan(&deviceList{w: backwardList(t, 42, s, m)}, 8, 8, 64); o&8 != 0 {
					t.Errorf("%s: the plan of %s %d at head dim 64 is %#x (pairs): the bwd90qq kernel walks no pairs (backward90 refuses it)", a.name, m, s, o)
				}
			}
		}
	}
	if n == 0 {
		t.Skip("no variant takes 128 queries a step (bwd90qq removed?): nothing to check")
	}
}

// A variant that splits the head-dim-128 backward (split128, experiment sm90g2) runs the
// bwd90es entries (that its module defines them is TestVariantsDefineTheirEntries's): its
// backward at 128 must be the early one they are built from, and the plan must split.
func TestSplit128Variants(t *testing.T) {
	n := 0
	for _, a := range archVariants {
		if a.split128 <= 1 {
			continue
		}
		n++
		if fn := a.bwd.at(128).fn; fn != "bwd90e" {
			t.Errorf("%s: the backward at head dim 128 is %s, and only bwd90e has a split entry (bwd90es)", a.name, fn)
		}
		if !strings.Contains(SourceSM90(), "SM90_BWD_G(bwd90es, bf16") {
			t.Errorf("attention_sm90.cu has no bwd90es entries")
		}
		k, want := &Kernel{arch: a}, a.split128
		if a.split128Rule { // split128Pays: full's rows do not vary
			want = 1
		}
		if _, g := k.backwardPlan(&deviceList{w: backwardList(t, 42, 4096, "full")}, 8, 8, 128); g != want {
			t.Errorf("%s: the plan splits full 4K at head dim 128 in %d, want %d", a.name, g, want)
		}
	}
	if n == 0 {
		t.Skip("no variant splits at head dim 128 (bwd90es removed?): nothing to check")
	}
}

// The forward runs persistent by the rule on short rows with every entry that has a
// persistent form, never with the wide forward (fwd90n: one Q tile; the rule keys on the
// entry, oneItem, not on the key tile).
func TestForwardPersistentEntries(t *testing.T) {
	k := &Kernel{arch: variantNamed(t, "sm90")} // the rule's side: persist 0
	for _, c := range []struct {
		fv   variant
		want bool
	}{{fwdSM90MO, true}, {fwdSM90O, true}, {fwdSM90S, true}, {fwdSM90N, false}} {
		w := namedList(t, 42, 8192, c.fv.qTile, c.fv.kTile, false, "causal_document")
		if !persistentForward(w) {
			t.Fatalf("causal_document 8K in %d x %d tiles: not short rows (the case no longer tests the rule)", c.fv.qTile, c.fv.kTile)
		}
		if got := k.forwardPersistent(c.fv, w); got != c.want {
			t.Errorf("%s on short rows: persistent %v, want %v", c.fv.fn, got, c.want)
		}
	}
}

// The wider tiles' rule (widerTilesPay: the wide forward's 176-key tiles on 128 x 128 lists):
// dense and most document rows take them, causal_document 16K does not (1.04x the keys; it
// runs persistent there anyway), block-sparse maps of 128-token blocks (which the wider tiles
// straddle: 1.2-2x the keys) and the causal window (1.14x) never.
func TestWiderTilesRule(t *testing.T) {
	for _, c := range []struct {
		name string
		s    int
		want bool
	}{{"full", 8192, true}, {"causal", 16384, true}, {"full_document", 32768, true},
		{"causal_document", 16384, false}, {"prefix_lm_causal", 8192, true}, {"sliding_window_causal", 16384, false}} {
		narrow, wider := namedList(t, 42, c.s, 128, 128, false, c.name), namedList(t, 42, c.s, 128, fwdSM90N.kTile, false, c.name)
		if got := widerTilesPay(narrow, wider); got != c.want {
			t.Errorf("%s %d: %d-key tiles on 128 x 128 pay %v, want %v", c.name, c.s, fwdSM90N.kTile, got, c.want)
		}
	}
	for _, ratio := range []float64{0.2, 0.5} {
		sp, err := mask.BlockSparse(16384, mask.SparseOptions{Seed: 5, Block: 128, Ratio: ratio, HeadsKV: 2}, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		if widerTilesPay(listOf(t, sp.Heads, 128, 128, false), listOf(t, sp.Heads, 128, fwdSM90N.kTile, false)) {
			t.Errorf("block-sparse 128-token blocks kept %.1f: %d-key tiles on 128 x 128 pay", ratio, fwdSM90N.kTile)
		}
	}
}

// The forward's registers as FwdRegs<NC> sets them (attention_sm90.cu, compiled with the host
// C++ compiler: the setmaxnreg counts, one block a multiprocessor by __launch_bounds__) agree
// with what the host plans for every sm90 variant's forward: the producer's and the consumers'
// registers within the block's 65536 (else setmaxnreg.inc waits for ever), and its shared
// memory (1 KB reserved a block) and threads within an SM's 228 KB and 2048.
func TestForwardBlocksFit(t *testing.T) {
	src := SourceSM90()
	prog := "#include <cstdio>\n" + extract(t, src, "template <int NC> struct FwdRegs {", "\n};\n") + `
template <int NC> void show() { printf("%d %d %d %d\n", NC, FwdRegs<NC>::kProd, FwdRegs<NC>::kCons, FwdRegs<NC>::kLaunch); }
int main() { show<2>(); show<3>(); return 0; }
`
	for _, rule := range []string{"__launch_bounds__(128 * (NC + 1), 1)", "kProdRegs = FwdRegs<NC>::kProd, kConsRegs = FwdRegs<NC>::kCons"} {
		if !strings.Contains(src, rule) {
			t.Fatalf("attention_sm90.cu no longer says %q: the forward's blocks and registers come from elsewhere", rule)
		}
	}
	type regs struct{ prod, cons, launch int }
	byNC := map[int]regs{}
	for _, line := range strings.Split(strings.TrimSpace(hostcc.Output(t, "fwdregs", prog)), "\n") {
		var nc int
		var r regs
		if _, err := fmt.Sscan(line, &nc, &r.prod, &r.cons, &r.launch); err != nil {
			t.Fatalf("line %q: %v", line, err)
		}
		byNC[nc] = r
	}
	for _, av := range archVariants {
		if av.major != 9 {
			continue
		}
		for _, d := range []int{64, 128} {
			vs := forwardsOf(av, d)
			for _, v := range vs {
				nc := v.qTile / 64
				r, ok := byNC[nc]
				if !ok {
					t.Errorf("%s %s: %d consumer warpgroups, which FwdRegs was not asked for", av.name, v.fn, nc)
					continue
				}
				if r.launch*v.threads > 65536 || 128*(r.prod+nc*r.cons) > r.launch*v.threads {
					t.Errorf("%s %s: %d threads at %d registers, setmaxnreg %d + %d x %d: past the registers", av.name, v.fn, v.threads, r.launch, r.prod, nc, r.cons)
				}
				if sh := v.shared(d) + 1024; sh > 228<<10 || v.threads > 2048 {
					t.Errorf("%s %s at head dim %d: a block of %d bytes and %d threads does not fit an SM (%d bytes)", av.name, v.fn, d, v.shared(d), v.threads, sh)
				}
			}
		}
	}
}

// The persistent forward launches as many blocks as run at once: one an SM, never more than
// the items, at least one; the plain forward a block an item, heads the fast index.
func TestForwardGrid(t *testing.T) {
	for _, c := range []struct {
		sms, heads, rows, want int
	}{{132, 64, 100, 132}, {114, 64, 100, 114}, {132, 1, 100, 100}, {132, 8, 3, 24}, {132, 0, 0, 1}} {
		if g := forwardGrid(true, c.sms, c.heads, c.rows); g != (cuda.Dim3{X: c.want}) {
			t.Errorf("persistent on %d SMs, %d x %d items: grid %v, want %d blocks", c.sms, c.heads, c.rows, g, c.want)
		}
	}
	if g := forwardGrid(false, 132, 64, 256); g != (cuda.Dim3{X: 64, Y: 256}) {
		t.Errorf("not persistent, 64 heads x 256 row tiles: grid %v", g)
	}
}

// BackwardPartials bounds the split every variant's plan takes (the footprint's fp32
// partials, counted before anything is allocated): sm90 4 or 2 at head dim 64 and at 128 8 at
// a group of 8, 2 at 6 (since call 67), sm90g8 8 at a group of 8 and at 4 (where it cannot
// split) the tail's 4, sm90g2 2 (always split, so never a tail), sm90ns, sm90nt and sm90-c75
// the tail's or the rule's (the larger of the rules a variant compiles), the deterministic
// backward and sm80 none; and no
// plan splits in more parts than it says, on masks whose plans split and on masks whose do
// not, at groups of 8 and 2.
func TestBackwardPartials(t *testing.T) {
	for _, c := range []struct {
		variant  string
		det      bool
		group, d int
		want     int
	}{{"sm90", false, 8, 128, 8}, {"sm90", false, 8, 64, 4}, {"sm90", false, 2, 64, 2}, {"sm90", false, 6, 128, 2}, {"sm90", false, 1, 128, 1},
		{"sm90g8", false, 8, 128, 8}, {"sm90g8", false, 4, 128, 4}, {"sm90g2", false, 8, 128, 2}, {"sm90g2", false, 3, 128, 1}, {"sm90ns", false, 8, 128, 8}, {"sm90nt", false, 8, 128, 8}, {"sm90nt", false, 4, 128, 4}, {"sm90-c75", false, 4, 128, 4}, {"sm90", true, 8, 128, 1}, {"sm80", false, 8, 128, 1}} {
		a := variantNamed(t, c.variant)
		k := &Kernel{arch: a, bwd: a.bwd, det: c.det}
		if got := k.BackwardPartials(c.group, c.d); got != c.want {
			t.Errorf("%s (deterministic %v) at group %d, head dim %d: %d parts, want %d", c.variant, c.det, c.group, c.d, got, c.want)
		}
	}
	for _, a := range archVariants {
		if a.major != 9 {
			continue
		}
		k := &Kernel{arch: a, bwd: a.bwd}
		for _, m := range []string{"full", "causal_blockwise", "share_question"} {
			w := backwardList(t, 42, 16384, m)
			for _, hs := range []struct{ heads, group int }{{8, 8}, {32, 2}} {
				for _, d := range []int{64, 128} {
					sched, g := k.backwardPlan(&deviceList{w: w}, hs.heads, hs.group, d)
					if g > k.BackwardPartials(hs.group, d) {
						t.Errorf("%s, %s 16K at %d:%d head dim %d: the plan splits in %d, BackwardPartials says at most %d", a.name, m, hs.heads*hs.group, hs.heads, d, g, k.BackwardPartials(hs.group, d))
					}
					// the last wave's split: its compact partials within as many whole ones
					if tp := k.tailPlan(&deviceList{w: w}, sched, g, hs.heads, hs.group, d); tp > k.BackwardPartials(hs.group, d) {
						t.Errorf("%s, %s 16K at %d:%d head dim %d: the tail splits in %d, BackwardPartials says at most %d", a.name, m, hs.heads*hs.group, hs.heads, d, tp, k.BackwardPartials(hs.group, d))
					}
				}
			}
		}
	}
	// plans that split in 4 and 8 at head dim 128 (sm90 since call 67): within the bound, and
	// at it where the rule goes that far
	a90 := variantNamed(t, "sm90")
	sm := &Kernel{arch: a90, bwd: a90.bwd}
	for _, c := range []struct {
		name string
		w    *WorkList
		want int
	}{
		{"causal_document_long 16K", backwardList(t, 42, 16384, "causal_document_long"), 4},
		{"block-sparse b128 r0.5 32K", sparseBackwardList(t, 32768, mask.SparseOptions{Seed: 11, Block: 128, Ratio: 0.5, HeadsKV: 8}), 8},
	} {
		_, g := sm.backwardPlan(&deviceList{w: c.w}, 8, 8, 128)
		if g != c.want || g > sm.BackwardPartials(8, 128) {
			t.Errorf("sm90 %s at 64:8: the plan splits in %d, want %d within BackwardPartials's %d", c.name, g, c.want, sm.BackwardPartials(8, 128))
		}
	}
}

// The forward's work items (fwd_item, compiled on the host from attention_sm90.cu): in both
// orders, heads fastest (sm90 at head dim 64) and a KV head's items together (KVM: sm90 at 128
// since call 69), every (head, row) item is visited exactly once over
// the grid's items, its KV head is its head's, its query tile and entries are its list's
// (per-KV-head lists or one), and with KVM the items of KV head k are the k-th block of
// group x rows; the defines pick the order per head dim as the variants say.
func TestForwardItemOrder(t *testing.T) {
	src := SourceSM90()
	wl := extract(t, worklistHeader, "struct WorkList {", "\n};\n")
	item := extract(t, src, "struct FwdItem {", "  return it;\n}\n")
	sel := extract(t, src, "#if defined(LONGCA_FWD_KVMAJOR128)", "#endif\n")
	prog := "#include <cstdio>\n#include <vector>\n#define DEV\n" + wl + item + `
template <bool KVM> int check(int hq, int hkv, int rows, int perHead) {
  const int lists = perHead ? hkv : 1, gq = hq / hkv;
  std::vector<int> order(lists * rows), start(lists * (rows + 1));
  for (int l = 0; l < lists; l++) {
    for (int r = 0; r < rows; r++) order[l * rows + r] = (r * 7 + l) % rows;  // a permutation (rows prime to 7)
    start[l * (rows + 1)] = 0;
    for (int q = 0; q < rows; q++) start[l * (rows + 1) + q + 1] = start[l * (rows + 1) + q] + q % 3 + l;
  }
  WorkList w{};
  w.order = order.data(), w.start = start.data(), w.row_tiles = rows, w.per_head = perHead;
  std::vector<int> seen(hq * rows, 0);
  int bad = 0;
  for (int i = 0; i < hq * rows; i++) {
    FwdItem it = fwd_item(w, i, hq, hkv, KVM);
    const int l = perHead ? it.kvh : 0;
    if (it.h < 0 || it.h >= hq || it.qt < 0 || it.qt >= rows || it.kvh != it.h / gq) { bad++; continue; }
    if (KVM ? it.kvh != i / (gq * rows) : it.h != i % hq) bad++;
    if (it.e0 != start[l * (rows + 1) + it.qt] || it.e1 != start[l * (rows + 1) + it.qt + 1]) bad++;
    seen[it.h * rows + it.qt]++;
  }
  for (int s : seen) bad += s != 1;
  if (bad) printf("KVM %d hq %d hkv %d rows %d per_head %d: %d bad\n", (int)KVM, hq, hkv, rows, perHead, bad);
  return bad;
}
int main() {
  const int shapes[][3] = {{64, 8, 128}, {64, 64, 9}, {8, 1, 16}, {32, 2, 1}, {6, 3, 5}};
  int bad = 0;
  for (auto &s : shapes)
    for (int p = 0; p < 2; p++) bad += check<false>(s[0], s[1], s[2], p) + check<true>(s[0], s[1], s[2], p);
  printf("%s\n", bad ? "FAIL" : "ok");
  return 0;
}
`
	if out := strings.TrimSpace(hostcc.Output(t, "fwditem", prog)); out != "ok" {
		t.Errorf("fwd_item:\n%s", out)
	}
	// the order each define gives each head dim
	for _, c := range []struct {
		define    string
		d64, d128 int
	}{{"", 0, 0}, {"LONGCA_FWD_KVMAJOR128", 0, 1}} {
		p := "#include <cstdio>\n"
		for _, d := range strings.Fields(c.define) {
			p += "#define " + d + "\n"
		}
		p += sel + "int main() { printf(\"%d %d\\n\", (int)kFwdKVMajor<64>, (int)kFwdKVMajor<128>); return 0; }\n"
		if got, want := strings.TrimSpace(hostcc.Output(t, "fwdkvm", p)), fmt.Sprintf("%d %d", c.d64, c.d128); got != want {
			t.Errorf("with %q defined: KV-major at head dims 64 and 128 %s, want %s", c.define, got, want)
		}
	}
	a := variantNamed(t, "sm90")
	if !slices.Contains(a.defines, "LONGCA_FWD_KVMAJOR128") {
		t.Errorf("sm90 does not order its d128 forward by KV head (LONGCA_FWD_KVMAJOR128)")
	}
}

// sm90rm is sm90 but for the d128 forward's item order: its defines are sm90's without
// LONGCA_FWD_KVMAJOR128, in sm90's order.
func TestSM90RMDefines(t *testing.T) {
	rm, sm := variantNamed(t, "sm90rm"), variantNamed(t, "sm90")
	var want []string
	for _, d := range sm.defines {
		if d != "LONGCA_FWD_KVMAJOR128" {
			want = append(want, d)
		}
	}
	if !slices.Equal(rm.defines, want) || len(want) != len(sm.defines)-1 {
		t.Errorf("sm90rm defines %v, want %v (sm90's %v without LONGCA_FWD_KVMAJOR128)", rm.defines, want, sm.defines)
	}
}

// The dQ stage's late publish (call 79's sm90qf, in the pairs' entries too since call 80's
// sm90qp): sm90 compiles both defines, sm90-c75 (the default before the nineteenth session's
// promotions) leaves both out and is otherwise sm90's but for the later tail; and in the early backward's loop the
// late publish follows the next step's S^T and dP^T (issue_sdp) and precedes the wait for dK.
func TestLateFenceDefines(t *testing.T) {
	sm, c75 := variantNamed(t, "sm90"), variantNamed(t, "sm90-c75")
	for _, d := range []string{"LONGCA_BWD_LATE_FENCE", "LONGCA_BWD_LATE_FENCE_PAIRS"} {
		if !slices.Contains(sm.defines, d) || slices.Contains(c75.defines, d) {
			t.Errorf("%s: in sm90 %v, in sm90-c75 %v; want true, false", d, slices.Contains(sm.defines, d), slices.Contains(c75.defines, d))
		}
	}
	// less the four of calls 74-80 and the tail's two of calls 85-86
	if len(c75.defines) != len(sm.defines)-6 {
		t.Errorf("sm90-c75 defines %v: want sm90's %v less six", c75.defines, sm.defines)
	}
	if nt := variantNamed(t, "sm90nt"); len(nt.defines) != len(sm.defines)-2 || nt.compiles("LONGCA_BWD_TAIL") || nt.compiles("LONGCA_BWD_TAIL_PAIRS") {
		t.Errorf("sm90nt defines %v: want sm90's %v less the tail's two", nt.defines, sm.defines)
	}
	loop := extract(t, SourceSM90(), "constexpr bool late = kLateFence", "mbar_arrive(&emptyQ[it % STAGES]);")
	sdp, pub, wait := strings.Index(loop, "issue_sdp(it + 1);"), strings.Index(loop, "if (late) publish_dq();"), strings.Index(loop, "wgmma_wait<1>();")
	if sdp < 0 || pub < 0 || wait < 0 || !(sdp < pub && pub < wait) || !strings.Contains(loop, "stage_dq(dqa, it, !late);") {
		t.Errorf("the early loop's late publish is not between the next step's issue and the wait for dK:\n%s", loop)
	}
}

// sm90's tail rule (tailParts): the parts that leave the least of the last wave idle, where
// that saves 1% of the pass; the cells docs/perf.md predicts from (full d128 64:8 on 132
// SMs) and the edges.
func TestTailParts(t *testing.T) {
	for _, c := range []struct{ blocks, group, slots, want int }{
		{1024, 8, 132, 8}, // 16K: 7 waves and 100 items; 8 parts take 7/8 of a wave
		{2048, 8, 132, 8}, // 32K: 68 items, 5/8
		{3072, 8, 132, 8}, // 48K: 36 items, 3/8 (2 and 4 parts 1/2)
		{512, 8, 132, 1},  // 8K: 116 items; no part count takes less than a wave
		{100, 8, 132, 1},  // less than a wave: nothing to split
		{264, 8, 132, 1},  // whole waves
		{136, 2, 132, 2},  // 4 items left, a group of 2
		{144, 4, 132, 4},  // 12 items: 4 parts a quarter of a wave
		{1024, 1, 132, 1}, // a group of one cannot split
		{1024, 8, 0, 1},
		{133 * 1000, 8, 132, 1}, // 1,000 waves: the 1% is not there
	} {
		if got := tailParts(c.blocks, c.group, c.slots); got != c.want {
			t.Errorf("tailParts(%d blocks, group %d, %d SMs) = %d, want %d", c.blocks, c.group, c.slots, got, c.want)
		}
	}
}

// The tail's partials are its split items' key tiles only: full 48K at 64:8 on 132 SMs has
// 3,072 items, 23 whole waves and 36 items left (38 MB of partials in 8 parts, dK's and dV's,
// where the group split's layout took 3.2 GB); causal 48K's 1,536 pairs leave 84, two tiles each.
func TestTailElems(t *testing.T) {
	full, causal := &deviceList{w: backwardList(t, 42, 49152, "full")}, &deviceList{w: backwardList(t, 42, 49152, "causal")}
	for _, c := range []struct {
		dl                 *deviceList
		paired             bool
		first, items, elem int
	}{
		{full, false, 3036, 3072, 36 * 128 * 128},
		{causal, true, 1452, 1536, 84 * 2 * 128 * 128},
	} {
		first, items := tailItems(c.dl, 8, c.paired, 132)
		if first != c.first || items != c.items {
			t.Errorf("paired %v: items %d .. %d, want %d .. %d", c.paired, first, items, c.first, c.items)
		}
		if got := tailElems(c.dl, 8, c.paired, 132, 128); got != c.elem {
			t.Errorf("paired %v: %d elements a part, want %d", c.paired, got, c.elem)
		}
	}
	if mb := 8 * tailElems(full, 8, false, 132, 128) * 4 * 2 >> 20; mb != 36 {
		t.Errorf("full 48K's partials %d MiB, want 36", mb)
	}
}

// The tail is sm90's (since calls 85-86's sm90tp): its rule runs on full's backward list
// (every key tile as many full entries) and on causal's pairs (of one weight: 2 (rows + 1)
// entries), never on causal's unpaired rows, within documents, split or in another order than
// a head's key tiles together (sm90fn's); sm90nt and sm90-c75
// (neither tail define) and a variant with the unpaired define only (entries that map the
// pairs' grid as 2-D) never take it where they lack the entries.
func TestTailPlanOnlyOnEvenRows(t *testing.T) {
	wf, wc, wc32 := backwardList(t, 42, 16384, "full"), backwardList(t, 42, 16384, "causal"), backwardList(t, 42, 32768, "causal")
	if !evenRows(wf) || evenRows(wc) {
		t.Fatalf("evenRows: full %v, causal %v; want true, false", evenRows(wf), evenRows(wc))
	}
	// a partial last key tile weighs less: full's rule takes no tail there (TestTailWave's
	// partial length), causal's pairs may (2,112 at 64:16: the GPU test's partial pairs)
	if wp := backwardList(t, 42, 16384-64, "full"); evenRows(wp) {
		t.Errorf("evenRows: full 16,320 (a partial last key tile) true, want false")
	}
	if wp := backwardList(t, 42, 2112, "causal"); !evenPairs(wp) {
		t.Errorf("evenPairs: causal 2,112 (a partial last key tile) false, want true")
	}
	if !evenPairs(wc) || !evenPairs(wc32) {
		t.Fatalf("evenPairs: causal 16K %v, 32K %v; want true", evenPairs(wc), evenPairs(wc32))
	}
	sm := &Kernel{arch: variantNamed(t, "sm90")}
	if got := sm.tailPlan(&deviceList{w: wf}, schedKTFast, 1, 8, 8, 128); got != 8 {
		t.Errorf("sm90's tail on full 16K 64:8 d128: %d parts, want 8", got)
	}
	// causal 32K's pairs (1,024 blocks at 64:8) of one weight, 8 parts; 16K's 512 none
	if got := sm.tailPlan(&deviceList{w: wc32}, schedKTFast|8, 1, 8, 8, 128); got != 8 {
		t.Errorf("sm90's tail on causal 32K 64:8 d128, paired: %d parts, want 8", got)
	}
	unpairedOnly := &Kernel{arch: variantNamed(t, "sm90")}
	unpairedOnly.arch.defines = slices.DeleteFunc(slices.Clone(unpairedOnly.arch.defines), func(d string) bool { return d == "LONGCA_BWD_TAIL_PAIRS" })
	if got := unpairedOnly.tailPlan(&deviceList{w: wf}, schedKTFast, 1, 8, 8, 128); got != 8 {
		t.Errorf("sm90 without LONGCA_BWD_TAIL_PAIRS on full 16K 64:8 d128: %d parts, want 8", got)
	}
	nt, c75 := &Kernel{arch: variantNamed(t, "sm90nt")}, &Kernel{arch: variantNamed(t, "sm90-c75")}
	for _, c := range []struct {
		k     *Kernel
		w     *WorkList
		sched int32
		gs, d int
	}{{unpairedOnly, wc32, schedKTFast | 8, 1, 128}, {nt, wf, schedKTFast, 1, 128}, {nt, wc32, schedKTFast | 8, 1, 128}, {c75, wf, schedKTFast, 1, 128},
		{sm, wc, schedKTFast, 1, 128}, {sm, wf, schedKTFast, 2, 128}, {sm, wf, schedKTFast | 8, 1, 128}, {sm, wf, schedKTFast, 1, 64},
		{sm, wc, schedKTFast | 8, 1, 128}, {sm, wc32, schedKTFast | 8 | schedDocPairs, 1, 128}, {sm, wc32, schedKTFast | 8, 2, 128},
		{sm, wf, schedNoRot, 1, 128}, {sm, wc32, schedNoRot | 8, 1, 128}} { // the tail's grid walks a head's key tiles together: not sm90fn's order
		if got := c.k.tailPlan(&deviceList{w: c.w}, c.sched, c.gs, 8, 8, c.d); got != 1 {
			t.Errorf("%s, sched %#x, gs %d, d %d: tail %d, want none", c.k.arch.name, c.sched, c.gs, c.d, got)
		}
	}
	if (&Kernel{arch: variantNamed(t, "sm90"), det: true}).tailPlan(&deviceList{w: wf}, schedKTFast, 1, 8, 8, 128) != 1 {
		t.Errorf("sm90's deterministic backward takes the tail")
	}
	// sm90fn (heaviest first over all heads, the order rule's other side) keeps its order on
	// full 16K, where sm90 splits the tail
	fn := &Kernel{arch: variantNamed(t, "sm90fn")}
	fn.bwd = fn.arch.bwd
	if sched, g := fn.backwardPlan(&deviceList{w: wf}, 8, 8, 128); fn.tailPlan(&deviceList{w: wf}, sched, g, 8, 8, 128) != 1 {
		t.Errorf("sm90fn's full 16K backward (sched %#x) takes the tail", sched)
	}
}

// TestTailWave's premises on the CPU, at the 132 SMs of both the H100 and the H200: the GPU
// test searches lengths up to 8K for the tail's cases and fails where a rule change leaves it
// none (call 87b: 07f9189 kept the default's causal pairs below 16K, ordered heaviest first,
// unsplit, and the search, written before, found no length). Here the same searches, on the
// plans alone: full's tail at 16:8, 64:16 and 64:8 on the default's own plan; causal's pairs'
// tail at 64:16 (also with a partial last key tile) and 16:8 on the default's entries with
// the order fixed to key tiles together (TestTailWave's second kernel), and the default's own
// order there, where it is not key tiles together, unsplit.
func TestTailWaveLengths(t *testing.T) {
	sm := &Kernel{arch: variantNamed(t, "sm90")}
	sm.bwd = sm.arch.bwd
	kt := &Kernel{arch: variantNamed(t, "sm90")}
	kt.arch.sched, kt.bwd = schedKTFast, kt.arch.bwd
	if sm.blockSlots() != 132 {
		t.Fatalf("blockSlots %d without a device, want 132", sm.blockSlots())
	}
	tail := func(k *Kernel, name string, s, hq, hkv int) (int32, int) {
		dl := &deviceList{w: backwardList(t, 42, s, name)}
		sched, g := k.backwardPlan(dl, hkv, hq/hkv, 128)
		return sched, k.tailPlan(dl, sched, g, hkv, hq/hkv, 128)
	}
	for _, h := range [][2]int{{16, 8}, {64, 16}, {64, 8}} {
		found := false
		for r := 2; r <= 64 && !found; r++ {
			if tailParts(h[1]*r, h[0]/h[1], 132) > 1 {
				found = true
				if _, tp := tail(sm, "full", 128*r, h[0], h[1]); tp <= 1 {
					t.Errorf("full S=%d %d:%d: tailParts splits, but sm90's plan takes no tail", 128*r, h[0], h[1])
				}
			}
		}
		if !found {
			t.Errorf("full %d:%d: no length up to 8K whose last wave tailParts splits", h[0], h[1])
		}
	}
	for i, h := range [][2]int{{64, 16}, {16, 8}} {
		// as the GPU test searches: the first length that splits, which must be paired
		s := 0
		for r := 4; r <= 64 && s == 0; r++ {
			if sched, tp := tail(kt, "causal", 128*r, h[0], h[1]); tp > 1 {
				s = 128 * r
				if sched&8 == 0 {
					t.Errorf("causal S=%d %d:%d, key tiles together: the first length that splits its last wave is not paired (order %#x)", s, h[0], h[1], sched)
				}
			}
		}
		if s == 0 {
			t.Errorf("causal %d:%d, key tiles together: no length up to 8K whose pairs split their last wave", h[0], h[1])
			continue
		}
		if i == 0 {
			if _, tp := tail(kt, "causal", s-64, h[0], h[1]); tp <= 1 {
				t.Errorf("causal S=%d %d:%d, key tiles together: the pairs' tail not split with a partial last key tile", s-64, h[0], h[1])
			}
		}
		switch sched, tp := tail(sm, "causal", s, h[0], h[1]); {
		case sched&schedKTFast == schedKTFast:
			t.Logf("causal S=%d %d:%d: sm90's own order is key tiles together here (%#x): the GPU test's unsplit check does not run", s, h[0], h[1], sched)
		case tp != 1:
			t.Errorf("causal S=%d %d:%d: sm90's order %#x is not key tiles together, but its plan splits the tail in %d", s, h[0], h[1], sched, tp)
		}
	}
}
