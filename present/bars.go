package present

import (
	"fmt"
	"image/color"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/longca/longca/results"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
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
	var files []string
	for _, ch := range barCharts(s) {
		path := filepath.Join(dir, ch.file)
		if err := ch.save(path); err != nil {
			return files, fmt.Errorf("bar charts: %w", err)
		}
		files = append(files, path)
	}
	return files, nil
}

// barCharts builds WriteBarCharts' charts, one per (mask, pass, heads) in the summary's
// order, each with its file name.
func barCharts(s Summary) []*barChart {
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
	var charts []*barChart
	for _, g := range order {
		ls := uniqueSorted(lengths[g])
		var drawn []string
		for _, k := range s.Kernels {
			if len(rates[g][k]) > 0 {
				drawn = append(drawn, k)
			}
		}
		names := make([]string, len(ls))
		for j, n := range ls {
			names[j] = sizeLabel(int(n))
		}
		bars := groupedBars{rates: make([][]float64, len(drawn)), colors: make([]color.Color, len(drawn))}
		for i, k := range drawn {
			bars.colors[i] = kernelColor(s.Kernels, k)
			bars.rates[i] = make([]float64, len(ls))
			for j, n := range ls {
				r, ok := rates[g][k][n]
				if !ok {
					r = math.NaN() // no bar: the kernel did not run ok at this length
				}
				bars.rates[i][j] = r
			}
		}
		ch := newBarChart(fmt.Sprintf("%s, %s, heads %d:%d", g.mask, g.pass, g.hq, g.hkv), names, drawn, bars)
		ch.file = BarFileName(g.mask, g.pass, g.hq, g.hkv)
		charts = append(charts, ch)
	}
	return charts
}

// barGroupWidth is the share of a length's category that its group of bars fills: the rest
// is the margin between groups, and half of it the margin at either end of the axis.
const barGroupWidth = 0.8

// groupedBars draws the bars in data coordinates on a categorical length axis: group j (the
// j-th length) is centred on x = j and fills barGroupWidth of it, split evenly among the
// kernels drawn, and the axis runs from -0.5 to len-0.5. Bars were plotter.BarCharts of a
// width in points, offset from each group's tick, on an axis that ended at the last tick:
// the last group's right-hand bars were cut off at the plot's edge.
type groupedBars struct {
	rates  [][]float64 // per kernel drawn, per length; NaN where it has no bar
	colors []color.Color
}

// groups is how many lengths the bars stand on.
func (g groupedBars) groups() int {
	if len(g.rates) == 0 {
		return 0
	}
	return len(g.rates[0])
}

// barRect is one bar as drawn: the kernel's index among those drawn, the length's, and the
// rectangle on the canvas.
type barRect struct {
	kernel, group int
	vg.Rectangle
}

// rects places every bar on the data canvas c of plot p.
func (g groupedBars) rects(c draw.Canvas, p *plot.Plot) []barRect {
	trX, trY := p.Transforms(&c)
	var out []barRect
	w := barGroupWidth / float64(max(1, len(g.rates)))
	for i, rs := range g.rates {
		for j, r := range rs {
			if math.IsNaN(r) {
				continue
			}
			x0 := float64(j) - barGroupWidth/2 + float64(i)*w
			out = append(out, barRect{i, j, vg.Rectangle{
				Min: vg.Point{X: trX(x0), Y: trY(0)},
				Max: vg.Point{X: trX(x0 + w), Y: trY(r)},
			}})
		}
	}
	return out
}

// Plot draws the bars (plot.Plotter).
func (g groupedBars) Plot(c draw.Canvas, p *plot.Plot) {
	for _, b := range g.rects(c, p) {
		c.SetColor(g.colors[b.kernel])
		c.Fill(b.Rectangle.Path())
	}
}

// DataRange is the categorical x range with its end margins and the rates from zero
// (plot.DataRanger).
func (g groupedBars) DataRange() (xmin, xmax, ymin, ymax float64) {
	for _, rs := range g.rates {
		for _, r := range rs {
			if !math.IsNaN(r) {
				ymax = max(ymax, r)
			}
		}
	}
	return -0.5, float64(g.groups()) - 0.5, 0, ymax
}

// swatch is a kernel's colour in the legend (plot.Thumbnailer).
type swatch struct{ color.Color }

func (s swatch) Thumbnail(c *draw.Canvas) {
	c.SetColor(s.Color)
	c.Fill(c.Rectangle.Path())
}

// barChart is one grouped bar chart: the plot of the bars and, in a strip of its own to
// the right of the plot, the legend (it was drawn inside the plot's top right corner, over
// the last group's bars).
type barChart struct {
	p      *plot.Plot
	bars   groupedBars
	legend plot.Legend
	file   string // its name in the plot folder: BarFileName
}

// barChartW, barChartH are a bar chart's size; it grows taller where the legend would not fit.
const (
	barChartW = 7 * vg.Inch
	barChartH = 4 * vg.Inch
	legendGap = 10 // points between the plot and the legend, and right of the legend
)

func newBarChart(title string, lengths, kernels []string, bars groupedBars) *barChart {
	p := plot.New()
	p.Title.Text = title
	p.X.Label.Text = "sequence length (tokens)"
	p.Y.Label.Text = "TFLOP/s"
	grid := plotter.NewGrid()
	grid.Vertical.Color = nil // categories, not values: no line through the groups
	p.Add(grid, bars)
	_, _, _, top := bars.DataRange()
	p.X.Min, p.X.Max = -0.5, float64(len(lengths))-0.5
	p.Y.Min, p.Y.Max = 0, top*1.05
	if len(lengths) > 0 {
		p.NominalX(lengths...)
	}
	l := plot.NewLegend()
	l.Top, l.Left = true, true
	l.Padding = 3
	for i, k := range kernels {
		l.Add(k, swatch{bars.colors[i]})
	}
	return &barChart{p: p, bars: bars, legend: l}
}

// size is the canvas the chart is drawn on: barChartW by barChartH, taller where its
// legend needs it.
func (b *barChart) size() (w, h vg.Length) {
	probe := draw.Canvas{Rectangle: vg.Rectangle{Max: vg.Point{X: barChartW, Y: barChartH}}}
	return barChartW, max(barChartH, b.legend.Rectangle(probe).Size().Y+2*vg.Inch)
}

// layout splits c into the plot's canvas (c less a strip at the right) and the legend's
// (in that strip, as wide as the legend, from the top of the data area down), and returns
// them with the data area the bars are drawn in.
func (b *barChart) layout(c draw.Canvas) (plotC, dataC, legendC draw.Canvas) {
	lw := b.legend.Rectangle(c).Size().X
	plotC = draw.Crop(c, 0, -(lw + 2*legendGap), 0, 0)
	dataC = b.p.DataCanvas(plotC)
	legendC = c
	legendC.Min = vg.Point{X: c.Max.X - legendGap - lw, Y: dataC.Min.Y}
	legendC.Max = vg.Point{X: c.Max.X - legendGap, Y: dataC.Max.Y}
	return plotC, dataC, legendC
}

func (b *barChart) draw(c draw.Canvas) {
	plotC, _, legendC := b.layout(c)
	b.p.Draw(plotC)
	b.legend.Draw(legendC)
}

// save writes the chart as a PNG (or the format path's extension names) through saveTo.
func (b *barChart) save(path string) error {
	w, h := b.size()
	c, err := draw.NewFormattedCanvas(w, h, strings.TrimPrefix(filepath.Ext(path), "."))
	if err != nil {
		return err
	}
	b.draw(draw.New(c))
	return saveTo(c, path)
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
