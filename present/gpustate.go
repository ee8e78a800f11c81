package present

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/longca/longca/harness"
	"github.com/longca/longca/results"
)

// GPUStateLine summarises the GPU's state while the measured rows of pass ("" every pass)
// were timed (their sm_clock_mhz and kin), the CP rows (every rank's) with cp, else the
// others: the lowest SM clock read, the rows' mean clocks' range and median, the highest
// power and temperature, how many rows saw each clock event reason, and the idle before each
// case (settle_ms: --settle) where any read row had one. "" where no row carries a reading
// (the CPU, no NVML, older files).
func GPUStateLine(rows []results.Row, pass string, cp bool) string {
	var means []float64
	var lo int64 = -1
	var watts float64
	var hot int64
	ok, events := 0, map[string]int{}
	settles := map[float64]int{} // settle_ms of the read rows (-1: none)
	for _, r := range rows {
		if !measured(r, pass, cp) || r.DeviceIndex == nil {
			continue // not measured, or not on a GPU (never read)
		}
		ok++
		if r.SMClockMHz == nil {
			continue
		}
		means = append(means, *r.SMClockMHz)
		if r.SettleMs != nil {
			settles[*r.SettleMs]++
		} else {
			settles[-1]++
		}
		if r.SMClockMinMHz != nil && (lo < 0 || *r.SMClockMinMHz < lo) {
			lo = *r.SMClockMinMHz
		}
		if r.PowerW != nil {
			watts = max(watts, *r.PowerW)
		}
		if r.TempC != nil {
			hot = max(hot, *r.TempC)
		}
		for _, e := range strings.Split(r.ClockEvents, ",") {
			if e != "" {
				events[e]++
			}
		}
	}
	if len(means) == 0 {
		return ""
	}
	var b strings.Builder
	fmt.Fprintf(&b, "GPU while timed (%d of %d rows measured on a GPU read): SM clock %.0f-%.0f MHz over the rows (median %.0f)", len(means), ok, slices.Min(means), slices.Max(means), harness.Median(means))
	if lo >= 0 {
		fmt.Fprintf(&b, ", lowest reading %d MHz", lo)
	}
	fmt.Fprintf(&b, "; power up to %.0f W (a row's mean); up to %d C", watts, hot)
	if len(events) > 0 {
		names := make([]string, 0, len(events))
		for e := range events {
			names = append(names, e)
		}
		sort.Slice(names, func(i, j int) bool {
			return events[names[i]] > events[names[j]] || events[names[i]] == events[names[j]] && names[i] < names[j]
		})
		b.WriteString("; clock events:")
		for i, e := range names {
			onRows(&b, i, e, events[e])
		}
	}
	if settles[-1] < len(means) { // some rows settled: say how long, and on how many
		vals := make([]float64, 0, len(settles))
		for v := range settles {
			if v >= 0 {
				vals = append(vals, v)
			}
		}
		sort.Float64s(vals)
		b.WriteString("; idle before each case (--settle):")
		for i, v := range vals {
			onRows(&b, i, fmt.Sprintf("%.0f ms", v), settles[v])
		}
		if n := settles[-1]; n > 0 {
			onRows(&b, len(vals), "none", n)
		}
	}
	return b.String()
}

// onRows writes the i-th item of a list of what was seen on how many rows: " WHAT on N rows",
// after a comma from the second on.
func onRows(b *strings.Builder, i int, what string, n int) {
	if i > 0 {
		b.WriteString(",")
	}
	fmt.Fprintf(b, " %s on %d %s", what, n, plural(n, "row", "rows"))
}

// PowerCapHint is a second line under GPUStateLine for rows (of pass, CP or not as there)
// timed without --settle where a quarter or more of those read ran at the board's power cap
// (NVML's sw_power_cap): there the kernel timed right after another in a case starts from
// the power state that one left and runs at a lower clock, so a ratio within a few percent
// is partly the order's (docs/perf.md, "Calls 92-93"). "" otherwise.
func PowerCapHint(rows []results.Row, pass string, cp bool) string {
	read, capped := 0, 0
	for _, r := range rows {
		if !measured(r, pass, cp) || r.SMClockMHz == nil {
			continue
		}
		if r.SettleMs != nil {
			return "" // timed from a rested card: what the hint would ask for
		}
		read++
		if strings.Contains(","+r.ClockEvents+",", ",sw_power_cap,") {
			capped++
		}
	}
	if read == 0 || 4*capped < read {
		return ""
	}
	return fmt.Sprintf("the GPU was at its power cap on %d of %d rows: a kernel timed right after another starts at a lower clock, so read ratios within ~5%% with `longca report --clocks` (or --against), or time with --settle (250ms, the default since the twenty-sixth session; these rows had none)", capped, read)
}

// measured says whether row r is one of GPUStateLine's and PowerCapHint's: timed ok, of pass
// ("" every pass), a CP row with cp, else a kernel or sparse one.
func measured(r results.Row, pass string, cp bool) bool {
	return r.Status == results.StatusOK && (r.Bench == "cp") == cp && (pass == "" || r.Pass == pass)
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}
