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

// Loop is how a case is repeated: warm-ups, then timed iterations, each timed by the
// device's own clock (events on a GPU) with the last-level cache flushed before it.
// Kernels and CP methods share it; CP adds what every rank does around an iteration.
type Loop struct {
	// Warmup and Iters are the untimed and timed repetitions.
	Warmup, Iters int
	// Before runs before every iteration, warm-up or timed, after the cache flush (CP: a
	// barrier, so the ranks start together). Nil: nothing.
	Before func() error
	// After runs after every iteration with the time this rank measured (0 for a
	// warm-up) and its error, and returns the figure recorded and the error that stops
	// the loop (CP: the slowest rank's time and the status every rank agreed on, so all
	// ranks stop together). Nil: the rank's own time and error.
	After func(d time.Duration, err error) (time.Duration, error)
}

// Time runs fn warmup times untimed, then iters times timed, with the cache flushed
// before each timed one; the first error stops it.
func Time(dev tensor.Device, warmup, iters int, fn func() error) (Stats, error) {
	return Loop{Warmup: warmup, Iters: iters}.Time(dev, fn)
}

// Time runs the loop on dev: fn is one iteration.
func (l Loop) Time(dev tensor.Device, fn func() error) (Stats, error) {
	if l.Iters < 1 {
		return Stats{}, fmt.Errorf("timing: %d iterations: need at least 1 (-n)", l.Iters)
	}
	if l.Warmup < 0 {
		return Stats{}, fmt.Errorf("timing: %d warm-ups: must not be negative (-w)", l.Warmup)
	}
	after := l.After
	if after == nil {
		after = func(d time.Duration, err error) (time.Duration, error) { return d, err }
	}
	before := func() error {
		if l.Before == nil {
			return nil
		}
		return l.Before()
	}
	for i := 0; i < l.Warmup; i++ {
		err := before()
		if err == nil {
			err = fn()
		}
		if _, err := after(0, err); err != nil {
			return Stats{}, fmt.Errorf("warm-up %d: %w", i+1, err)
		}
	}
	samples := make([]time.Duration, 0, l.Iters)
	for i := 0; i < l.Iters; i++ {
		var d time.Duration
		err := dev.FlushCache()
		if err != nil {
			err = fmt.Errorf("flushing the cache: %w", err)
		} else if err = before(); err == nil {
			d, err = dev.Time(fn)
		}
		if d, err = after(d, err); err != nil {
			return Stats{}, fmt.Errorf("iteration %d: %w", i+1, err)
		}
		samples = append(samples, d)
	}
	return NewStats(samples), nil
}
