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
// plots drawn there.
func WriteReportFull(w io.Writer, path string, rows []results.Row, o ReportOptions) error {
	pass, plotDir := o.Pass, o.PlotDir
	title := fmt.Sprintf("longca report: %s (%d rows in all)", path, len(rows))
	if pass != "" {
		title += ", showing pass " + pass
	}
	if err := WriteReport(w, rows, pass, title); err != nil {
		return err
	}
	sum := Summarize(rows, pass) // the tables and plots below share it
	if o.Clocks {
		if err := WriteClockTable(w, "each kernel's SM clock while timed (the mean of its busy readings), per case: "+path, sum); err != nil {
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
	for _, r := range rows {
		if r.Bench == "cp" && (pass == "" || r.Pass == pass) {
			cpRows = append(cpRows, r)
		}
	}
	if len(cpRows) > 0 {
		if err := WriteCPTable(w, "CP methods of "+path, cpRows); err != nil {
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
	_, err = fmt.Fprintf(w, "# %d plots in %s (lines: TFLOP/s against length; bars_*: kernels side by side per length)\n", n, plotDir)
	return err
}
