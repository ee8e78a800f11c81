package results

import (
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"
)

// randomRow fills every column, leaving each nullable one nil with probability 1/3.
func randomRow(rng *rand.Rand, i int) Row {
	opt := func() bool { return rng.IntN(3) != 0 }
	r := Row{
		RunID: "run-x", Time: time.UnixMicro(rng.Int64N(1 << 50)).UTC(), Host: "node07",
		Rank: int64(rng.IntN(8)), WorldSize: 8, LocalRank: int64(rng.IntN(8)), Launcher: "srun",
		Device: "NVIDIA H200", Backend: "cuda", Bench: "kernel", Kernel: "ref",
		Mask: "causal_document", MaskParams: `{"dist":"pile"}`, Seed: rng.Uint64(), Sample: int64(i),
		SeqLen: int64(rng.IntN(1 << 20)), SeqLenPerRank: 8192, Batch: 1, HeadsQ: 64, HeadsKV: 8, HeadDim: 128,
		DType: "bf16", Pass: "fwd", MaskArea: rng.Int64N(1 << 40), FLOPs: rng.Float64() * 1e15,
		Warmups: 5, Iters: 15, CheckWorst: "dq", Status: StatusOK, Reason: "", Version: "dev", Command: "longca kernel",
	}
	if opt() {
		r.Ulysses, r.Ring, r.Windows, r.InnerDim = Ptr(int64(2)), Ptr(int64(4)), Ptr(int64(1)), "ulysses"
	}
	if opt() {
		r.BlockSize, r.KeptRatio = Ptr(int64(128)), Ptr(rng.Float64())
	}
	if opt() {
		r.SetTimes(time.Duration(rng.IntN(1e9)+1), time.Duration(rng.IntN(1e9)), time.Duration(rng.IntN(1e9)), time.Duration(rng.IntN(1e9)))
	} else {
		r.Status, r.Reason = StatusOOM, "out of memory"
	}
	if opt() {
		r.SetCheck(CheckFigure{Name: "out", Err: rng.Float64(), NaiveErr: rng.Float64(), Tol: rng.Float64(), Pass: rng.IntN(2) == 0, SeqLen: 2048, HQ: 8, HKV: 1})
	}
	if opt() {
		r.PeakMemBytes, r.CommBytes, r.PadTokens = Ptr(rng.Int64()), Ptr(rng.Int64N(1<<40)), Ptr(int64(rng.IntN(100)))
	}
	return r
}

func TestRoundTripEveryColumn(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	rows := make([]Row, 50)
	for i := range rows {
		rows[i] = randomRow(rng, i)
	}
	rec := Record(Schema(nil), rows)
	defer rec.Release()
	if int(rec.NumCols()) != len(Columns()) || rec.NumRows() != 50 {
		t.Fatalf("record is %dx%d, want 50x%d", rec.NumRows(), rec.NumCols(), len(Columns()))
	}
	got, err := Rows(rec)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, rows) {
		for i := range rows {
			if !reflect.DeepEqual(got[i], rows[i]) {
				t.Fatalf("row %d:\n got %+v\nwant %+v", i, got[i], rows[i])
			}
		}
	}
}

func TestNonOKRowHasNulls(t *testing.T) {
	r := Row{RunID: "r", Status: StatusUnsupported, Reason: "head dim 96", FLOPs: 1e12}
	rec := Record(Schema(nil), []Row{r})
	defer rec.Release()
	for _, name := range []string{"median_ms", "min_ms", "max_ms", "mean_ms", "tflops", "bandwidth_gbs", "peak_mem_bytes", "check_err", "block_size"} {
		i := rec.Schema().FieldIndices(name)
		if len(i) != 1 {
			t.Fatalf("no column %s", name)
		}
		if !rec.Column(i[0]).IsNull(0) {
			t.Errorf("column %s of an unsupported row is not null", name)
		}
		if !rec.Schema().Field(i[0]).Nullable {
			t.Errorf("column %s is not nullable", name)
		}
	}
}

func TestSetTimesRates(t *testing.T) {
	r := Row{FLOPs: 3e12, CommBytes: Ptr(int64(2e9))}
	r.SetTimes(2*time.Second, time.Second, 3*time.Second, 2*time.Second)
	if *r.TFLOPs != 1.5 || *r.BandwidthGBs != 1 || *r.MedianMs != 2000 || *r.MinMs != 1000 {
		t.Fatalf("tflops %v GB/s %v median %v min %v", *r.TFLOPs, *r.BandwidthGBs, *r.MedianMs, *r.MinMs)
	}
}

func TestWriterReadBackClosed(t *testing.T) {
	dir := t.TempDir()
	w, err := Create(dir, "r1", 0, 1)
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(3, 4))
	var want []Row
	for i := 0; i < 7; i++ {
		r := randomRow(rng, i)
		want = append(want, r)
		if err := w.Write(r); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := Create(dir, "r1", 0, 1); err == nil {
		t.Fatal("a second writer of the same run and rank was allowed")
	}
	got, f, err := ReadRows(filepath.Join(dir, "r1.rank-0-of-1.arrow"))
	if err != nil {
		t.Fatal(err)
	}
	if f.Truncated {
		t.Errorf("closed file reads as truncated: %s", f.Tail)
	}
	if f.Meta(MetaSchemaVersion) != SchemaVersion || f.Meta(MetaRunID) != "r1" {
		t.Errorf("metadata %v", f.Schema.Metadata())
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("read back %d rows different from the %d written", len(got), len(want))
	}
}

func TestParseFileName(t *testing.T) {
	for _, c := range []struct {
		name       string
		id         string
		rank, size int
		ok         bool
	}{
		{"kernel-1.rank-0-of-1.arrow", "kernel-1", 0, 1, true},
		{"a.b.rank-12-of-64.arrow", "a.b", 12, 64, true},
		{"x.rank-4-of-4.arrow", "", 0, 0, false},
		{"merged.arrow", "", 0, 0, false},
		{"x.rank-1-of-2.parquet", "", 0, 0, false},
	} {
		id, r, n, ok := ParseFileName(c.name)
		if id != c.id || r != c.rank || n != c.size || ok != c.ok {
			t.Errorf("%s: got %q %d %d %v", c.name, id, r, n, ok)
		}
		if ok && FileName(id, r, n) != c.name {
			t.Errorf("%s does not round-trip", c.name)
		}
	}
}

// TestTornStreamKeepsWholeRows cuts a rank file at every few bytes, as a kill mid-write
// would, and checks that exactly the rows wholly on disk read back.
func TestTornStreamKeepsWholeRows(t *testing.T) {
	dir := t.TempDir()
	w, err := Create(dir, "torn", 0, 1)
	if err != nil {
		t.Fatal(err)
	}
	size := func() int64 {
		st, err := os.Stat(w.Path())
		if err != nil {
			t.Fatal(err)
		}
		return st.Size()
	}
	ends := []int64{size()} // ends[i]: file size with i rows
	rng := rand.New(rand.NewPCG(5, 6))
	for i := 0; i < 4; i++ {
		if err := w.Write(randomRow(rng, i)); err != nil {
			t.Fatal(err)
		}
		ends = append(ends, size())
	}
	full, err := os.ReadFile(w.Path())
	if err != nil {
		t.Fatal(err)
	}
	w.Close()
	cut := filepath.Join(dir, "cut.arrow")
	for n := ends[0]; n <= ends[len(ends)-1]; n += 5 {
		if err := os.WriteFile(cut, full[:n], 0o644); err != nil {
			t.Fatal(err)
		}
		want := 0
		for i, e := range ends {
			if e <= n {
				want = i
			}
		}
		rows, f, err := ReadRows(cut)
		if err != nil {
			t.Fatalf("cut at %d of %d bytes: %v", n, len(full), err)
		}
		if len(rows) != want || !f.Truncated {
			t.Fatalf("cut at %d bytes: %d rows (truncated %v), want %d", n, len(rows), f.Truncated, want)
		}
		for i, r := range rows {
			if r.Sample != int64(i) {
				t.Fatalf("cut at %d: row %d is sample %d", n, i, r.Sample)
			}
		}
	}
}
