package cp

import (
	"fmt"
	"sync"

	"github.com/longca/longca/internal/cuda/devops"
	"github.com/longca/longca/tensor"
)

// Batched row copies and sums (ops.copyRuns, ops.addRuns): balanced's packed-documents
// layout moves a rank's keys in tens to hundreds of runs of rows per pass, and a launch
// per run made the copies launch-bound (about 5 us each on a GPU the in-process ranks
// share). On a device each is one launch over a runs table (internal/cuda/devops), which
// is uploaded once per run of the method and kept (runTables); the host and the tracer do
// the same runs one by one.

// checkRuns checks that every run lies inside dst's and src's rows and returns the row
// size in elements.
func checkRuns(what string, dst, src tensor.Tensor, runs []rowCopy) (int, error) {
	ds, ss := dst.Shape(), src.Shape()
	if len(ds) == 0 || len(ss) == 0 || tensor.Numel(ds[1:]) != tensor.Numel(ss[1:]) {
		return 0, fmt.Errorf("cp: %s from %v into %v: rows differ", what, ss, ds)
	}
	for _, r := range runs {
		if r.N < 0 || r.To < 0 || r.From < 0 || r.To+r.N > ds[0] || r.From+r.N > ss[0] {
			return 0, fmt.Errorf("cp: %s of %d rows from row %d of %v to row %d of %v", what, r.N, r.From, ss, r.To, ds)
		}
	}
	return tensor.Numel(ds[1:]), nil
}

// eachRun calls op on the row views of every run.
func eachRun(dst, src tensor.Tensor, runs []rowCopy, op func(d, s tensor.Tensor) error) error {
	for _, r := range runs {
		d, err := rowsOf(dst, r.To, r.To+r.N)
		if err != nil {
			return err
		}
		s, err := rowsOf(src, r.From, r.From+r.N)
		if err != nil {
			return err
		}
		if err := op(d, s); err != nil {
			return err
		}
	}
	return nil
}

func (o hostOps) copyRuns(dst, src tensor.Tensor, runs []rowCopy) error {
	if _, err := checkRuns("row copy", dst, src, runs); err != nil {
		return err
	}
	return eachRun(dst, src, runs, o.convert)
}

func (o hostOps) addRuns(dst, src tensor.Tensor, runs []rowCopy) error {
	if _, err := checkRuns("row sum", dst, src, runs); err != nil {
		return err
	}
	return eachRun(dst, src, runs, o.accumulate)
}

// copyRuns of a traced run: one helper launch moving the runs' rows.
func (o traceOps) copyRuns(dst, src tensor.Tensor, runs []rowCopy) error {
	if _, err := checkRuns("row copy", dst, src, runs); err != nil {
		return err
	}
	return o.t.Helper("copy-runs", 1, []tensor.Tensor{src}, []tensor.Tensor{dst})
}

func (o traceOps) addRuns(dst, src tensor.Tensor, runs []rowCopy) error {
	if _, err := checkRuns("row sum", dst, src, runs); err != nil {
		return err
	}
	return o.t.Helper("add-runs", 1, []tensor.Tensor{dst, src}, []tensor.Tensor{dst})
}

// runTables are the runs tables a run of a method uploaded, by the runs they hold (the
// plan's slices: the same runs come back every pass).
type runTables struct {
	mu sync.Mutex
	m  map[runsKey]tensor.Tensor
}

type runsKey struct {
	first *rowCopy
	n     int
}

// table is the runs table of runs on the device, uploaded on first use when d keeps
// tables (release says whether the caller frees it after its launch).
func (d deviceOps) table(runs []rowCopy) (t tensor.Tensor, release bool, err error) {
	key := runsKey{&runs[0], len(runs)}
	if d.tables != nil {
		d.tables.mu.Lock()
		defer d.tables.mu.Unlock()
		if t, ok := d.tables.m[key]; ok {
			return t, false, nil
		}
	}
	rs := make([][3]int, len(runs))
	for i, r := range runs {
		rs[i] = [3]int{r.To, r.From, r.N}
	}
	h := devops.RunsTable(rs)
	if t, err = d.p.Alloc(h.DType(), h.Shape()...); err != nil {
		return nil, false, err
	}
	// CopyIn waits for the stream: once per run of the method when tables are kept.
	if err := d.p.CopyIn(t, h); err != nil {
		d.p.Free(t)
		return nil, false, err
	}
	if d.tables == nil {
		return t, true, nil
	}
	if d.tables.m == nil {
		d.tables.m = map[runsKey]tensor.Tensor{}
	}
	d.tables.m[key] = t
	return t, false, nil
}

// dropTables frees the kept tables (after the work that reads them: Free is ordered on
// the stream).
func (d deviceOps) dropTables() {
	if d.tables == nil {
		return
	}
	d.tables.mu.Lock()
	defer d.tables.mu.Unlock()
	for k, t := range d.tables.m {
		d.p.Free(t)
		delete(d.tables.m, k)
	}
}

// batched runs launch(table, runs, total rows) as one launch, or each run through
// one when the batched kernels cannot run on this device (or rows are not whole 8-byte
// words, for a copy).
func (d deviceOps) batched(dst, src tensor.Tensor, runs []rowCopy, words bool, one func(d, s tensor.Tensor) error,
	launch func(table tensor.Tensor, n, total int) error) error {
	if len(runs) == 0 {
		return nil
	}
	if d.p.RunsReady() != nil || words && tensor.Numel(dst.Shape()[1:])*dst.DType().Size()%8 != 0 {
		return eachRun(dst, src, runs, one)
	}
	t, release, err := d.table(runs)
	if err != nil {
		return err
	}
	total := 0
	for _, r := range runs {
		total += r.N
	}
	err = launch(t, len(runs), total)
	if release {
		d.p.Free(t)
	}
	return err
}

func (d deviceOps) copyRuns(dst, src tensor.Tensor, runs []rowCopy) error {
	row, err := checkRuns("row copy", dst, src, runs)
	if err != nil {
		return err
	}
	if dst.DType() != src.DType() {
		return fmt.Errorf("cp: row copy from %s into %s", src.DType(), dst.DType())
	}
	return d.batched(dst, src, runs, true, d.convert, func(t tensor.Tensor, n, total int) error {
		return d.p.CopyRuns(dst, src, t, n, total, int64(row*dst.DType().Size()))
	})
}

func (d deviceOps) addRuns(dst, src tensor.Tensor, runs []rowCopy) error {
	row, err := checkRuns("row sum", dst, src, runs)
	if err != nil {
		return err
	}
	if dst.DType() != tensor.FP32 {
		return fmt.Errorf("cp: row sum into %s rows (fp32 is needed)", dst.DType())
	}
	return d.batched(dst, src, runs, false, d.accumulate, func(t tensor.Tensor, n, total int) error {
		return d.p.AddRuns(dst, src, t, n, total, int64(row))
	})
}
