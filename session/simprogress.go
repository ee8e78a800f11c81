package session

import (
	"container/heap"
	"math"
	"sync"
	"time"

	"github.com/rs/zerolog"
)

// simProgressEvery is the least time between two "simulate case" lines: a sweep of
// thousands of cheap cases says where it is without a line each.
const simProgressEvery = 5 * time.Second

// simProgress is simulate's progress on stderr, as kernel's and cp's sweeps log theirs:
// an up-front "simulate sweep" line (the cases, the GPU counts and the estimate), a
// "simulate gpus" line as each GPU count's last case finishes (how many cases and GPU
// counts remain), and between them a "simulate case" line at most every
// simProgressEvery. Its estimate is caseSeconds per case (the bound fitSimulation
// refuses by, rounded up: often several times the real time), scheduled on
// the workers as predictAll hands them out; the eta scales what remains by the
// wall time the finished cases took against their estimate. Safe for concurrent use.
type simProgress struct {
	log     *zerolog.Logger
	now     func() time.Time
	every   time.Duration
	workers int

	mu       sync.Mutex
	jobs     []simJob
	cost     []float64 // each case's estimated CPU seconds
	group    []int     // each case's GPU count (its index in the sweep's list)
	gpus     []int     // each GPU count
	left     []int     // each GPU count's cases not yet finished
	gpusLeft int       // GPU counts with cases not yet finished
	total    float64   // the estimate of every case
	done     int
	doneCost float64
	start    time.Time
	last     time.Time // the last line's time
}

// newSimProgress is the progress of jobs (each cost[i] estimated CPU seconds, of GPU
// count gpus[group[i]]) on workers workers.
func newSimProgress(log *zerolog.Logger, jobs []simJob, cost []float64, group, gpus []int, workers int) *simProgress {
	p := &simProgress{log: log, now: time.Now, every: simProgressEvery, workers: max(workers, 1),
		jobs: jobs, cost: cost, group: group, gpus: gpus, left: make([]int, len(gpus))}
	for _, c := range cost {
		p.total += c
	}
	for _, g := range group {
		if p.left[g] == 0 {
			p.gpusLeft++
		}
		p.left[g]++
	}
	return p
}

// makespan is the wall time of cost's cases handed in order to workers workers, each to
// the first free (predictAll's channel): a sweep of one long case is that case's time,
// not a share of it.
func makespan(cost []float64, workers int) float64 {
	if workers <= 1 || len(cost) <= 1 {
		s := 0.0
		for _, c := range cost {
			s += c
		}
		return s
	}
	free := make(freeAt, min(workers, len(cost)))
	end := 0.0
	for _, c := range cost {
		t := free[0] + c
		free[0] = t
		heap.Fix(&free, 0)
		end = math.Max(end, t)
	}
	return end
}

// freeAt is a min-heap of the times the workers are free.
type freeAt []float64

func (h freeAt) Len() int           { return len(h) }
func (h freeAt) Less(i, j int) bool { return h[i] < h[j] }
func (h freeAt) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *freeAt) Push(x any)        { *h = append(*h, x.(float64)) }
func (h *freeAt) Pop() any          { old := *h; x := old[len(old)-1]; *h = old[:len(old)-1]; return x }

// begin logs the up-front line and starts the clock.
func (p *simProgress) begin(run string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.start, p.last = p.now(), p.now()
	p.log.Info().Str("run", run).Int("cases", len(p.jobs)).Ints("gpus", p.gpus).Int("workers", p.workers).
		Str("at_most", durationOf(makespan(p.cost, p.workers)).String()).Msg("simulate sweep")
}

// finished records case i done and logs a line when its GPU count is done, or when the
// last line is simProgressEvery old.
func (p *simProgress) finished(i int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.done++
	p.doneCost += p.cost[i]
	g := p.group[i]
	p.left[g]--
	now := p.now()
	if p.left[g] == 0 {
		p.gpusLeft--
		p.last = now
		p.log.Info().Int("gpus", p.gpus[g]).Int("done", p.done).Int("of", len(p.jobs)).Int("gpus_left", p.gpusLeft).
			Str("elapsed", now.Sub(p.start).Round(time.Second).String()).Str("eta", p.eta(now).String()).Msg("simulate gpus")
		return
	}
	if now.Sub(p.last) < p.every {
		return
	}
	p.last = now
	j := p.jobs[i]
	p.log.Info().Int("done", p.done).Int("of", len(p.jobs)).Int("gpus", j.n).Str("method", j.method).Str("mask", j.mask).
		Str("eta", p.eta(now).String()).Msg("simulate case")
}

// eta is the time left: the estimate of the cases not finished, scaled by the wall time
// the finished ones took against theirs (the estimate alone before any has a cost).
func (p *simProgress) eta(now time.Time) time.Duration {
	if p.done == len(p.jobs) {
		return 0
	}
	remaining := math.Max(p.total-p.doneCost, 0)
	elapsed := now.Sub(p.start).Seconds()
	if p.doneCost <= 0 || elapsed <= 0 {
		return durationOf(remaining / float64(min(p.workers, len(p.jobs)-p.done)))
	}
	return durationOf(remaining * elapsed / p.doneCost)
}

// durationOf is s seconds as a Duration rounded to the second, the longest one for more
// than it holds.
func durationOf(s float64) time.Duration {
	if s >= float64(math.MaxInt64)/float64(time.Second) {
		return math.MaxInt64
	}
	return time.Duration(s * float64(time.Second)).Round(time.Second)
}
