package dataset

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// ParseSize reads a token count with an optional binary suffix: 1K = 1024, 48K,
// 4M = 4194304, 1G. The number before a suffix may not be negative.
func ParseSize(s string) (int, error) {
	t := strings.TrimSpace(s)
	mult := 1
	if n := len(t); n > 0 {
		switch t[n-1] {
		case 'k', 'K':
			mult, t = 1<<10, t[:n-1]
		case 'm', 'M':
			mult, t = 1<<20, t[:n-1]
		case 'g', 'G':
			mult, t = 1<<30, t[:n-1]
		}
	}
	v, err := strconv.Atoi(t)
	if errors.Is(err, strconv.ErrRange) && !strings.HasPrefix(t, "-") {
		return 0, fmt.Errorf("size %q is too large", s)
	}
	if err != nil || v < 0 {
		return 0, fmt.Errorf("size %q is not a non-negative integer with an optional K, M or G suffix (e.g. 48K)", s)
	}
	if v > (1<<62)/mult {
		return 0, fmt.Errorf("size %q is too large", s)
	}
	return v * mult, nil
}

// FormatSize writes n with the largest binary suffix that divides it (49152 -> 48K).
func FormatSize(n int) string {
	switch {
	case n != 0 && n%(1<<30) == 0:
		return strconv.Itoa(n>>30) + "G"
	case n != 0 && n%(1<<20) == 0:
		return strconv.Itoa(n>>20) + "M"
	case n != 0 && n%(1<<10) == 0:
		return strconv.Itoa(n>>10) + "K"
	}
	return strconv.Itoa(n)
}
