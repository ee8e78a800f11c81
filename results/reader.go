package results

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/ipc"

	"github.com/longca/longca/internal/smallfile"
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
	// Unverified is true when the file's rows carry no checksums (written before
	// ChecksumColumn existed): damage in them cannot be detected.
	Unverified bool

	// read counts the batches read; gather joins them (Batches is its joined): see accept.
	read   int
	gather joiner
}

// ErrDamaged marks a file whose bytes were changed after its writer wrote them: a row
// that fails its checksum, a batch that does not decode with more after it, bytes past
// the end marker. ErrNotResults marks a file that is not a longca results file at all.
// Both are reasons to skip a file (Merge, Load) rather than to stop.
var (
	ErrDamaged    = errors.New("damaged")
	ErrNotResults = errors.New("not a longca results file")
)

// ErrMissingRanks marks a merge refused because ranks have no readable file: some of
// them (Merge without AllowMissing), or all (with it too: nothing to merge). longca
// merge exits with status 2 on it: the folder given is incomplete, and --allow-missing
// or another folder is the fix; a run merging its own files exits 1.
var ErrMissingRanks = errors.New("ranks missing")

// missingRanks is an error that errors.Is takes for ErrMissingRanks, without adding its
// text.
type missingRanks struct{ error }

func (e missingRanks) Is(target error) bool { return target == ErrMissingRanks }
func (e missingRanks) Unwrap() error        { return e.error }

// ErrUsage marks a request the caller can fix and the files cannot meet as asked: a
// folder without rank files, a run id it does not hold, an output that is one of the
// inputs or in a folder that cannot be written. The CLI exits with status 2 on it.
var ErrUsage = errors.New("bad request")

// usageErr is an error that errors.Is takes for ErrUsage, without adding its text.
type usageErr struct{ error }

func (e usageErr) Is(target error) bool { return target == ErrUsage }
func (e usageErr) Unwrap() error        { return e.error }

// Usagef is a request error (ErrUsage) with the message format gives: the caller's fault
// (exit status 2), where the text alone is said.
func Usagef(format string, args ...any) error { return usageErr{fmt.Errorf(format, args...)} }

// eos is the IPC stream's end marker: continuation token and a zero length.
var eos = []byte{0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0}

// MaxFileBytes bounds the size of a results file that Open reads into memory (a rank's
// file holds about 2 KB a row: this is millions of rows).
const MaxFileBytes = 8 << 30

// Open reads a results file: an Arrow IPC file (as Merge writes) or an Arrow IPC stream
// (as Writer writes), including one whose writer was killed mid-run. Every batch is
// checked before a value is read (its buffers hold what it claims) and every row
// against its checksum; no input makes it panic or allocate more than a few times the
// file's size. A damaged file is an error wrapping ErrDamaged, a foreign one
// ErrNotResults.
func Open(path string) (*File, error) {
	st, err := os.Stat(path)
	if err != nil { // (a path the user gave, or a folder's entry: usage, exit 2)
		return nil, usageErr{fmt.Errorf("results: %w", err)}
	}
	if st.IsDir() {
		return nil, fmt.Errorf("results: %s is a folder, not a file: %w", path, ErrNotResults)
	}
	if !st.Mode().IsRegular() { // a FIFO would wait in open(2) for a writer, for good
		return nil, fmt.Errorf("results: %s is %s, not a regular file: give the file itself: %w", path, smallfile.Kind(st.Mode()), ErrNotResults)
	}
	if st.Size() > MaxFileBytes {
		return nil, fmt.Errorf("results: %s is %d bytes, over the %d a results file may have: %w", path, st.Size(), int64(MaxFileBytes), ErrNotResults)
	}
	if err := sniff(path, st.Size()); err != nil {
		if errors.Is(err, ErrNotResults) {
			return nil, fmt.Errorf("results: %s: %w", path, err)
		}
		return nil, usageErr{fmt.Errorf("results: %w", err)} // unreadable: permission
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, usageErr{fmt.Errorf("results: %w", err)}
	}
	f, err := Decode(path, data)
	if err != nil {
		return nil, fmt.Errorf("results: %s: %w", path, err)
	}
	return f, nil
}

// sniff rejects a file that is not Arrow from its first 8 bytes, before it is read
// whole: an Arrow IPC file starts with its magic, a stream with the continuation token
// and the length of a schema message that fits in the file.
func sniff(path string, size int64) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	var head [8]byte
	n, _ := io.ReadFull(f, head[:])
	switch {
	case n == 0:
		return nil // Decode says what an empty file is
	case bytes.HasPrefix(head[:n], fileMagic[:min(n, len(fileMagic))]):
		return nil
	case n == 8 && binary.LittleEndian.Uint32(head[:4]) == 0xffffffff:
		if l := int64(binary.LittleEndian.Uint32(head[4:])); l > 0 && l <= size-8 && l <= 16<<20 {
			return nil
		}
	}
	hint := ""
	if strings.EqualFold(filepath.Ext(path), ".csv") || strings.EqualFold(filepath.Ext(path), ".parquet") {
		hint = "; a CSV or Parquet export is for notebooks: give the Arrow file it was exported from (longca merge writes it beside the export), or the run's folder"
	}
	return fmt.Errorf("its first bytes % x are not an Arrow file's or stream's (read %d of its %d bytes)%s: %w", head[:n], n, size, hint, ErrNotResults)
}

// Decode reads the bytes of a results file (see Open); path only names it.
func Decode(path string, data []byte) (f *File, err error) {
	f = &File{Path: path}
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("%w: reading it failed: %v", ErrDamaged, p)
		}
		if err != nil {
			f.Release()
			f = nil
		}
	}()
	if len(data) == 0 {
		return nil, fmt.Errorf("empty: its writer died before writing the schema: %w", ErrNotResults)
	}
	if bytes.HasPrefix(data, fileMagic) {
		err = f.readFile(data)
	} else {
		err = f.readStream(data)
	}
	if err == nil {
		err = f.join()
	}
	return f, err
}

// limits bound what the IPC readers allocate for one message by the input's size.
func limits(n int) []ipc.Option {
	return []ipc.Option{ipc.WithMetadataSizeLimit(int64(n)), ipc.WithBodySizeLimit(int64(n))}
}

func (f *File) readStream(data []byte) error {
	// Walk the messages, verifying each one's metadata before arrow-go reads it.
	var msgs []ipcMessage
	var stop error
	pos, eosEnd := 0, -1
	for pos < len(data) {
		m, isEOS, _, err := messageAt(data, pos)
		if err != nil {
			stop = err
			break
		}
		if isEOS {
			eosEnd = m.end
			break
		}
		if m.end%8 != 0 { // the writer pads every message to 8 bytes
			stop = fmt.Errorf("message at byte %d ends at byte %d, not 8-byte aligned", pos, m.end)
			break
		}
		if len(msgs) == 0 && m.header != headerSchema || len(msgs) > 0 && m.header != headerRecordBatch {
			stop = fmt.Errorf("message at byte %d is of type %d where a record batch belongs", pos, m.header)
			break
		}
		if len(msgs) > 0 && m.cols != msgs[0].cols {
			stop = fmt.Errorf("batch at byte %d has %d columns, the schema %d", pos, m.cols, msgs[0].cols)
			break
		}
		msgs = append(msgs, m)
		pos = m.end
	}
	if len(msgs) == 0 {
		return fmt.Errorf("no Arrow schema at the start (%v): %w", stop, ErrNotResults)
	}
	schemaEnd := msgs[0].end
	// arrow-go reads the messages it is given (in), one at a time: the schema now, then
	// each batch the coalescer does not take.
	in := &feed{b: data[:schemaEnd]}
	r, err := ipc.NewReader(in, limits(pos)...)
	if err != nil {
		return fmt.Errorf("the Arrow schema does not decode (%v): %w", err, ErrNotResults)
	}
	defer r.Release()
	if err := checkSchema(r.Schema()); err != nil {
		return fmt.Errorf("%v: %w", err, ErrNotResults)
	}
	f.Schema = r.Schema()
	goodEnd := schemaEnd
	rankFile := f.Meta(MetaRank) != ""
	// decode reads message k, the next batch (f.read), through arrow-go and accepts it;
	// ok is false, and stop says why, where it does not decode.
	decode := func(k int) (ok bool, err error) {
		in.b = data[msgs[k].start:msgs[k].end]
		if !r.Next() {
			if stop = r.Err(); stop == nil {
				stop = fmt.Errorf("batch %d (at byte %d) did not decode", f.read, msgs[k].start)
			}
			return false, nil
		}
		// A rank file's writer writes an empty first batch (the schema on disk at once),
		// then batches of rows (one a Write; up to writeRows a WriteAll batch), each
		// holding buffers sized for its rows (accept: exactBuffers).
		n := r.RecordBatch().NumRows()
		if rankFile && f.read == 0 && n != 0 {
			return false, fmt.Errorf("%w: batch 0 holds %d rows; a rank file's first batch holds none", ErrDamaged, n)
		}
		if rankFile && f.read > 0 && n < 1 {
			return false, fmt.Errorf("%w: batch %d holds %d rows; a rank file's batches after the first hold at least one", ErrDamaged, f.read, n)
		}
		if err := f.accept(r.RecordBatch(), f.read, rankFile); err != nil {
			return false, err
		}
		goodEnd = msgs[k].end
		return true, nil
	}
	// A rank file's batches of rows are read straight into batches of up to coalesceRows
	// rows (coalescer), not one by one through arrow-go: flush keeps the batch they make.
	// Where it fails its checks, its batches are decoded again one by one (decode), which
	// says which and why, as it did before them.
	var co *coalescer
	if rankFile && coalesceBatches {
		co = newCoalescer(f.Schema)
	}
	var replay []int
	flush := func() (ok bool, err error) {
		if co == nil || len(co.msgs) == 0 {
			return true, nil
		}
		first := co.first
		replay = append(replay[:0], co.msgs...)
		rec := co.build()
		verified, cerr := checkCoalesced(rec)
		if cerr == nil {
			if !verified {
				f.Unverified = true
			}
			full := f.gather.keep(rec)
			rec.Release()
			if full {
				return true, f.join()
			}
			return true, nil
		}
		rec.Release()
		f.read, goodEnd = first, msgs[replay[0]-1].end
		for _, k := range replay {
			if ok, err := decode(k); !ok || err != nil {
				return ok, err
			}
		}
		return true, nil
	}
	for k := 1; k < len(msgs); k++ {
		if co != nil && f.read > 0 {
			if b, ok := parseBatch(data, msgs[k], len(co.cols)); ok {
				// A batch of compactBatches rows or more (a WriteAll chunk's) is as compact
				// as a coalesced one: it makes one of its own, as arrow-go would.
				big := b.rows >= compactBatches
				if len(co.msgs) > 0 && (big || co.bytes+len(b.body) > joinBytes) {
					if ok, err := flush(); err != nil || !ok {
						if err != nil {
							return err
						}
						break
					}
				}
				if co.add(&b, f.read, k) {
					f.read++
					goodEnd = msgs[k].end
					if big || co.full() {
						if ok, err := flush(); err != nil {
							return err
						} else if !ok {
							break
						}
					}
					continue
				}
			}
		}
		if ok, err := flush(); err != nil {
			return err
		} else if !ok {
			break
		}
		if ok, err := decode(k); err != nil {
			return err
		} else if !ok {
			break
		}
	}
	if _, err := flush(); err != nil {
		return err
	}
	switch {
	case stop != nil:
		// A killed writer tears at most its last batch; a batch that does not decode
		// with a good one after it, or before the end marker, is damage.
		if bytes.HasSuffix(data, eos) {
			return fmt.Errorf("%w: batch %d (at byte %d) does not decode but the stream has its end marker: %v", ErrDamaged, f.read, goodEnd, stop)
		}
		if at := laterBatch(data, goodEnd); at >= 0 {
			return fmt.Errorf("%w: batch %d (at byte %d) does not decode but a whole batch lies at byte %d: %v", ErrDamaged, f.read, goodEnd, at, stop)
		}
		f.Truncated, f.Tail = true, stop.Error()
	case eosEnd >= 0 && eosEnd < len(data):
		return fmt.Errorf("%w: %d bytes follow the end marker at byte %d", ErrDamaged, len(data)-eosEnd, eosEnd-len(eos))
	case eosEnd < 0:
		f.Truncated, f.Tail = true, "no end-of-stream marker"
	}
	return nil
}

// feed is the bytes arrow-go's stream reader reads next: one message at a time.
type feed struct{ b []byte }

func (f *feed) Read(p []byte) (int, error) {
	if len(f.b) == 0 {
		return 0, io.EOF
	}
	n := copy(p, f.b)
	f.b = f.b[n:]
	return n, nil
}

// accept validates and verifies batch i (where exact, a rank file's, its buffers held to
// its rows: exactBuffers) and keeps it (an empty one is dropped). Small batches are joined
// compactBatches at a time (or joinBytes of data): a decoded batch costs about 300 bytes
// of Arrow objects a column whatever its rows, and a rank file's Write writes one row a
// batch, so a rank file of 20,000 rows (150 MB) took 1.3 GB to read whole. Batches then
// holds the joined batches, not one for each batch of the file.
func (f *File) accept(rec arrow.RecordBatch, i int, exact bool) error {
	f.read++
	if err := validateBatch(rec); err != nil {
		return fmt.Errorf("%w: batch %d: %v", ErrDamaged, i, err)
	}
	if exact {
		if err := exactBuffers(rec); err != nil {
			return fmt.Errorf("%w: batch %d: %v", ErrDamaged, i, err)
		}
	}
	verified, err := verifyChecksums(rec)
	if err != nil {
		return fmt.Errorf("%w: batch %d: %v", ErrDamaged, i, err)
	}
	if !verified && rec.NumRows() > 0 {
		f.Unverified = true
	}
	if f.gather.keep(rec) {
		return f.join()
	}
	return nil
}

// join joins the batches gathered since the last join into one, kept in Batches.
func (f *File) join() error {
	n := len(f.gather.pending)
	err := f.gather.flush(f.Schema)
	f.Batches = f.gather.joined
	if err != nil {
		return fmt.Errorf("%w: joining batches %d-%d: %v", ErrDamaged, f.read-n, f.read-1, err)
	}
	return nil
}

// joinBytes bounds the data of the batches joined into one (so that a column of strings
// stays far from the 2 GiB its 32-bit offsets can address).
const joinBytes = 64 << 20

// joiner gathers record batches and joins small ones compactBatches at a time (or
// joinBytes of data): a decoded batch costs about 300 bytes of Arrow objects a column
// whatever its rows, a joined one the same for all of its rows. A File's batches (Write
// writes one row a batch) and Merge's files (columnKeeper) are gathered so. Empty batches
// are dropped; one of compactBatches rows or more is kept as it is (flush).
type joiner struct {
	joined  []arrow.RecordBatch
	pending []arrow.RecordBatch
	bytes   int64 // of pending's data
	rows    int64 // of every batch kept
}

// keep holds rec (retained; an empty one is dropped) and says whether what is pending
// should now be joined (flush).
func (j *joiner) keep(rec arrow.RecordBatch) (full bool) {
	if rec.NumRows() == 0 {
		return false
	}
	rec.Retain()
	j.pending = append(j.pending, rec)
	j.bytes += batchBytes(rec)
	j.rows += rec.NumRows()
	return len(j.pending) >= compactBatches || j.bytes >= joinBytes
}

// flush joins the pending batches (with s's fields), kept in joined: each run of small
// ones into one; a batch of compactBatches rows or more (a WriteAll chunk of a rank
// file) is as compact as a joined one, and is kept as it is, not copied.
func (j *joiner) flush(s *arrow.Schema) error {
	pending := j.pending
	j.pending, j.bytes = nil, 0
	var run []arrow.RecordBatch
	var rows int64
	emit := func() error {
		defer func() { run, rows = nil, 0 }()
		switch len(run) {
		case 0:
			return nil
		case 1:
			j.joined = append(j.joined, run[0])
			return nil
		}
		rec, err := join(s, run, rows)
		for _, b := range run {
			b.Release()
		}
		if err != nil {
			return err
		}
		j.joined = append(j.joined, rec)
		return nil
	}
	for i, b := range pending {
		if b.NumRows() < compactBatches {
			run = append(run, b)
			rows += b.NumRows()
			continue
		}
		if err := emit(); err != nil {
			for _, b := range pending[i:] {
				b.Release()
			}
			return err
		}
		j.joined = append(j.joined, b)
	}
	return emit()
}

// release frees every batch held.
func (j *joiner) release() {
	for _, b := range j.joined {
		b.Release()
	}
	for _, b := range j.pending {
		b.Release()
	}
	j.joined, j.pending, j.bytes, j.rows = nil, nil, 0, 0
}

// batchBytes is the size of rec's buffers.
func batchBytes(rec arrow.RecordBatch) int64 {
	var n int64
	for _, c := range rec.Columns() {
		for _, b := range c.Data().Buffers() {
			if b != nil {
				n += int64(b.Len())
			}
		}
	}
	return n
}

// maxResync bounds the places laterBatch tries.
const maxResync = 4096

// laterBatch looks, from the batch that failed at byte from on, for a whole record batch
// message (its framing and metadata verify) and returns its offset, or -1. A killed writer leaves at most one torn
// message, never a whole one, so finding one means the stream was damaged. IPC messages
// start 8-byte aligned with the continuation token.
func laterBatch(data []byte, from int) int {
	tries := 0
	for at := from; at+8 <= len(data) && tries < maxResync; at += 8 {
		if !bytes.Equal(data[at:at+4], eos[:4]) {
			continue
		}
		tries++
		m, isEOS, _, err := messageAt(data, at)
		if err == nil && !isEOS && m.header == headerRecordBatch {
			return at
		}
	}
	return -1
}

// fileMagic opens and closes an Arrow IPC file.
var fileMagic = []byte("ARROW1")

// verifyFileLayout verifies an Arrow IPC file's framing and every message's metadata (its
// footer, schema and record batches), so that arrow-go's reader, which trusts them, can
// neither index outside data nor allocate what a damaged length claims.
func verifyFileLayout(data []byte, foreign bool, maxInflated int64) error {
	n := len(data)
	if n < 8+10 || !bytes.HasSuffix(data, fileMagic) {
		return fmt.Errorf("%w: an Arrow file without its closing magic (cut short?)", ErrDamaged)
	}
	footerLen := int(int32(binary.LittleEndian.Uint32(data[n-10:])))
	footerStart := n - 10 - footerLen
	if footerLen <= 0 || footerStart < 8 {
		return fmt.Errorf("%w: footer length %d", ErrDamaged, footerLen)
	}
	blocks, cols, err := verifyFooter(data[footerStart:n-10], foreign)
	if err != nil {
		return fmt.Errorf("%w: footer: %v", ErrDamaged, err)
	}
	sm, _, _, err := messageOf(data[:footerStart], 8, foreign)
	if err == nil && (sm.header != headerSchema || sm.cols != cols) {
		err = fmt.Errorf("the footer's schema has %d columns, the stream's %d", cols, sm.cols)
	}
	if err != nil {
		return fmt.Errorf("%w: schema message: %v", ErrDamaged, err)
	}
	var inflated int64
	for i, b := range blocks {
		end := b.offset + int64(b.metaLen) + b.bodyLen
		if b.offset < 8 || b.metaLen < 8 || b.bodyLen < 0 || end > int64(footerStart) {
			return fmt.Errorf("%w: batch %d's block (offset %d, %d+%d bytes) lies outside the file", ErrDamaged, i, b.offset, b.metaLen, b.bodyLen)
		}
		m, _, _, err := messageOf(data[:end], int(b.offset), foreign)
		switch {
		case err != nil:
		case b.dict && m.header != headerDictionary: // (its nodes are its value type's)
			err = fmt.Errorf("message of type %d where a dictionary batch belongs", m.header)
		case !b.dict && (m.header != headerRecordBatch || m.cols != sm.cols):
			err = fmt.Errorf("message of type %d with %d field nodes, the schema %d", m.header, m.cols, sm.cols)
		}
		if err != nil {
			return fmt.Errorf("%w: batch %d: %v", ErrDamaged, i, err)
		}
		if inflated += m.inflated; inflated > maxInflated {
			return fmt.Errorf("its compressed batches inflate to more than %d bytes (at batch %d), more than this reader will allocate: write the column alone, uncompressed", maxInflated, i)
		}
	}
	return nil
}

// VerifyArrowFile verifies the framing and metadata of an Arrow IPC file that longca did
// not write (a --counts file) before arrow-go reads it: any flat or nested column type
// (nested at most maxNesting deep), dictionaries, compressed or not (its buffers
// inflating to maxInflated bytes at most).
func VerifyArrowFile(data []byte, maxInflated int64) error {
	return verifyFileLayout(data, true, maxInflated)
}

func (f *File) readFile(data []byte) error {
	n := len(data)
	if err := verifyFileLayout(data, false, 0); err != nil {
		return err
	}
	r, err := ipc.NewFileReader(bytes.NewReader(data), limits(n)...)
	if err != nil {
		return fmt.Errorf("%w: Arrow file: %v", ErrDamaged, err)
	}
	defer r.Close()
	if err := checkSchema(r.Schema()); err != nil {
		return fmt.Errorf("%v: %w", err, ErrNotResults)
	}
	f.Schema = r.Schema()
	for i := 0; i < r.NumRecords(); i++ {
		rec, err := r.RecordBatch(i)
		if err != nil {
			return fmt.Errorf("%w: batch %d: %v", ErrDamaged, i, err)
		}
		if err := f.accept(rec, i, false); err != nil { // (checkRowCount holds it to its rows)
			return err
		}
	}
	if err := f.join(); err != nil {
		return err
	}
	return f.checkRowCount()
}

// checkRowCount holds a file to the row count its metadata records (merged files), so a
// damaged batch length cannot drop rows silently.
func (f *File) checkRowCount() error {
	want := f.Meta(MetaRows)
	if want == "" {
		return nil // written before the count was recorded
	}
	if got := fmt.Sprint(f.NumRows()); got != want {
		return fmt.Errorf("%w: %s rows read where the file records %s", ErrDamaged, got, want)
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
	if f == nil {
		return
	}
	f.gather.release()
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

// Loaded is what LoadChecked read: the rows, and the files it left out and why.
type Loaded struct {
	Rows []Row
	// Skipped names the files left out (damaged, not longca's, renamed) with the
	// reason; Missing the ranks without a readable file (or a merged file's record of
	// them: merge --allow-missing); Truncated the
	// files read whose writer stopped before the end marker (their finished rows are in Rows),
	// or a merged file's record of such rank files.
	Skipped, Missing, Truncated []string
	// Incomplete names the runs whose rank files hold fewer rows than they planned (a
	// sweep stopped before its end: MetaPlannedRows), or a merged file's record of them
	// (MetaIncomplete).
	Incomplete []string
	// Recent holds those of Truncated whose rank file was last written less than
	// RecentWrite before it was read, with how long before: its writer may still be
	// writing it (a run still going), or was stopped just now; not cut short for sure.
	Recent map[string]time.Duration
	// Stale says why a merged file does not hold what its rank files do now (it was
	// merged while a run was writing): a folder's merged.arrow so is passed over for its
	// rank files; a merged file given by name is read as it is. "" when neither.
	Stale string
	// MergedRuns are the runs a merged file read holds (its MetaRuns, those without a row
	// among them): nil where rank files were read.
	MergedRuns []string
}

// mergedRuns are the runs the merged file f holds (its MetaRuns).
func mergedRuns(f *File) []string {
	var out []string
	for _, r := range strings.Split(f.Meta(MetaRuns), ",") {
		if r != "" {
			out = append(out, r)
		}
	}
	return out
}

// runsNotIn lists the runs with rank files in dir that the merged file f does not hold
// (its MetaRuns).
func runsNotIn(dir string, f *File) []string {
	all, err := Scan(dir)
	if err != nil {
		return nil
	}
	held := map[string]bool{}
	for _, r := range mergedRuns(f) {
		held[r] = true
	}
	var out []string
	for id := range all {
		if !held[id] {
			out = append(out, id)
		}
	}
	sort.Strings(out)
	return out
}

// Load reads the rows of a results file, or of a folder (see LoadChecked, which also
// says which files it skipped).
func Load(path string) ([]Row, error) {
	l, err := LoadChecked(path)
	return l.Rows, err
}

// LoadChecked reads the rows of a results file, or of a folder: its merged.arrow when
// there is one, else every readable rank file in it. In a folder, a file that cannot be
// used is skipped and named in Loaded.Skipped (missing ranks are not an error here); a
// file given by name must be readable. A folder none of whose files can be read is a
// usage error (ErrUsage) naming each and why.
func LoadChecked(path string) (Loaded, error) {
	st, err := os.Stat(path)
	if err != nil {
		return Loaded{}, fmt.Errorf("results: %w", err)
	}
	if !st.IsDir() {
		rows, f, err := ReadRows(path)
		if err != nil {
			return Loaded{Rows: rows}, err
		}
		l, err := measuredFile(path, rows)
		l.Truncated, l.Incomplete, l.Missing = truncatedOf(path, f), incompleteOf(f, len(rows)), missingOf(f)
		now := time.Now()
		if f.Meta(MetaRuns) != "" { // a merged file: held to the rank files beside it
			l.MergedRuns = mergedRuns(f)
			l.Stale, l.Truncated, l.Incomplete = staleFile(path, f, l.Truncated, l.Incomplete)
			l.Recent = recentOf(filepath.Dir(path), f, l.Truncated, now)
		} else if age, ok := recentAge(now, st.ModTime()); ok && f.Truncated {
			l.Recent = map[string]time.Duration{l.Truncated[0]: age}
		}
		return l, err
	}
	var out Loaded
	used := 0
	merged := filepath.Join(path, "merged.arrow")
	if _, err := os.Stat(merged); err == nil {
		rows, f, err := ReadRows(merged)
		if err == nil {
			used++
			// The merged file stands for the folder only when it holds every run whose
			// rank files are there, as they are now: a later run in the same folder must
			// not be hidden, nor the rows a run wrote after a merge made while it ran.
			extra := runsNotIn(path, f)
			if len(extra) > 0 {
				out.Skipped = append(out.Skipped, fmt.Sprintf("%s: it lacks run(s) %s whose rank files are in the folder: reading the rank files instead", merged, strings.Join(extra, ", ")))
			} else if out.Stale = staleMerged(path, merged, f); out.Stale == "" {
				l, err := measuredFile(merged, rows)
				l.Truncated, l.Incomplete, l.Missing = truncatedOf(merged, f), incompleteOf(f, len(rows)), missingOf(f)
				l.Recent = recentOf(path, f, l.Truncated, time.Now())
				l.MergedRuns = mergedRuns(f)
				return l, err
			}
		} else {
			out.Skipped = append(out.Skipped, strings.TrimPrefix(err.Error(), "results: "))
		}
	}
	c, err := collect(path, nil, func() keeper { return &rowKeeper{} })
	if err != nil {
		return out, fmt.Errorf("results: %w", err)
	}
	defer c.release()
	out.Skipped = append(out.Skipped, c.skipped...)
	out.Missing, out.Truncated, out.Incomplete = c.missing, c.truncated, c.incomplete
	out.Recent = c.recent(time.Now())
	if k, ok := c.kept.(*rowKeeper); ok {
		out.Skipped = append(out.Skipped, k.skipped...)
		out.Rows = k.rows
		used += k.used
	}
	if used == 0 && len(out.Skipped) > 0 {
		// Every file was left out: an empty table would read as a run without rows.
		return out, Usagef("none of the folder's %d results file(s) can be read (%s): give a folder a longca run wrote", len(out.Skipped), firstFew(out.Skipped, 3))
	}
	return out, nil
}

// rowKeeper keeps the rows of the files collect reads for LoadChecked: their rows
// (without those keepMeasured leaves out), the files left out or cut down and why, and
// how many files gave rows.
type rowKeeper struct {
	rows    []Row
	skipped []string
	used    int
	// strs holds one copy of each string the rows hold: a decoded row's strings point
	// into its file's Arrow buffers, which would keep each file's buffers (about 2.5 KB
	// for a one-row rank file) alive; many (host, command, env) repeat from file to file.
	strs map[string]string
}

// rowStrings are the indices of Row's string fields (Status included).
var rowStrings = func() []int {
	var out []int
	t := reflect.TypeOf(Row{})
	for i := 0; i < t.NumField(); i++ {
		if t.Field(i).Type.Kind() == reflect.String {
			out = append(out, i)
		}
	}
	return out
}()

// own makes row r's strings the keeper's, free of the file's buffers.
func (k *rowKeeper) own(r *Row) {
	if k.strs == nil {
		k.strs = map[string]string{}
	}
	v := reflect.ValueOf(r).Elem()
	for _, i := range rowStrings {
		f := v.Field(i)
		s := f.String()
		if s == "" {
			continue
		}
		c, ok := k.strs[s]
		if !ok {
			c = strings.Clone(s)
			k.strs[c] = c
		}
		f.SetString(c)
	}
}

// add keeps f's rows; Rows matches columns by name, so the layout is not needed: a
// column f lacks (written by an older longca) decodes as its zero value.
func (k *rowKeeper) add(f *File, _ *arrow.Schema) {
	rows, err := f.Rows()
	if err != nil {
		k.skipped = append(k.skipped, err.Error())
		return
	}
	kept, why := keepMeasured(f.Path, rows)
	if why != "" {
		k.skipped = append(k.skipped, why)
	}
	if len(kept) == 0 && len(rows) > 0 {
		return
	}
	for i := range kept {
		k.own(&kept[i])
	}
	k.rows = append(k.rows, kept...)
	k.used++
}

func (k *rowKeeper) release() { k.strs = nil }

// truncatedOf is what LoadChecked says of one file read whole: the file itself where its
// writer stopped before the end marker, or the rank files a merged file records as such.
func truncatedOf(path string, f *File) []string {
	if f == nil {
		return nil
	}
	var out []string
	if f.Truncated {
		out = append(out, fmt.Sprintf("%s (%s)", path, f.Tail))
	}
	if m := f.Meta(MetaTruncated); m != "" {
		out = append(out, strings.Split(m, "; ")...)
	}
	return out
}

// missingOf is a merged file's record of the ranks it was merged without (merge
// --allow-missing: MetaMissing), as Loaded.Missing names them; nil for any other file.
func missingOf(f *File) []string {
	if f == nil || f.Meta(MetaMissing) == "" {
		return nil
	}
	return strings.Split(f.Meta(MetaMissing), "; ")
}

// measuredFile is what LoadChecked returns of one file that stands alone (a file given by
// name, or a folder's merged file holding its every run): its rows without those
// keepMeasured leaves out, named in Skipped. A file none of whose rows can be used is a
// usage error, as a folder none of whose files can be: an empty table would read as a run
// without rows.
func measuredFile(path string, rows []Row) (Loaded, error) {
	kept, why := keepMeasured(path, rows)
	if why == "" {
		return Loaded{Rows: rows}, nil
	}
	if len(kept) == 0 {
		return Loaded{Skipped: []string{why}}, Usagef("%s: none of its rows can be used (%s): give a file a longca run wrote", path, why)
	}
	return Loaded{Rows: kept, Skipped: []string{why}}, nil
}

// badFigures says which of an ok or predicted row's times and rates are not what a
// measurement (or a prediction) can have, a finite number >= 0: "median_ms NaN, tflops
// -3"; "" when all are (or the row has another status, whose figures are null).
// Durations and FLOPs over them are never NaN, infinite or negative; such a row was
// written by hand or by another program, and one of them made a table's average NaN, a
// CP run's kernel_tflops and cp_efficiency (--baseline) NaN, and simulate --compare's
// error NaN.
func badFigures(r Row) string {
	if r.Status != StatusOK && r.Status != StatusPredicted {
		return ""
	}
	var bad []string
	check := func(name string, v *float64) {
		if v != nil && !(*v >= 0 && !math.IsInf(*v, 1)) {
			bad = append(bad, fmt.Sprintf("%s %v", name, *v))
		}
	}
	check("flops", &r.FLOPs)
	check("median_ms", r.MedianMs)
	check("min_ms", r.MinMs)
	check("max_ms", r.MaxMs)
	check("mean_ms", r.MeanMs)
	check("tflops", r.TFLOPs)
	check("bandwidth_gbs", r.BandwidthGBs)
	check("samples_tflops_median", r.SamplesTFLOPsMedian)
	check("samples_tflops_min", r.SamplesTFLOPsMin)
	check("samples_tflops_max", r.SamplesTFLOPsMax)
	check("device_tflops", r.DeviceTFLOPs)
	check("kernel_tflops", r.KernelTFLOPs)
	check("cp_efficiency", r.CPEfficiency)
	check("no_comm_ms", r.NoCommMs)
	// the card's state and the check's figures: a clock of NaN and a power of +Inf passed
	// into report --clocks' summary line ("SM clock NaN-NaN MHz") while its per-case table
	// showed "-" (the eleventh pass)
	check("sm_clock_mhz", r.SMClockMHz)
	check("power_w", r.PowerW)
	check("settle_ms", r.SettleMs)
	check("check_err", r.CheckErr)
	check("check_tol", r.CheckTol)
	check("kept_ratio", r.KeptRatio)
	check("exposed_comm_share", r.ExposedCommShare)
	return strings.Join(bad, ", ")
}

// keepMeasured returns the rows of the file at path without those whose figures are not
// a measurement's (badFigures), and a line naming the first few of those ("" when none).
// LoadChecked leaves them out of what it returns (merge copies files as they are).
func keepMeasured(path string, rows []Row) ([]Row, string) {
	var kept []Row
	var first []string
	n := 0
	for i, r := range rows {
		why := badFigures(r)
		if why == "" {
			if n > 0 {
				kept = append(kept, r)
			}
			continue
		}
		if n == 0 {
			kept = append(kept, rows[:i]...)
		}
		if n++; n <= 3 {
			name := r.Kernel
			if r.Method != "" {
				name = r.Method
			}
			first = append(first, fmt.Sprintf("row %d (%s %s %s %d %s): %s", i, clip(r.Bench), clip(name), clip(r.Mask), r.SeqLen, clip(r.Pass), why))
		}
	}
	if n == 0 {
		return rows, ""
	}
	more := ""
	if n > len(first) {
		more = fmt.Sprintf("; and %d more", n-len(first))
	}
	return kept, fmt.Sprintf("%s: %d of its %d rows left out, their times or rates not finite numbers >= 0 as a measurement's are (%s%s)", path, n, len(rows), strings.Join(first, "; "), more)
}

// clip bounds a name read from a file for a message: at most 40 bytes, quoted.
func clip(s string) string {
	if len(s) > 40 {
		s = s[:40] + "..."
	}
	return strconv.Quote(s)
}
