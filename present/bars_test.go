package present

import (
	"image/png"
	"os"
	"path/filepath"
	"testing"

	"github.com/longca/longca/results"

	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
)

// barRows are three kernels (one of long name) at four lengths of one case, the fastest
// kernel's rate at the longest length the highest: the bar that was cut off at the plot's
// right edge, under the legend. The slowest kernel has no bar at 2K (oom).
func barRows() []results.Row {
	var rows []results.Row
	for _, n := range []int64{512, 1024, 2048, 4096} {
		for i, k := range []string{"ref", "cuda", "loongtrain-16x4-w4[cudnn]"} {
			r := results.Row{Mask: "causal", SeqLen: n, HeadsQ: 8, HeadsKV: 2, Pass: "fwd", Kernel: k, Status: results.StatusOK,
				TFLOPs: results.Ptr(float64(n) / 1000 * float64(3-i))}
			if i == 2 && n == 2048 {
				r.Status, r.TFLOPs = results.StatusOOM, nil
			}
			rows = append(rows, r)
		}
	}
	return rows
}

// Every bar lies inside the data area with a margin at both ends of the length axis, the
// bars of a group side by side without overlap, and the legend beside the data area, on
// the canvas, clear of every bar. (Bars were offset in points from ticks on an axis that
// ended at the last tick, and the legend was drawn in the data area's top right corner.)
func TestBarChartGeometry(t *testing.T) {
	charts := barCharts(Summarize(barRows(), ""))
	if len(charts) != 1 {
		t.Fatalf("%d charts, want 1", len(charts))
	}
	ch := charts[0]
	w, h := ch.size()
	c := draw.New(vgimg.New(w, h))
	_, data, legendC := ch.layout(c)
	bars := ch.bars.rects(data, ch.p)
	if len(bars) != 3*4-1 {
		t.Fatalf("%d bars, want 11 (3 kernels x 4 lengths, less an oom)", len(bars))
	}
	var left, right vg.Length = data.Max.X, data.Min.X
	for _, b := range bars {
		if b.Min.X < data.Min.X || b.Max.X > data.Max.X || b.Min.Y < data.Min.Y-0.01 || b.Max.Y > data.Max.Y+0.01 || b.Max.X <= b.Min.X || b.Max.Y <= b.Min.Y {
			t.Errorf("bar of kernel %d at length %d: %v, outside the data area %v", b.kernel, b.group, b.Rectangle, data.Rectangle)
		}
		left, right = min(left, b.Min.X), max(right, b.Max.X)
		for _, o := range bars {
			if o != b && o.Min.X < b.Max.X-0.01 && b.Min.X < o.Max.X-0.01 {
				t.Errorf("bars %d/%d and %d/%d overlap: %v %v", b.kernel, b.group, o.kernel, o.group, b.Rectangle, o.Rectangle)
			}
		}
	}
	if margin := data.Size().X * (1 - barGroupWidth) / 2 / 4 * 0.99; left-data.Min.X < margin || data.Max.X-right < margin {
		t.Errorf("bars span %v-%v of the data area %v-%v: want a margin of %v at both ends (half a group's gap)", left, right, data.Min.X, data.Max.X, margin)
	}
	lr := ch.legend.Rectangle(legendC)
	if lr.Min.X < data.Max.X || lr.Max.X > c.Max.X || lr.Min.Y < c.Min.Y || lr.Max.Y > c.Max.Y || lr.Size().X <= 0 || lr.Size().Y <= 0 {
		t.Errorf("legend %v: want it right of the data area %v, on the canvas %v", lr, data.Rectangle, c.Rectangle)
	}
	for _, b := range bars {
		if lr.Min.X < b.Max.X && b.Min.X < lr.Max.X && lr.Min.Y < b.Max.Y && b.Min.Y < lr.Max.Y {
			t.Errorf("legend %v overlaps bar %d/%d %v", lr, b.kernel, b.group, b.Rectangle)
		}
	}
}

// The written PNG: no kernel's colour in its right-most columns (the last bar ran into the
// image's right edge).
func TestBarChartPNGRightEdge(t *testing.T) {
	s := Summarize(barRows(), "")
	files, err := WriteBarCharts(t.TempDir(), s)
	if err != nil || len(files) != 1 || filepath.Base(files[0]) != "bars_causal_fwd_8-2.png" {
		t.Fatalf("%v, %v", files, err)
	}
	f, err := os.Open(files[0])
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatal(err)
	}
	b := img.Bounds()
	edge := b.Dx() / 100
	for _, k := range s.Kernels {
		kr, kg, kb, _ := kernelColor(s.Kernels, k).RGBA()
		for x := b.Max.X - edge; x < b.Max.X; x++ {
			for y := b.Min.Y; y < b.Max.Y; y++ {
				if r, g, bl, _ := img.At(x, y).RGBA(); r == kr && g == kg && bl == kb {
					t.Fatalf("%s's colour at (%d, %d), in the last %d columns of a %d-wide chart", k, x, y, edge, b.Dx())
				}
			}
		}
	}
}
