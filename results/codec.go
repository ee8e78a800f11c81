package results

import (
	"fmt"
	"reflect"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// column binds one Row field to one Arrow column.
type column struct {
	name  string
	index int // field index in Row
	typ   arrow.DataType
	null  bool // a pointer field: nil is null
}

var (
	rowType   = reflect.TypeOf(Row{})
	timeType  = reflect.TypeOf(time.Time{})
	tsType    = &arrow.TimestampType{Unit: arrow.Microsecond, TimeZone: "UTC"}
	columns   = buildColumns()
	rowSchema = buildSchema(nil)
)

func buildColumns() []column {
	var cols []column
	for i := 0; i < rowType.NumField(); i++ {
		f := rowType.Field(i)
		name := f.Tag.Get("arrow")
		if name == "" || name == "-" {
			continue
		}
		t, null := f.Type, false
		if t.Kind() == reflect.Pointer {
			t, null = t.Elem(), true
		}
		var dt arrow.DataType
		switch {
		case t == timeType:
			dt = tsType
		case t.Kind() == reflect.String:
			dt = arrow.BinaryTypes.String
		case t.Kind() == reflect.Int64:
			dt = arrow.PrimitiveTypes.Int64
		case t.Kind() == reflect.Uint64:
			dt = arrow.PrimitiveTypes.Uint64
		case t.Kind() == reflect.Float64:
			dt = arrow.PrimitiveTypes.Float64
		case t.Kind() == reflect.Bool:
			dt = arrow.FixedWidthTypes.Boolean
		default:
			panic(fmt.Sprintf("results: field %s has unsupported type %s", f.Name, f.Type))
		}
		cols = append(cols, column{name: name, index: i, typ: dt, null: null})
	}
	return cols
}

// Columns lists the column names of the schema, in order: Row's columns, then
// ChecksumColumn.
func Columns() []string {
	out := make([]string, len(columns), len(columns)+1)
	for i, c := range columns {
		out[i] = c.name
	}
	return append(out, ChecksumColumn)
}

// Schema returns the Arrow schema of Row with the schema version (and extra metadata).
func Schema(extra map[string]string) *arrow.Schema { return buildSchema(extra) }

func buildSchema(extra map[string]string) *arrow.Schema {
	fields := make([]arrow.Field, len(columns), len(columns)+1)
	for i, c := range columns {
		fields[i] = arrow.Field{Name: c.name, Type: c.typ, Nullable: c.null}
	}
	fields = append(fields, arrow.Field{Name: ChecksumColumn, Type: arrow.PrimitiveTypes.Uint64})
	keys := []string{MetaSchemaVersion}
	vals := []string{SchemaVersion}
	for k, v := range extra {
		keys = append(keys, k)
		vals = append(vals, v)
	}
	md := arrow.NewMetadata(keys, vals)
	return arrow.NewSchema(fields, &md)
}

// Record encodes rows as one record batch of schema s (which must have Row's fields
// and ChecksumColumn, as Schema makes it), each row with its checksum. The caller
// releases it.
func Record(s *arrow.Schema, rows []Row) arrow.RecordBatch {
	b := array.NewRecordBuilder(memory.DefaultAllocator, s)
	defer b.Release()
	sum := b.Field(len(columns)).(*array.Uint64Builder)
	for _, r := range rows {
		v := reflect.ValueOf(r)
		for i, c := range columns {
			appendValue(b.Field(i), c, v.Field(c.index))
		}
		sum.Append(0)
	}
	rec := b.NewRecordBatch()
	defer rec.Release()
	out, err := withChecksums(rec)
	if err != nil {
		panic(fmt.Sprintf("results: checksums of rows just built: %v", err)) // only the codec's own types are built
	}
	return out
}

func appendValue(fb array.Builder, c column, v reflect.Value) {
	if c.null {
		if v.IsNil() {
			fb.AppendNull()
			return
		}
		v = v.Elem()
	}
	switch b := fb.(type) {
	case *array.StringBuilder:
		b.Append(v.String())
	case *array.Int64Builder:
		b.Append(v.Int())
	case *array.Uint64Builder:
		b.Append(v.Uint())
	case *array.Float64Builder:
		b.Append(v.Float())
	case *array.BooleanBuilder:
		b.Append(v.Bool())
	case *array.TimestampBuilder:
		t := v.Interface().(time.Time)
		if t.IsZero() {
			b.AppendNull()
			return
		}
		b.Append(arrow.Timestamp(t.UnixMicro()))
	default:
		panic(fmt.Sprintf("results: column %s has builder %T", c.name, fb))
	}
}

// Rows decodes a record batch into rows, matching columns by name: a column the record
// lacks stays zero (nil), a column Row lacks is ignored. A column of the right name and
// the wrong type is an error.
func Rows(rec arrow.RecordBatch) ([]Row, error) {
	n := int(rec.NumRows())
	out := make([]Row, n)
	sch := rec.Schema()
	for _, c := range columns {
		idx := sch.FieldIndices(c.name)
		if len(idx) == 0 {
			continue
		}
		col := rec.Column(idx[0])
		if !arrow.TypeEqual(col.DataType(), c.typ) {
			return nil, fmt.Errorf("results: column %s is %s, want %s", c.name, col.DataType(), c.typ)
		}
		for i := 0; i < n; i++ {
			if col.IsNull(i) {
				continue
			}
			f := reflect.ValueOf(&out[i]).Elem().Field(c.index)
			if c.null {
				f.Set(reflect.New(f.Type().Elem()))
				f = f.Elem()
			}
			switch a := col.(type) {
			case *array.String:
				f.SetString(a.Value(i))
			case *array.Int64:
				f.SetInt(a.Value(i))
			case *array.Uint64:
				f.SetUint(a.Value(i))
			case *array.Float64:
				f.SetFloat(a.Value(i))
			case *array.Boolean:
				f.SetBool(a.Value(i))
			case *array.Timestamp:
				f.Set(reflect.ValueOf(time.UnixMicro(int64(a.Value(i))).UTC()))
			}
		}
	}
	return out, nil
}
