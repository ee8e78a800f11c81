package harness

import (
	"fmt"
	"strconv"
	"strings"
)

// Heads is a query:KV head setting (64:8 is GQA, 64:64 MHA).
type Heads struct{ Q, KV int }

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
