package results

import (
	"encoding/binary"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/bitutil"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// A rank file written a row at a time (Write, or any writer before WriteAll) holds one
// record batch a row. Decoded one by one, each cost arrow-go's IPC reader some 70 µs (an
// Arrow array and its buffers a column, about 60 columns), and joining them half as much
// again: a file of 20,000 such rows took 3.5-3.9 s of CPU and 1.7 GB of allocations to
// merge, the same rows in one batch 0.18 s (BenchmarkMergeOneRowBatches). coalescer reads
// such batches straight from their bytes into one batch of up to coalesceRows rows,
// copying each column's values once (readStream): 0.55-0.64 s and 0.48 GB.
//
// It takes only a batch that arrow-go would decode to the same arrays and that
// validateBatch and exactBuffers would pass (its metadata as the Writer writes it, every
// buffer inside its body and sized for its rows, string offsets from 0 up to its
// characters' length): any other goes through arrow-go and those checks as before, the
// batches coalesced before it first. The batch it builds is then validated and its rows'
// checksums verified; if that fails, its batches are decoded again one by one through
// arrow-go, so that a damaged file is refused with the batch, row and words it always was.
type coalescer struct {
	schema *arrow.Schema
	cols   []rawColumn
	first  int // the index (File.read) of the first batch held
	msgs   []int
	rows   int
	bytes  int
}

// coalesceBatches turns the coalescer on (a test turns it off, to hold what it reads to
// what arrow-go's reader reads of the same file).
var coalesceBatches = true

// rawColumn is one column's values gathered so far.
type rawColumn struct {
	typ   arrow.DataType
	kind  byte // 'w': 8-byte values; 'b': booleans; 's': strings
	nulls int
	// valid is the validity bitmap of rows so far, made at the first null (until then
	// every row is valid).
	valid []byte
	vals  []byte  // 8-byte values, or the boolean bitmap
	offs  []int32 // strings: offsets, the first 0
	chars []byte
}

// coalesceRows bounds the rows of a coalesced batch (as many as WriteAll fsyncs at once);
// joinBytes bounds its bytes.
const coalesceRows = 4096

// newCoalescer is a coalescer of batches of s, or nil when s has a column of a type it
// does not read (checkSchema admits none).
func newCoalescer(s *arrow.Schema) *coalescer {
	c := &coalescer{schema: s, cols: make([]rawColumn, s.NumFields())}
	for i, f := range s.Fields() {
		c.cols[i].typ = f.Type
		switch f.Type.ID() {
		case arrow.INT64, arrow.UINT64, arrow.FLOAT64, arrow.TIMESTAMP:
			c.cols[i].kind = 'w'
		case arrow.BOOL:
			c.cols[i].kind = 'b'
		case arrow.STRING:
			c.cols[i].kind = 's'
		default:
			return nil
		}
	}
	return c
}

// rawBatch is a record batch message's metadata and body, and where its field nodes and
// buffers lie in the metadata.
type rawBatch struct {
	meta, body []byte
	buffers    int // position of the buffers vector's first element in meta
	nBuffers   int
	nodes      int // position of the nodes vector's first element in meta
	nNodes     int
	rows       int
}

// buffer is buffer i of b, or ok false when it lies outside the body.
func (b *rawBatch) buffer(i int) ([]byte, bool) {
	if i >= b.nBuffers {
		return nil, false
	}
	e := b.meta[b.buffers+16*i:]
	off, n := int64(binary.LittleEndian.Uint64(e)), int64(binary.LittleEndian.Uint64(e[8:]))
	if off < 0 || n < 0 || off > int64(len(b.body)) || n > int64(len(b.body))-off {
		return nil, false
	}
	return b.body[off : off+n], true
}

// node is field node i of b: its length and null count.
func (b *rawBatch) node(i int) (length, nulls int64) {
	e := b.meta[b.nodes+16*i:]
	return int64(binary.LittleEndian.Uint64(e)), int64(binary.LittleEndian.Uint64(e[8:]))
}

// parseBatch reads the record batch message m of data (verified by messageAt) as a
// rawBatch; ok is false for anything but a batch of at least one row with a node for
// every column and uncompressed buffers, as Writer writes.
func parseBatch(data []byte, m ipcMessage, cols int) (b rawBatch, ok bool) {
	metaLen := int(binary.LittleEndian.Uint32(data[m.start+4:]))
	b.meta, b.body = data[m.start+8:m.start+8+metaLen], data[m.start+8+metaLen:m.end]
	v := fbVerifier{b: b.meta}
	root, err := v.u32(0)
	if err != nil {
		return b, false
	}
	mt, err := v.table(root)
	if err != nil {
		return b, false
	}
	h, found, err := v.subtable(mt, msgHeader)
	if err != nil || !found {
		return b, false
	}
	if at, err := v.ref(h, batchCompression); err != nil || at != 0 {
		return b, false
	}
	at, err := v.field(h, 0, 8) // RecordBatch.length
	if err != nil || at == 0 {
		return b, false
	}
	rows := int64(binary.LittleEndian.Uint64(b.meta[at:]))
	if rows < 1 || rows > int64(len(b.body)) { // (a row takes 4 bytes of every string column's offsets)
		return b, false
	}
	b.rows = int(rows)
	if at, err = v.ref(h, batchNodes); err != nil || at == 0 {
		return b, false
	}
	if b.nNodes, err = v.vector(at, 16); err != nil || b.nNodes != cols {
		return b, false
	}
	b.nodes = at + 4
	if at, err = v.ref(h, batchBuffers); err != nil || at == 0 {
		return b, false
	}
	if b.nBuffers, err = v.vector(at, 16); err != nil {
		return b, false
	}
	b.buffers = at + 4
	return b, true
}

// within64 says whether a buffer of size bytes is what arrow-go's writer writes for
// need bytes: at least that, at most that padded to 64 (exactArray's rule).
func within64(size, need int) bool { return size >= need && size <= (need+63)&^63 }

// add takes batch b (index i of the file, message k) if it is one the coalescer reads
// (see coalescer), copying its values; ok false leaves the coalescer as it was.
func (c *coalescer) add(b *rawBatch, i, k int) bool {
	n := b.rows
	want := 0
	for _, col := range c.cols {
		want += 2
		if col.kind == 's' {
			want++
		}
	}
	if b.nBuffers != want {
		return false
	}
	// Check every column before copying any: a batch is taken whole or not at all.
	type span struct {
		nulls       int
		valid, vals []byte
		chars       []byte
	}
	var stack [80]span
	spans := stack[:0]
	if len(c.cols) > len(stack) {
		spans = make([]span, 0, len(c.cols))
	}
	buf := 0
	for ci, col := range c.cols {
		length, nulls := b.node(ci)
		if length != int64(n) || nulls < 0 || nulls > length {
			return false
		}
		var s span
		s.nulls = int(nulls)
		if nulls > 0 { // (arrow-go skips the validity buffer of a column without nulls)
			vb, ok := b.buffer(buf)
			if !ok || !within64(len(vb), (n+7)/8) {
				return false
			}
			// a count its bitmap does not hold: decode refuses the batch (validateArray),
			// which the coalesced batch's sum of counts alone need not show
			if n-bitutil.CountSetBits(vb, 0, n) != int(nulls) {
				return false
			}
			s.valid = vb
		}
		buf++
		vb, ok := b.buffer(buf)
		buf++
		if !ok {
			return false
		}
		s.vals = vb
		switch col.kind {
		case 'w':
			if !within64(len(vb), 8*n) {
				return false
			}
		case 'b':
			if !within64(len(vb), (n+7)/8) {
				return false
			}
		case 's':
			cb, ok := b.buffer(buf)
			buf++
			if !ok || len(vb) != 4*(n+1) || binary.LittleEndian.Uint32(vb) != 0 {
				return false
			}
			prev := uint32(0)
			for j := 1; j <= n; j++ {
				o := binary.LittleEndian.Uint32(vb[4*j:])
				if o < prev || o > 1<<31-1 {
					return false
				}
				prev = o
			}
			if int(prev) != len(cb) {
				return false
			}
			s.chars = cb
		}
		spans = append(spans, s)
	}
	if len(c.msgs) == 0 {
		c.first = i
	}
	for ci := range c.cols {
		c.cols[ci].take(spans[ci].nulls, spans[ci].valid, spans[ci].vals, spans[ci].chars, c.rows, n)
	}
	c.msgs = append(c.msgs, k)
	c.rows += n
	c.bytes += len(b.body)
	return true
}

// take appends a batch's n values of the column (before it, at rows) from its buffers:
// its null count and validity bitmap (nil without nulls), its values (or offsets), its
// characters.
func (col *rawColumn) take(nulls int, valid, vals, chars []byte, at, n int) {
	if nulls > 0 && col.valid == nil {
		col.valid = make([]byte, bitutil.BytesForBits(int64(at)), bitutil.BytesForBits(int64(max(at+n, coalesceRows))))
		bitutil.SetBitsTo(col.valid, 0, int64(at), true)
	}
	if col.valid != nil {
		col.valid = growBits(col.valid, at+n)
		if nulls > 0 {
			copyBits(col.valid, at, valid, 0, n)
		} else {
			bitutil.SetBitsTo(col.valid, int64(at), int64(n), true)
		}
	}
	col.nulls += nulls
	switch col.kind {
	case 'w':
		col.vals = append(col.vals, vals[:8*n]...)
	case 'b':
		col.vals = growBits(col.vals, at+n)
		copyBits(col.vals, at, vals, 0, n)
	case 's':
		if len(col.offs) == 0 {
			col.offs = append(col.offs, 0)
		}
		base := int32(len(col.chars))
		for j := 1; j <= n; j++ {
			col.offs = append(col.offs, base+int32(binary.LittleEndian.Uint32(vals[4*j:])))
		}
		col.chars = append(col.chars, chars...)
	}
}

// growBits is bits long enough for n bits.
func growBits(bits []byte, n int) []byte {
	need := int(bitutil.BytesForBits(int64(n)))
	for len(bits) < need {
		bits = append(bits, 0)
	}
	return bits
}

// full says whether the batches held should now be built into one (flush).
func (c *coalescer) full() bool { return c.rows >= coalesceRows || c.bytes >= joinBytes }

// build makes the batches held into one record batch and empties the coalescer; nil when
// it holds none.
func (c *coalescer) build() arrow.RecordBatch {
	if len(c.msgs) == 0 {
		return nil
	}
	n := c.rows
	arrays := make([]arrow.Array, len(c.cols))
	for i := range c.cols {
		col := &c.cols[i]
		var valid *memory.Buffer
		if col.valid != nil {
			valid = memory.NewBufferBytes(fit(col.valid))
		}
		bufs := []*memory.Buffer{valid, memory.NewBufferBytes(fit(col.vals))}
		if col.kind == 's' {
			if len(col.offs) == 0 {
				col.offs = append(col.offs, 0)
			}
			bufs[1] = memory.NewBufferBytes(fit(arrow.Int32Traits.CastToBytes(col.offs)))
			bufs = append(bufs, memory.NewBufferBytes(fit(col.chars)))
		}
		d := array.NewData(col.typ, n, bufs, nil, col.nulls, 0)
		arrays[i] = array.MakeFromData(d)
		d.Release()
		*col = rawColumn{typ: col.typ, kind: col.kind}
	}
	rec := array.NewRecordBatch(c.schema, arrays, int64(n))
	for _, a := range arrays {
		a.Release()
	}
	c.msgs, c.rows, c.bytes = c.msgs[:0], 0, 0
	return rec
}

// fit is b, or a copy of it where appending left it much room (up to as much again)
// that a batch kept would hold for nothing.
func fit(b []byte) []byte {
	if cap(b)-len(b) <= len(b)/8 {
		return b
	}
	return append(make([]byte, 0, len(b)), b...)
}

// checkCoalesced validates a coalesced batch and verifies its rows' checksums, as accept
// does a decoded one (exactBuffers holds by construction).
func checkCoalesced(rec arrow.RecordBatch) (verified bool, err error) {
	if err := validateBatch(rec); err != nil {
		return false, err
	}
	return verifyChecksums(rec)
}
