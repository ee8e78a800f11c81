package present

import (
	"fmt"
	"image/color"
	"os"
	"path/filepath"
	"sort"

	"github.com/longca/longca/results"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
)

// BarFileName is the grouped bar chart of one (mask, pass, heads):
// bars_<mask>_<pass>_<q>-<kv>.png, with fwd+bwd written fwdbwd.
func BarFileName(mask, pass string, hq, hkv int64) string {
	return "bars_" + PlotFileName(mask, pass, hq, hkv)
}

// WriteBarCharts draws, per (mask, pass, heads), TFLOP/s as grouped bars: one group per
// sequence length, one bar per kernel (in the summary's kernel order, the same colour in
// every chart), so which kernel is fastest at each length, and by how much, reads at a
// glance. A kernel that did not run ok at a length has no bar there. With fewer than two
// kernels it draws nothing (the line plots say it all). It returns the files written
// into dir.
func WriteBarCharts(dir string, s Summary) ([]string, error) {
	if len(s.Kernels) < 2 {
		return nil, nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("bar charts: %w", err)
	}
	type group struct {
		mask, pass string
		hq, hkv    int64
	}
	var order []group
	lengths := map[group][]int64{}
	rates := map[group]map[string]map[int64]float64{}
	for _, c := range s.Cases {
		g := group{c.Mask, c.Pass, c.HeadsQ, c.HeadsKV}
		if rates[g] == nil {
			rates[g] = map[string]map[int64]float64{}
			order = append(order, g)
		}
		lengths[g] = append(lengths[g], c.SeqLen)
		for _, k := range s.Kernels {
			if cell, ok := s.Cells[c][k]; ok && cell.Status == results.StatusOK {
				if rates[g][k] == nil {
					rates[g][k] = map[int64]float64{}
				}
				rates[g][k][c.SeqLen] = cell.TFLOPs
			}
		}
	}
	var files []string
	for _, g := range order {
		ls := uniqueSorted(lengths[g])
		p := plot.New()
		p.Title.Text = fmt.Sprintf("%s, %s, heads %d:%d", g.mask, g.pass, g.hq, g.hkv)
		p.X.Label.Text = "sequence length (tokens)"
		p.Y.Label.Text = "TFLOP/s"
		p.Y.Min = 0
		p.Add(plotter.NewGrid())
		var drawn []string
		top := 0.0
		for _, k := range s.Kernels {
			if len(rates[g][k]) > 0 {
				drawn = append(drawn, k)
			}
			for _, r := range rates[g][k] {
				top = max(top, r)
			}
		}
		if top > 0 {
			p.Y.Max = top * (1.15 + 0.08*float64(len(drawn))) // room for the legend above the bars
		}
		width := vg.Points(min(22, 300/float64(max(1, len(drawn)*len(ls)))))
		for i, k := range drawn {
			vals := make(plotter.Values, len(ls))
			for j, n := range ls {
				vals[j] = rates[g][k][n]
			}
			bars, err := plotter.NewBarChart(vals, width)
			if err != nil {
				return files, fmt.Errorf("bar charts: %s: %w", g.mask, err)
			}
			bars.LineStyle.Width = 0
			bars.Color = kernelColor(s.Kernels, k)
			bars.Offset = vg.Length(float64(i)-float64(len(drawn)-1)/2) * width
			p.Add(bars)
			p.Legend.Add(k, bars)
		}
		names := make([]string, len(ls))
		for j, n := range ls {
			names[j] = sizeLabel(int(n))
		}
		p.NominalX(names...)
		p.Legend.Top = true
		path := filepath.Join(dir, BarFileName(g.mask, g.pass, g.hq, g.hkv))
		if err := savePlot(p, 7*vg.Inch, 4*vg.Inch, path); err != nil {
			return files, fmt.Errorf("bar charts: %w", err)
		}
		files = append(files, path)
	}
	return files, nil
}

// kernelColor gives each kernel of the summary its own colour, the same in every chart.
func kernelColor(kernels []string, k string) color.Color {
	for i, n := range kernels {
		if n == k {
			return plotutil.Color(i)
		}
	}
	return color.Black
}

func uniqueSorted(xs []int64) []int64 {
	out := append([]int64(nil), xs...)
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	n := 0
	for i, x := range out {
		if i == 0 || x != out[n-1] {
			out[n] = x
			n++
		}
	}
	return out[:n]
}
