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
