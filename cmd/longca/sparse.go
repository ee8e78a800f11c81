package main

import (
	"strconv"

	"github.com/longca/longca/harness"
	"github.com/longca/longca/mask"
	"github.com/urfave/cli/v2"
)

// sparseSeqLens are the published block-sparse lengths (32K..128K).
var sparseSeqLens = []int{32 << 10, 64 << 10, 128 << 10}

func init() {
	register(&cli.Command{
		Name:  "sparse",
		Usage: "sweep kernels over block-sparse masks (uniform or variable blocks, kept ratios): check, then time",
		Description: "Block-sparse masks (MASKS.md): q and k cut into blocks (--block B: uniform; --avg-block A:\n" +
			"variable, minimum 128), each (KV head, q-block row) keeps the top max(1, int(r * k blocks))\n" +
			"k blocks by --scores (random, as published, or content: pooled q . pooled k). One case per\n" +
			"layout x ratio x length x heads x kernel x pass; the rows carry block_size and kept_ratio.\n" +
			"Published: -b 32K -e 128K, --block 64,128, --ratios 0.2,0.5,0.8, fwd and bwd.",
		Flags: append(commonSweepFlags(),
			&cli.StringFlag{Name: "block", Usage: "uniform block sizes, comma-separated (64,128)"},
			&cli.StringFlag{Name: "avg-block", Usage: "variable layout: average block sizes, comma-separated (128,256,512,1024)"},
			&cli.StringFlag{Name: "ratios", Value: "0.2,0.5,0.8", Usage: "kept ratios in (0, 1], comma-separated"},
			&cli.StringFlag{Name: "scores", Value: "random", Usage: "random or content"},
		),
		Action: sparseAction,
	})
}

// sparseSpecs reads --block, --avg-block, --ratios and --scores.
func sparseSpecs(c *cli.Context) ([]harness.SparseSpec, error) {
	scores, err := mask.ParseScores(c.String("scores"))
	if err != nil {
		return nil, usageError("%v", err)
	}
	var ratios []float64
	for _, f := range splitList(c.String("ratios")) {
		r, err := strconv.ParseFloat(f, 64)
		if err != nil || !(r > 0 && r <= 1) {
			return nil, usageError("--ratios: %q is not a ratio in (0, 1] (e.g. --ratios 0.2,0.5)", f)
		}
		ratios = append(ratios, r)
	}
	if len(ratios) == 0 {
		return nil, usageError("--ratios is empty: give kept ratios in (0, 1], e.g. 0.5")
	}
	ints := func(flag string) ([]int, error) {
		var out []int
		for _, f := range splitList(c.String(flag)) {
			n, err := strconv.Atoi(f)
			if err != nil || n < 1 {
				return nil, usageError("--%s: %q is not a positive block size (e.g. --%s 128)", flag, f, flag)
			}
			out = append(out, n)
		}
		return out, nil
	}
	blocks, err := ints("block")
	if err != nil {
		return nil, err
	}
	avgs, err := ints("avg-block")
	if err != nil {
		return nil, err
	}
	for _, a := range avgs {
		if a < mask.DefaultMinBlock {
			return nil, usageError("--avg-block %d is below the minimum block %d", a, mask.DefaultMinBlock)
		}
	}
	if len(blocks) == 0 && len(avgs) == 0 {
		blocks = []int{64, 128}
	}
	var specs []harness.SparseSpec
	for _, b := range blocks {
		for _, r := range ratios {
			specs = append(specs, harness.SparseSpec{Block: b, Ratio: r, Scores: scores})
		}
	}
	for _, a := range avgs {
		for _, r := range ratios {
			specs = append(specs, harness.SparseSpec{AvgBlock: a, Ratio: r, Scores: scores})
		}
	}
	return specs, nil
}

func sparseAction(c *cli.Context) (err error) {
	defer func() { err = usageOnRankZero(err) }()
	w, err := kernelWorld(c)
	if err != nil {
		return err
	}
	ko, err := kernelOptions(c, w)
	if err != nil {
		return err
	}
	s, err := sweepFromFlags(c, sparseSeqLens, ko)
	if err != nil {
		return err
	}
	if s.Sparse, err = sparseSpecs(c); err != nil {
		return err
	}
	for _, sp := range s.Sparse { // (a block past the length ran the one-block map, dense, without a word)
		for _, n := range s.SeqLens {
			if b := max(sp.Block, sp.AvgBlock); b > n {
				return usageError("--block/--avg-block %d is longer than the sequence length %d: give blocks of at most the shortest length", b, n)
			}
		}
	}
	return sweepAction(c, s, "sparse", w, ko)
}
