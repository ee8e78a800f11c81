package harness

import (
	"fmt"

	"github.com/longca/longca/kernels"
	"github.com/longca/longca/mask"
	"github.com/longca/longca/tensor"
)

// Suite is a standard sweep of `longca run` with its repetitions and mask options.
type Suite struct {
	Name          string
	Sweep         Sweep
	Warmup, Iters int
	CheckBudget   float64
	Build         MaskBuilder
}

// cpuBlock is block_causal_document's block in the CPU suites, so that 512 is a multiple.
const cpuBlock = 512

// smallBlocks builds masks with block_causal_document's block at blk tokens.
func smallBlocks(blk int) MaskBuilder {
	return func(name string, seqlen int, seed uint64) (mask.Spec, error) {
		o := mask.Options{Seed: seed}
		if name == "block_causal_document" {
			o.BlockSize = blk
		}
		return mask.Build(name, seqlen, o)
	}
}

// StandardSuite is the named suite of `longca run`: gpu, cpu or smoke.
func StandardSuite(name string) (Suite, error) {
	both := []kernels.Pass{kernels.Fwd, kernels.Bwd}
	switch name {
	case "gpu":
		// 96 cases a kernel. On one H200 with cuda and four torch peers: 480 cases in 6
		// minutes (the SDPA peers refuse all but full and causal at once; Estimate's test
		// replays that run).
		return Suite{Name: "gpu", Warmup: 3, Iters: 10, CheckBudget: DefaultCheckBudget, Build: BuildMask,
			Sweep: Sweep{Masks: mask.KernelMasks(), SeqLens: []int{8 << 10, 16 << 10, 32 << 10, 48 << 10},
				Heads: []Heads{{Q: 64, KV: 8}}, HeadDim: 128, DType: tensor.BF16,
				Kernels: []string{"cuda"}, Passes: both, Seed: 42}}, nil
	case "cpu":
		return Suite{Name: "cpu", Warmup: 0, Iters: 2, CheckBudget: 1e8, Build: smallBlocks(cpuBlock),
			Sweep: Sweep{Masks: []string{"full", "causal", "causal_document", "sliding_window_causal", "share_question", "block_causal_document"},
				SeqLens: []int{512, 1 << 10, 2 << 10}, Heads: []Heads{{Q: 8, KV: 2}}, HeadDim: 64, DType: tensor.BF16,
				Kernels: []string{"ref"}, Passes: both, Seed: 42}}, nil
	case "smoke":
		return Suite{Name: "smoke", Warmup: 0, Iters: 1, CheckBudget: 1e7, Build: smallBlocks(128),
			Sweep: Sweep{Masks: []string{"causal", "causal_document", "block_causal_document"},
				SeqLens: []int{128, 256}, Heads: []Heads{{Q: 4, KV: 2}}, HeadDim: 16, DType: tensor.BF16,
				Kernels: []string{"ref"}, Passes: both, Seed: 42}}, nil
	}
	return Suite{}, fmt.Errorf("no standard suite %q: use gpu, cpu or smoke", name)
}
