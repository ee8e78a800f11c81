package mask

import "testing"

func BenchmarkBlocksCausal(b *testing.B) {
	sp, _ := Build("causal", 1<<18, Options{})
	e := UniformEdges(1<<18, 128)
	for i := 0; i < b.N; i++ {
		Blocks(sp.Mask, e, e)
	}
}

func BenchmarkBlocksCausalDocument(b *testing.B) {
	sp, _ := Build("causal_document", 1<<20, Options{Seed: 1})
	e := UniformEdges(1<<20, 128)
	for i := 0; i < b.N; i++ {
		Blocks(sp.Mask, e, e)
	}
}

func BenchmarkBlockSparse128K(b *testing.B) {
	for i := 0; i < b.N; i++ {
		if _, err := BlockSparse(1<<17, SparseOptions{Seed: 42, Block: 64, Ratio: 0.5, HeadsKV: 8}, nil, nil); err != nil {
			b.Fatal(err)
		}
	}
}
