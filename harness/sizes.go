// Package harness is the sweep and timing code shared by `longca kernel` and `longca
// cp`: case expansion (masks x lengths x heads x kernels x passes), sizes in nccl-tests'
// vocabulary (-b/-e/-f, --step), device timing with warm-ups and cache flushes, status
// classification, and the check-then-time rule.
package harness

import (
	"fmt"
	"strings"

	"github.com/longca/longca/dataset"
)

// ParseSizeList reads a comma-separated list of sizes with K/M/G suffixes ("1K,2K,48K").
func ParseSizeList(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		if strings.TrimSpace(f) == "" {
			continue
		}
		n, err := dataset.ParseSize(f)
		if err != nil {
			return nil, err
		}
		if n <= 0 {
			return nil, fmt.Errorf("size %q must be positive", f)
		}
		out = append(out, n)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("empty size list %q", s)
	}
	return out, nil
}

// MaxLengths bounds the lengths one sweep may have: a range is counted, and refused past
// this, before anything is allocated (-b 1 -e 1G --step 1 would be a billion cases).
const MaxLengths = 4096

// MaxSamples bounds --samples (masks per case) of cp and simulate.
const MaxSamples = 100000

// SizeRange is nccl-tests' sweep: from begin to end (inclusive), multiplying by factor
// (factor 2 doubles), or adding step when step > 0 (8K..48K by 8K). The error says which
// of begin, end, factor, step is wrong, or that the range has more than MaxLengths.
func SizeRange(begin, end, factor, step int) ([]int, error) {
	switch {
	case begin <= 0:
		return nil, fmt.Errorf("begin %d must be positive", begin)
	case end < begin:
		return nil, fmt.Errorf("end %d is below begin %d", end, begin)
	case step < 0:
		return nil, fmt.Errorf("step %d must not be negative", step)
	case step == 0 && factor < 2 && end != begin:
		return nil, fmt.Errorf("factor %d must be at least 2 (or give a step)", factor)
	}
	if step > 0 {
		n := (end-begin)/step + 1
		if n > MaxLengths {
			return nil, fmt.Errorf("%s to %s by %s is %d lengths, over the %d a sweep may have: give a larger step, or -f", FormatSize(begin), FormatSize(end), FormatSize(step), n, MaxLengths)
		}
		out := make([]int, n)
		for i := range out {
			out[i] = begin + i*step
		}
		return out, nil
	}
	out := []int{begin}
	for n := begin; end != begin && n <= end/factor; { // n*factor <= end, without overflow
		n *= factor
		out = append(out, n)
	}
	return out, nil
}

// FormatSize writes n as 48K, 1M or 1000.
func FormatSize(n int) string { return dataset.FormatSize(n) }
