package results

import (
	"encoding/binary"
	"fmt"
	"math"
)

// The Arrow IPC metadata is FlatBuffers, which arrow-go reads without bounds checks: a
// damaged vector length makes it allocate whatever the length says (hundreds of GiB).
// fbVerifier checks the metadata of the messages results files hold (Schema and
// RecordBatch messages, the file footer) before arrow-go sees them: every table, vector
// and string lies inside the buffer, and only the features longca writes are used (the
// column types of the codec, no dictionaries, no children, no compression). The field
// numbers are the Arrow format's (Message.fbs, Schema.fbs, File.fbs).
type fbVerifier struct {
	b []byte
	// foreign verifies a file longca did not write (a --counts file): any flat or nested
	// column type, dictionaries, compressed bodies, and bodies padded past their buffers;
	// still every table, vector and string inside the buffer.
	foreign bool
}

// Field slots of the Arrow tables (vtable index).
const (
	msgHeaderType, msgHeader, msgBodyLength, msgCustomMetadata = 1, 2, 3, 4
	schemaFields, schemaCustomMetadata, schemaFeatures         = 1, 2, 3
	fieldName, fieldTypeType, fieldType, fieldDictionary       = 0, 2, 3, 4
	fieldChildren, fieldCustomMetadata                         = 5, 6
	batchNodes, batchBuffers, batchCompression, batchVariadic  = 1, 2, 3, 4
	footerSchema, footerDictionaries, footerRecordBatches      = 1, 2, 3
	footerCustomMetadata                                       = 4
	kvKey, kvValue                                             = 0, 1
	timestampTimezone                                          = 1
)

// Message header and column type codes (MessageHeader and Type unions).
const (
	headerSchema      = 1
	headerRecordBatch = 3
	typeInt           = 2
	typeFloatingPoint = 3
	typeUtf8          = 5
	typeBool          = 6
	typeTimestamp     = 10
	typeUnion         = 14
	headerDictionary  = 2 // a DictionaryBatch: id, data (a RecordBatch), isDelta
	dictIndexType     = 1 // DictionaryEncoding's indexType (an Int table)
	unionTypeIDs      = 1 // Union's typeIds
	dictBatchData     = 1
)

// flatForeign are the other flat column types a foreign file may hold (Type union codes:
// Null, Binary, Decimal, Date, Time, Interval, FixedSizeBinary, Duration, LargeBinary,
// LargeUtf8, BinaryView, Utf8View), each read as its type table's scalars.
var flatForeign = map[byte]bool{1: true, 4: true, 7: true, 8: true, 9: true, 11: true, 15: true, 18: true, 19: true, 20: true, 23: true, 24: true}

// nestedForeign are the nested types whose type tables hold scalars only: List, Struct,
// FixedSizeList, Map, LargeList, RunEndEncoded, ListView, LargeListView (Union has a vector).
var nestedForeign = map[byte]bool{12: true, 13: true, 16: true, 17: true, 21: true, 22: true, 25: true, 26: true}

// fbTable is a verified table: its position and its vtable.
type fbTable struct {
	pos, vt, vtSize, size int
}

func (v fbVerifier) u32(at int) (int, error) {
	if at < 0 || at+4 > len(v.b) {
		return 0, fmt.Errorf("offset %d outside the %d-byte metadata", at, len(v.b))
	}
	return int(binary.LittleEndian.Uint32(v.b[at:])), nil
}

// table verifies the table at pos.
func (v fbVerifier) table(pos int) (fbTable, error) {
	if pos < 0 || pos+4 > len(v.b) {
		return fbTable{}, fmt.Errorf("table at %d outside the metadata", pos)
	}
	vt := pos - int(int32(binary.LittleEndian.Uint32(v.b[pos:])))
	if vt < 0 || vt+4 > len(v.b) {
		return fbTable{}, fmt.Errorf("vtable at %d outside the metadata", vt)
	}
	t := fbTable{pos: pos, vt: vt, vtSize: int(binary.LittleEndian.Uint16(v.b[vt:])), size: int(binary.LittleEndian.Uint16(v.b[vt+2:]))}
	if t.vtSize < 4 || t.vtSize%2 != 0 || vt+t.vtSize > len(v.b) || t.size < 4 || pos+t.size > len(v.b) {
		return fbTable{}, fmt.Errorf("malformed vtable at %d", vt)
	}
	return t, nil
}

// field is the position of slot i of t, or 0 when absent; width is the field's size.
func (v fbVerifier) field(t fbTable, i, width int) (int, error) {
	if 4+2*i+2 > t.vtSize {
		return 0, nil
	}
	off := int(binary.LittleEndian.Uint16(v.b[t.vt+4+2*i:]))
	if off == 0 {
		return 0, nil
	}
	if off+width > t.size {
		return 0, fmt.Errorf("field %d runs past its table", i)
	}
	return t.pos + off, nil
}

// ref follows the offset field i of t (a table, vector or string); 0 when absent.
func (v fbVerifier) ref(t fbTable, i int) (int, error) {
	at, err := v.field(t, i, 4)
	if err != nil || at == 0 {
		return 0, err
	}
	u, err := v.u32(at)
	if err != nil {
		return 0, err
	}
	target := at + u
	if target >= len(v.b) {
		return 0, fmt.Errorf("field %d points outside the metadata", i)
	}
	return target, nil
}

// vector verifies the vector at pos with elements of elem bytes and returns its length.
func (v fbVerifier) vector(pos, elem int) (int, error) {
	n, err := v.u32(pos)
	if err != nil {
		return 0, err
	}
	if uint64(pos)+4+uint64(n)*uint64(elem) > uint64(len(v.b)) {
		return 0, fmt.Errorf("vector of %d elements at %d runs past the metadata", n, pos)
	}
	return n, nil
}

// subtable follows field i of t to a table, verifying it; ok is false when absent.
func (v fbVerifier) subtable(t fbTable, i int) (fbTable, bool, error) {
	at, err := v.ref(t, i)
	if err != nil || at == 0 {
		return fbTable{}, false, err
	}
	st, err := v.table(at)
	return st, err == nil, err
}

// tables verifies the vector of tables in field i of t, calling each on every element.
func (v fbVerifier) tables(t fbTable, i int, each func(fbTable) error) error {
	at, err := v.ref(t, i)
	if err != nil || at == 0 {
		return err
	}
	n, err := v.vector(at, 4)
	if err != nil {
		return err
	}
	for j := 0; j < n; j++ {
		e := at + 4 + 4*j
		u, _ := v.u32(e)
		et, err := v.table(e + u)
		if err != nil {
			return err
		}
		if each != nil {
			if err := each(et); err != nil {
				return err
			}
		}
	}
	return nil
}

func (v fbVerifier) str(t fbTable, i int) error {
	at, err := v.ref(t, i)
	if err != nil || at == 0 {
		return err
	}
	_, err = v.vector(at, 1)
	return err
}

func (v fbVerifier) scalarVector(t fbTable, i, elem int) error {
	at, err := v.ref(t, i)
	if err != nil || at == 0 {
		return err
	}
	_, err = v.vector(at, elem)
	return err
}

func (v fbVerifier) byteField(t fbTable, i int) (byte, error) {
	at, err := v.field(t, i, 1)
	if err != nil || at == 0 {
		return 0, err
	}
	return v.b[at], nil
}

func (v fbVerifier) keyValues(t fbTable, i int) error {
	return v.tables(t, i, func(kv fbTable) error {
		if err := v.str(kv, kvKey); err != nil {
			return err
		}
		return v.str(kv, kvValue)
	})
}

// schema verifies a Schema table and returns its number of columns.
func (v fbVerifier) schema(s fbTable) (int, error) {
	if err := v.keyValues(s, schemaCustomMetadata); err != nil {
		return 0, err
	}
	if err := v.scalarVector(s, schemaFeatures, 8); err != nil {
		return 0, err
	}
	n := 0
	err := v.tables(s, schemaFields, func(f fbTable) error {
		nodes, err := v.fieldOf(f, 0)
		n += nodes
		return err
	})
	return n, err
}

// maxNesting bounds how deep a foreign file's nested columns may go.
const maxNesting = 32

// fieldOf verifies a Field table at nesting depth and returns its field nodes in a record
// batch (one, and its children's: a flat column's one; Arrow lays a batch's nodes out in the
// schema's fields' pre-order). Only a foreign file may have children or a dictionary.
func (v fbVerifier) fieldOf(f fbTable, depth int) (int, error) {
	if err := v.str(f, fieldName); err != nil {
		return 0, err
	}
	if err := v.keyValues(f, fieldCustomMetadata); err != nil {
		return 0, err
	}
	if !v.foreign {
		if at, err := v.ref(f, fieldDictionary); err != nil || at != 0 {
			return 0, fmt.Errorf("a dictionary-encoded column: not written by longca%s", because(err))
		}
	} else if d, ok, err := v.subtable(f, fieldDictionary); err != nil {
		return 0, err
	} else if ok { // DictionaryEncoding: id, isOrdered, kind (scalars), and its index type
		if _, _, err := v.subtable(d, dictIndexType); err != nil {
			return 0, err
		}
	}
	nodes := 1
	if at, err := v.ref(f, fieldChildren); err != nil {
		return 0, err
	} else if at != 0 {
		if !v.foreign {
			if n, err := v.vector(at, 4); err != nil || n != 0 {
				return 0, fmt.Errorf("a nested column: not written by longca%s", because(err))
			}
		} else if depth >= maxNesting {
			return 0, fmt.Errorf("columns nested more than %d deep", maxNesting)
		} else if err := v.tables(f, fieldChildren, func(c fbTable) error {
			n, err := v.fieldOf(c, depth+1)
			nodes += n
			return err
		}); err != nil {
			return 0, err
		}
	}
	tt, err := v.byteField(f, fieldTypeType)
	if err != nil {
		return 0, err
	}
	typ, ok, err := v.subtable(f, fieldType)
	if err != nil || !ok {
		return 0, fmt.Errorf("a column without a type (%v)", err)
	}
	switch {
	case tt == typeInt, tt == typeFloatingPoint, tt == typeUtf8, tt == typeBool:
	case tt == typeTimestamp:
		return nodes, v.str(typ, timestampTimezone)
	case v.foreign && flatForeign[tt]: // their type tables hold scalars only
	case v.foreign && tt == typeUnion: // a mode and a vector of type ids
		return nodes, v.scalarVector(typ, unionTypeIDs, 4)
	case v.foreign && nestedForeign[tt]: // scalars only (a list's size, a map's sortedness)
	default:
		return 0, fmt.Errorf("a column of Arrow type %d: not written by longca", tt)
	}
	return nodes, nil
}

// recordBatch verifies a RecordBatch table (a record batch's, or a dictionary batch's data)
// and the body of bodyLen bytes it describes. It returns its number of field nodes (one per
// column of the flat schemas longca writes) and, where the batch is compressed (foreign
// files only), its buffers, whose first 8 bytes in the body give each one's inflated length.
func (v fbVerifier) recordBatch(t fbTable, bodyLen int64) (cols int, compressedBufs [][2]int64, err error) {
	compressed := false
	if v.foreign { // BodyCompression: a codec and a method, scalars
		if _, compressed, err = v.subtable(t, batchCompression); err != nil {
			return 0, nil, err
		}
	} else if at, err := v.ref(t, batchCompression); err != nil || at != 0 {
		return 0, nil, fmt.Errorf("a compressed batch: not written by longca%s", because(err))
	}
	if err := v.scalarVector(t, batchVariadic, 8); err != nil {
		return 0, nil, err
	}
	bufs, err := v.buffers(t)
	if err != nil {
		return 0, nil, err
	}
	var end int64
	for _, b := range bufs {
		end = max(end, b[0]+b[1])
	}
	// The writer pads each buffer to 8 bytes and the body holds nothing else: a body longer
	// than its buffers' end so padded (a flipped length) would swallow the messages after it,
	// and a shorter one cannot hold them. (Another writer may align its buffers to 64 bytes:
	// a foreign body need only hold them.)
	if !v.foreign && bodyLen != (end+7)&^7 || v.foreign && bodyLen < end {
		return 0, nil, fmt.Errorf("a body of %d bytes for buffers that end at byte %d", bodyLen, end)
	}
	if compressed {
		compressedBufs = bufs
	}
	at, err := v.ref(t, batchNodes)
	if err != nil || at == 0 {
		return 0, compressedBufs, err
	}
	cols, err = v.vector(at, 16)
	return cols, compressedBufs, err
}

// buffers verifies a record batch's buffers and returns each one's offset and length.
func (v fbVerifier) buffers(t fbTable) ([][2]int64, error) {
	at, err := v.ref(t, batchBuffers)
	if err != nil || at == 0 {
		return nil, err
	}
	n, err := v.vector(at, 16)
	if err != nil {
		return nil, err
	}
	bufs := make([][2]int64, n) // (n entries of 16 bytes lie inside the metadata)
	for i := range bufs {
		e := v.b[at+4+16*i:]
		off, length := int64(binary.LittleEndian.Uint64(e)), int64(binary.LittleEndian.Uint64(e[8:]))
		if off < 0 || length < 0 || off > 1<<40 || length > 1<<40 {
			return nil, fmt.Errorf("buffer %d at %d of %d bytes: not a place in a body", i, off, length)
		}
		bufs[i] = [2]int64{off, length}
	}
	return bufs, nil
}

// verifyMessage verifies one IPC message's metadata and returns its header type, body
// length, and its number of columns (schema) or field nodes (record batch).
// Of a compressed batch (foreign files only) it returns the buffers too, whose first 8
// bytes in the body give each one's length once inflated.
func verifyMessage(meta []byte, foreign bool) (header byte, bodyLen int64, cols int, compressedBufs [][2]int64, err error) {
	v := fbVerifier{meta, foreign}
	root, err := v.u32(0)
	if err != nil {
		return 0, 0, 0, nil, err
	}
	m, err := v.table(root)
	if err != nil {
		return 0, 0, 0, nil, err
	}
	if err := v.keyValues(m, msgCustomMetadata); err != nil {
		return 0, 0, 0, nil, err
	}
	if header, err = v.byteField(m, msgHeaderType); err != nil {
		return 0, 0, 0, nil, err
	}
	at, err := v.field(m, msgBodyLength, 8)
	if err != nil {
		return 0, 0, 0, nil, err
	}
	if at != 0 {
		bodyLen = int64(binary.LittleEndian.Uint64(meta[at:]))
	}
	h, ok, err := v.subtable(m, msgHeader)
	if err != nil || !ok {
		return 0, 0, 0, nil, fmt.Errorf("message without a header (%v)", err)
	}
	switch header {
	case headerSchema:
		cols, err = v.schema(h)
	case headerRecordBatch:
		cols, compressedBufs, err = v.recordBatch(h, bodyLen)
	case headerDictionary:
		if !foreign {
			err = fmt.Errorf("a dictionary batch: not written by longca")
			break
		}
		data, ok, derr := v.subtable(h, dictBatchData)
		if err = derr; err == nil && !ok {
			err = fmt.Errorf("a dictionary batch without its data")
		}
		if err == nil {
			cols, compressedBufs, err = v.recordBatch(data, bodyLen)
		}
	default:
		err = fmt.Errorf("message of type %d: not written by longca", header)
	}
	return header, bodyLen, cols, compressedBufs, err
}

// fileBlock is one record batch's place in an Arrow file (File.fbs's Block struct).
type fileBlock struct {
	offset  int64
	metaLen int32
	bodyLen int64
	dict    bool // a dictionary batch's (foreign files only)
}

// verifyFooter verifies an Arrow file's footer and returns its record batch blocks and
// its schema's number of columns.
func verifyFooter(footer []byte, foreign bool) ([]fileBlock, int, error) {
	v := fbVerifier{footer, foreign}
	root, err := v.u32(0)
	if err != nil {
		return nil, 0, err
	}
	f, err := v.table(root)
	if err != nil {
		return nil, 0, err
	}
	s, ok, err := v.subtable(f, footerSchema)
	if err != nil || !ok {
		return nil, 0, fmt.Errorf("footer without a schema (%v)", err)
	}
	cols, err := v.schema(s)
	if err != nil {
		return nil, 0, err
	}
	if err := v.keyValues(f, footerCustomMetadata); err != nil {
		return nil, 0, err
	}
	dicts, err := v.blocks(f, footerDictionaries, true)
	if err != nil {
		return nil, 0, err
	}
	if len(dicts) > 0 && !foreign {
		return nil, 0, fmt.Errorf("dictionaries: not written by longca")
	}
	batches, err := v.blocks(f, footerRecordBatches, false)
	if err != nil {
		return nil, 0, err
	}
	return append(dicts, batches...), cols, nil
}

// blocks reads the vector of Block structs in field i of the footer f.
func (v fbVerifier) blocks(f fbTable, i int, dict bool) ([]fileBlock, error) {
	at, err := v.ref(f, i)
	if err != nil || at == 0 {
		return nil, err
	}
	n, err := v.vector(at, 24)
	if err != nil {
		return nil, err
	}
	blocks := make([]fileBlock, n) // (n entries of 24 bytes lie inside the footer)
	for i := range blocks {
		e := v.b[at+4+24*i:]
		blocks[i] = fileBlock{offset: int64(binary.LittleEndian.Uint64(e)), metaLen: int32(binary.LittleEndian.Uint32(e[8:])), bodyLen: int64(binary.LittleEndian.Uint64(e[16:])), dict: dict}
	}
	return blocks, nil
}

// ipcMessage is one verified message of a stream: where it starts and ends.
type ipcMessage struct {
	start, end int
	header     byte
	cols       int   // schema: columns; record batch: field nodes
	inflated   int64 // a compressed batch's buffers' lengths once inflated
}

// messageAt verifies the message that starts at pos of data: continuation token,
// metadata length, metadata, body. torn is true when data ends inside it.
func messageAt(data []byte, pos int) (m ipcMessage, eosAt bool, torn bool, err error) {
	return messageOf(data, pos, false)
}

// messageOf is messageAt, of a foreign file where foreign is set (see fbVerifier).
func messageOf(data []byte, pos int, foreign bool) (m ipcMessage, eosAt bool, torn bool, err error) {
	rest := len(data) - pos
	if rest < 8 {
		return m, false, true, fmt.Errorf("%d bytes left, not a whole message prefix", rest)
	}
	if binary.LittleEndian.Uint32(data[pos:]) != 0xffffffff {
		return m, false, false, fmt.Errorf("no continuation token at byte %d", pos)
	}
	metaLen := int64(binary.LittleEndian.Uint32(data[pos+4:]))
	if metaLen == 0 {
		return ipcMessage{start: pos, end: pos + 8}, true, false, nil
	}
	if metaLen > math.MaxInt32 { // (an int32 in the format: arrow-go's readers refuse more)
		return m, false, false, fmt.Errorf("metadata of %d bytes at byte %d, more than an Arrow message has", metaLen, pos)
	}
	if metaLen > int64(rest-8) {
		return m, false, true, fmt.Errorf("metadata of %d bytes at byte %d runs past the end", metaLen, pos)
	}
	meta := data[pos+8 : pos+8+int(metaLen)]
	header, bodyLen, cols, bufs, err := verifyMessage(meta, foreign)
	if err != nil {
		return m, false, false, fmt.Errorf("message at byte %d: %w", pos, err)
	}
	if bodyLen < 0 || bodyLen > int64(rest)-8-metaLen {
		return m, false, true, fmt.Errorf("body of %d bytes at byte %d runs past the end", bodyLen, pos)
	}
	m = ipcMessage{start: pos, end: pos + 8 + int(metaLen) + int(bodyLen), header: header, cols: cols}
	body := data[pos+8+int(metaLen) : m.end]
	for i, b := range bufs { // a compressed buffer: its inflated length, then its frames
		if b[1] == 0 {
			continue
		}
		if b[1] < 8 || b[0]+b[1] > int64(len(body)) {
			return m, false, false, fmt.Errorf("message at byte %d: compressed buffer %d of %d bytes at %d, outside its %d-byte body", pos, i, b[1], b[0], len(body))
		}
		n := int64(binary.LittleEndian.Uint64(body[b[0]:]))
		if n < -1 || n > 1<<40 {
			return m, false, false, fmt.Errorf("message at byte %d: compressed buffer %d inflates to %d bytes", pos, i, n)
		}
		m.inflated += max(n, 0)
	}
	return m, false, false, nil
}

// because is " (err)", or "" when err is nil (a feature found, not a verification error).
func because(err error) string {
	if err == nil {
		return ""
	}
	return fmt.Sprintf(" (%v)", err)
}
