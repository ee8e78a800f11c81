package results

import (
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// nullRows writes a rank file (run dmg, rank 0 of 1) of batches of rows, each batch one
// WriteAll of its rows, where block_size is null at the rows blockNull marks and 128
// elsewhere. It returns the file's bytes and where each batch starts.
func nullRows(t *testing.T, blockNull ...[]bool) ([]byte, []int) {
	t.Helper()
	var batches [][]Row
	for b, nulls := range blockNull {
		var rows []Row
		for i, null := range nulls {
			r := Row{RunID: "dmg", WorldSize: 1, Bench: "kernel", Status: StatusOK, Sample: int64(10*b + i)}
			if !null {
				r.BlockSize = Ptr(int64(128))
			}
			rows = append(rows, r)
		}
		batches = append(batches, rows)
	}
	data, starts := writeBatchesFile(t, batches, false, true)
	return data, starts[:len(blockNull)]
}

// nullCountAt is where in data the stored null count of column col of the batch that
// starts at byte start lies (its field node's second word).
func nullCountAt(t *testing.T, data []byte, start int, col string) int {
	t.Helper()
	f, err := Decode("t.arrow", data)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Release()
	ci := f.Schema.FieldIndices(col)[0]
	m, _, _, err := messageAt(data, start)
	if err != nil {
		t.Fatal(err)
	}
	b, ok := parseBatch(data, m, len(f.Schema.Fields()))
	if !ok {
		t.Fatalf("no batch of rows at byte %d", start)
	}
	return m.start + 8 + b.nodes + 16*ci + 8
}

// A batch whose stored null count is not what its validity bitmap marks is refused as
// damaged on both read paths, and so skipped by merge. Each file's rows pass their
// checksums (they cover whether a value is null, which the bitmap says): the count alone
// is damaged. Before, both paths read them as good, and a merge then wrote block_size's
// value as a null (arrow-go writes a column whose count is its length with every bit
// cleared: a merged file its own reader refuses), or panicked (a negative count is
// arrow-go's "unknown", counted from a bitmap that a column without nulls lacks).
func TestNullCountNotItsBitmapIsRefused(t *testing.T) {
	set := func(data []byte, at int, v int64) { binary.LittleEndian.PutUint64(data[at:], uint64(v)) }
	cases := []struct {
		name   string
		nulls  [][]bool
		damage func(t *testing.T, data []byte, starts []int)
	}{
		{"a count raised to the batch's rows", [][]bool{{true, false}}, func(t *testing.T, data []byte, starts []int) {
			set(data, nullCountAt(t, data, starts[0], "block_size"), 2)
		}},
		{"a negative count in a column without nulls", [][]bool{{true, false}}, func(t *testing.T, data []byte, starts []int) {
			set(data, nullCountAt(t, data, starts[0], "sample"), -1)
		}},
		{"a negative count beside a bitmap", [][]bool{{true, false}}, func(t *testing.T, data []byte, starts []int) {
			set(data, nullCountAt(t, data, starts[0], "block_size"), -1)
		}},
		// (the coalescer joins both batches: their counts' sum is the joined bitmap's)
		{"counts that cancel across batches", [][]bool{{true, false}, {true, true}}, func(t *testing.T, data []byte, starts []int) {
			a, b := nullCountAt(t, data, starts[0], "block_size"), nullCountAt(t, data, starts[1], "block_size")
			set(data, a, 2)
			set(data, b, 1)
		}},
	}
	for _, c := range cases {
		data, starts := nullRows(t, c.nulls...)
		for _, coalesce := range []bool{true, false} {
			coalesceBatches = coalesce
			rows, _, err := decodeRows(data)
			coalesceBatches = true
			if err != nil {
				t.Fatalf("%s: the file as written does not read (coalescing %v): %v", c.name, coalesce, err)
			}
			if len(rows) == 0 || rows[0].BlockSize != nil {
				t.Fatalf("%s: as written, %d rows, the first's block_size %v; want it null", c.name, len(rows), rows[0].BlockSize)
			}
		}
		c.damage(t, data, starts)
		for _, coalesce := range []bool{true, false} {
			coalesceBatches = coalesce
			rows, _, err := decodeRows(data)
			coalesceBatches = true
			if !errors.Is(err, ErrDamaged) || !strings.Contains(err.Error(), "null count") {
				t.Errorf("%s, coalescing %v: %d rows, err %v; want the batch refused as damaged for its null count", c.name, coalesce, len(rows), err)
			}
		}
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, FileName("dmg", 0, 1)), data, 0o644); err != nil {
			t.Fatal(err)
		}
		if res, err := Merge(dir, MergeOptions{}); err == nil || !strings.Contains(err.Error(), "null count") {
			t.Errorf("%s: merge wrote %v (err %v); want the rank file skipped as damaged for its null count", c.name, res.Files, err)
		}
	}
}
