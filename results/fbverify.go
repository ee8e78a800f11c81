package results

import (
	"encoding/binary"
	"fmt"
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
)

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
		n++
		if err := v.str(f, fieldName); err != nil {
			return err
		}
		if err := v.keyValues(f, fieldCustomMetadata); err != nil {
			return err
		}
		if at, err := v.ref(f, fieldDictionary); err != nil || at != 0 {
			return fmt.Errorf("a dictionary-encoded column: not written by longca%s", because(err))
		}
		if at, err := v.ref(f, fieldChildren); err != nil {
			return err
		} else if at != 0 {
			if n, err := v.vector(at, 4); err != nil || n != 0 {
				return fmt.Errorf("a nested column: not written by longca%s", because(err))
			}
		}
		tt, err := v.byteField(f, fieldTypeType)
		if err != nil {
			return err
		}
		typ, ok, err := v.subtable(f, fieldType)
		if err != nil || !ok {
			return fmt.Errorf("a column without a type (%v)", err)
		}
		switch tt {
		case typeInt, typeFloatingPoint, typeUtf8, typeBool:
		case typeTimestamp:
			return v.str(typ, timestampTimezone)
		default:
			return fmt.Errorf("a column of Arrow type %d: not written by longca", tt)
		}
		return nil
	})
	return n, err
}

// recordBatch verifies a RecordBatch table and returns its number of field nodes (one
// per column of the flat schemas longca writes).
func (v fbVerifier) recordBatch(t fbTable) (cols int, buffersEnd int64, err error) {
	if at, err := v.ref(t, batchCompression); err != nil || at != 0 {
		return 0, 0, fmt.Errorf("a compressed batch: not written by longca%s", because(err))
	}
	if err := v.scalarVector(t, batchVariadic, 8); err != nil {
		return 0, 0, err
	}
	if buffersEnd, err = v.buffersEnd(t); err != nil {
		return 0, 0, err
	}
	at, err := v.ref(t, batchNodes)
	if err != nil || at == 0 {
		return 0, buffersEnd, err
	}
	cols, err = v.vector(at, 16)
	return cols, buffersEnd, err
}

// buffersEnd verifies a record batch's buffers (Buffer structs: offset and length, int64
// each) and returns where the last of them ends in the body.
func (v fbVerifier) buffersEnd(t fbTable) (int64, error) {
	at, err := v.ref(t, batchBuffers)
	if err != nil || at == 0 {
		return 0, err
	}
	n, err := v.vector(at, 16)
	if err != nil {
		return 0, err
	}
	var end int64
	for i := 0; i < n; i++ {
		e := v.b[at+4+16*i:]
		off, length := int64(binary.LittleEndian.Uint64(e)), int64(binary.LittleEndian.Uint64(e[8:]))
		if off < 0 || length < 0 || off > 1<<40 || length > 1<<40 {
			return 0, fmt.Errorf("buffer %d at %d of %d bytes: not a place in a body", i, off, length)
		}
		end = max(end, off+length)
	}
	return end, nil
}

// verifyMessage verifies one IPC message's metadata and returns its header type, body
// length, and its number of columns (schema) or field nodes (record batch).
func verifyMessage(meta []byte) (header byte, bodyLen int64, cols int, err error) {
	v := fbVerifier{meta}
	root, err := v.u32(0)
	if err != nil {
		return 0, 0, 0, err
	}
	m, err := v.table(root)
	if err != nil {
		return 0, 0, 0, err
	}
	if err := v.keyValues(m, msgCustomMetadata); err != nil {
		return 0, 0, 0, err
	}
	if header, err = v.byteField(m, msgHeaderType); err != nil {
		return 0, 0, 0, err
	}
	at, err := v.field(m, msgBodyLength, 8)
	if err != nil {
		return 0, 0, 0, err
	}
	if at != 0 {
		bodyLen = int64(binary.LittleEndian.Uint64(meta[at:]))
	}
	h, ok, err := v.subtable(m, msgHeader)
	if err != nil || !ok {
		return 0, 0, 0, fmt.Errorf("message without a header (%v)", err)
	}
	switch header {
	case headerSchema:
		cols, err = v.schema(h)
	case headerRecordBatch:
		var buffersEnd int64
		cols, buffersEnd, err = v.recordBatch(h)
		// The writer pads each buffer to 8 bytes and the body holds nothing else: a body
		// longer than its buffers' end so padded (a flipped length) would swallow the
		// messages after it, and a shorter one cannot hold them.
		if err == nil && bodyLen != (buffersEnd+7)&^7 {
			err = fmt.Errorf("a body of %d bytes for buffers that end at byte %d", bodyLen, buffersEnd)
		}
	default:
		err = fmt.Errorf("message of type %d: not written by longca", header)
	}
	return header, bodyLen, cols, err
}

// fileBlock is one record batch's place in an Arrow file (File.fbs's Block struct).
type fileBlock struct {
	offset  int64
	metaLen int32
	bodyLen int64
}

// verifyFooter verifies an Arrow file's footer and returns its record batch blocks and
// its schema's number of columns.
func verifyFooter(footer []byte) ([]fileBlock, int, error) {
	v := fbVerifier{footer}
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
	if at, err := v.ref(f, footerDictionaries); err != nil {
		return nil, 0, err
	} else if at != 0 {
		if n, err := v.vector(at, 24); err != nil || n != 0 {
			return nil, 0, fmt.Errorf("dictionaries: not written by longca%s", because(err))
		}
	}
	at, err := v.ref(f, footerRecordBatches)
	if err != nil || at == 0 {
		return nil, cols, err
	}
	n, err := v.vector(at, 24)
	if err != nil {
		return nil, 0, err
	}
	blocks := make([]fileBlock, n)
	for i := range blocks {
		e := footer[at+4+24*i:]
		blocks[i] = fileBlock{offset: int64(binary.LittleEndian.Uint64(e)), metaLen: int32(binary.LittleEndian.Uint32(e[8:])), bodyLen: int64(binary.LittleEndian.Uint64(e[16:]))}
	}
	return blocks, cols, nil
}

// ipcMessage is one verified message of a stream: where it starts and ends.
type ipcMessage struct {
	start, end int
	header     byte
	cols       int // schema: columns; record batch: field nodes
}

// messageAt verifies the message that starts at pos of data: continuation token,
// metadata length, metadata, body. torn is true when data ends inside it.
func messageAt(data []byte, pos int) (m ipcMessage, eosAt bool, torn bool, err error) {
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
	if metaLen > int64(rest-8) {
		return m, false, true, fmt.Errorf("metadata of %d bytes at byte %d runs past the end", metaLen, pos)
	}
	meta := data[pos+8 : pos+8+int(metaLen)]
	header, bodyLen, cols, err := verifyMessage(meta)
	if err != nil {
		return m, false, false, fmt.Errorf("message at byte %d: %w", pos, err)
	}
	if bodyLen < 0 || bodyLen > int64(rest)-8-metaLen {
		return m, false, true, fmt.Errorf("body of %d bytes at byte %d runs past the end", bodyLen, pos)
	}
	return ipcMessage{start: pos, end: pos + 8 + int(metaLen) + int(bodyLen), header: header, cols: cols}, false, false, nil
}

// because is " (err)", or "" when err is nil (a feature found, not a verification error).
func because(err error) string {
	if err == nil {
		return ""
	}
	return fmt.Sprintf(" (%v)", err)
}
