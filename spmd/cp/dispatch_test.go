package cp

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/longca/longca/mask"
)

// cpMask builds a CP benchmark mask of seq tokens as longca cp does.
func cpMask(t testing.TB, name string, seq int, seed uint64) mask.Mask {
	t.Helper()
	spec, err := mask.Build(name, seq, mask.Options{Seed: seed, Purpose: mask.PurposeCP})
	if err != nil {
		t.Fatal(err)
	}
	return spec.Mask
}

// TestDispatchBalancesArea: on the CP masks at 8 and 64 ranks (8K tokens each, blocks of
// 512) every rank holds the same number of blocks, every block exactly one rank, and no
// rank's area exceeds the mean by more than DispatchTolerance; the areas add up to the
// mask's.
func TestDispatchBalancesArea(t *testing.T) {
	for _, n := range []int{8, 64} {
		for _, name := range mask.CPMasks() {
			m := cpMask(t, name, n*8192, 3)
			d, err := Balance(m, n, 512, 0)
			if err != nil {
				t.Fatal(err)
			}
			seen := make([]int, len(d.Owner))
			var sum int64
			for r, bs := range d.Blocks {
				if len(bs) != d.PerRank {
					t.Fatalf("%s n%d: rank %d holds %d blocks, want %d", name, n, r, len(bs), d.PerRank)
				}
				for _, b := range bs {
					seen[b]++
				}
				sum += d.Area[r]
			}
			for b, c := range seen {
				if c != 1 {
					t.Fatalf("%s n%d: block %d held %d times", name, n, b, c)
				}
			}
			if sum != m.Area() {
				t.Fatalf("%s n%d: ranks' areas add to %d, the mask's is %d", name, n, sum, m.Area())
			}
			// The areas are the mask's in each rank's rows, recomputed here.
			for r, bs := range d.Blocks {
				var a int64
				for _, b := range bs {
					a += m.Window(d.blockRange(int(b)), mask.Range{Start: 0, End: m.SeqK}).Area()
				}
				if a != d.Area[r] {
					t.Fatalf("%s n%d: rank %d's area is %d, the dispatch says %d", name, n, r, a, d.Area[r])
				}
			}
			if im := d.Imbalance(); im > DispatchTolerance {
				t.Fatalf("%s n%d: imbalance %.4f over the tolerance %.2f", name, n, im, DispatchTolerance)
			}
			fetched := 0
			for _, f := range d.Fetched {
				fetched += f
			}
			t.Logf("%-22s n%-3d imbalance %.4f  stages %d window %d  fetched blocks per rank %.1f of %d", name, n, d.Imbalance(), d.NumStages(), d.Window, float64(fetched)/float64(n), len(d.Owner))
		}
	}
}

// TestDispatchFetchesExactlyWhatIsNeeded: on small masks of every kind, a rank receives a
// block exactly when some row of its blocks attends to some key of it (brute force over
// the pairs), once, and every receive has its send.
func TestDispatchFetchesExactlyWhatIsNeeded(t *testing.T) {
	const seq = 256
	for mi, name := range mask.Names() {
		spec, err := mask.Build(name, seq, testMaskOptions(uint64(1+mi)))
		if err != nil {
			t.Fatal(err)
		}
		m := spec.Mask
		for _, c := range [][2]int{{2, 16}, {4, 8}, {8, 4}, {3, 7}} {
			n, blk := c[0], c[1]
			d, err := Balance(m, n, blk, 0)
			if err != nil {
				t.Fatal(err)
			}
			for r := range n {
				want := map[int]bool{}
				for _, qb := range d.Blocks[r] {
					rows := d.blockRange(int(qb))
					for q := rows.Start; q < rows.End; q++ {
						for k := range seq {
							if kb := k / blk; int(d.Owner[kb]) != r && m.Allowed(q, k) {
								want[kb] = true
							}
						}
					}
				}
				got := map[int]bool{}
				for s := range d.NumStages() {
					st := d.RecvStage(r, s)
					at := 0
					for _, x := range st.Recv {
						if int(x.At) != at {
							t.Fatalf("%s n%d b%d rank %d stage %d: a receive at block %d, want %d (packed)", name, n, blk, r, s, x.At, at)
						}
						at += int(x.N)
						for i := range int(x.N) {
							kb := int(d.Blocks[x.Peer][int(x.Slot)+i])
							if got[kb] {
								t.Fatalf("%s n%d b%d rank %d: block %d received twice", name, n, blk, r, kb)
							}
							got[kb] = true
						}
						if !slices.Contains(d.Sends(int(x.Peer), s), Xfer{Peer: int32(r), Slot: x.Slot, N: x.N, At: x.At}) {
							t.Fatalf("%s n%d b%d: rank %d receives %v in stage %d that rank %d never sends", name, n, blk, r, x, s, x.Peer)
						}
					}
					if at != st.Slots {
						t.Fatalf("%s n%d b%d rank %d stage %d: %d blocks received into %d", name, n, blk, r, s, at, st.Slots)
					}
				}
				if fmt.Sprint(sortedKeys(got)) != fmt.Sprint(sortedKeys(want)) {
					t.Fatalf("%s n%d b%d rank %d: fetches blocks %v, attends to %v", name, n, blk, r, sortedKeys(got), sortedKeys(want))
				}
				if d.Fetched[r] != len(got) {
					t.Fatalf("%s n%d b%d rank %d: Fetched %d, received %d", name, n, blk, r, d.Fetched[r], len(got))
				}
			}
		}
	}
}

func sortedKeys(m map[int]bool) []int {
	out := make([]int, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// TestDispatchCausalIsZigzagLike: on one causal document the dispatch gives every rank
// blocks from both ends (as zigzag sharding does), so the areas balance.
func TestDispatchCausalIsZigzagLike(t *testing.T) {
	m := cpMask(t, "causal", 8*8192, 1)
	d, err := Balance(m, 8, 512, 0)
	if err != nil {
		t.Fatal(err)
	}
	half := len(d.Owner) / 2
	for r, bs := range d.Blocks {
		if int(bs[0]) >= half || int(bs[len(bs)-1]) < half {
			t.Fatalf("rank %d holds blocks %v: not from both halves", r, bs)
		}
	}
	if im := d.Imbalance(); im > DispatchTolerance {
		t.Fatalf("imbalance %.4f", im)
	}
}

// TestDispatchSolverTime prints the dispatch's time at 1M tokens on 1024 ranks (the
// figures in docs/cp-gpu.md): the blocks' areas and keys from the slices, the placement,
// and the transfer plan (which blocks every rank fetches from whom, in which stage). It
// fails past two seconds in all, a bound loose enough for a loaded machine.
func TestDispatchSolverTime(t *testing.T) {
	if testing.Short() {
		t.Skip("builds 1M-token masks")
	}
	for _, name := range mask.CPMasks() {
		m := cpMask(t, name, 1<<20, 5)
		t0 := time.Now()
		d, needs := newDispatch(m, 1024, DefaultBlock(1<<20, 1024))
		d.stages = DefaultStages(1024, 0)
		t1 := time.Now()
		d.assign(needs)
		t2 := time.Now()
		d.plan(needs)
		t3 := time.Now()
		xfers := 0
		for r := range d.Ranks {
			for s := range d.NumStages() {
				xfers += len(d.RecvStage(r, s).Recv)
			}
		}
		t.Logf("%-22s 1M tokens, 1024 ranks, block %d: needs %v, placement %v, transfer plan %v (%d transfers); imbalance %.4f, %d stages",
			name, d.Block, t1.Sub(t0).Round(time.Millisecond), t2.Sub(t1).Round(time.Millisecond), t3.Sub(t2).Round(time.Millisecond), xfers, d.Imbalance(), d.NumStages())
		if el := t3.Sub(t0); el > 2*time.Second {
			t.Fatalf("%s: the dispatch took %v", name, el)
		}
	}
}

// BenchmarkDispatch1M1024 is the dispatch of causal_document_long at 1M tokens on 1024
// ranks (go test -bench Dispatch ./spmd/cp/).
func BenchmarkDispatch1M1024(b *testing.B) {
	m := cpMask(b, "causal_document_long", 1<<20, 5)
	blk := DefaultBlock(1<<20, 1024)
	b.ResetTimer()
	for range b.N {
		if _, err := Balance(m, 1024, blk, 0); err != nil {
			b.Fatal(err)
		}
	}
}
