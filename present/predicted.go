package present

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/longca/longca/results"
)

// Predicted says whether a row is a prediction of `longca simulate` (bench simulate, or
// status predicted), not a measurement.
func Predicted(r results.Row) bool {
	return r.Bench == "simulate" || r.Status == results.StatusPredicted
}

// SplitPredicted parts rows into the measured and simulate's predictions (Predicted), each
// in their order. `longca report` on simulate's rows printed the kernel table: every cell
// "predicted", no rate, "ok: 0" of 42 rows and a column for each of 38 meshes.
func SplitPredicted(rows []results.Row) (measured, predicted []results.Row) {
	for _, r := range rows {
		if Predicted(r) {
			predicted = append(predicted, r)
		} else {
			measured = append(measured, r)
		}
	}
	return measured, predicted
}

// byRun groups rows by run id, in the order the runs first appear: each simulate run is
// one machine and kernel model, whose table is its own.
func byRun(rows []results.Row) (runs []string, of map[string][]results.Row) {
	of = map[string][]results.Row{}
	for _, r := range rows {
		if of[r.RunID] == nil {
			runs = append(runs, r.RunID)
		}
		of[r.RunID] = append(of[r.RunID], r)
	}
	return runs, of
}

// modelNames are the machines and kernel models that rows' model_params name, each once.
func modelNames(rows []results.Row) (machines, kernels []string) {
	for _, r := range rows {
		var mp struct {
			Machine struct {
				Name string `json:"name"`
			} `json:"machine"`
			Kernel struct {
				Name string `json:"name"`
			} `json:"kernel_model"`
		}
		if r.ModelParams == "" || json.Unmarshal([]byte(r.ModelParams), &mp) != nil {
			continue
		}
		if n := mp.Machine.Name; n != "" && !slices.Contains(machines, n) {
			machines = append(machines, n)
		}
		if n := mp.Kernel.Name; n != "" && !slices.Contains(kernels, n) {
			kernels = append(kernels, n)
		}
	}
	return machines, kernels
}

// WritePredictions prints simulate's rows of pass ("" every pass), read from src, one run
// at a time, grouped as `longca simulate` groups them (bestCells): per mask, pass, heads
// and GPU count, each method's per-GPU TFLOP/s on its best mesh (the median over the mask
// samples, the best mesh by that median), the fastest marked *; then each of those meshes;
// and a count of the rows by status that adds up to the rows. The title says they are
// predictions, not measurements.
func WritePredictions(w io.Writer, src string, rows []results.Row, pass string) error {
	var kept []results.Row
	for _, r := range rows {
		if pass == "" || r.Pass == pass {
			kept = append(kept, r)
		}
	}
	runs, of := byRun(kept)
	for i, run := range runs {
		if i > 0 {
			if _, err := io.WriteString(w, "#\n"); err != nil {
				return err
			}
		}
		if err := writeRunPredictions(w, src, run, of[run]); err != nil {
			return err
		}
	}
	return nil
}

// writeRunPredictions is WritePredictions' two tables of one run's rows.
func writeRunPredictions(w io.Writer, src, run string, rows []results.Row) error {
	best, keys, methods := bestCells(rows)
	seqlen, samples := map[simKey]int64{}, 0
	for _, r := range rows {
		seqlen[simKey{r.Mask, r.Pass, fmt.Sprintf("%d:%d", r.HeadsQ, r.HeadsKV), r.WorldSize}] = r.SeqLen
		samples = max(samples, int(r.Sample)+1)
	}
	model := ""
	if ms, ks := modelNames(rows); len(ms) > 0 || len(ks) > 0 {
		model = fmt.Sprintf(" (machine %s, kernel model %s)", orNone(ms), orNone(ks))
	}
	median := ""
	if samples > 1 {
		median = fmt.Sprintf(", the median over up to %d mask samples (the best by that median)", samples)
	}
	title := []string{
		fmt.Sprintf("longca simulate's predictions, not measurements: run %s%s, read from %s", run, model, src),
		"(grouped as simulate's own table; `longca simulate ... --compare DIR` sets predictions beside measured cp rows)",
	}
	head := func() []TextColumn {
		return []TextColumn{{Name: "mask", Left: true}, {Name: "pass"}, {Name: "heads", Unit: "q:kv"}, {Name: "GPUs"}, {Name: "seqlen", Unit: "tokens"}}
	}
	rates := TextTable{Title: append(title, "per-GPU TFLOP/s of each method's best mesh"+median+"; * fastest"), Columns: head()}
	meshes := TextTable{Title: []string{"the mesh of each rate above (ulysses x ring, -w: windows; =: the method's one mesh)"}, Columns: head()}
	for _, me := range methods {
		rates.Columns = append(rates.Columns, TextColumn{Name: me, Unit: "TFLOP/s"})
		meshes.Columns = append(meshes.Columns, TextColumn{Name: me})
	}
	sum, n := map[string]float64{}, map[string]int{}
	for _, k := range keys {
		lead := []string{k.mask, k.pass, k.heads, fmt.Sprint(k.gpus), fmt.Sprint(seqlen[k])}
		top := topRate(best[k])
		rate, mesh := slices.Clone(lead), slices.Clone(lead)
		for _, me := range methods {
			c := best[k][me]
			v, m := "-", "-"
			switch {
			case c == nil:
			case c.n > 0:
				v, m = c.rate(top), c.mesh(me)
				sum[me] += c.tflops
				n[me]++
			default:
				v, m = string(c.status), string(c.status)
			}
			rate, mesh = append(rate, v), append(mesh, m)
		}
		rates.Rows, meshes.Rows = append(rates.Rows, rate), append(meshes.Rows, mesh)
	}
	counts := map[results.Status]int{}
	for _, r := range rows {
		counts[r.Status]++
	}
	var b strings.Builder
	fmt.Fprintf(&b, "Cases: %d  Rows: %d%s  Avg TFLOP/s per GPU:", len(keys), len(rows), presentCounts(counts, results.StatusPredicted, results.StatusUnsupported))
	for _, me := range methods {
		if n[me] == 0 {
			fmt.Fprintf(&b, " %s -", me)
		} else {
			fmt.Fprintf(&b, " %s %s", me, FormatRate(sum[me]/float64(n[me])))
		}
	}
	meshes.Summary = []string{b.String()}
	if err := rates.Write(w); err != nil {
		return err
	}
	if _, err := io.WriteString(w, "#\n"); err != nil {
		return err
	}
	return meshes.Write(w)
}

func orNone(names []string) string {
	if len(names) == 0 {
		return "-"
	}
	return strings.Join(names, ", ")
}

// WritePredictionPlots draws simulate's scaling plots of rows (WriteScalingPlots: per-GPU
// TFLOP/s against GPUs, each method's best mesh) into dir, one run's into dir/<run> where
// rows hold several runs; it returns the files written.
func WritePredictionPlots(dir string, rows []results.Row, pass string) ([]string, error) {
	var kept []results.Row
	for _, r := range rows {
		if pass == "" || r.Pass == pass {
			kept = append(kept, r)
		}
	}
	runs, of := byRun(kept)
	var files []string
	for _, run := range runs {
		d := dir
		if len(runs) > 1 {
			d = filepath.Join(dir, fileSafe(run))
		}
		if err := os.MkdirAll(d, 0o755); err != nil {
			return files, fmt.Errorf("plots: %w", err)
		}
		fs, err := WriteScalingPlots(d, of[run])
		files = append(files, fs...)
		if err != nil {
			return files, err
		}
	}
	return files, nil
}
