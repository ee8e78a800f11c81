package session

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"
)

// TestMakespan: the cases handed in order to the first free worker, as predictAll does.
func TestMakespan(t *testing.T) {
	for _, c := range []struct {
		cost    []float64
		workers int
		want    float64
	}{
		{nil, 2, 0},
		{[]float64{10}, 2, 10}, // one long case is its own time, not half of it
		{[]float64{1, 1, 1, 1}, 2, 2},
		{[]float64{3, 1, 1, 1}, 2, 3},
		{[]float64{1, 1, 1, 3}, 2, 4},
		{[]float64{1, 2, 3}, 1, 6},
		{[]float64{1, 2, 3}, 8, 3},
	} {
		if got := makespan(c.cost, c.workers); got != c.want {
			t.Errorf("makespan(%v, %d workers) = %v, want %v", c.cost, c.workers, got, c.want)
		}
	}
}

// TestSimProgressLines: the up-front line, a line per GPU count as its last case ends
// (with the counts left), and a case line between them no more than every
// simProgressEvery, on a clock the test moves.
func TestSimProgressLines(t *testing.T) {
	var buf bytes.Buffer
	log := zerolog.New(&buf)
	jobs := []simJob{{n: 8, method: "a", mask: "causal"}, {n: 8, method: "b", mask: "causal"},
		{n: 16, method: "a", mask: "full"}, {n: 16, method: "b", mask: "full"}, {n: 16, method: "c", mask: "full"}}
	p := newSimProgress(&log, jobs, []float64{1, 1, 1, 1, 1}, []int{0, 0, 1, 1, 1}, []int{8, 16}, 2)
	t0 := time.Date(2026, 12, 3, 22, 0, 0, 0, time.UTC)
	clock := t0
	p.now = func() time.Time { return clock }
	p.begin("run1")
	for i, at := range []time.Duration{1, 2, 3, 8, 9} {
		clock = t0.Add(at * time.Second)
		p.finished(i)
	}
	var got []string
	for _, line := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("log line %q: %v", line, err)
		}
		switch m["message"] {
		case "simulate sweep":
			got = append(got, fmt.Sprintf("sweep cases=%v gpus=%v at_most=%v", m["cases"], m["gpus"], m["at_most"]))
		case "simulate gpus":
			got = append(got, fmt.Sprintf("gpus=%v done=%v/%v gpus_left=%v eta=%v", m["gpus"], m["done"], m["of"], m["gpus_left"], m["eta"]))
		case "simulate case":
			got = append(got, fmt.Sprintf("case done=%v/%v gpus=%v method=%v eta=%v", m["done"], m["of"], m["gpus"], m["method"], m["eta"]))
		default:
			t.Errorf("unexpected line %q", line)
		}
	}
	want := []string{
		"sweep cases=5 gpus=[8 16] at_most=3s", // 5 cases of 1 s on 2 workers
		"gpus=8 done=2/5 gpus_left=1 eta=3s",   // 3 s of estimate left, at the 1 s a case taken so far
		// the third case ends 1 s after the last line: none
		"case done=4/5 gpus=16 method=b eta=2s", // 6 s after the last line
		"gpus=16 done=5/5 gpus_left=0 eta=0s",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("progress lines:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
