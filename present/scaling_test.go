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
