package present

import (
	"fmt"
	"hash/fnv"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/longca/longca/internal/smallfile"
	"github.com/longca/longca/results"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
)

// PlotFileName is the PNG of one (mask, pass, heads): <mask>_<pass>_<q>-<kv>.png, with
// fwd+bwd written fwdbwd. The mask and pass come from a results file that may be a
// stranger's: each is made fileSafe.
func PlotFileName(mask, pass string, hq, hkv int64) string {
	return fmt.Sprintf("%s_%s_%d-%d.png", fileSafe(mask), fileSafe(strings.ReplaceAll(pass, "+", "")), hq, hkv)
}

// fileSafe is s as part of a file name: its characters but letters, digits and "._-"
// written "_", at most 80 bytes, and where either changed it, 8 hex digits of its hash
// after, so that two names stay two files. A results file's mask of 1 MB made report
// --plot fail on "file name too long" (exit 1, a 1 MB line), and one with "/" would have
// written out of the folder (the twelfth pass).
func fileSafe(s string) string {
	const most = 80
	var b strings.Builder
	changed := len(s) > most
	for _, r := range s {
		if b.Len() >= most {
			break
		}
		if r < utf8.RuneSelf && (r == '.' || r == '_' || r == '-' || unicode.IsLetter(r) || unicode.IsDigit(r)) {
			b.WriteRune(r)
		} else {
			b.WriteByte('_')
			changed = true
		}
	}
	if !changed {
		return s
	}
	h := fnv.New32a()
	h.Write([]byte(s))
	return fmt.Sprintf("%s-%08x", b.String(), h.Sum32())
}

// WritePlots draws TFLOP/s against sequence length, one line per kernel, one PNG per
// (mask, pass, heads) into dir, and returns the files written. Points come from the
// summary's ok cells only.
func WritePlots(dir string, s Summary) ([]string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("plots: %w", err)
	}
	type group struct {
		mask, pass string
		hq, hkv    int64
	}
	var order []group
	points := map[group]map[string]plotter.XYs{}
	for _, c := range s.Cases {
		g := group{c.Mask, c.Pass, c.HeadsQ, c.HeadsKV}
		if points[g] == nil {
			points[g] = map[string]plotter.XYs{}
			order = append(order, g)
		}
		for _, k := range s.Kernels {
			if cell, ok := s.Cells[c][k]; ok && cell.Status == results.StatusOK {
				points[g][k] = append(points[g][k], plotter.XY{X: float64(c.SeqLen), Y: cell.TFLOPs})
			}
		}
	}
	var files []string
	for _, g := range order {
		p := plot.New()
		p.Title.Text = fmt.Sprintf("%s, %s, heads %d:%d", g.mask, g.pass, g.hq, g.hkv)
		p.X.Label.Text = "sequence length (tokens)"
		p.Y.Label.Text = "TFLOP/s"
		p.Add(plotter.NewGrid())
		p.Y.Min = 0 // rates from zero, so that ratios between kernels read true
		// Legend bottom right, under the lines, which start at zero's far side.
		var args []any
		ticks := map[float64]bool{}
		names := make([]string, 0, len(points[g]))
		for k := range points[g] {
			names = append(names, k)
		}
		sort.Strings(names)
		for _, k := range names {
			xy := points[g][k]
			sort.Slice(xy, func(i, j int) bool { return xy[i].X < xy[j].X })
			args = append(args, k, xy)
			for _, pt := range xy {
				ticks[pt.X] = true
			}
		}
		p.X.Tick.Marker = lengthTicks(ticks)
		if len(args) > 0 {
			if err := plotutil.AddLinePoints(p, args...); err != nil {
				return files, fmt.Errorf("plots: %s: %w", g.mask, err)
			}
		}
		path := filepath.Join(dir, PlotFileName(g.mask, g.pass, g.hq, g.hkv))
		if err := savePlot(p, 6*vg.Inch, 4*vg.Inch, path); err != nil {
			return files, fmt.Errorf("plots: %w", err)
		}
		files = append(files, path)
	}
	return files, nil
}

// lengthTicks marks each measured length, written as 8K, 48K, 512.
func lengthTicks(xs map[float64]bool) plot.ConstantTicks {
	var ticks plot.ConstantTicks
	for x := range xs {
		ticks = append(ticks, plot.Tick{Value: x, Label: sizeLabel(int(x))})
	}
	sort.Slice(ticks, func(i, j int) bool { return ticks[i].Value < ticks[j].Value })
	return ticks
}

// sizeLabel writes n with a K or M suffix when it divides evenly.
func sizeLabel(n int) string {
	switch {
	case n > 0 && n%(1<<20) == 0:
		return fmt.Sprintf("%dM", n>>20)
	case n > 0 && n%(1<<10) == 0:
		return fmt.Sprintf("%dK", n>>10)
	}
	return fmt.Sprint(n)
}

// WriteAllPlots draws both kinds of plot of a summary into dir: TFLOP/s against length
// (WritePlots) and kernels side by side per length (WriteBarCharts); it returns how many.
func WriteAllPlots(dir string, s Summary) (int, error) {
	lines, err := WritePlots(dir, s)
	if err != nil {
		return 0, err
	}
	bars, err := WriteBarCharts(dir, s)
	return len(lines) + len(bars), err
}

// savePlot writes p to path in the format its extension names, as plot.Save does, but
// through saveTo: whole or not at all, and a named pipe at path is written once a reader
// holds it, not filled unread.
func savePlot(p *plot.Plot, w, h vg.Length, path string) error {
	wt, err := p.WriterTo(w, h, strings.TrimPrefix(filepath.Ext(path), "."))
	if err != nil {
		return err
	}
	return saveTo(wt, path)
}

// saveTo writes a drawn canvas to path whole or not at all (savePlot's): through a
// temporary file renamed over path (smallfile.WriteWhole), so that a disk that fills
// midway leaves no partial PNG under path's name; a named pipe is written in place.
func saveTo(wt io.WriterTo, path string) error {
	return smallfile.WriteWhole(path, func(w io.Writer) error {
		_, err := wt.WriteTo(w)
		return err
	})
}
