package results

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"sort"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/ipc"
)

// File is the content of one results file (a rank's stream or a merged file).
type File struct {
	Path    string
	Schema  *arrow.Schema
	Batches []arrow.RecordBatch
	// Truncated is true for a stream without its end marker: its writer was killed or
	// crashed. Every row it finished is in Batches; a torn last batch is dropped.
	Truncated bool
	// Tail says why the stream stopped early, when it did with an error.
	Tail string
}

// eos is the IPC stream's end marker: continuation token and a zero length.
var eos = []byte{0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0}

// Open reads a results file: an Arrow IPC file (as Merge writes) or an Arrow IPC stream
// (as Writer writes), including one whose writer was killed mid-run.
func Open(path string) (*File, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("results: %w", err)
	}
	f := &File{Path: path}
	if bytes.HasPrefix(data, []byte("ARROW1")) {
		return f, f.readFile(data)
	}
	if len(data) == 0 {
		return nil, fmt.Errorf("results: %s is empty: its writer died before writing the schema", path)
	}
	r, err := ipc.NewReader(bytes.NewReader(data))
	if err != nil {
		return nil, fmt.Errorf("results: %s: %w", path, err)
	}
	defer r.Release()
	f.Schema = r.Schema()
	for r.Next() {
		rec := r.RecordBatch()
		rec.Retain()
		f.Batches = append(f.Batches, rec)
	}
	if err := r.Err(); err != nil {
		f.Truncated, f.Tail = true, err.Error()
	} else if !bytes.HasSuffix(data, eos) {
		f.Truncated, f.Tail = true, "no end-of-stream marker"
	}
	return f, nil
}

func (f *File) readFile(data []byte) error {
	r, err := ipc.NewFileReader(bytes.NewReader(data))
	if err != nil {
		return fmt.Errorf("results: %s: %w", f.Path, err)
	}
	defer r.Close()
	f.Schema = r.Schema()
	for i := 0; i < r.NumRecords(); i++ {
		rec, err := r.RecordBatch(i)
		if err != nil {
			f.Release()
			return fmt.Errorf("results: %s: batch %d: %w", f.Path, i, err)
		}
		rec.Retain()
		f.Batches = append(f.Batches, rec)
	}
	return nil
}

// NumRows counts the rows of every batch.
func (f *File) NumRows() int64 {
	var n int64
	for _, b := range f.Batches {
		n += b.NumRows()
	}
	return n
}

// Rows decodes every batch.
func (f *File) Rows() ([]Row, error) {
	var out []Row
	for _, b := range f.Batches {
		rows, err := Rows(b)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", f.Path, err)
		}
		out = append(out, rows...)
	}
	return out, nil
}

// Meta is the value of a schema metadata key ("" when absent).
func (f *File) Meta(key string) string {
	if f.Schema == nil {
		return ""
	}
	md := f.Schema.Metadata()
	if i := md.FindKey(key); i >= 0 {
		return md.Values()[i]
	}
	return ""
}

// Release frees the batches.
func (f *File) Release() {
	for _, b := range f.Batches {
		b.Release()
	}
	f.Batches = nil
}

// ReadRows opens a file and decodes its rows.
func ReadRows(path string) ([]Row, *File, error) {
	f, err := Open(path)
	if err != nil {
		return nil, nil, err
	}
	defer f.Release()
	rows, err := f.Rows()
	return rows, f, err
}

// Load reads the rows of a results file, or of a folder: its merged.arrow when there is
// one, else every rank file in it (missing ranks are not an error here).
func Load(path string) ([]Row, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("results: %w", err)
	}
	if !st.IsDir() {
		rows, _, err := ReadRows(path)
		return rows, err
	}
	merged := filepath.Join(path, "merged.arrow")
	if _, err := os.Stat(merged); err == nil {
		rows, _, err := ReadRows(merged)
		return rows, err
	}
	runs, err := Scan(path)
	if err != nil {
		return nil, err
	}
	ids := make([]string, 0, len(runs))
	for id := range runs {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	var out []Row
	for _, id := range ids {
		for r := 0; r < runs[id].Size; r++ {
			p, ok := runs[id].Paths[r]
			if !ok {
				continue
			}
			rows, _, err := ReadRows(p)
			if err != nil {
				return nil, err
			}
			out = append(out, rows...)
		}
	}
	if len(out) == 0 && len(ids) == 0 {
		return nil, fmt.Errorf("results: no results files in %s", path)
	}
	return out, nil
}
