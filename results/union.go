package results

import (
	"fmt"
	"slices"
	"strconv"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// union is the columns of the files a merge (or a folder's report) joins, matched by
// name. A column added to Row does not bump SchemaVersion, so files of two longca
// versions in one folder differ by the columns one has and the other lacks; they are
// joined into the union of their columns, in this binary's column order (the columns it
// does not know after its own, row_checksum last), a file's missing column filled as
// missingColumn says. Files that all have the same columns keep them as they are. Files
// of another schema version, or with a column of another type than an earlier file's,
// cannot be joined: admit says which two.
type union struct {
	files   int
	first   origin        // the first file admitted
	version string        // its schema version (MetaSchemaVersion)
	schema0 *arrow.Schema // its schema
	// uniform: every file so far has the first one's fields, in its order.
	uniform bool
	fields  map[string]*unionField
	extras  []string // the names columnTypes lacks, in the order first seen
	cached  *arrow.Schema
}

// origin names a file for a message: its path and the longca version that wrote it.
type origin struct{ path, longca string }

// unionField is one column of a union.
type unionField struct {
	typ      arrow.DataType
	nullable bool
	lacked   bool   // a file admitted lacks it
	from     origin // the first file that has it
}

// maxUnionColumns bounds the columns a union may gather (Row has about 90): files of
// many more different columns are no longca versions of one format.
const maxUnionColumns = 1024

// admit adds f's columns to the union, or says why f cannot be joined to the files
// admitted before (the union is then unchanged).
func (u *union) admit(f *File) error {
	fields := f.Schema.Fields()
	v := f.Meta(MetaSchemaVersion)
	if u.files == 0 {
		u.files, u.first, u.version, u.schema0, u.uniform = 1, originOf(f), v, f.Schema, true
		u.fields = make(map[string]*unionField, len(fields))
		for _, fd := range fields {
			u.add(fd, u.first, false)
		}
		return nil
	}
	if v != u.version {
		return fmt.Errorf("%s: schema version %s in the first, %s in the second", u.pair(u.first, f), strconv.Quote(u.version), strconv.Quote(v))
	}
	if u.uniform && sameFields(u.schema0.Fields(), fields) {
		u.files++
		return nil
	}
	added := 0
	for _, fd := range fields {
		uf, ok := u.fields[fd.Name]
		if !ok {
			added++
			continue
		}
		if !arrow.TypeEqual(uf.typ, fd.Type) {
			return fmt.Errorf("%s: column %s is %s in the first, %s in the second", u.pair(uf.from, f), fd.Name, uf.typ, fd.Type)
		}
	}
	if len(u.fields)+added > maxUnionColumns {
		return fmt.Errorf("%s: the files hold %d different columns, more than the %d longca joins", u.pair(u.first, f), len(u.fields)+added, maxUnionColumns)
	}
	u.files++
	u.uniform, u.cached = false, nil
	has := make(map[string]bool, len(fields))
	o := originOf(f)
	for _, fd := range fields {
		has[fd.Name] = true
		u.add(fd, o, true)
	}
	for name, uf := range u.fields {
		if !has[name] {
			uf.lacked = true
		}
	}
	return nil
}

// add adds fd (of the file o) to the union's fields; lacked says that earlier files lack
// it when it is new.
func (u *union) add(fd arrow.Field, o origin, lacked bool) {
	uf, ok := u.fields[fd.Name]
	if !ok {
		uf = &unionField{typ: fd.Type, from: o, lacked: lacked}
		u.fields[fd.Name] = uf
		if _, known := columnTypes[fd.Name]; !known {
			u.extras = append(u.extras, fd.Name)
		}
	}
	uf.nullable = uf.nullable || fd.Nullable
}

// pair names the file a and f (their paths and longca versions) for a message.
func (u *union) pair(a origin, f *File) string {
	b := originOf(f)
	return fmt.Sprintf("%s (%s) and %s (%s) cannot be joined", a.path, a.longca, b.path, b.longca)
}

// layout is the union's columns, without metadata: the first file's schema while every
// file has its fields; else this binary's columns the files have, in its order, then
// the columns it does not know, in the order first seen, then ChecksumColumn. A column
// some file lacks is nullable unless it is a string (missingColumn) or ChecksumColumn
// (conform computes it). nil before any file.
func (u *union) layout() *arrow.Schema {
	switch {
	case u.files == 0:
		return nil
	case u.uniform:
		if u.cached == nil {
			u.cached = arrow.NewSchema(u.schema0.Fields(), nil)
		}
		return u.cached
	case u.cached != nil:
		return u.cached
	}
	out := make([]arrow.Field, 0, len(u.fields))
	put := func(name string) {
		if uf, ok := u.fields[name]; ok {
			// (conform fills a missing ChecksumColumn: never null)
			null := uf.lacked && uf.typ.ID() != arrow.STRING && name != ChecksumColumn
			out = append(out, arrow.Field{Name: name, Type: uf.typ, Nullable: uf.nullable || null})
		}
	}
	for _, c := range columns {
		put(c.name)
	}
	for _, name := range u.extras {
		put(name)
	}
	put(ChecksumColumn)
	u.cached = arrow.NewSchema(out, nil)
	return u.cached
}

// schema is layout with the first file's metadata (its schema version); nil before any
// file.
func (u *union) schema() *arrow.Schema {
	l := u.layout()
	if l == nil {
		return nil
	}
	md := u.schema0.Metadata()
	return arrow.NewSchema(l.Fields(), &md)
}

// originOf names f and the longca version that wrote it: its first row's version column.
func originOf(f *File) origin {
	v := ""
	if idx := f.Schema.FieldIndices("version"); len(idx) == 1 {
		for _, b := range f.Batches {
			if col, ok := b.Column(idx[0]).(*array.String); ok && col.Len() > 0 && col.IsValid(0) {
				v = col.Value(0)
				break
			}
		}
	}
	switch {
	case v == "":
		v = "longca version unknown: no rows"
		if len(f.Schema.FieldIndices("version")) == 0 {
			v = "longca version unknown: no version column"
		}
	case len(v) > 40 || strconv.Quote(v) != `"`+v+`"`:
		v = "longca " + clip(v)
	default:
		v = "longca " + v
	}
	return origin{f.Path, v}
}

// sameFields says whether a and b are the same fields in the same order.
func sameFields(a, b []arrow.Field) bool {
	return slices.EqualFunc(a, b, arrow.Field.Equal)
}

// sameLayout says whether a and b have the same column names and types in the same
// order (the data of one fits the other).
func sameLayout(a, b *arrow.Schema) bool {
	return slices.EqualFunc(a.Fields(), b.Fields(), func(x, y arrow.Field) bool {
		return x.Name == y.Name && arrow.TypeEqual(x.Type, y.Type)
	})
}

// conform returns rec with layout's columns, matched by name: those rec has are shared
// (not copied), those it lacks are missingColumn's. Where layout has ChecksumColumn, every
// row's checksum is computed anew for its new columns (the rows were checked against
// their own when their file was read): a checksum covers a row's columns in order, so the
// old one would not hold, and a file written before checksums existed gets them here.
func conform(rec arrow.RecordBatch, layout *arrow.Schema) (arrow.RecordBatch, error) {
	n := rec.NumRows()
	src := rec.Schema()
	cols := make([]arrow.Array, len(layout.Fields()))
	for i, fd := range layout.Fields() {
		if idx := src.FieldIndices(fd.Name); len(idx) == 1 {
			cols[i] = rec.Column(idx[0])
			continue
		}
		a := missingColumn(fd.Type, int(n))
		defer a.Release()
		cols[i] = a
	}
	out := array.NewRecordBatch(layout, cols, n)
	if len(layout.FieldIndices(ChecksumColumn)) == 0 {
		return out, nil
	}
	defer out.Release()
	return withChecksums(out)
}

// missingColumn is n values of a column a file lacks (written before the column
// existed): empty strings, as strings are never null (docs/results-format.md); null for
// every other type.
func missingColumn(t arrow.DataType, n int) arrow.Array {
	if t.ID() == arrow.STRING {
		b := array.NewStringBuilder(memory.DefaultAllocator)
		defer b.Release()
		b.AppendEmptyValues(n)
		return b.NewArray()
	}
	return array.MakeArrayOfNull(memory.DefaultAllocator, t, n)
}
