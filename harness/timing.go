package harness

import (
	"fmt"
	"slices"
	"time"

	"github.com/longca/longca/tensor"
)

// Stats summarises timed repetitions.
type Stats struct {
	Median, Min, Max, Mean time.Duration
	// Samples are the repetitions' times, in the order they ran.
	Samples []time.Duration
}

// NewStats summarises samples (at least one).
func NewStats(samples []time.Duration) Stats {
	s := Stats{Samples: samples}
	if len(samples) == 0 {
		return s
	}
	sorted := slices.Clone(samples)
	slices.Sort(sorted)
	n := len(sorted)
	s.Min, s.Max = sorted[0], sorted[n-1]
	if n%2 == 1 {
		s.Median = sorted[n/2]
	} else {
		s.Median = (sorted[n/2-1] + sorted[n/2]) / 2
	}
	var sum time.Duration
	for _, d := range sorted {
		sum += d
	}
	s.Mean = sum / time.Duration(n)
	return s
}

// Time runs fn warmup times untimed, then iters times, each timed by the device's own
// clock (events on a GPU) with the last-level cache flushed before it. The first error
// stops it.
func Time(dev tensor.Device, warmup, iters int, fn func() error) (Stats, error) {
	if iters < 1 {
		return Stats{}, fmt.Errorf("timing: %d iterations: need at least 1 (-n)", iters)
	}
	if warmup < 0 {
		return Stats{}, fmt.Errorf("timing: %d warm-ups: must not be negative (-w)", warmup)
	}
	for i := 0; i < warmup; i++ {
		if err := fn(); err != nil {
			return Stats{}, fmt.Errorf("warm-up %d: %w", i+1, err)
		}
	}
	samples := make([]time.Duration, 0, iters)
	for i := 0; i < iters; i++ {
		if err := dev.FlushCache(); err != nil {
			return Stats{}, fmt.Errorf("flushing the cache: %w", err)
		}
		d, err := dev.Time(fn)
		if err != nil {
			return Stats{}, fmt.Errorf("iteration %d: %w", i+1, err)
		}
		samples = append(samples, d)
	}
	return NewStats(samples), nil
}
