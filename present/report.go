package present

import (
	"fmt"
	"io"

	"github.com/longca/longca/results"
)

// ReportOptions are `longca report`'s choices: one pass (all when empty), a folder for the
// plots (none when empty), and a kernel to set every other against (Against, with the ratio
// At to count the cases at or above).
type ReportOptions struct {
	Pass, PlotDir, Against string
	At                     float64
	// Clocks adds the table of each kernel's mean SM clock while timed, per case.
	Clocks bool
	// Pairs reads Against's ratios within runs (WriteAgainstTable's paired).
	Pairs bool
}

// WriteReportFull is what `longca report` prints of rows read from path: the kernel
// table (and ratios to the fastest), with Against every kernel over that one, the CP table
// of the CP rows, all for one pass when Pass is set; and, with PlotDir, the line and bar
// plots drawn there. Rows of `longca simulate` (Predicted) are not measurements: they get
// simulate's own grouping (WritePredictions) and its scaling plots, not the kernel table.
func WriteReportFull(w io.Writer, path string, rows []results.Row, o ReportOptions) error {
	pass, plotDir := o.Pass, o.PlotDir
	measured, predicted := SplitPredicted(rows)
	title := fmt.Sprintf("longca report: %s (%d rows in all)", path, len(rows))
	if len(predicted) > 0 && len(measured) > 0 {
		title = fmt.Sprintf("longca report: %s (%d rows in all: %d measured, %d of longca simulate's predictions, in tables of their own below)", path, len(rows), len(measured), len(predicted))
	}
	if pass != "" {
		title += ", showing pass " + pass
	}
	if len(measured) > 0 || len(predicted) == 0 {
		if err := WriteReport(w, measured, pass, title); err != nil {
			return err
		}
	} else if _, err := fmt.Fprintf(w, "# %s\n#\n", title); err != nil {
		return err
	}
	sum := Summarize(measured, pass) // the tables and plots below share it
	if o.Clocks {
		if !sum.anyClock() {
			why := "rows from a CPU, or timed with --gpu-state=false"
			if len(measured) == 0 {
				why = "no row was measured (these are longca simulate's predictions)"
			}
			if _, err := fmt.Fprintf(w, "# --clocks: no row carries an SM clock: %s\n", why); err != nil {
				return err
			}
		} else if err := WriteClockTable(w, "each kernel's SM clock while timed (the mean of its busy readings), per case: "+path, sum); err != nil {
			return err
		}
	}
	if o.Against != "" {
		if err := WriteAgainstTable(w, fmt.Sprintf("against %s: %s", o.Against, path), sum, o.Against, o.At, o.Pairs); err != nil {
			return err
		}
	}
	// CP rows also get their own table: efficiency, ranks per device, overlap, check.
	var cpRows []results.Row
	for _, r := range measured {
		if r.Bench == "cp" && (pass == "" || r.Pass == pass) {
			cpRows = append(cpRows, r)
		}
	}
	if len(cpRows) > 0 {
		if err := WriteCPTable(w, "CP methods of "+path, cpRows); err != nil {
			return err
		}
	}
	if len(predicted) > 0 {
		if len(measured) > 0 {
			if _, err := io.WriteString(w, "#\n"); err != nil {
				return err
			}
		}
		if err := WritePredictions(w, path, predicted, pass); err != nil {
			return err
		}
	}
	if plotDir == "" {
		return nil
	}
	n, err := WriteAllPlots(plotDir, sum)
	if err != nil {
		return err
	}
	what := "lines: TFLOP/s against length; bars_*: kernels side by side per length"
	if len(predicted) > 0 {
		files, err := WritePredictionPlots(plotDir, predicted, pass)
		if err != nil {
			return err
		}
		if n += len(files); len(measured) > 0 {
			what += "; *_scaling: simulate's predicted per-GPU TFLOP/s against GPUs"
		} else {
			what = "*_scaling: simulate's predicted per-GPU TFLOP/s against GPUs, each method's best mesh"
		}
	}
	_, err = fmt.Fprintf(w, "# %d %s in %s (%s)\n", n, plural(n, "plot", "plots"), plotDir, what)
	return err
}

// anyClock says whether a cell of s read an SM clock: without one, WriteClockTable is all "-".
func (s Summary) anyClock() bool {
	for _, cells := range s.Cells {
		for _, c := range cells {
			if c.Status == results.StatusOK && c.ClockMHz > 0 {
				return true
			}
		}
	}
	return false
}
