package results

import (
	"encoding/binary"
	"math"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/bitutil"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// concatColumn joins parts (one column of consecutive batches) into one array of type
// typ, as array.Concatenate does, for the flat types results files hold (checkSchema):
// strings, 8-byte numbers and timestamps, booleans. It copies each part's values once
// into buffers sized for all of them, where array.Concatenate walks each part's buffers
// several times over (about 0.75 µs a part: a rank file written one row a batch is
// joined 256 one-row parts a column at a time, 30% of its merge). Parts of another type,
// or not of typ, and strings of more characters than 32-bit offsets address, are left to
// array.Concatenate (ok false), whose error stands.
func concatColumn(typ arrow.DataType, parts []arrow.Array) (arrow.Array, bool) {
	width := 0
	switch typ.ID() {
	case arrow.INT64, arrow.UINT64, arrow.FLOAT64, arrow.TIMESTAMP:
		width = 8
	case arrow.STRING, arrow.BOOL:
	default:
		return nil, false
	}
	n, nulls, chars := 0, 0, 0
	for _, p := range parts {
		if p.DataType() != typ && !arrow.TypeEqual(p.DataType(), typ) {
			return nil, false
		}
		n += p.Len()
		nulls += p.NullN()
		if s, ok := p.(*array.String); ok {
			chars += len(s.ValueBytes())
		}
	}
	if chars > math.MaxInt32 { // past what 32-bit offsets address: array.Concatenate refuses it
		return nil, false
	}
	mem := memory.DefaultAllocator
	alloc := func(size int) *memory.Buffer {
		b := memory.NewResizableBuffer(mem)
		b.Resize(size)
		clear(b.Bytes())
		return b
	}
	var validity *memory.Buffer
	if nulls > 0 {
		validity = alloc(int(bitutil.BytesForBits(int64(n))))
		bits, at := validity.Bytes(), 0
		for _, p := range parts {
			d := p.Data()
			if p.NullN() == 0 {
				bitutil.SetBitsTo(bits, int64(at), int64(p.Len()), true)
			} else {
				copyBits(bits, at, d.Buffers()[0].Bytes(), d.Offset(), p.Len())
			}
			at += p.Len()
		}
	}
	bufs := []*memory.Buffer{validity}
	switch {
	case width > 0:
		vals := alloc(width * n)
		dst := vals.Bytes()
		for _, p := range parts {
			d := p.Data()
			src := d.Buffers()[1].Bytes()
			dst = dst[copy(dst, src[width*d.Offset():width*(d.Offset()+d.Len())]):]
		}
		bufs = append(bufs, vals)
	case typ.ID() == arrow.BOOL:
		vals := alloc(int(bitutil.BytesForBits(int64(n))))
		at := 0
		for _, p := range parts {
			d := p.Data()
			copyBits(vals.Bytes(), at, d.Buffers()[1].Bytes(), d.Offset(), d.Len())
			at += d.Len()
		}
		bufs = append(bufs, vals)
	default: // strings
		offs, data := alloc(4*(n+1)), alloc(chars)
		o, dst := offs.Bytes(), data.Bytes()
		base := 0
		for _, p := range parts {
			s := p.(*array.String)
			from := s.ValueOffsets() // (this part's n+1 offsets)
			for _, v := range from[1:] {
				o = o[4:]
				binary.LittleEndian.PutUint32(o, uint32(base+int(v-from[0])))
			}
			copy(dst[base:], s.ValueBytes())
			base += len(s.ValueBytes())
		}
		bufs = append(bufs, offs, data)
	}
	d := array.NewData(typ, n, bufs, nil, nulls, 0)
	for _, b := range bufs {
		if b != nil {
			b.Release()
		}
	}
	defer d.Release()
	return array.MakeFromData(d), true
}

// copyBits copies n bits of src from bit srcAt to dst from bit dstAt (a few bits one by
// one: bitutil.CopyBitmap's setup costs more than a one-row part's bit).
func copyBits(dst []byte, dstAt int, src []byte, srcAt, n int) {
	if n > 64 {
		bitutil.CopyBitmap(src, srcAt, n, dst, dstAt)
		return
	}
	for i := range n {
		if bitutil.BitIsSet(src, srcAt+i) {
			bitutil.SetBit(dst, dstAt+i)
		} else {
			bitutil.ClearBit(dst, dstAt+i)
		}
	}
}
