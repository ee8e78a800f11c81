package sim

import (
	"context"
	"runtime"
	"testing"

	"github.com/longca/longca/dataset"
	"github.com/longca/longca/internal/heaptest"
	"github.com/longca/longca/kernels"
	"github.com/longca/longca/mask"
	"github.com/longca/longca/spmd/cp"
	"github.com/longca/longca/tensor"
)

// TestMemoryBytesInBoundsLayouts: on a mask of short documents (1 to 64 tokens, 16K of
// them on 64 GPUs), the estimate of each case's own layout (zigzag on its ring, or
// contiguous) is at least the heap its prediction takes, and contiguous is estimated far
// below zigzag, as it is measured. The estimate charged every case documents x ranks:
// 256 GPUs of ring-p2p --sharding contiguous peaked at 70 MB and were refused as needing
// 18.5 GiB.
func TestMemoryBytesInBoundsLayouts(t *testing.T) {
	const n = 64
	lens := make([]int, 5000) // 1 to 64 tokens
	for i := range lens {
		lens[i] = 1 + i*37%64
	}
	src := dataset.NewCounts("short.txt", lens)
	seqlen := n * 8192
	spec, err := mask.Build("causal_document", seqlen, mask.Options{Seed: 7, Purpose: mask.PurposeCP, Source: src})
	if err != nil {
		t.Fatal(err)
	}
	docs, err := spec.Docs()
	if err != nil {
		t.Fatal(err)
	}
	p := kernels.Problem{HeadsQ: 64, HeadsKV: 8, HeadDim: 128, DType: tensor.BF16, Mask: spec.Mask}
	passes := []kernels.Pass{kernels.Fwd}
	o := Options{Machine: MachinePresets["h100-ib"], Kernel: KernelPresets["fa3-h100"], PartialDType: tensor.FP32}
	parallel := runtime.GOMAXPROCS(0) // traced ranks walking their steps at once (record)
	heap := map[string]float64{}
	est := map[string]float64{}
	for _, c := range []struct {
		name, method string
		cfg          cp.Config
		lay          DocLayout
	}{
		{"ring-p2p zigzag", "ring-p2p", cp.Config{Sharding: cp.Zigzag}, ZigzagDocs(n, len(docs))},
		{"ring-p2p contiguous", "ring-p2p", cp.Config{Sharding: cp.Contiguous}, ContiguousDocs(n, docs, seqlen)},
		{"usp 8x8 zigzag", "usp", cp.Config{Ulysses: 8, Ring: 8}, ZigzagDocs(8, len(docs))},
		{"ulysses", "ulysses", cp.Config{}, ContiguousDocs(1, docs, seqlen)},
	} {
		m, _ := cp.New(c.method)
		cfg := c.cfg
		cfg.Ranks, cfg.HeadFirst, cfg.Docs = n, true, docs
		var err error
		got, _ := heaptest.Peak(func() { _, _, err = Predict(context.Background(), m, cfg, p, passes, o) })
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		e := MemoryBytesIn(n, c.lay, TracedSteps(n, 0, 0), PassWeight(passes), parallel) + SequenceBytes(seqlen)
		heap[c.name], est[c.name] = got, e
		t.Logf("%s (%d documents): peak heap %.1f MB, estimated %.1f MB", c.name, len(docs), got/1e6, e/1e6)
		if got > e {
			t.Errorf("%s on %d GPUs (%d documents): %.1f MB of heap, estimated %.1f MB", c.name, n, len(docs), got/1e6, e/1e6)
		}
	}
	if z, c := est["ring-p2p zigzag"], est["ring-p2p contiguous"]; c*4 > z {
		t.Errorf("ring-p2p contiguous estimated %.1f MB, zigzag %.1f MB: want contiguous far below", c/1e6, z/1e6)
	}
	if z, c := heap["ring-p2p zigzag"], heap["ring-p2p contiguous"]; c > z {
		t.Errorf("ring-p2p contiguous took %.1f MB, zigzag %.1f MB: the layouts' work is not what the estimate says", c/1e6, z/1e6)
	}
	if old := MemoryBytes(n, len(docs), TracedSteps(n, 0, 0), PassWeight(passes), parallel); est["ring-p2p contiguous"] >= old {
		t.Errorf("contiguous estimated %.1f MB, no less than the every-layout bound %.1f MB", est["ring-p2p contiguous"]/1e6, old/1e6)
	}
}

// TestChunkDocs: the most documents meeting one of the ring's chunks.
func TestChunkDocs(t *testing.T) {
	docs := []mask.Range{{Start: 0, End: 1}, {Start: 1, End: 2}, {Start: 2, End: 3}, {Start: 3, End: 10}, {Start: 10, End: 16}}
	for _, c := range []struct{ ring, want int }{{1, 5}, {2, 4}, {4, 4}, {16, 1}} {
		if got := ChunkDocs(docs, 16, c.ring); got != c.want {
			t.Errorf("ring %d: %d documents in a chunk, want %d", c.ring, got, c.want)
		}
	}
}
