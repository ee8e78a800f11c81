package harness

import (
	"fmt"
	"strconv"
	"strings"
)

// Heads is a query:KV head setting (64:8 is GQA, 64:64 MHA).
type Heads struct{ Q, KV int }

// MaxHeads and MaxHeadDim bound what the flags take: 8x and 4x beyond the largest models'
// (128 query heads, head dim 256), so that every byte and FLOP count the planners, the
// simulator and the estimates make stays far inside int64 (2^10 heads x 2^10 x 2^40 tokens
// is 2^60) and a typo is refused by name before any estimate is made.
const (
	MaxHeads   = 1024
	MaxHeadDim = 1024
)

// CheckHeadDim refuses a head dimension outside 1..MaxHeadDim.
func CheckHeadDim(d int) error {
	if d <= 0 || d > MaxHeadDim {
		return fmt.Errorf("%d: must be 1 to %d (e.g. 128)", d, MaxHeadDim)
	}
	return nil
}

func (h Heads) String() string { return fmt.Sprintf("%d:%d", h.Q, h.KV) }

// ParseHeads reads "64:8,64:64"; a bare "32" means 32:32.
func ParseHeads(s string) ([]Heads, error) {
	var out []Heads
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		q, kv, ok := strings.Cut(f, ":")
		if !ok {
			kv = q
		}
		hq, err1 := strconv.Atoi(q)
		hkv, err2 := strconv.Atoi(kv)
		switch {
		case err1 != nil || err2 != nil:
			return nil, fmt.Errorf("heads %q: want Q:KV, e.g. 64:8", f)
		case hq <= 0 || hkv <= 0:
			return nil, fmt.Errorf("heads %q: both counts must be positive", f)
		case hq > MaxHeads || hkv > MaxHeads:
			return nil, fmt.Errorf("heads %q: at most %d heads of each kind (e.g. 64:8)", f, MaxHeads)
		case hq%hkv != 0:
			return nil, fmt.Errorf("heads %q: query heads must be a multiple of KV heads", f)
		}
		out = append(out, Heads{hq, hkv})
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("empty heads list %q", s)
	}
	return out, nil
}
