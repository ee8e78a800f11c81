package results

import (
	"math/rand/v2"
	"reflect"
	"testing"
)

// writeAllRows makes n random rows of run "wa", rank 0 of 1.
func writeAllRows(n int) []Row {
	rng := rand.New(rand.NewPCG(11, 12))
	rows := make([]Row, n)
	for i := range rows {
		rows[i] = randomRow(rng, i)
		rows[i].RunID, rows[i].Rank, rows[i].WorldSize = "wa", 0, 1
	}
	return rows
}

// WriteAll of 10,000 rows fsyncs once per syncRows rows, not once a row (100,000 rows
// took 5 minutes a row at a time), writes a batch per writeRows rows, and every row reads
// back as it was written; a closed writer refuses more.
func TestWriteAllSyncsInChunks(t *testing.T) {
	rows := writeAllRows(10000)
	w, err := Create(t.TempDir(), "wa", 0, 1)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.WriteAll(nil); err != nil {
		t.Fatal(err)
	}
	if err := w.WriteAll(rows[:1]); err != nil {
		t.Fatal(err)
	}
	if err := w.WriteAll(rows[1:]); err != nil {
		t.Fatal(err)
	}
	// Create's empty batch, the one row, then 9999 rows in chunks of syncRows
	if want := 1 + 1 + (len(rows)-1+syncRows-1)/syncRows; w.syncs != want || w.Len() != len(rows) {
		t.Fatalf("%d fsyncs and %d rows, want %d and %d", w.syncs, w.Len(), want, len(rows))
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if err := w.WriteAll(rows[:1]); err == nil {
		t.Fatal("a closed writer took rows")
	}
	f, err := Open(w.Path())
	if err != nil {
		t.Fatal(err)
	}
	defer f.Release()
	if want := 1 + 1 + (len(rows)-1+writeRows-1)/writeRows; f.Truncated || f.read != want {
		t.Fatalf("read %d batches (truncated %v %s), want the empty one, the one row's and one a writeRows rows (syncRows a multiple of it), %d", f.read, f.Truncated, f.Tail, want)
	}
	got, err := f.Rows()
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(rows) {
		t.Fatalf("read back %d rows, wrote %d", len(got), len(rows))
	}
	for i := range rows {
		if !reflect.DeepEqual(got[i], rows[i]) {
			t.Fatalf("row %d:\n got %+v\nwant %+v", i, got[i], rows[i])
		}
	}
}
