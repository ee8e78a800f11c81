package session

import (
	"bufio"
	"io"
	"os"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/longca/longca/results"
	"github.com/longca/longca/spmd"
)

// writeCalls is the number of write system calls this process has made (Linux's
// /proc/self/io), or -1 where it cannot be read.
func writeCalls() int {
	f, err := os.Open("/proc/self/io")
	if err != nil {
		return -1
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "syscw: "); ok {
			n, err := strconv.Atoi(v)
			if err != nil {
				return -1
			}
			return n
		}
	}
	return -1
}

// WriteRankRows writes rows in hand (simulate's) thousands at a time, not a write and an
// fsync a row (100,000 predicted rows took minutes without a word), and every row reads
// back as it was written, from the rank file and from the run's merge.
func TestWriteRankRowsManyRows(t *testing.T) {
	s := New("simulate", t.TempDir(), "sim-many", spmd.World{Size: 1, Host: "node07"}, "dev", nil, io.Discard, io.Discard)
	base := s.BaseRow(s.World)
	masks := []string{"full", "causal", "full_document_long", "causal_document_long"}
	methods := []string{"balanced", "loongtrain", "ring-allgather", "ring-p2p", "ulysses", "usp"}
	rows := make([]results.Row, 10000)
	for i := range rows {
		r := base
		r.Method, r.Mask, r.Pass = methods[i%len(methods)], masks[i/len(methods)%len(masks)], []string{"fwd", "bwd"}[i%2]
		r.Sample, r.Seed, r.SeqLen, r.HeadsQ, r.HeadsKV, r.HeadDim = int64(i), uint64(42+i), int64(8192<<(i%8)), 64, 8, 128
		r.Status, r.FLOPs = results.StatusPredicted, float64(i)*1e12
		r.MedianMs = results.Ptr(1 + float64(i%977)/3)
		r.TFLOPs = results.Ptr(r.FLOPs / *r.MedianMs / 1e9)
		if i%3 == 0 {
			r.Ulysses, r.Ring, r.ExposedCommShare = results.Ptr(int64(2)), results.Ptr(int64(4)), results.Ptr(float64(i%100)/100)
		}
		rows[i] = r
	}
	before := writeCalls()
	path, err := s.WriteRankRows(s.RunID, 0, 1, rows, len(rows))
	if err != nil {
		t.Fatal(err)
	}
	// a row at a time was a write call (and an fsync) a row or more: 10,000 and more
	if n := writeCalls() - before; before >= 0 && n > len(rows)/4 {
		t.Errorf("writing %d rows took %d write calls: a row at a time, not thousands", len(rows), n)
	}
	got, f, err := results.ReadRows(path)
	if err != nil {
		t.Fatal(err)
	}
	if f.Truncated || f.Meta(results.MetaRank) != "0" {
		t.Fatalf("%s: truncated %v (%s), rank %q", path, f.Truncated, f.Tail, f.Meta(results.MetaRank))
	}
	same := func(what string, got []results.Row) {
		t.Helper()
		if len(got) != len(rows) {
			t.Fatalf("%s: %d rows, wrote %d", what, len(got), len(rows))
		}
		for i := range rows {
			if !reflect.DeepEqual(got[i], rows[i]) {
				t.Fatalf("%s: row %d:\n got %+v\nwant %+v", what, i, got[i], rows[i])
			}
		}
	}
	same(path, got)
	res, err := s.MergeRun(results.MergedPath(s.Out, s.RunID), false)
	if err != nil {
		t.Fatal(err)
	}
	if res.Rows != int64(len(rows)) || len(res.Missing)+len(res.Truncated)+len(res.Skipped) > 0 {
		t.Fatalf("merge: %d rows, missing %v, truncated %v, skipped %v", res.Rows, res.Missing, res.Truncated, res.Skipped)
	}
	merged, err := results.Load(res.Files[0])
	if err != nil {
		t.Fatal(err)
	}
	same(res.Files[0], merged)
}
