package results

import (
	"path/filepath"
	"reflect"
	"testing"
)

// writePlanned writes rows rows to rank's file of run on n ranks, which records planned
// rows as its plan (negative: none, as an older writer's file), and closes it (as a
// sweep stopped by Ctrl-C or SIGTERM closes it).
func writePlanned(t *testing.T, dir, run string, rank, n, rows, planned int) string {
	t.Helper()
	w, err := CreatePlanned(dir, run, rank, n, planned)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < rows; i++ {
		if err := w.Write(Row{RunID: run, Rank: int64(rank), WorldSize: int64(n), Sample: int64(i),
			Mask: "causal", SeqLen: int64(256 * (i + 1)), FLOPs: float64(i + 1), Status: StatusOK,
			TFLOPs: Ptr(float64(i) / 10)}); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return w.Path()
}

// A sweep stopped before its end (Ctrl-C, SIGTERM from a batch system's time limit)
// closes its rank files as a whole one does; the plan each file records at its creation
// tells them apart: the merged file names the run with its counts (longca.incomplete),
// and LoadChecked says so of the merged file, of the folder's rank files and of a rank
// file given alone. Before, nothing in either file said the sweep was cut short.
func TestStoppedSweepIsIncomplete(t *testing.T) {
	dir := t.TempDir()
	writePlanned(t, dir, "whole", 0, 1, 3, 3)
	writePlanned(t, dir, "cut", 0, 2, 4, 4)
	cut1 := writePlanned(t, dir, "cut", 1, 2, 1, 4) // stopped after its first row

	f, err := Open(cut1)
	if err != nil {
		t.Fatal(err)
	}
	if p, ok := PlannedRows(f); !ok || p != 4 || f.Meta(MetaPlannedRows) != "4" || f.Truncated {
		t.Fatalf("rank file: plan %d %v (%s=%q), truncated %v; want 4, closed", p, ok, MetaPlannedRows, f.Meta(MetaPlannedRows), f.Truncated)
	}
	f.Release()

	want := []string{"run cut: 5 of 8 planned rows"}
	l, err := LoadChecked(dir) // the rank files (no merged file yet)
	if err != nil || !reflect.DeepEqual(l.Incomplete, want) {
		t.Fatalf("folder's rank files: incomplete %q, %v; want %q", l.Incomplete, err, want)
	}
	res, err := Merge(dir, MergeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(res.Incomplete, want) {
		t.Errorf("merge: incomplete %q, want %q", res.Incomplete, want)
	}
	m, err := Open(res.Files[0])
	if err != nil {
		t.Fatal(err)
	}
	if got := m.Meta(MetaIncomplete); got != want[0] {
		t.Errorf("merged file: %s = %q, want %q", MetaIncomplete, got, want[0])
	}
	if m.Meta(MetaPlannedRows) != "" {
		t.Errorf("merged file carries a rank file's %s", MetaPlannedRows)
	}
	m.Release()
	for _, p := range []string{dir, res.Files[0]} { // the folder's merged file, or the file
		if l, err := LoadChecked(p); err != nil || !reflect.DeepEqual(l.Incomplete, want) {
			t.Errorf("LoadChecked(%s): incomplete %q, %v; want %q", p, l.Incomplete, err, want)
		}
	}
	if l, err := LoadChecked(cut1); err != nil || !reflect.DeepEqual(l.Incomplete, []string{"run cut: 1 of 4 planned rows"}) {
		t.Errorf("the stopped rank file alone: incomplete %q, %v", l.Incomplete, err)
	}
	if l, err := LoadChecked(filepath.Join(dir, FileName("whole", 0, 1))); err != nil || len(l.Incomplete) != 0 {
		t.Errorf("the whole run's rank file alone: incomplete %q, %v", l.Incomplete, err)
	}
	if res, err := Merge(dir, MergeOptions{Runs: []string{"whole"}, Out: filepath.Join(dir, "whole.arrow")}); err != nil || len(res.Incomplete) != 0 {
		t.Errorf("merge of the whole run alone: incomplete %q, %v", res.Incomplete, err)
	}
}

// A run that measured every row it planned merges to what its files merged to before
// the plan was recorded: the same rows and the same metadata keys, nothing added to the
// merged file of a whole run (and so nothing for a notebook to mistake). Files without a
// plan (older writers) are of unknown plan, never called incomplete, whatever their rows.
func TestWholeAndOldRunsMergeAsBefore(t *testing.T) {
	type merged struct {
		rows []Row
		meta map[string]string
		res  MergeResult
	}
	mergeOf := func(planned int) merged {
		dir := t.TempDir()
		writePlanned(t, dir, "r", 0, 1, 5, planned)
		res, err := Merge(dir, MergeOptions{})
		if err != nil {
			t.Fatal(err)
		}
		rows, f, err := ReadRows(res.Files[0])
		if err != nil {
			t.Fatal(err)
		}
		md := f.Schema.Metadata()
		meta := map[string]string{}
		for i, k := range md.Keys() {
			meta[k] = md.Values()[i]
		}
		if l, err := LoadChecked(dir); err != nil || len(l.Incomplete) != 0 {
			t.Errorf("planned %d: LoadChecked: incomplete %q, %v", planned, l.Incomplete, err)
		}
		return merged{rows, meta, res}
	}
	old := mergeOf(-1)
	if _, ok := old.meta[MetaIncomplete]; ok || len(old.res.Incomplete) != 0 {
		t.Errorf("no plan: incomplete %q, metadata %v", old.res.Incomplete, old.meta)
	}
	for _, planned := range []int{5, 2} { // whole; more rows than planned (not incomplete)
		m := mergeOf(planned)
		if !reflect.DeepEqual(m.rows, old.rows) || len(m.res.Incomplete) != 0 {
			t.Errorf("planned %d: %d rows, incomplete %q; want the %d rows, none", planned, len(m.rows), m.res.Incomplete, len(old.rows))
		}
		for k := range m.meta {
			if _, ok := old.meta[k]; !ok {
				t.Errorf("planned %d: the merged file has %s = %q, which the same rows without a plan merge without", planned, k, m.meta[k])
			}
		}
		for _, k := range []string{MetaSchemaVersion, MetaRuns, MetaRows} {
			if m.meta[k] != old.meta[k] {
				t.Errorf("planned %d: %s = %q, without a plan %q", planned, k, m.meta[k], old.meta[k])
			}
		}
		if len(m.meta) != len(old.meta) {
			t.Errorf("planned %d: metadata %v, without a plan %v", planned, m.meta, old.meta)
		}
	}
	// An older writer's file cut short by a signal: closed, no plan, so unknown.
	dir := t.TempDir()
	path := writePlanned(t, dir, "old", 0, 1, 2, -1)
	for _, p := range []string{path, dir} {
		if l, err := LoadChecked(p); err != nil || len(l.Incomplete) != 0 || len(l.Rows) != 2 {
			t.Errorf("LoadChecked(%s) of a file without a plan: %d rows, incomplete %q, %v", p, len(l.Rows), l.Incomplete, err)
		}
	}
}

// A plan that is not a count (hand-written, another program's) is no plan.
func TestPlannedRowsOnlyCounts(t *testing.T) {
	for v, want := range map[string]bool{"0": true, "12": true, "": false, "x": false, "-3": false, "1e3": false,
		"99999999999999999999": false, "1099511627777": false} {
		md := map[string]string{}
		if v != "" {
			md[MetaPlannedRows] = v
		}
		if _, ok := PlannedRows(&File{Schema: Schema(md)}); ok != want {
			t.Errorf("%s = %q: a plan %v, want %v", MetaPlannedRows, v, ok, want)
		}
	}
}

// A rank file not closed (its run still writing, or killed) is left to the truncated line:
// "its sweep stopped before the end" would be false of a run still going (a merge made
// while a run writes, the fifteenth pass's F1).
func TestOpenRankFileIsNotCalledIncomplete(t *testing.T) {
	dir := t.TempDir()
	w, err := CreatePlanned(dir, "live", 0, 1, 5)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if err := w.Write(Row{RunID: "live", WorldSize: 1, Mask: "causal", SeqLen: 256, FLOPs: 1, Status: StatusOK, TFLOPs: Ptr(0.1)}); err != nil {
		t.Fatal(err)
	}
	l, err := LoadChecked(w.Path())
	if err != nil {
		t.Fatal(err)
	}
	if len(l.Incomplete) != 0 {
		t.Errorf("a rank file still being written: incomplete %q, want none", l.Incomplete)
	}
	res, err := Merge(dir, MergeOptions{AllowMissing: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Incomplete) != 0 || len(res.Truncated) != 1 {
		t.Errorf("merge of a run still writing: incomplete %q, truncated %q; want none and the file", res.Incomplete, res.Truncated)
	}
}
