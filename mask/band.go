package mask

import "sort"

// bandArea counts the pairs q in Q, k in K with lo <= k-q <= hi in closed form, with no
// allocation: the row width min(ke-1, q+hi) - max(ks, q+lo) + 1 is linear between the two
// rows where an end leaves the diagonal, so each stretch sums as an arithmetic series.
func bandArea(q, k Range, lo, hi int) int64 {
	if q.Len() == 0 || k.Len() == 0 || lo > hi {
		return 0
	}
	b1 := k.Start - lo // from this row on, the left end is q+lo
	b2 := k.End - hi   // from this row on, the right end is ke-1
	clamp := func(x int) int { return min(max(x, q.Start), q.End) }
	cuts := [4]int{q.Start, clamp(b1), clamp(b2), q.End}
	if cuts[1] > cuts[2] {
		cuts[1], cuts[2] = cuts[2], cuts[1]
	}
	var area int64
	for i := 0; i < 3; i++ {
		x, y := cuts[i], cuts[i+1]
		if x >= y {
			continue
		}
		// f(q) = a + c*q on [x, y).
		a, c := int64(1), int64(0)
		if x >= b1 {
			a, c = a-int64(lo), c-1
		} else {
			a -= int64(k.Start)
		}
		if x < b2 {
			a, c = a+int64(hi), c+1
		} else {
			a += int64(k.End - 1)
		}
		area += sumPositive(a, c, int64(x), int64(y))
	}
	return area
}

// sumPositive is the sum of max(0, a + c*q) over integers q in [x, y), for c in {-1, 0, 1}.
func sumPositive(a, c, x, y int64) int64 {
	switch c {
	case 0:
		if a <= 0 {
			return 0
		}
		return a * (y - x)
	case 1: // positive from q = 1-a on
		x = max(x, 1-a)
	default: // positive up to q = a-1
		y = min(y, a)
	}
	if x >= y {
		return 0
	}
	n := y - x
	first, last := a+c*x, a+c*(y-1)
	return (first + last) * n / 2
}

// areaIn is the number of pairs of slice s inside the q x k window.
func (s Slice) areaIn(q, k Range) int64 {
	lo, hi := s.Band()
	return bandArea(s.Q.Intersect(q), s.K.Intersect(k), lo, hi)
}

// findBlock is the index of the block of edges that holds position p.
func findBlock(edges []int, p int) int {
	return sort.Search(len(edges)-1, func(i int) bool { return edges[i+1] > p })
}
