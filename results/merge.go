package results

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// MergeOptions controls Merge.
type MergeOptions struct {
	// Out is the merged Arrow IPC file; default <dir>/merged.arrow.
	Out string
	// Parquet and CSV also write Out with .parquet and .csv extensions.
	Parquet, CSV bool
	// AllowMissing merges even when ranks are missing, and records which in the
	// output's schema metadata (MetaAllowMissing, MetaMissing).
	AllowMissing bool
	// Runs restricts the merge to these run ids; empty means every run in dir.
	Runs []string
}

// MergeResult says what Merge did.
type MergeResult struct {
	// Files are the files written: the Arrow file first, then Parquet and CSV.
	Files []string
	// Runs are the merged run ids, sorted.
	Runs []string
	// Rows is the number of rows merged.
	Rows int64
	// Missing names missing ranks ("run r1: rank 2 of 4"), merged anyway.
	Missing []string
	// Truncated names rank files whose writer did not close them.
	Truncated []string
}

// RunFiles are the rank files of one run id.
type RunFiles struct {
	// Size is the world size in the file names.
	Size int
	// Paths maps each present rank to its file.
	Paths map[int]string
}

// Scan finds every rank file in dir, grouped by run id. Two files of one run that
// disagree on the world size are an error.
func Scan(dir string) (map[string]*RunFiles, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("merge: %w", err)
	}
	runs := map[string]*RunFiles{}
	for _, e := range ents {
		id, rank, size, ok := ParseFileName(e.Name())
		if !ok || e.IsDir() {
			continue
		}
		rf := runs[id]
		if rf == nil {
			rf = &RunFiles{Size: size, Paths: map[int]string{}}
			runs[id] = rf
		}
		if rf.Size != size {
			return nil, fmt.Errorf("merge: run %s has files for world sizes %d and %d", id, rf.Size, size)
		}
		rf.Paths[rank] = filepath.Join(dir, e.Name())
	}
	return runs, nil
}

// missingRanks lists the ranks 0..size-1 without a file.
func (rf *RunFiles) missingRanks() []int {
	var out []int
	for r := 0; r < rf.Size; r++ {
		if _, ok := rf.Paths[r]; !ok {
			out = append(out, r)
		}
	}
	return out
}

func joinInts(xs []int) string {
	s := make([]string, len(xs))
	for i, x := range xs {
		s[i] = strconv.Itoa(x)
	}
	return strings.Join(s, ", ")
}

// Merge joins every rank's file of each run in dir into one Arrow IPC file (and Parquet
// and CSV on request). Every rank 0..n-1 of each run must be present, unless
// AllowMissing, and all files must have the same columns.
func Merge(dir string, opts MergeOptions) (MergeResult, error) {
	var res MergeResult
	runs, err := Scan(dir)
	if err != nil {
		return res, err
	}
	if len(opts.Runs) > 0 {
		for _, id := range opts.Runs {
			if runs[id] == nil {
				return res, fmt.Errorf("merge: no files of run %s in %s", id, dir)
			}
		}
		keep := map[string]*RunFiles{}
		for _, id := range opts.Runs {
			keep[id] = runs[id]
		}
		runs = keep
	}
	if len(runs) == 0 {
		return res, fmt.Errorf("merge: no rank files (*.rank-R-of-N.arrow) in %s", dir)
	}
	for id := range runs {
		res.Runs = append(res.Runs, id)
	}
	sort.Strings(res.Runs)
	var problems []string
	for _, id := range res.Runs {
		rf := runs[id]
		if miss := rf.missingRanks(); len(miss) > 0 {
			word := "rank"
			if len(miss) > 1 {
				word = "ranks"
			}
			problems = append(problems, fmt.Sprintf("run %s: %s %s of %d missing", id, word, joinInts(miss), rf.Size))
		}
	}
	if len(problems) > 0 && !opts.AllowMissing {
		return res, fmt.Errorf("merge: %s (pass --allow-missing to merge anyway)", strings.Join(problems, "; "))
	}
	res.Missing = problems

	var files []*File
	defer func() {
		for _, f := range files {
			f.Release()
		}
	}()
	var ref *File
	for _, id := range res.Runs {
		rf := runs[id]
		for r := 0; r < rf.Size; r++ {
			p, ok := rf.Paths[r]
			if !ok {
				continue
			}
			f, err := Open(p)
			if err != nil {
				return res, fmt.Errorf("merge: %w", err)
			}
			files = append(files, f)
			if f.Truncated {
				res.Truncated = append(res.Truncated, fmt.Sprintf("run %s: rank %d of %d", id, r, rf.Size))
			}
			if ref == nil {
				ref = f
				continue
			}
			if err := sameColumns(ref, f); err != nil {
				return res, fmt.Errorf("merge: %w", err)
			}
		}
	}
	md := map[string]string{MetaRuns: strings.Join(res.Runs, ",")}
	if v := ref.Meta(MetaSchemaVersion); v != "" {
		md[MetaSchemaVersion] = v
	}
	if len(res.Missing) > 0 {
		md[MetaAllowMissing] = "true"
		md[MetaMissing] = strings.Join(res.Missing, "; ")
	}
	if len(res.Truncated) > 0 {
		md[MetaTruncated] = strings.Join(res.Truncated, "; ")
	}
	rec, err := concat(ref.Schema, md, files)
	if err != nil {
		return res, err
	}
	defer rec.Release()
	res.Rows = rec.NumRows()

	out := opts.Out
	if out == "" {
		out = filepath.Join(dir, "merged.arrow")
	}
	if err := WriteArrowFile(out, rec); err != nil {
		return res, err
	}
	res.Files = append(res.Files, out)
	base := strings.TrimSuffix(out, filepath.Ext(out))
	if opts.Parquet {
		if err := WriteParquet(base+".parquet", rec); err != nil {
			return res, err
		}
		res.Files = append(res.Files, base+".parquet")
	}
	if opts.CSV {
		if err := WriteCSV(base+".csv", rec); err != nil {
			return res, err
		}
		res.Files = append(res.Files, base+".csv")
	}
	return res, nil
}

// sameColumns checks that two files have the same fields and schema version.
func sameColumns(a, b *File) error {
	if va, vb := a.Meta(MetaSchemaVersion), b.Meta(MetaSchemaVersion); va != vb {
		return fmt.Errorf("schema version %q of %s differs from %q of %s", vb, b.Path, va, a.Path)
	}
	fa, fb := a.Schema.Fields(), b.Schema.Fields()
	for i := 0; i < max(len(fa), len(fb)); i++ {
		switch {
		case i >= len(fa):
			return fmt.Errorf("schemas disagree: %s has extra column %s that %s lacks", b.Path, fb[i].Name, a.Path)
		case i >= len(fb):
			return fmt.Errorf("schemas disagree: %s lacks column %s of %s", b.Path, fa[i].Name, a.Path)
		case !fa[i].Equal(fb[i]):
			return fmt.Errorf("schemas disagree: column %d is %s %s in %s but %s %s in %s",
				i, fa[i].Name, fa[i].Type, a.Path, fb[i].Name, fb[i].Type, b.Path)
		}
	}
	return nil
}

// concat joins the batches of files into one record batch with schema s's fields and
// metadata md.
func concat(s *arrow.Schema, md map[string]string, files []*File) (arrow.RecordBatch, error) {
	keys := make([]string, 0, len(md))
	for k := range md {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	vals := make([]string, len(keys))
	for i, k := range keys {
		vals[i] = md[k]
	}
	meta := arrow.NewMetadata(keys, vals)
	schema := arrow.NewSchema(s.Fields(), &meta)
	cols := make([]arrow.Array, len(s.Fields()))
	var rows int64
	for _, f := range files {
		rows += f.NumRows()
	}
	for i := range cols {
		var parts []arrow.Array
		for _, f := range files {
			for _, b := range f.Batches {
				parts = append(parts, b.Column(i))
			}
		}
		if len(parts) == 0 {
			parts = append(parts, array.MakeArrayOfNull(memory.DefaultAllocator, s.Field(i).Type, 0))
			defer parts[0].Release()
		}
		c, err := array.Concatenate(parts, memory.DefaultAllocator)
		if err != nil {
			return nil, fmt.Errorf("merge: column %s: %w", s.Field(i).Name, err)
		}
		defer c.Release()
		cols[i] = c
	}
	return array.NewRecordBatch(schema, cols, rows), nil
}
