package results

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/ipc"
)

// versionRows are rows rows of a run's rank, as longca version ver writes them (one
// column of each kind set, so that a test can see what a merge keeps of them).
func versionRows(run string, rank, size, rows int, ver string) []Row {
	out := make([]Row, rows)
	for i := range out {
		out[i] = Row{RunID: run, Rank: int64(rank), WorldSize: int64(size), Sample: int64(i),
			Mask: "causal", SeqLen: int64(512 * (i + 1)), FLOPs: float64(rank*100 + i), Status: StatusOK,
			TFLOPs: Ptr(float64(rank) + float64(i)/10), DeviceUUID: "GPU-" + run, SettleMs: Ptr(250.0),
			Warmups: 1, Iters: 3, Version: ver}
	}
	return out
}

// writeVersionFile writes a rank file as an older (or foreign) longca writes it: Row's
// columns without those in drop (a version before they were added), with the rank file's
// metadata and md over it (a schema version), one batch a row after an empty one, each
// row with its checksum over its own columns, or none where drop holds ChecksumColumn.
func writeVersionFile(t testing.TB, dir, run string, rank, size int, rows []Row, drop []string, md map[string]string, extra *arrow.Field) string {
	t.Helper()
	full := Schema(map[string]string{MetaRunID: run, MetaRank: strconv.Itoa(rank), MetaWorldSize: strconv.Itoa(size)})
	rec := Record(full, rows)
	defer rec.Release()
	var fields []arrow.Field
	var cols []arrow.Array
	for i, fd := range full.Fields() {
		if slices.Contains(drop, fd.Name) {
			continue
		}
		if extra != nil && fd.Name == ChecksumColumn { // a column this binary does not know, before the checksum
			fields = append(fields, *extra)
			a := missingColumn(extra.Type, len(rows))
			defer a.Release()
			cols = append(cols, a)
		}
		fields = append(fields, fd)
		cols = append(cols, rec.Column(i))
	}
	keys, vals := full.Metadata().Keys(), slices.Clone(full.Metadata().Values())
	for i, k := range keys {
		if v, ok := md[k]; ok {
			vals[i] = v
		}
	}
	fmd := arrow.NewMetadata(keys, vals)
	s := arrow.NewSchema(fields, &fmd)
	old := array.NewRecordBatch(s, cols, int64(len(rows)))
	defer old.Release()
	if !slices.Contains(drop, ChecksumColumn) {
		summed, err := withChecksums(old)
		if err != nil {
			t.Fatal(err)
		}
		defer summed.Release()
		old = summed
	}
	path := filepath.Join(dir, FileName(run, rank, size))
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	w := ipc.NewWriter(f, ipc.WithSchema(s))
	empty := old.NewSlice(0, 0)
	err = w.Write(empty)
	empty.Release()
	for i := int64(0); err == nil && i < old.NumRows(); i++ {
		one := old.NewSlice(i, i+1)
		err = w.Write(one)
		one.Release()
	}
	if err == nil {
		err = w.Close()
	}
	if err != nil {
		t.Fatal(err)
	}
	return path
}

// writeNewFile writes a rank file as this longca writes it.
func writeNewFile(t *testing.T, dir, run string, rank, size int, rows []Row) {
	t.Helper()
	w, err := Create(dir, run, rank, size)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rows {
		if err := w.Write(r); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
}

// columnOf is the named column of rec.
func columnOf(t *testing.T, rec arrow.RecordBatch, name string) arrow.Array {
	t.Helper()
	idx := rec.Schema().FieldIndices(name)
	if len(idx) != 1 {
		t.Fatalf("merged file has %d columns %s", len(idx), name)
	}
	return rec.Column(idx[0])
}

// TestMergeJoinsLongcaVersions: runs written by a longca before device_uuid (and other
// columns) existed and by this one, in one folder, merge into one file of the union of
// their columns, in this binary's order, whichever version's files come first and
// whichever are the more: the probe's finding, where the minority's run was skipped
// ("schemas disagree") with exit status 0. report's read of the folder keeps every run.
func TestMergeJoinsLongcaVersions(t *testing.T) {
	older := []string{"device_uuid", "settle_ms", "warmups"} // a string, a nullable and a non-nullable number
	for _, tc := range []struct {
		name      string
		old, new_ []string // run ids
	}{
		{"old runs first and more", []string{"a-old", "b-old"}, []string{"z-new"}},
		{"new run first, old more", []string{"x-old", "y-old"}, []string{"a-new"}},
		{"interleaved", []string{"b-old"}, []string{"a-new", "c-new"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			for _, id := range tc.old {
				for r := 0; r < 2; r++ {
					writeVersionFile(t, dir, id, r, 2, versionRows(id, r, 2, 3, "v-old"), older, nil, nil)
				}
			}
			for _, id := range tc.new_ {
				for r := 0; r < 2; r++ {
					writeNewFile(t, dir, id, r, 2, versionRows(id, r, 2, 3, "v-new"))
				}
			}
			runs := append(slices.Clone(tc.old), tc.new_...)
			slices.Sort(runs)
			res, err := Merge(dir, MergeOptions{CSV: true})
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(res.Runs, runs) || res.Rows != int64(6*len(runs)) || len(res.Skipped) != 0 || len(res.Missing) != 0 {
				t.Fatalf("merge: runs %v, %d rows, skipped %v, missing %v; want runs %v, %d rows", res.Runs, res.Rows, res.Skipped, res.Missing, runs, 6*len(runs))
			}
			f, err := Open(res.Files[0]) // (every row's checksum checked)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Release()
			if f.Unverified || len(f.Batches) != 1 {
				t.Fatalf("merged file: unverified %v, %d batches", f.Unverified, len(f.Batches))
			}
			var names []string
			for _, fd := range f.Schema.Fields() {
				names = append(names, fd.Name)
			}
			if !slices.Equal(names, Columns()) {
				t.Fatalf("merged columns %v, want this binary's %v", names, Columns())
			}
			if f.Meta(MetaSchemaVersion) != SchemaVersion || f.Meta(MetaRuns) != strings.Join(runs, ",") {
				t.Fatalf("merged metadata %v", f.Schema.Metadata())
			}
			rec := f.Batches[0]
			run := columnOf(t, rec, "run_id").(*array.String)
			uuid := columnOf(t, rec, "device_uuid").(*array.String)
			settle := columnOf(t, rec, "settle_ms").(*array.Float64)
			warm := columnOf(t, rec, "warmups").(*array.Int64)
			tf := columnOf(t, rec, "tflops").(*array.Float64)
			if fd := rec.Schema().Field(rec.Schema().FieldIndices("warmups")[0]); !fd.Nullable {
				t.Errorf("warmups, lacking in the old files and null there, is not nullable in the merged schema")
			}
			for i := 0; i < int(rec.NumRows()); i++ {
				id := run.Value(i)
				isOld := strings.HasSuffix(id, "-old")
				if i > 0 && id < run.Value(i-1) {
					t.Fatalf("row %d is of run %s after run %s: not in run order", i, id, run.Value(i-1))
				}
				switch {
				case isOld && (uuid.IsNull(i) || uuid.Value(i) != "" || !settle.IsNull(i) || !warm.IsNull(i)):
					t.Fatalf("old row %d (%s): device_uuid %q (null %v), settle_ms null %v, warmups null %v; want \"\", null, null", i, id, uuid.Value(i), uuid.IsNull(i), settle.IsNull(i), warm.IsNull(i))
				case !isOld && (uuid.Value(i) != "GPU-"+id || settle.Value(i) != 250 || warm.Value(i) != 1):
					t.Fatalf("new row %d (%s): device_uuid %q, settle_ms %v, warmups %v", i, id, uuid.Value(i), settle.Value(i), warm.Value(i))
				}
				if tf.IsNull(i) {
					t.Fatalf("row %d (%s) lost its tflops", i, id)
				}
			}
			csv, err := os.ReadFile(strings.TrimSuffix(res.Files[0], ".arrow") + ".csv")
			if err != nil || strings.Count(string(csv), "\n") != 1+6*len(runs) {
				t.Fatalf("csv: %v, %d lines", err, strings.Count(string(csv), "\n"))
			}

			// report reads the folder (rank files: merged.arrow is removed) with every run.
			os.Remove(res.Files[0])
			l, err := LoadChecked(dir)
			if err != nil || len(l.Rows) != 6*len(runs) || len(l.Skipped) != 0 || len(l.Missing) != 0 {
				t.Fatalf("load: %d rows, skipped %v, missing %v, %v", len(l.Rows), l.Skipped, l.Missing, err)
			}
			seen := map[string]int{}
			for _, r := range l.Rows {
				seen[r.RunID]++
			}
			for _, id := range runs {
				if seen[id] != 6 {
					t.Fatalf("load: rows per run %v", seen)
				}
			}

			// --run of one version's run and the other's.
			res, err = Merge(dir, MergeOptions{Runs: []string{tc.old[0], tc.new_[0]}, Out: filepath.Join(dir, "two.arrow")})
			if err != nil || res.Rows != 12 || len(res.Skipped) != 0 {
				t.Fatalf("merge --run %s --run %s: %+v, %v", tc.old[0], tc.new_[0], res, err)
			}
		})
	}
}

// TestMergeOldFilesAloneKeepTheirColumns: files that all lack a column merge as they are,
// without it (the union has only the columns some file has), as before.
func TestMergeOldFilesAloneKeepTheirColumns(t *testing.T) {
	dir := t.TempDir()
	writeVersionFile(t, dir, "o1", 0, 1, versionRows("o1", 0, 1, 2, "v-old"), []string{"device_uuid"}, nil, nil)
	writeVersionFile(t, dir, "o2", 0, 1, versionRows("o2", 0, 1, 2, "v-old"), []string{"device_uuid"}, nil, nil)
	res, err := Merge(dir, MergeOptions{})
	if err != nil || res.Rows != 4 {
		t.Fatalf("merge: %+v, %v", res, err)
	}
	f, err := Open(res.Files[0])
	if err != nil {
		t.Fatal(err)
	}
	defer f.Release()
	if len(f.Schema.FieldIndices("device_uuid")) != 0 || len(f.Schema.Fields()) != len(Columns())-1 {
		t.Fatalf("merged %d columns, device_uuid among them: %v", len(f.Schema.Fields()), f.Schema.FieldIndices("device_uuid"))
	}
}

// TestMergeJoinsUnverifiedAndUnknownColumns: a file written before row_checksum existed
// joins files with it (its rows get checksums, the file is named unverified), and a
// column this binary does not know (a newer longca's) is kept, after its own columns.
func TestMergeJoinsUnverifiedAndUnknownColumns(t *testing.T) {
	dir := t.TempDir()
	writeVersionFile(t, dir, "a", 0, 1, versionRows("a", 0, 1, 2, "v-old"), []string{ChecksumColumn, "device_uuid"}, nil, nil)
	writeNewFile(t, dir, "b", 0, 1, versionRows("b", 0, 1, 2, "v-mid"))
	future := arrow.Field{Name: "future_col", Type: arrow.PrimitiveTypes.Int64, Nullable: true}
	writeVersionFile(t, dir, "c", 0, 1, versionRows("c", 0, 1, 2, "v-future"), nil, nil, &future)
	res, err := Merge(dir, MergeOptions{})
	if err != nil || res.Rows != 6 || len(res.Unverified) != 1 || !strings.Contains(res.Unverified[0], FileName("a", 0, 1)) {
		t.Fatalf("merge: %+v, %v", res, err)
	}
	f, err := Open(res.Files[0])
	if err != nil {
		t.Fatal(err)
	}
	defer f.Release()
	fields := f.Schema.Fields()
	n := len(fields)
	if n != len(Columns())+1 || fields[n-2].Name != "future_col" || fields[n-1].Name != ChecksumColumn || fields[n-1].Nullable || f.Unverified {
		t.Fatalf("merged: %d columns ending %s, %s; unverified %v", n, fields[n-2].Name, fields[n-1].Name, f.Unverified)
	}
}

// TestMergeRefusesVersionConflicts: files that cannot be joined by name (another schema
// version; a column of one name and two types) are refused with one line naming both
// files, their longca versions and the fix, as a usage error (exit status 2), not as
// missing ranks (whose fix, --allow-missing, would drop a run); nothing is written, and
// report's read of the folder is refused alike.
func TestMergeRefusesVersionConflicts(t *testing.T) {
	for _, tc := range []struct {
		name  string
		write func(t *testing.T, dir string)
		why   string
		runs  []string // a --run pair that conflicts
	}{
		{"schema version", func(t *testing.T, dir string) {
			writeVersionFile(t, dir, "vtwo", 0, 1, versionRows("vtwo", 0, 1, 2, "v-two"), nil, map[string]string{MetaSchemaVersion: "2"}, nil)
		}, `schema version "1" in the first, "2" in the second`, []string{"vnew", "vtwo"}},
		{"column type", func(t *testing.T, dir string) {
			a := arrow.Field{Name: "future_col", Type: arrow.PrimitiveTypes.Int64, Nullable: true}
			b := arrow.Field{Name: "future_col", Type: arrow.BinaryTypes.String}
			writeVersionFile(t, dir, "vtwo", 0, 1, versionRows("vtwo", 0, 1, 2, "v-two"), nil, nil, &b)
			writeVersionFile(t, dir, "vthree", 0, 1, versionRows("vthree", 0, 1, 2, "v-three"), nil, nil, &a)
		}, "column future_col is", []string{"vtwo", "vthree"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			writeNewFile(t, dir, "vnew", 0, 1, versionRows("vnew", 0, 1, 2, "v-new"))
			writeNewFile(t, dir, "vnew2", 0, 1, versionRows("vnew2", 0, 1, 2, "v-new"))
			tc.write(t, dir)
			for name, err := range map[string]error{
				"merge":       func() error { _, err := Merge(dir, MergeOptions{}); return err }(),
				"merge --run": func() error { _, err := Merge(dir, MergeOptions{Runs: tc.runs}); return err }(),
				"load":        func() error { _, err := LoadChecked(dir); return err }(),
			} {
				msg := ""
				if err != nil {
					msg = err.Error()
				}
				if !errors.Is(err, ErrUsage) || errors.Is(err, ErrMissingRanks) || strings.Contains(msg, "allow-missing") ||
					!strings.Contains(msg, tc.why) || !strings.Contains(msg, "longca v-two") || !strings.Contains(msg, FileName("vtwo", 0, 1)) ||
					!strings.Contains(msg, "--run ID") || !strings.Contains(msg, "folders of their own") || strings.Contains(msg, "\n") {
					t.Errorf("%s: %v; want a usage error naming both files, their versions, %q and the fix", name, err, tc.why)
				}
				if !strings.Contains(msg, FileName("vnew", 0, 1)) && !strings.Contains(msg, FileName("vthree", 0, 1)) || !strings.Contains(msg, "longca v-new") && !strings.Contains(msg, "longca v-three") {
					t.Errorf("%s: %v: the other file and its version are not named", name, err)
				}
			}
			if _, err := os.Stat(filepath.Join(dir, "merged.arrow")); err == nil {
				t.Error("a refused merge wrote merged.arrow")
			}
			// Each version's runs alone merge.
			if res, err := Merge(dir, MergeOptions{Runs: []string{"vnew", "vnew2"}, Out: filepath.Join(dir, "new.arrow")}); err != nil || res.Rows != 4 {
				t.Errorf("merge --run vnew --run vnew2: %+v, %v", res, err)
			}
		})
	}
}

// TestMergeOfVersionsHoldsFewChunks: joining files of two versions keeps what Merge
// holds bounded as for one: a few chunks, not every file's batches, however the versions
// alternate; the merged rows keep their order.
func TestMergeOfVersionsHoldsFewChunks(t *testing.T) {
	dir := t.TempDir()
	const n = 600
	for i := 0; i < n; i++ {
		id := fmt.Sprintf("r%04d", i)
		if i%3 == 0 {
			writeNewFile(t, dir, id, 0, 1, versionRows(id, 0, 1, 1, "v-new"))
		} else {
			writeVersionFile(t, dir, id, 0, 1, versionRows(id, 0, 1, 1, "v-old"), []string{"device_uuid"}, nil, nil)
		}
	}
	rows := mergeHoldingFewChunks(t, dir, n)
	for i, r := range rows {
		want := ""
		if i%3 == 0 {
			want = "GPU-" + r.RunID
		}
		if r.RunID != fmt.Sprintf("r%04d", i) || r.DeviceUUID != want {
			t.Fatalf("row %d is of run %s with device_uuid %q, want r%04d and %q", i, r.RunID, r.DeviceUUID, i, want)
		}
	}
}

// TestDuplicateColumnIsNotResults: a file naming a column twice is no longca file (merge
// and report match columns by name).
func TestDuplicateColumnIsNotResults(t *testing.T) {
	dir := t.TempDir()
	dup := arrow.Field{Name: "mask", Type: arrow.BinaryTypes.String}
	p := writeVersionFile(t, dir, "d", 0, 1, versionRows("d", 0, 1, 1, "v"), nil, nil, &dup)
	if _, err := Open(p); !errors.Is(err, ErrNotResults) || !strings.Contains(err.Error(), "column mask appears twice") {
		t.Fatalf("Open: %v", err)
	}
}
