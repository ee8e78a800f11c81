package present

import (
	"bytes"
	"slices"
	"strings"
	"testing"

	"github.com/longca/longca/results"
)

func TestGPUStateLine(t *testing.T) {
	row := func(pass string, clk float64, lo int64, w float64, c int64, ev string) results.Row {
		return results.Row{Bench: "kernel", Kernel: "cuda", Mask: "full", SeqLen: 8192, HeadsQ: 64, HeadsKV: 8, HeadDim: 128, Pass: pass, Status: results.StatusOK,
			FLOPs: 1e12, TFLOPs: results.Ptr(500.0), DeviceIndex: results.Ptr(int64(0)), SMClockMHz: results.Ptr(clk), SMClockMinMHz: results.Ptr(lo), PowerW: results.Ptr(w), TempC: results.Ptr(c), ClockEvents: ev}
	}
	rows := []results.Row{
		row("fwd", 1980, 1980, 300, 40, ""),
		row("fwd", 1700, 1550, 699.5, 61, "sw_power_cap"),
		row("bwd", 1750, 1600, 690, 58, "sw_power_cap,sw_thermal"),
		{Bench: "kernel", Kernel: "torch:flex", Pass: "fwd", Status: results.StatusOK, DeviceIndex: results.Ptr(int64(0))},    // measured on the GPU, not read
		{Bench: "kernel", Kernel: "ref", Pass: "fwd", Status: results.StatusOK},                                               // on the CPU: never read
		{Bench: "kernel", Kernel: "cuda", Pass: "fwd", Status: results.StatusUnsupported, DeviceIndex: results.Ptr(int64(0))}, // not measured
	}
	got := GPUStateLine(rows, "", false)
	for _, want := range []string{"3 of 4 rows measured on a GPU read", "1700-1980 MHz", "median 1750", "lowest reading 1550 MHz", "power up to 700 W", "up to 61 C", "clock events: sw_power_cap on 2 rows, sw_thermal on 1 row"} {
		if !strings.Contains(got, want) {
			t.Errorf("line %q lacks %q", got, want)
		}
	}
	if strings.Contains(got, "settle") {
		t.Errorf("no row settled, yet the line says %q", got)
	}
	settled := slices.Clone(rows)
	settled[0].SettleMs, settled[1].SettleMs = results.Ptr(250.0), results.Ptr(250.0)
	if l := GPUStateLine(settled, "", false); !strings.Contains(l, "idle before each case (--settle): 250 ms on 2 rows, none on 1 row") {
		t.Errorf("two rows settled: %q", l)
	}
	settled[2].SettleMs = results.Ptr(1000.0)
	if l := GPUStateLine(settled, "", false); !strings.HasSuffix(l, "(--settle): 250 ms on 2 rows, 1000 ms on 1 row") {
		t.Errorf("every row settled, two idles: %q", l)
	}
	if fwd := GPUStateLine(rows, "fwd", false); !strings.Contains(fwd, "2 of 3 rows measured on a GPU read") || strings.Contains(fwd, "sw_thermal") {
		t.Errorf("fwd only: %q", fwd)
	}
	if l := GPUStateLine(rows[3:], "", false); l != "" {
		t.Errorf("no readings: %q, want none", l)
	}
	cp := rows[1]
	cp.Bench, cp.Rank = "cp", 1
	if l := GPUStateLine(append(rows, cp), "", true); !strings.Contains(l, "1 of 1 rows measured on a GPU read") || !strings.Contains(l, "1700-1700 MHz") {
		t.Errorf("CP rows only: %q", l)
	}
	if l := GPUStateLine(append(rows, cp), "", false); !strings.Contains(l, "3 of 4 rows measured on a GPU read") {
		t.Errorf("kernel rows only, a CP row beside: %q", l)
	}
	var b bytes.Buffer
	if err := WriteReport(&b, rows[:3], "", "t"); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "\n# GPU while timed (3 of 3") {
		t.Errorf("the report lacks the GPU line:\n%s", b.String())
	}
}

// The power cap's hint: under GPUStateLine where a quarter or more of the rows read ran at
// sw_power_cap and none was timed with --settle; not otherwise, nor for the other bench.
func TestPowerCapHint(t *testing.T) {
	row := func(ev string) results.Row {
		return results.Row{Bench: "kernel", Kernel: "cuda", Mask: "full", SeqLen: 8192, HeadsQ: 64, HeadsKV: 8, Pass: "fwd", Status: results.StatusOK,
			FLOPs: 1e12, TFLOPs: results.Ptr(500.0), DeviceIndex: results.Ptr(int64(0)), SMClockMHz: results.Ptr(1700.0), ClockEvents: ev}
	}
	rows := []results.Row{row("sw_power_cap"), row(""), row(""), row("sw_thermal,sw_power_cap")}
	if h := PowerCapHint(rows, "", false); !strings.Contains(h, "power cap on 2 of 4 rows") || !strings.Contains(h, "--settle") {
		t.Errorf("hint %q", h)
	}
	if h := PowerCapHint(rows[1:], "", false); !strings.Contains(h, "1 of 3") { // a third: a quarter or more
		t.Errorf("1 of 3 capped: %q", h)
	}
	if h := PowerCapHint([]results.Row{row(""), row(""), row(""), row(""), row("sw_power_cap")}, "", false); h != "" {
		t.Errorf("1 of 5 capped: %q, want none", h)
	}
	if h := PowerCapHint(rows, "", true); h != "" {
		t.Errorf("CP rows asked, none given: %q", h)
	}
	settled := append([]results.Row(nil), rows...)
	settled[1].SettleMs = results.Ptr(1000.0)
	if h := PowerCapHint(settled, "", false); h != "" {
		t.Errorf("timed with --settle: %q, want none", h)
	}
	var b bytes.Buffer
	if err := WriteReport(&b, rows, "", "t"); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "\n# the GPU was at its power cap on 2 of 4 rows") {
		t.Errorf("the report lacks the hint:\n%s", b.String())
	}
}
