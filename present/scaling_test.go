package present

import (
	"image/png"
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

func TestCrossoversAndScalingPlot(t *testing.T) {
	series := map[string][]ScalingPoint{
		"ring":    {{8, 500}, {64, 300}, {512, 100}},
		"ulysses": {{8, 600}, {64, 400}},
		"usp":     {{8, 550}, {64, 450}, {512, 400}},
		"usp2":    {{512, 400.1}},
	}
	got := Crossovers(series)
	want := []Crossover{{From: 8, To: 64, Before: "ulysses", After: "usp"}, {From: 64, To: 512, Before: "usp", After: "usp=usp2"}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("crossovers %+v, want %+v", got, want)
	}
	if len(Crossovers(map[string][]ScalingPoint{"a": {{8, 2}, {16, 2}}, "b": {{8, 1}, {16, 1}}})) != 0 {
		t.Fatal("a crossover where one series leads everywhere")
	}
	path := filepath.Join(t.TempDir(), "p", "x_scaling.png")
	if err := WriteScalingPlot(path, "causal, fwd", series); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := png.Decode(f); err != nil {
		t.Fatalf("not a PNG: %v", err)
	}
}

// One GPU count alone (simulate --gpus 1) draws a plot instead of panicking in the log
// scale (the plot widened the axis down to 0); an empty series map writes nothing.
func TestScalingPlotOnePoint(t *testing.T) {
	for _, gpus := range []int{1, 8} {
		path := filepath.Join(t.TempDir(), "one.png")
		if err := WriteScalingPlot(path, "one point", map[string][]ScalingPoint{"ring": {{gpus, 100}}, "usp": {{gpus, 90}}}); err != nil {
			t.Fatalf("%d GPUs: %v", gpus, err)
		}
		if _, err := os.Stat(path); err != nil {
			t.Fatalf("%d GPUs: %v", gpus, err)
		}
	}
	path := filepath.Join(t.TempDir(), "none.png")
	if err := WriteScalingPlot(path, "nothing", nil); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(path); err == nil {
		t.Error("a plot of nothing was written")
	}
}
