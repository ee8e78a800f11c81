package results

import (
	"bufio"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/ipc"
)

// FileName is the name of one rank's results file: <run>.rank-<r>-of-<n>.arrow, so that
// several runs can share a folder.
func FileName(runID string, rank, size int) string {
	return fmt.Sprintf("%s.rank-%d-of-%d.arrow", runID, rank, size)
}

var rankFile = regexp.MustCompile(`^(.+)\.rank-(\d+)-of-(\d+)\.arrow$`)

// MaxWorldSize is the most ranks a run's files may name: spmd.MaxWorld (2^20), the most a
// world may have (results does not import spmd; TestMaxWorldSizeIsSpmds holds the two
// equal). A name claiming more is no file of ours, and a merge must not walk its ranks.
const MaxWorldSize = 1 << 20

// ParseFileName reads a FileName back; ok is false for any other name, among them one
// whose world size is over MaxWorldSize or whose numbers FileName would not write
// (rank-01 would be a second file of rank 1).
func ParseFileName(name string) (runID string, rank, size int, ok bool) {
	m := rankFile.FindStringSubmatch(name)
	if m == nil {
		return "", 0, 0, false
	}
	r, err1 := strconv.Atoi(m[2])
	n, err2 := strconv.Atoi(m[3])
	if err1 != nil || err2 != nil || n <= 0 || n > MaxWorldSize || r >= n || FileName(m[1], r, n) != name {
		return "", 0, 0, false
	}
	return m[1], r, n, true
}

// Writer appends rows to one rank's file, an Arrow IPC stream: the schema, an empty
// record batch, then a batch for each Write (one row) and for each writeRows rows of
// WriteAll, its buffers sized for its rows (the reader holds a rank file's batches to
// that: exactBuffers). Every Write's row is written and fsynced before Write returns, so
// a crash, an out-of-memory kill or SIGKILL after row k leaves rows 1..k readable (Read
// accepts the stream without its end marker); WriteAll writes rows already in hand (a
// simulation's) a batch at a time, with one fsync per syncRows. Safe for concurrent use.
type Writer struct {
	mu     sync.Mutex
	path   string
	f      *os.File
	buf    *bufio.Writer // between w and f: a batch's messages reach f in a few writes
	w      *ipc.Writer
	schema *arrow.Schema
	n      int
	syncs  int // fsyncs of rows (tests count them)
}

// CheckRunID says why id cannot be a run id, or nil: a run id names files inside the
// results folder, so it is 1 to MaxRunIDLen letters, digits, '.', '_', '-' and '+', not
// starting with '.' or '-' (no '/', no "..": it cannot point outside the folder).
func CheckRunID(id string) error {
	if id == "" || len(id) > MaxRunIDLen {
		return fmt.Errorf("run id %q must have 1 to %d characters", id, MaxRunIDLen)
	}
	if id[0] == '.' || id[0] == '-' {
		return fmt.Errorf("run id %q must not start with %q", id, id[0])
	}
	for _, c := range id {
		if !runIDChar(c) {
			return fmt.Errorf("run id %q has %q: use letters, digits, '.', '_', '-', '+' (it names files in the results folder)", id, c)
		}
	}
	return nil
}

// MaxRunIDLen is the longest run id CheckRunID takes.
const MaxRunIDLen = 128

// runIDChar says whether c may stand in a run id.
func runIDChar(c rune) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.ContainsRune("._-+", c)
}

// RunIDFrom is s with every character a run id cannot hold as '-', cut to MaxRunIDLen
// bytes (a name made from a launcher's job id; CheckRunID still judges its first character).
func RunIDFrom(s string) string {
	s = strings.Map(func(c rune) rune {
		if runIDChar(c) {
			return c
		}
		return '-'
	}, s)
	return s[:min(len(s), MaxRunIDLen)]
}

// CheckNewRun refuses, before a run of size ranks starts, a run id that dir already
// holds in a form the new run cannot join: its merged file (MergedPath), or rank files
// of another world size (a merge keeps one size's and leaves the others out, so the
// earlier rows would vanish from the run's merge). Rank files of the same size are left
// to Create, which refuses each rank's own: the other ranks of a launch may be writing
// theirs now; unless allHere, when this process writes every rank's file (in-process
// ranks), and any of them is refused now, once, rather than by each rank. A usage error
// (ErrUsage) naming the file; nil when dir does not exist.
func CheckNewRun(dir, runID string, size int, allHere bool) error {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil // Create says what is wrong with the folder
	}
	for _, e := range ents {
		name := e.Name()
		if name == runID+".merged.arrow" {
			return Usagef("%s exists: run %s was written to %s already (a run id is used once; nothing is overwritten): give another run id or folder", filepath.Join(dir, name), runID, dir)
		}
		if id, _, n, ok := ParseFileName(name); ok && id == runID && n != size {
			return Usagef("%s exists: run %s was written to %s already, on %d rank(s), and this run has %d (a run id is used once; nothing is overwritten): give another run id or folder", filepath.Join(dir, name), runID, dir, n, size)
		} else if ok && id == runID && allHere {
			return Usagef("%s exists: run %s has rank files in %s already (a run id is used once; nothing is overwritten): give another run id or folder", filepath.Join(dir, name), runID, dir)
		}
	}
	return nil
}

// Create makes dir (if needed) and the rank's file in it; an existing file is a usage
// error (ErrUsage: a run id is used once). The file does not say how many rows its run
// plans (CreatePlanned does).
func Create(dir, runID string, rank, size int) (*Writer, error) {
	return CreatePlanned(dir, runID, rank, size, -1)
}

// CreatePlanned is Create of a file whose run plans planned rows for this rank (every
// case, sample and pass of its sweep), recorded in the schema's metadata
// (MetaPlannedRows): the stream's schema is written first and never again, so the plan is
// what a reader holds the rows against to tell a sweep stopped before its end (closed
// with fewer rows) from a whole one. A negative planned records no plan.
func CreatePlanned(dir, runID string, rank, size, planned int) (*Writer, error) {
	if err := CheckRunID(runID); err != nil {
		return nil, fmt.Errorf("results: %w", err)
	}
	if size <= 0 || size > MaxWorldSize || rank < 0 || rank >= size {
		return nil, fmt.Errorf("results: bad writer identity: run %q rank %d of %d", runID, rank, size)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("results: %w", err)
	}
	path := filepath.Join(dir, FileName(runID, rank, size))
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if errors.Is(err, fs.ErrExist) {
		return nil, Usagef("results: %s exists: run %s has rank files in %s already (a run id is used once; nothing is overwritten): give another run id or folder", path, runID, dir)
	}
	if err != nil {
		return nil, fmt.Errorf("results: %w", err)
	}
	// A run of another size started with the same id at the same time passed CheckNewRun
	// too: whichever of the two creates its file second sees the other's and yields (both
	// may), rather than both writing rows that one merge cannot hold.
	if err := CheckNewRun(dir, runID, size, false); err != nil {
		f.Close()
		os.Remove(path)
		return nil, err
	}
	md := map[string]string{
		MetaRunID:     runID,
		MetaRank:      strconv.Itoa(rank),
		MetaWorldSize: strconv.Itoa(size),
	}
	if planned >= 0 {
		md[MetaPlannedRows] = strconv.Itoa(planned)
	}
	s := Schema(md)
	buf := bufio.NewWriterSize(f, bufBytes)
	w := &Writer{path: path, f: f, buf: buf, schema: s, w: ipc.NewWriter(buf, ipc.WithSchema(s))}
	// An empty batch puts the schema on disk now: a file killed before its first row
	// still reads as a valid, empty result.
	if err := w.write(nil); err != nil {
		f.Close()
		return nil, err
	}
	return w, nil
}

// NoRoom says whether err is a write the machine refused for want of room: the disk or
// the quota full, the file-size limit (`ulimit -f`), the file system made read-only.
func NoRoom(err error) bool {
	for _, e := range []error{syscall.ENOSPC, syscall.EDQUOT, syscall.EFBIG, syscall.EROFS} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

// Path is the file being written.
func (w *Writer) Path() string { return w.path }

// Len is the number of rows written.
func (w *Writer) Len() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.n
}

// Write appends one row and makes it durable (fsync) before returning.
func (w *Writer) Write(r Row) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if err := w.write([]Row{r}); err != nil {
		return err
	}
	w.n++
	return nil
}

// syncRows is the most rows WriteAll writes between two fsyncs: it bounds the rows a crash
// of the machine inside the call can lose (what was written since the last fsync). Row by
// row, fsynced, 100,000 simulate rows took 457 s on a 2-core VM's disk; 4096 at a time,
// one batch a row, 24 to 38 s, and 807 MB that took 35-42 s and 1.8 GB to merge; one batch
// a chunk, 205 MB.
const syncRows = 4096

// writeRows is the most rows WriteAll encodes at once and writes as one record batch,
// handed to the kernel whole before the next is encoded. A process killed while it writes
// (SIGKILL, out of memory: the machine still up) leaves at most that batch torn, and its
// rows lost with those not yet written; every batch before it reads back, fsynced or not.
// When a record batch held a chunk of syncRows rows, a kill lost every row of the chunk at
// hand, up to 4095 of them written before it. A batch also bounds the memory of one call
// (about 2 KB a row encoded). Its metadata (some 5 KB) once for 256 rows made a file of
// 100,000 test rows of 680 bytes 3% larger than batches of 4096 rows did (70.2 MB, 68.2),
// and the reader reads batches of rows into larger ones (coalescer) at no more cost.
const writeRows = 256

// bufBytes is the buffer between the IPC writer and the file: a one-row batch is about
// 7 KB, written by the IPC writer in some 20 pieces; small, as a process may write many
// ranks' files.
const bufBytes = 64 << 10

// WriteAll appends rows, a record batch for each writeRows of them, and makes them durable
// (fsync) once every syncRows rows instead of once a row: for rows already in hand (a
// simulation's), where Write's fsync a row made 100,000 rows take minutes, and a batch a
// row made a file four times the size of its rows. Each batch is handed to the kernel
// before the next is encoded: a process killed during the call leaves the rows of every
// batch written before readable (a torn last batch is dropped, as after a killed Write),
// a crash of the machine those of the batches fsynced before. Len counts the rows of the
// batches written.
func (w *Writer) WriteAll(rows []Row) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	for len(rows) > 0 {
		chunk := rows[:min(len(rows), syncRows)]
		for part := chunk; len(part) > 0; {
			batch := part[:min(len(part), writeRows)]
			if err := w.put(batch); err != nil {
				return err
			}
			w.n += len(batch)
			part = part[len(batch):]
		}
		if err := w.sync(); err != nil {
			return err
		}
		rows = rows[len(chunk):]
	}
	return nil
}

// write encodes rows as one record batch (none: an empty batch), writes it, then flushes
// and fsyncs the file.
func (w *Writer) write(rows []Row) error {
	if err := w.put(rows); err != nil {
		return err
	}
	return w.sync()
}

// put encodes rows as one record batch (none: an empty batch), writes it and hands it to
// the kernel (the buffer flushed). Record's builders and arrow-go's IPC writer size its
// buffers for its rows, as exactBuffers holds a rank file's batches to.
func (w *Writer) put(rows []Row) error {
	if w.w == nil {
		return fmt.Errorf("results: %s is closed", w.path)
	}
	rec := Record(w.schema, rows)
	defer rec.Release()
	if err := w.w.Write(rec); err != nil {
		return fmt.Errorf("results: writing %s: %w", w.path, err)
	}
	if err := w.buf.Flush(); err != nil {
		return fmt.Errorf("results: writing %s: %w", w.path, err)
	}
	return nil
}

// sync makes what was written durable (fsync).
func (w *Writer) sync() error {
	if err := w.f.Sync(); err != nil {
		return fmt.Errorf("results: syncing %s: %w", w.path, err)
	}
	w.syncs++
	return nil
}

// Close writes the stream's end marker and closes the file.
func (w *Writer) Close() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.w == nil {
		return nil
	}
	err := w.w.Close()
	w.w = nil
	if ferr := w.buf.Flush(); err == nil && ferr != nil {
		err = ferr
	}
	if serr := w.f.Sync(); err == nil && serr != nil {
		err = serr
	}
	if cerr := w.f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("results: closing %s: %w", w.path, err)
	}
	return nil
}
