package present

import (
	"fmt"
	"io"

	"github.com/longca/longca/results"
)

// WriteReportFull is what `longca report` prints of rows read from path: the kernel
// table (and ratios to the fastest), the CP table of the CP rows, both for one pass when
// pass is set; and, with plotDir, the line and bar plots drawn there.
func WriteReportFull(w io.Writer, path string, rows []results.Row, pass, plotDir string) error {
	title := fmt.Sprintf("longca report: %s (%d rows in all)", path, len(rows))
	if pass != "" {
		title += ", showing pass " + pass
	}
	if err := WriteReport(w, rows, pass, title); err != nil {
		return err
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
	n, err := WriteAllPlots(plotDir, Summarize(rows, pass))
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(w, "# %d plots in %s (lines: TFLOP/s against length; bars_*: kernels side by side per length)\n", n, plotDir)
	return err
}
