package session

import (
	"errors"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/longca/longca/dataset"
	"github.com/longca/longca/harness"
	"github.com/longca/longca/internal/heaptest"
	"github.com/longca/longca/kernels"
	"github.com/longca/longca/mask"
)

// countsDocs are the documents of a counts file of k counts, the i-th length(i) tokens.
func countsDocs(t *testing.T, k int, length func(i int) int) harness.Docs {
	t.Helper()
	counts := make([]int, k)
	for i := range counts {
		counts[i] = length(i)
	}
	src := dataset.NewCounts("counts.txt", counts)
	return harness.Docs{Source: src}
}

// onDocs is o drawing its documents from docs, as longca simulate sets it.
func onDocs(o *Simulation, docs harness.Docs) *Simulation {
	o.Docs, o.Sweep.Docs, o.Sweep.Build = docs, docs, docs.CPBuilder()
	return o
}

// TestFitSimulationEstimatesBeforeBuilding: a case of millions of 1-token documents is
// refused from the documents its mask is expected to hold, before any mask of documents
// is built, in one line naming --gpus, exit 2: 8 GPUs of 2M tokens (16M documents) had
// their mask built first (3.6 GB and 20 s) to be refused at 536 GiB, and two GPU counts of
// two such masks ran out of memory under ulimit -v 4G before the refusal. A mask the
// builder refuses before drawing a document (more documents than a sequence may hold) is
// still refused as the builder says, naming --max-doc; a case that fits is let through.
func TestFitSimulationEstimatesBeforeBuilding(t *testing.T) {
	ones := countsDocs(t, 10, func(int) int { return 1 })
	const avail = 18 << 30
	for _, c := range []struct {
		name        string
		gpus        []int
		tpr         int
		method      string
		masks       []string
		want, also  string // "": fits
		mayAskFirst bool   // the builder refuses the mask before drawing a document
	}{
		{"8 GPUs of 2M", []int{8}, 2 << 20, "ring-p2p", []string{"causal_document"}, "--gpus 8: simulating causal_document (about 16777216 documents) needs about", "GiB of host memory", false},
		{"1024 GPUs of 16K", []int{1024}, 16 << 10, "ring-p2p", []string{"causal_document"}, "--gpus 1024: simulating causal_document (about 16777216 documents)", "", false},
		{"8,16 GPUs of 1M, two masks", []int{8, 16}, 1 << 20, "ulysses", []string{"causal_document", "full_document"}, "--gpus 8: simulating causal_document (about 8388608 documents)", "", false},
		{"balanced, 8 GPUs of 2M", []int{8}, 2 << 20, "balanced", []string{"causal_document_long"}, "--gpus 8: simulating causal_document_long (about", "", false},
		{"8 GPUs of 4M: over a sequence's documents", []int{8}, 4 << 20, "ring-p2p", []string{"causal_document"}, "--max-doc", "one sequence may hold", true},
		{"8 GPUs of 8K", []int{8}, 8 << 10, "ulysses", []string{"causal_document"}, "", "", false},
	} {
		o := onDocs(simulation(c.method, c.masks[0], 8, 0, 0), ones)
		o.GPUs, o.TokensPerRank, o.Sweep.Masks, o.Sweep.Passes = c.gpus, c.tpr, c.masks, []kernels.Pass{kernels.Fwd}
		real := maskCache(o)
		var mu sync.Mutex
		built := 0 // masks of documents asked for, with documents
		maskFor := func(name string, seqlen int, seed uint64) *builtMask {
			if c.want != "" && !c.mayAskFirst && mask.DrawsDocuments(name) {
				mu.Lock()
				built++
				mu.Unlock()
				return &builtMask{err: errors.New("not built by this test")} // (its documents would be gigabytes)
			}
			b := real(name, seqlen, seed)
			if len(b.docs) > 0 {
				mu.Lock()
				built++
				mu.Unlock()
			}
			return b
		}
		start := time.Now()
		err := fitSimulationIn(o, maskFor, avail, 2)
		took := time.Since(start)
		if c.want == "" {
			if err != nil || built == 0 {
				t.Errorf("%s: %v (%d masks built); want it let through, its mask built", c.name, err, built)
			}
			continue
		}
		var ue *UsageError
		switch {
		case err == nil || !errors.As(err, &ue) || ue.ExitCode() != 2 || strings.Contains(err.Error(), "\n"):
			t.Errorf("%s: %v; want one usage line, exit 2", c.name, err)
		case !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), c.also):
			t.Errorf("%s: %v; want it to say %q and %q", c.name, err, c.want, c.also)
		case built > 0:
			t.Errorf("%s: %d masks of documents built before the refusal: %v", c.name, built, err)
		case took > 5*time.Second:
			t.Errorf("%s: refused after %v", c.name, took)
		}
	}
}

// TestFitSimulationCountsBalancedByItsLayout: balanced is counted as its dispatch lays the
// documents (each held about once over its ranks, sim.BalancedDocs), not as zigzag on
// every rank: 256 and 512 GPUs of 1- to 64-token documents (64,509 and 129,103 of them;
// peaks of 69 and 87 MB measured) fit a host of 1 GiB, where they were refused at 18.8
// and 75.1 GiB; ring-p2p's zigzag on the same documents (1.8 GiB estimated, 450 MB
// measured) is refused there, naming --sharding contiguous, and a sweep of both names it,
// not balanced.
func TestFitSimulationCountsBalancedByItsLayout(t *testing.T) {
	short := countsDocs(t, 5000, func(i int) int { return 1 + i*37%64 })
	const avail = 1 << 30
	for _, c := range []struct {
		methods []string
		gpus    int
		want    string // "": fits
	}{
		{[]string{"balanced"}, 256, ""},
		{[]string{"balanced"}, 512, ""},
		{[]string{"ring-p2p"}, 512, "give --sharding contiguous"},
		{[]string{"balanced", "ring-p2p"}, 512, "give --sharding contiguous (ring-p2p's"},
	} {
		o := onDocs(simulation(c.methods[0], "causal_document", c.gpus, 0, 0), short)
		o.Sweep.Methods, o.Sweep.Passes = c.methods, []kernels.Pass{kernels.Fwd}
		err := fitSimulationIn(o, maskCache(o), avail, 2)
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%v on %d GPUs: refused: %v", c.methods, c.gpus, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%v on %d GPUs: %v; want a refusal saying %q", c.methods, c.gpus, err, c.want)
		}
	}
}

// TestFitSweepCountsSampleMasks: every sample's mask is kept to the end of the sweep, so
// --samples 100 of a mask of 700,000 documents (67 MB each) keep 6.5 GiB, refused on 5 GiB
// naming --samples; they were counted as 20 KB a job, 2 MB. One sample fits.
func TestFitSweepCountsSampleMasks(t *testing.T) {
	docs := countsDocs(t, 2, func(i int) int { return 1 + i })
	for _, c := range []struct {
		samples int
		want    string
	}{{100, "--samples 100 --gpus 8:"}, {1, ""}} {
		o := onDocs(simulation("ulysses", "causal_document", 8, 0, 0), docs)
		o.TokensPerRank, o.Sweep.Samples, o.Sweep.Passes = 128<<10, c.samples, []kernels.Pass{kernels.Fwd}
		err := fitSimulationIn(o, maskCache(o), 5<<30, 2)
		switch {
		case c.want == "" && err != nil:
			t.Errorf("--samples %d: refused: %v", c.samples, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "of rows and masks")):
			t.Errorf("--samples %d: %v; want a refusal saying %q and the masks", c.samples, err, c.want)
		}
	}
}

// TestExpectedDocsNearBuilt: the documents a mask is expected to hold before it is built
// (what the checks before the build count) are within a few percent of what it draws where
// there are many, for plain and *_long masks, a counts file, a cap and the built-in
// distributions, and never more than the sequence's tokens; a mask without documents
// expects none.
func TestExpectedDocsNearBuilt(t *testing.T) {
	short := countsDocs(t, 5000, func(i int) int { return 1 + i*37%64 })
	ones := countsDocs(t, 10, func(int) int { return 1 })
	capped := harness.Docs{MaxDoc: dataset.Cap{Tokens: 100}}
	for _, c := range []struct {
		name  string
		docs  harness.Docs
		mk    string
		tpr   int
		close bool // many documents: held within 5%
	}{
		{"short", short, "causal_document", 8192, true},
		{"short", short, "full_document_long", 65536, true},
		{"ones", ones, "causal_document", 8192, true},
		{"ones", ones, "causal_document_long", 8192, true},
		{"--max-doc 100", capped, "causal_document", 65536, true},
		{"--max-doc 100", capped, "causal_document_long", 65536, true},
		{"MASKS.md", harness.Docs{}, "causal_document_long", 8192, false},
		{"MASKS.md", harness.Docs{}, "full_document", 65536, false},
	} {
		o := onDocs(simulation("ring-p2p", c.mk, 8, 0, 0), c.docs)
		o.TokensPerRank = c.tpr
		seqlen := o.seqlenFor(8)
		exp := o.expectedDocs(c.mk, seqlen)
		var drawn []float64
		for seed := range uint64(3) {
			b := maskCache(o)(c.mk, seqlen, 42+seed)
			if b.err != nil {
				t.Fatal(b.err)
			}
			drawn = append(drawn, float64(len(b.docs)))
		}
		med, lo, hi := harness.Spread(drawn)
		t.Logf("%s %s at %d tokens: %.0f documents expected, %.0f drawn (%.0f-%.0f)", c.name, c.mk, seqlen, exp, med, lo, hi)
		if exp > float64(seqlen) || (c.close && (exp < 0.95*lo || exp > 1.05*hi)) || exp < 1 {
			t.Errorf("%s %s at %d tokens: %.0f documents expected, %.0f-%.0f drawn", c.name, c.mk, seqlen, exp, lo, hi)
		}
	}
	if d := simulation("ring-p2p", "causal", 8, 0, 0).expectedDocs("causal", 65536); d != 0 {
		t.Errorf("causal: %g documents expected", d)
	}
}

// TestMaskBytesBoundBuiltMasks: a mask of documents held by the cache takes at most
// maskLiveBytes a document, and building one at most maskBuildBytes at its peak (1-token
// and 1- to 64-token documents, plain and *_long).
func TestMaskBytesBoundBuiltMasks(t *testing.T) {
	short := countsDocs(t, 5000, func(i int) int { return 1 + i*37%64 })
	ones := countsDocs(t, 10, func(int) int { return 1 })
	for _, c := range []struct {
		name string
		docs harness.Docs
		mk   string
		tpr  int
	}{
		{"ones", ones, "causal_document", 1 << 17},
		{"ones", ones, "full_document_long", 1 << 17},
		{"short", short, "causal_document", 1 << 19},
	} {
		o := onDocs(simulation("ring-p2p", c.mk, 8, 0, 0), c.docs)
		o.TokensPerRank = c.tpr
		var b *builtMask
		peak, live := heaptest.Peak(func() { b = maskCache(o)(c.mk, o.seqlenFor(8), 42) })
		if b.err != nil {
			t.Fatal(b.err)
		}
		d := float64(len(b.docs))
		t.Logf("%s %s: %.0f documents, %.0f bytes a document at the peak, %.0f live", c.name, c.mk, d, peak/d, live/d)
		if peak > maskBuildBytes*d || live > maskLiveBytes*d {
			t.Errorf("%s %s: %.0f documents took %.0f bytes each at the peak (counted %d) and keep %.0f (counted %d)",
				c.name, c.mk, d, peak/d, maskBuildBytes, live/d, maskLiveBytes)
		}
		runtime.KeepAlive(b)
	}
}
