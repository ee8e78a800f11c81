package present

import (
	"fmt"
	"image/color"
	"math"
	"os"
	"path/filepath"
	"sort"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
)

// ScalingPoint is one figure of a scaling plot: per-GPU TFLOP/s at a GPU count.
type ScalingPoint struct {
	GPUs   int
	TFLOPs float64
}

// Crossover is where the fastest series changes between two neighbouring GPU counts.
type Crossover struct {
	From, To      int    // the GPU counts
	Before, After string // the fastest series at From and at To
}

func (c Crossover) String() string {
	return fmt.Sprintf("%s best at %d GPUs, %s at %d", c.Before, c.From, c.After, c.To)
}

// tied is how close (relative) two figures must be to share first place.
const tied = 5e-4

// Crossovers finds the neighbouring GPU counts between which the fastest series changes
// (counts where a series has no point do not compete there). Series within 0.05% of the
// fastest share first place, named together ("loongtrain=usp").
func Crossovers(series map[string][]ScalingPoint) []Crossover {
	val := map[int]float64{}
	for _, name := range sortedKeys(series) {
		for _, p := range series[name] {
			if v, ok := val[p.GPUs]; !ok || p.TFLOPs > v {
				val[p.GPUs] = p.TFLOPs
			}
		}
	}
	best := map[int]string{}
	for _, name := range sortedKeys(series) {
		for _, p := range series[name] {
			if p.TFLOPs >= val[p.GPUs]*(1-tied) {
				if best[p.GPUs] != "" {
					best[p.GPUs] += "="
				}
				best[p.GPUs] += name
			}
		}
	}
	gpus := make([]int, 0, len(best))
	for g := range best {
		gpus = append(gpus, g)
	}
	sort.Ints(gpus)
	var out []Crossover
	for i := 1; i < len(gpus); i++ {
		a, b := gpus[i-1], gpus[i]
		if best[a] != best[b] {
			out = append(out, Crossover{From: a, To: b, Before: best[a], After: best[b]})
		}
	}
	return out
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// WriteScalingPlot draws per-GPU TFLOP/s against the GPU count (log scale), one line per
// series, into path (PNG). Crossovers stand out: a dashed vertical line between the two
// GPU counts where the fastest series changes, and the title names them.
func WriteScalingPlot(path, title string, series map[string][]ScalingPoint) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("plots: %w", err)
	}
	p := plot.New()
	cross := Crossovers(series)
	p.Title.Text = title
	if len(cross) > 0 {
		p.Title.Text += "\ncrossover: " + cross[0].String()
		if len(cross) > 1 {
			p.Title.Text += fmt.Sprintf(" (+%d more)", len(cross)-1)
		}
	}
	p.X.Label.Text = "GPUs"
	p.Y.Label.Text = "TFLOP/s per GPU"
	p.X.Scale = plot.LogScale{}
	p.Add(plotter.NewGrid())
	p.Y.Min = 0
	var args []any
	ticks := map[int]bool{}
	ymax := 0.0
	for _, name := range sortedKeys(series) {
		pts := append([]ScalingPoint(nil), series[name]...)
		sort.Slice(pts, func(i, j int) bool { return pts[i].GPUs < pts[j].GPUs })
		xy := make(plotter.XYs, len(pts))
		for i, pt := range pts {
			xy[i] = plotter.XY{X: float64(pt.GPUs), Y: pt.TFLOPs}
			ticks[pt.GPUs] = true
			ymax = max(ymax, pt.TFLOPs)
		}
		if len(xy) > 0 {
			args = append(args, name, xy)
		}
	}
	if len(args) > 0 {
		if err := plotutil.AddLinePoints(p, args...); err != nil {
			return fmt.Errorf("plots: %s: %w", title, err)
		}
	}
	for _, c := range cross {
		x := math.Sqrt(float64(c.From) * float64(c.To))
		l, err := plotter.NewLine(plotter.XYs{{X: x, Y: 0}, {X: x, Y: ymax * 1.05}})
		if err != nil {
			return fmt.Errorf("plots: %w", err)
		}
		l.Color = color.RGBA{R: 200, A: 255}
		l.Width = vg.Points(1.5)
		l.Dashes = []vg.Length{vg.Points(4), vg.Points(3)}
		p.Add(l)
	}
	var tk plot.ConstantTicks
	for g := range ticks {
		tk = append(tk, plot.Tick{Value: float64(g), Label: fmt.Sprint(g)})
	}
	sort.Slice(tk, func(i, j int) bool { return tk[i].Value < tk[j].Value })
	if len(tk) == 0 { // nothing measured: no axis a log scale can draw
		return nil
	}
	if lo, hi := tk[0].Value, tk[len(tk)-1].Value; lo == hi {
		// one GPU count alone: the plot would widen the axis by 1 each way, down to 0,
		// which a log scale cannot draw (it panics); from half of it to twice it instead
		p.X.Min, p.X.Max = lo/2, hi*2
	}
	p.X.Tick.Marker = tk
	p.Legend.Top, p.Legend.Left = false, true
	if err := savePlot(p, 7*vg.Inch, 4.5*vg.Inch, path); err != nil {
		return fmt.Errorf("plots: %w", err)
	}
	return nil
}
