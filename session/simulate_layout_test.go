package session

import (
	"strings"
	"testing"

	"github.com/longca/longca/dataset"
	"github.com/longca/longca/harness"
	"github.com/longca/longca/spmd/cp"
)

// TestFitSimulationBySharding: 512 GPUs of short documents (1 to 64 tokens) are refused
// on a host of 1 GiB for ring-p2p's zigzag layout with a fix that lowers the figure
// (--sharding contiguous, never --sampled-ranks, which does not), and accepted with
// --sharding contiguous and for ulysses. Every layout was charged documents x ranks: 74.5
// GiB for each, and "use a smaller --sampled-ranks (1)". (Zigzag is estimated at 1.8 GiB
// since spmd/cp's sub-masks hold only their slices: 450 MB measured, where it was refused
// on 18 GiB.)
func TestFitSimulationBySharding(t *testing.T) {
	lens := make([]int, 5000) // 1 to 64 tokens
	for i := range lens {
		lens[i] = 1 + i*37%64
	}
	src := dataset.NewCounts("short.txt", lens)
	const avail = 1 << 30
	for _, c := range []struct {
		method   string
		sharding cp.Sharding
		sampled  int
		want     string // "": fits
	}{
		{"ring-p2p", cp.DefaultSharding, 0, "give --sharding contiguous"},
		{"ring-p2p", cp.DefaultSharding, 1, "give --sharding contiguous"},
		{"ring-p2p", cp.Contiguous, 0, ""},
		{"ring-p2p", cp.Contiguous, 1, ""},
		{"ulysses", cp.DefaultSharding, 0, ""},
	} {
		o := simulation(c.method, "causal_document", 512, 16, c.sampled)
		o.Sweep.Passes = o.Sweep.Passes[:1]
		o.Sweep.Heads = []harness.Heads{{Q: 512, KV: 8}}
		o.Sweep.Mesh.Sharding = c.sharding
		o.Docs = harness.Docs{Source: src}
		o.Sweep.Build = o.Docs.CPBuilder()
		if b := maskCache(o)("causal_document", 512*8192, 42); b.err != nil || len(b.docs) < 100000 {
			t.Fatalf("mask: %d documents, %v", len(b.docs), b.err)
		}
		err := fitSimulationIn(o, maskCache(o), avail, 2)
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%s sharding %v --sampled-ranks %d: refused: %v", c.method, c.sharding, c.sampled, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "--sampled-ranks")):
			t.Errorf("%s sharding %v --sampled-ranks %d: %v; want a refusal saying %q and no --sampled-ranks", c.method, c.sharding, c.sampled, err, c.want)
		}
	}
}
