package results

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// writeRanks writes rows rows for each listed rank of a world of size n.
func writeRanks(t *testing.T, dir, run string, n, rows int, ranks ...int) {
	t.Helper()
	for _, r := range ranks {
		w, err := Create(dir, run, r, n)
		if err != nil {
			t.Fatal(err)
		}
		for i := 0; i < rows; i++ {
			if err := w.Write(Row{RunID: run, Rank: int64(r), WorldSize: int64(n), Sample: int64(i),
				Mask: "causal", SeqLen: int64(1024 * (i + 1)), FLOPs: float64(r*100 + i), Status: StatusOK,
				TFLOPs: Ptr(float64(r) + float64(i)/10)}); err != nil {
				t.Fatal(err)
			}
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

func TestMergeMissingRankIsNamed(t *testing.T) {
	dir := t.TempDir()
	writeRanks(t, dir, "runA", 4, 3, 0, 1, 3)
	_, err := Merge(dir, MergeOptions{})
	if err == nil {
		t.Fatal("merge with rank 2 of 4 missing succeeded")
	}
	if !strings.Contains(err.Error(), "run runA: rank 2 of 4 missing") {
		t.Fatalf("error does not name rank 2 of runA: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "merged.arrow")); err == nil {
		t.Fatal("a failed merge wrote its output")
	}

	// Two missing ranks, and a complete second run: only runA's are named missing, and
	// the runs are listed with how to merge one.
	dir2 := t.TempDir()
	writeRanks(t, dir2, "runA", 4, 1, 1, 3)
	writeRanks(t, dir2, "runB", 2, 1, 0, 1)
	_, err = Merge(dir2, MergeOptions{})
	if err == nil || !strings.Contains(err.Error(), "run runA: ranks 0, 2 of 4 missing") || strings.Contains(err.Error(), "run runB: rank") || !strings.Contains(err.Error(), "holds runs runA, runB: merge one with --run") {
		t.Fatalf("error: %v", err)
	}

	res, err := Merge(dir, MergeOptions{AllowMissing: true})
	if err != nil {
		t.Fatal(err)
	}
	f, err := Open(res.Files[0])
	if err != nil {
		t.Fatal(err)
	}
	defer f.Release()
	if f.NumRows() != 9 || f.Meta(MetaAllowMissing) != "true" || !strings.Contains(f.Meta(MetaMissing), "rank 2 of 4") {
		t.Fatalf("allow-missing merge: %d rows, metadata %v", f.NumRows(), f.Schema.Metadata())
	}
}

func TestMergeAllRanksReadBackWithArrow(t *testing.T) {
	dir := t.TempDir()
	writeRanks(t, dir, "runA", 4, 3, 3, 1, 0, 2)
	writeRanks(t, dir, "runB", 1, 2, 0)
	out := filepath.Join(t.TempDir(), "all.arrow")
	res, err := Merge(dir, MergeOptions{Out: out, Parquet: true, CSV: true})
	if err != nil {
		t.Fatal(err)
	}
	if res.Rows != 14 || len(res.Runs) != 2 || len(res.Files) != 3 || len(res.Missing) != 0 {
		t.Fatalf("result %+v", res)
	}

	// Read with arrow-go's own file reader, not ours.
	data, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	r, err := ipc.NewFileReader(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if r.NumRecords() != 1 {
		t.Fatalf("%d batches, want one", r.NumRecords())
	}
	rec, err := r.RecordBatch(0)
	if err != nil {
		t.Fatal(err)
	}
	if rec.NumRows() != 14 || int(rec.NumCols()) != len(Columns()) {
		t.Fatalf("merged is %dx%d", rec.NumRows(), rec.NumCols())
	}
	col := func(name string) arrow.Array { return rec.Column(rec.Schema().FieldIndices(name)[0]) }
	runs, ranks, flops := col("run_id").(*array.String), col("rank").(*array.Int64), col("flops").(*array.Float64)
	tf, med := col("tflops").(*array.Float64), col("median_ms")
	seen := map[string]int{}
	for i := 0; i < 14; i++ {
		key := runs.Value(i) + "/" + string(rune('0'+ranks.Value(i)))
		sample := seen[key]
		seen[key]++
		if flops.Value(i) != float64(ranks.Value(i)*100+int64(sample)) {
			t.Fatalf("row %d (%s sample %d): flops %v", i, key, sample, flops.Value(i))
		}
		if tf.Value(i) != float64(ranks.Value(i))+float64(sample)/10 || !med.IsNull(i) {
			t.Fatalf("row %d: tflops %v, median null %v", i, tf.Value(i), med.IsNull(i))
		}
	}
	if len(seen) != 5 || seen["runA/2"] != 3 || seen["runB/0"] != 2 {
		t.Fatalf("rows per rank %v", seen)
	}
	if v := rec.Schema().Metadata().Values()[rec.Schema().Metadata().FindKey(MetaRuns)]; v != "runA,runB" {
		t.Fatalf("runs metadata %q", v)
	}

	csv, err := os.ReadFile(strings.TrimSuffix(out, ".arrow") + ".csv")
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(csv)), "\n")
	if len(lines) != 15 || !strings.HasPrefix(lines[0], "run_id,time,host,rank") {
		t.Fatalf("csv has %d lines, header %q", len(lines), lines[0])
	}
	if st, err := os.Stat(strings.TrimSuffix(out, ".arrow") + ".parquet"); err != nil || st.Size() < 100 {
		t.Fatalf("parquet: %v", err)
	}
}

// TestMergeJoinsAFileLackingAColumn: a rank file of another longca version, one column
// fewer, is merged with its run's other files by column name (it was skipped, and its
// rank missing: "schemas disagree"); the merged file has the column.
func TestMergeJoinsAFileLackingAColumn(t *testing.T) {
	dir := t.TempDir()
	writeRanks(t, dir, "runA", 3, 1, 0, 2)
	s := Schema(map[string]string{MetaRunID: "runA", MetaRank: "1", MetaWorldSize: "3"})
	f, err := os.Create(filepath.Join(dir, FileName("runA", 1, 3)))
	if err != nil {
		t.Fatal(err)
	}
	var fields []arrow.Field
	for _, fd := range s.Fields() {
		if fd.Name != "command" {
			fields = append(fields, fd)
		}
	}
	other := arrow.NewSchema(fields, ptrMeta(s.Metadata()))
	w := ipc.NewWriter(f, ipc.WithSchema(other))
	b := array.NewRecordBuilder(memory.DefaultAllocator, other)
	rec := b.NewRecordBatch()
	if err := w.Write(rec); err != nil {
		t.Fatal(err)
	}
	w.Close()
	f.Close()
	res, err := Merge(dir, MergeOptions{})
	if err != nil || res.Rows != 2 || len(res.Skipped) != 0 || len(res.Missing) != 0 {
		t.Fatalf("merge: %+v, %v", res, err)
	}
	merged, err := Open(res.Files[0])
	if err != nil {
		t.Fatal(err)
	}
	defer merged.Release()
	if len(merged.Schema.FieldIndices("command")) != 1 {
		t.Fatalf("merged columns lack command: %v", merged.Schema)
	}
}

func ptrMeta(m arrow.Metadata) *arrow.Metadata { return &m }
