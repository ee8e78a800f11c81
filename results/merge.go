package results

import (
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

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
	// RefuseEmpty refuses, with ErrNoRows and nothing written, a merge whose runs hold no
	// row at all (longca merge's: a run's own merge writes it).
	RefuseEmpty bool
}

// ErrNoRows is Merge's error, under RefuseEmpty, when the runs merged hold no row; its
// MergeResult names the runs and their truncated files.
var ErrNoRows = errors.New("merge: the runs hold no rows")

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
	// Recent holds those of Truncated last written less than RecentWrite before the merge
	// read them, with how long before: their writer may still be writing them (a merge of a
	// run that is still going), or was stopped just now.
	Recent map[string]time.Duration
	// Incomplete names the runs whose rank files hold fewer rows than they planned (a
	// sweep stopped before its end), with their counts (MetaIncomplete).
	Incomplete []string
	// Skipped names the files left out and why: damaged, not longca's, or of another run
	// or rank than their name says. Their ranks count as missing. (Files of another
	// longca version are merged by column name, or refused: never skipped.)
	Skipped []string
	// Unverified names files whose rows carry no checksums (older writers).
	Unverified []string
}

// RunFiles are the rank files of one run id.
type RunFiles struct {
	// Size is the world size in the file names (the one most of the run's files have).
	Size int
	// Paths maps each present rank to its file.
	Paths map[int]string
	// Skipped are the run's files named for another world size, and why.
	Skipped []string
}

// Scan finds every rank file in dir, grouped by run id. When a run's files disagree on
// the world size, the size most of them have wins and the others are listed in its
// Skipped (a stray file does not block the folder).
//
// A folder of more than MaxFolderFiles rank files is refused (ErrUsage); its entries are
// read a batch at a time, so that a folder of millions of them is counted, not held.
func Scan(dir string) (map[string]*RunFiles, error) {
	d, err := os.Open(dir)
	if err != nil {
		return nil, err
	}
	defer d.Close()
	type named struct {
		rank int
		path string
	}
	bySize := map[string]map[int][]named{}
	found := 0
	for {
		ents, err := d.ReadDir(scanBatch)
		for _, e := range ents {
			id, rank, size, ok := ParseFileName(e.Name())
			if !ok || e.IsDir() {
				continue
			}
			if found++; found > maxFolderFiles {
				bySize = nil // (counted on, not kept)
				continue
			}
			if bySize[id] == nil {
				bySize[id] = map[int][]named{}
			}
			bySize[id][size] = append(bySize[id][size], named{rank, filepath.Join(dir, e.Name())})
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, err
		}
	}
	if found > maxFolderFiles {
		return nil, Usagef("%s holds %d rank files (*.rank-R-of-N.arrow), more than the %d that longca reads of one folder: move runs into folders of their own and merge or report each", dir, found, maxFolderFiles)
	}
	runs := map[string]*RunFiles{}
	for id, sizes := range bySize {
		best := -1
		for size, fs := range sizes {
			if best < 0 || len(fs) > len(sizes[best]) || len(fs) == len(sizes[best]) && size < best {
				best = size
			}
		}
		rf := &RunFiles{Size: best, Paths: map[int]string{}}
		for _, f := range sizes[best] {
			rf.Paths[f.rank] = f.path
		}
		for size, fs := range sizes {
			if size == best {
				continue
			}
			for _, f := range fs {
				rf.Skipped = append(rf.Skipped, fmt.Sprintf("%s: run %s has %d file(s) for %d ranks and this one for %d", f.path, id, len(sizes[best]), best, size))
			}
		}
		sort.Strings(rf.Skipped)
		runs[id] = rf
	}
	return runs, nil
}

// ranks are the keys of a set of ranks, sorted.
func ranks[V any](set map[int]V) []int {
	out := make([]int, 0, len(set))
	for r := range set {
		out = append(out, r)
	}
	sort.Ints(out)
	return out
}

// maxMissingShown bounds the pieces (a rank or a range) describeMissing names.
const maxMissingShown = 16

// describeMissing says which ranks of 0..size-1 are not among present (sorted, each in
// range), compactly: "rank 2 of 4 missing", "ranks 0, 2 of 4 missing", "ranks 1-999 of
// 1000 missing" (three or more in a row are a range); past maxMissingShown pieces it
// names the count instead of the rest. "" when none is missing. Its work and text grow
// with the ranks present, not with size (a name may claim up to MaxWorldSize ranks).
func describeMissing(size int, present []int) string {
	count := size - len(present)
	if count <= 0 {
		return ""
	}
	var pieces []string
	more := false
	gap := func(lo, hi int) { // ranks lo..hi-1 are missing
		switch {
		case lo >= hi:
		case len(pieces) >= maxMissingShown:
			more = true
		case hi-lo >= 3:
			pieces = append(pieces, fmt.Sprintf("%d-%d", lo, hi-1))
		default:
			for r := lo; r < hi; r++ {
				pieces = append(pieces, strconv.Itoa(r))
			}
		}
	}
	next := 0
	for _, r := range present {
		gap(next, r)
		next = r + 1
	}
	gap(next, size)
	list := strings.Join(pieces, ", ")
	if more {
		list += fmt.Sprintf(", ... (%d in all)", count)
	}
	word := "ranks"
	if count == 1 {
		word = "rank"
	}
	return fmt.Sprintf("%s %s of %d missing", word, list, size)
}

// collected is what collect read of a folder.
type collected struct {
	runs []string
	// paths are the files used (in run, then rank order); schema their columns (the
	// first one's, or the union's where their columns differ: see union) with the first
	// one's metadata.
	paths  []string
	schema *arrow.Schema
	// kept is what the caller's keeper kept of the files used.
	kept       keeper
	missing    []string
	truncated  []string
	skipped    []string
	unverified []string
	incomplete []string // runs of fewer rows than planned (planTally)
	// seen is each rank file's size and time just before it was read (note).
	seen []seenFile
}

func (c *collected) release() {
	if c.kept != nil {
		c.kept.release()
		c.kept = nil
	}
}

// keeper keeps what its caller needs of the files collect reads, so that a folder of
// many small files costs memory in proportion to its rows, not to its files (a decoded
// file holds about 70 KB of Arrow objects and its own copy of the schema, whatever its
// rows): Merge keeps the Arrow columns, compacted (columnKeeper), LoadChecked the rows
// (rowKeeper). collect makes one for all the files it accepts.
type keeper interface {
	// add keeps what is needed of f, a file collect accepted; collect releases f after.
	// layout is the columns of the files accepted so far, f included (union.layout):
	// what is kept of every file so far is to have them, in that order.
	add(f *File, layout *arrow.Schema)
	// release frees what was kept.
	release()
}

// MaxFolderFiles bounds the rank files of one folder that longca reads (Scan, and so
// merge and report): each costs up to a few KB of bookkeeping (its name, rank, what is
// said of it) besides its rows, and about half a millisecond to read. A folder of more
// is refused: move runs into folders of their own.
const MaxFolderFiles = 200_000

// maxFolderFiles is MaxFolderFiles (a test lowers it).
var maxFolderFiles = MaxFolderFiles

// scanBatch is how many folder entries Scan reads at a time.
const scanBatch = 4096

// HostBytes is the memory this process may still take, which collect holds its estimate
// of a folder's read against (besides MaxFolderFiles). longca sets it to
// harness.ThisMachine's reading (MemAvailable, cgroup and address-space limits), which
// this package cannot import; unset (+Inf), only MaxFolderFiles bounds a read.
var HostBytes = func() float64 { return math.Inf(1) }

// The estimate of a folder's read (collectEstimate): what is kept of a file is at most
// keptPerByte times its size, plus perFileBytes of bookkeeping; the file being decoded
// takes up to openPerByte times its own size while it is read (Open), and the merge's
// output as much again as what is kept. fitShare is the share of HostBytes a read may
// plan to use (the rest is the Go runtime's and the report's).
const (
	keptPerByte  = 1
	perFileBytes = 2 << 10
	openPerByte  = 4
	fitShare     = 0.85
)

// collectEstimate is the memory that reading files totalling bytes (the largest of
// which has largest bytes) is planned to take.
func collectEstimate(files int, bytes, largest int64) float64 {
	return 2*keptPerByte*float64(bytes) + perFileBytes*float64(files) + openPerByte*float64(largest)
}

// collect opens the rank files of the given runs of dir (every run when runs is empty),
// keeping (through the keeper newKeeper makes) what is needed of the readable files whose
// content matches their name; the others are skipped with the reason, and their ranks
// are missing. Files of longca versions whose columns differ (one has a column another
// lacks: a column added since) are joined by column name (union); files that cannot be
// joined so (another schema version, a column of another type) are a usage error
// (ErrUsage) naming both files and their longca versions, never a file skipped. Files are
// read one at a time and released before the next is opened. A folder of more than
// MaxFolderFiles rank files, or whose read is estimated at more memory than HostBytes
// leaves, is refused (ErrUsage) before any is read.
func collect(dir string, runs []string, newKeeper func() keeper) (*collected, error) {
	explicit := len(runs) > 0
	all, err := Scan(dir)
	if err != nil {
		return nil, err
	}
	if len(runs) > 0 {
		for i, id := range runs {
			if slices.Contains(runs[:i], id) { // (its rows were merged twice)
				return nil, Usagef("--run %s given twice: give each run once", id)
			}
			if all[id] == nil {
				return nil, Usagef("no files of run %s in %s (it holds %s)", id, dir, describeRuns(all))
			}
		}
	} else {
		for id := range all {
			runs = append(runs, id)
		}
	}
	if len(runs) == 0 {
		return nil, Usagef("no rank files (*.rank-R-of-N.arrow) in %s%s: give the folder a run wrote its results to", dir, oversized(dir))
	}
	c := &collected{runs: append([]string(nil), runs...)}
	sort.Strings(c.runs)
	if err := checkCollect(dir, c.runs, all, explicit); err != nil {
		return nil, err
	}
	keep := newKeeper()
	var u union
	var plan planTally
	present := map[string]map[int]bool{}
	for _, id := range c.runs {
		rf := all[id]
		c.skipped = append(c.skipped, rf.Skipped...)
		for _, r := range ranks(rf.Paths) {
			p := rf.Paths[r]
			c.note(id, r, rf.Size, p)
			f, err := Open(p)
			if err == nil {
				if err = checkIdentity(f, id, r, rf.Size); err != nil {
					f.Release()
				}
			}
			if err != nil {
				c.skipped = append(c.skipped, strings.TrimPrefix(err.Error(), "results: "))
				continue
			}
			if err := u.admit(f); err != nil {
				f.Release()
				keep.release()
				return nil, Usagef("%v: merge each version's runs on their own (longca merge %s --run ID --out FILE, then report that file), or move them into folders of their own", err, dir)
			}
			plan.add(id, f, f.NumRows())
			keep.add(f, u.layout())
			f.Release()
			c.paths = append(c.paths, p)
			if present[id] == nil {
				present[id] = map[int]bool{}
			}
			present[id][r] = true
			if f.Truncated {
				c.truncated = append(c.truncated, truncLine(id, r, rf.Size))
			}
			if f.Unverified {
				c.unverified = append(c.unverified, p)
			}
		}
	}
	c.schema, c.kept, c.incomplete = u.schema(), keep, plan.incomplete()
	// A run none of whose files could be used, among runs that could, is no run: stray
	// files named like one (copied, renamed, damaged) do not block the folder's real
	// runs. They are skipped (named above), and the run is left out unless asked for.
	if !explicit && len(present) > 0 {
		kept := c.runs[:0]
		for _, id := range c.runs {
			if len(present[id]) > 0 {
				kept = append(kept, id)
			}
		}
		c.runs = kept
	}
	for _, id := range c.runs {
		if m := describeMissing(all[id].Size, ranks(present[id])); m != "" {
			c.missing = append(c.missing, fmt.Sprintf("run %s: %s", id, m))
		}
	}
	return c, nil
}

// checkCollect refuses, before any file is read, a read of more memory than HostBytes
// leaves (collectEstimate).
func checkCollect(dir string, runs []string, all map[string]*RunFiles, explicit bool) error {
	files := 0
	for _, id := range runs {
		files += len(all[id].Paths)
	}
	split := fmt.Sprintf("merge its runs in parts (longca merge %s --run ID --out FILE, then report each merged file), or move runs into folders of their own", dir)
	if explicit {
		split = "give fewer --run ids at once, or move runs into folders of their own"
	}
	var total, largest int64
	for _, id := range runs {
		for _, p := range all[id].Paths {
			if st, err := os.Stat(p); err == nil && st.Mode().IsRegular() && st.Size() <= MaxFileBytes { // (Open refuses a larger one unread)
				n := st.Size()
				total += n
				largest = max(largest, n)
			}
		}
	}
	need, have := collectEstimate(files, total, largest), HostBytes()*fitShare
	if need > have {
		return Usagef("%s: reading its %d rank files (%s on disk) takes about %s of memory, more than the %s this machine has free for it: %s", dir, files, gib(float64(total)), gib(need), gib(have), split)
	}
	return nil
}

// gib says a byte count in GiB, or MiB below one GiB (KiB below one MiB).
func gib(b float64) string {
	if b < 1<<20 {
		return fmt.Sprintf("%.0f KiB", b/(1<<10))
	}
	if b < 1<<30 {
		return fmt.Sprintf("%.0f MiB", b/(1<<20))
	}
	return fmt.Sprintf("%.1f GiB", b/(1<<30))
}

// oversized names a file of dir named like a rank file of more than MaxWorldSize ranks
// (no file of ours: ParseFileName refuses it), as " (NAME names N ranks, over ...)", or "".
func oversized(dir string) string {
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		m := rankFile.FindStringSubmatch(e.Name())
		if m == nil {
			continue
		}
		if n, err := strconv.ParseUint(m[3], 10, 64); err != nil || n > MaxWorldSize {
			return fmt.Sprintf(" (%s names %s ranks, over longca's %d: not a rank file)", e.Name(), m[3], MaxWorldSize)
		}
	}
	return ""
}

// firstFew joins the first n of list and says how many more there are.
func firstFew(list []string, n int) string {
	if len(list) <= n {
		return strings.Join(list, "; ")
	}
	return fmt.Sprintf("%s; and %d more", strings.Join(list[:n], "; "), len(list)-n)
}

// describeRuns lists the runs of a folder with the ranks present: "a (2 of 2 ranks), b
// (1 of 4 ranks)", the first maxListed of them and how many more.
func describeRuns(all map[string]*RunFiles) string {
	if len(all) == 0 {
		return "no rank files"
	}
	ids := make([]string, 0, len(all))
	for id := range all {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	parts := make([]string, min(len(ids), maxListed))
	for i := range parts {
		id := ids[i]
		parts[i] = fmt.Sprintf("%s (%d of %d ranks)", id, len(all[id].Paths), all[id].Size)
	}
	more := ""
	if len(ids) > len(parts) {
		more = fmt.Sprintf(" and %d more (%d runs)", len(ids)-len(parts), len(ids))
	}
	return "runs " + strings.Join(parts, ", ") + more
}

// MergedPath is the merged file of one run in dir: <run>.merged.arrow. Commands that
// merge their own run (run, cp, simulate) write it there, so that runs sharing a folder
// keep their own merged file instead of overwriting one merged.arrow.
func MergedPath(dir, run string) string { return filepath.Join(dir, run+".merged.arrow") }

// ExportPaths are the Parquet and CSV files a merge into out writes beside it, with
// --parquet and --csv.
func ExportPaths(out string) (parquet, csv string) {
	base := strings.TrimSuffix(out, filepath.Ext(out))
	return base + ".parquet", base + ".csv"
}

// checkOut refuses an output that would overwrite an input: a rank file's name (of any
// run), or one of the files being merged; and an output folder that cannot be written,
// before anything is read. Only the files the merge writes are checked (the Parquet and
// CSV files when asked for: a folder named merged.parquet refused a merge without --parquet).
func checkOut(out string, opts MergeOptions, inputs []string) error {
	paths := []string{out}
	pq, csv := ExportPaths(out)
	if opts.Parquet {
		paths = append(paths, pq)
	}
	if opts.CSV {
		paths = append(paths, csv)
	}
	for _, p := range paths {
		if _, _, _, ok := ParseFileName(filepath.Base(p)); ok {
			return Usagef("--out %s is named like a rank file (<run>.rank-R-of-N.arrow): merging there would replace a rank's results; choose another name", out)
		}
		if _, err := fileTarget(p); err != nil {
			return err
		}
		st, err := os.Stat(p)
		if err != nil {
			continue
		}
		for _, in := range inputs {
			if fst, err := os.Stat(in); err == nil && os.SameFile(st, fst) {
				return Usagef("--out %s is %s, one of the files being merged: choose another name", out, in)
			}
		}
	}
	dir := filepath.Dir(out)
	probe, err := os.CreateTemp(dir, mergeProbe+"*")
	if err != nil {
		return Usagef("cannot write the merged file in %s (%v): give --out in a folder you can write", dir, cleanErr(err))
	}
	probe.Close()
	os.Remove(probe.Name())
	return nil
}

// cleanErr is an *os.PathError's reason without the path (said already).
func cleanErr(err error) error {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// checkIdentity checks that a rank file's metadata (which its Writer wrote) says the
// run, rank and world size its name says: a file renamed from another run or rank is not
// merged as this one.
func checkIdentity(f *File, run string, rank, size int) error {
	bad := func(what string, got, want any) error {
		return fmt.Errorf("%s: its %s is %v but its name says %v (renamed from another run or rank?): %w", f.Path, what, got, want, ErrNotResults)
	}
	if v := f.Meta(MetaRunID); v != run {
		return bad("run id (metadata "+MetaRunID+")", strconv.Quote(v), strconv.Quote(run))
	}
	if v := f.Meta(MetaRank); v != strconv.Itoa(rank) {
		return bad("rank (metadata "+MetaRank+")", strconv.Quote(v), rank)
	}
	if v := f.Meta(MetaWorldSize); v != strconv.Itoa(size) {
		return bad("world size (metadata "+MetaWorldSize+")", strconv.Quote(v), size)
	}
	return nil
}

// Merge joins every rank's file of each run in dir into one Arrow IPC file (and Parquet
// and CSV on request). A file that is damaged, not longca's, or of another run or rank
// than its name says is skipped (named in MergeResult.Skipped and the output's
// metadata), and its rank counts as missing. Files of longca versions with different
// columns are joined by column name (see union); files that cannot be (another schema
// version, a column of another type) are refused (ErrUsage), naming both. Every rank
// 0..n-1 of each run must be present, unless AllowMissing.
func Merge(dir string, opts MergeOptions) (MergeResult, error) {
	var res MergeResult
	c, err := collect(dir, opts.Runs, func() keeper { return &columnKeeper{} })
	if err != nil {
		return res, fmt.Errorf("merge: %w", err)
	}
	defer c.release()
	res.Runs, res.Missing, res.Truncated, res.Skipped, res.Unverified = c.runs, c.missing, c.truncated, c.skipped, c.unverified
	res.Incomplete = c.incomplete
	res.Recent = c.recent(time.Now())
	out := opts.Out
	if out == "" {
		out = filepath.Join(dir, "merged.arrow")
	}
	if err := checkOut(out, opts, c.paths); err != nil {
		return res, fmt.Errorf("merge: %w", err)
	}
	if len(c.missing) > 0 && !opts.AllowMissing {
		why := ""
		if len(c.skipped) > 0 {
			why = "; skipped " + firstFew(c.skipped, maxListed)
		}
		runs := ""
		if len(opts.Runs) == 0 && len(c.runs) > 1 {
			runs = fmt.Sprintf("; the folder holds runs %s: merge one with --run", FewRuns(c.runs, maxListed))
		}
		return res, missingRanks{fmt.Errorf("merge: %s%s%s (pass --allow-missing to merge anyway)", firstFew(c.missing, maxListed), why, runs)}
	}
	if len(c.paths) == 0 {
		// Every rank is missing (--allow-missing or not): the folder given has nothing to
		// merge, which longca merge says as bad input (exit status 2, see ErrMissingRanks).
		return res, missingRanks{fmt.Errorf("merge: none of the %d rank file(s) in %s can be read (%s): give a folder a longca run wrote its rank files to", len(c.skipped), dir, firstFew(c.skipped, 3))}
	}
	// The temporary files a merge killed while writing these names left (SIGKILL: it could
	// not remove them), whether or not this merge writes each name.
	pq, csv := ExportPaths(out)
	removeStaleTemps(out, pq, csv)
	kept := c.kept.(*columnKeeper)
	if err := kept.flush(c.schema); err != nil {
		return res, err
	}
	if opts.RefuseEmpty && kept.gather.rows == 0 {
		return res, ErrNoRows
	}
	ref := &File{Schema: c.schema}
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
	if len(res.Skipped) > 0 {
		md[MetaSkipped] = strings.Join(res.Skipped, "; ")
	}
	if len(res.Incomplete) > 0 {
		md[MetaIncomplete] = strings.Join(res.Incomplete, "; ")
	}
	if len(res.Unverified) > 0 {
		md[MetaUnverified] = strings.Join(res.Unverified, "; ")
	}
	md[MetaRows] = fmt.Sprint(kept.gather.rows)
	md[MetaRankBytes] = c.rankBytes()
	rec, err := concat(c.schema, md, kept.gather.joined, kept.gather.rows)
	if err != nil {
		return res, err
	}
	kept.release() // (the columns are in rec)
	defer rec.Release()
	res.Rows = rec.NumRows()

	if err := WriteArrowFile(out, rec); err != nil {
		return res, err
	}
	res.Files = append(res.Files, out)
	if opts.Parquet {
		if err := WriteParquet(pq, rec); err != nil {
			return res, err
		}
		res.Files = append(res.Files, pq)
	}
	if opts.CSV {
		if err := WriteCSV(csv, rec); err != nil {
			return res, err
		}
		res.Files = append(res.Files, csv)
	}
	return res, nil
}

// maxListed bounds the runs, missing ranks and skipped files an error line names (the
// merged file's metadata names them all).
const maxListed = 10

// FewRuns lists run ids for a line: all of them up to n, else the first n and how many
// more ("a, b, c and 19997 more (20000 runs)").
func FewRuns(runs []string, n int) string {
	if len(runs) <= n {
		return strings.Join(runs, ", ")
	}
	return fmt.Sprintf("%s and %d more (%d runs)", strings.Join(runs[:n], ", "), len(runs)-n, len(runs))
}

// compactBatches is how many batches a joiner holds before it joins them into one.
const compactBatches = 256

// columnKeeper keeps the files' record batches for Merge, joined into chunks of at least
// compactBatches batches as they come (joiner), so that what it holds grows with the
// rows, not the files. What it holds has the columns of layout, the last one add was
// given: a file of other columns (another longca version) is conformed to it, and when a
// file brings a column the layout lacked, the chunks held are conformed to the new one
// (conform: the columns they have are shared, not copied).
type columnKeeper struct {
	gather joiner
	layout *arrow.Schema
	err    error
}

func (k *columnKeeper) add(f *File, layout *arrow.Schema) {
	if k.err != nil {
		return
	}
	if k.layout != nil && k.layout != layout && !sameLayout(k.layout, layout) {
		if k.err = k.relayout(layout); k.err != nil {
			return
		}
	}
	k.layout = layout
	other := !sameLayout(f.Schema, layout)
	full := false
	for _, b := range f.Batches {
		if !other {
			full = k.gather.keep(b) || full
			continue
		}
		c, err := conform(b, layout)
		if err != nil {
			k.err = fmt.Errorf("merge: %s: %w", f.Path, err)
			return
		}
		full = k.gather.keep(c) || full
		c.Release()
	}
	if full {
		k.err = k.gather.flush(layout)
	}
}

// relayout conforms what is held to layout.
func (k *columnKeeper) relayout(layout *arrow.Schema) error {
	if err := k.gather.flush(k.layout); err != nil {
		return err
	}
	for i, b := range k.gather.joined {
		c, err := conform(b, layout)
		if err != nil {
			return fmt.Errorf("merge: %w", err)
		}
		b.Release()
		k.gather.joined[i] = c
	}
	return nil
}

// flush joins the pending batches into one chunk (with s's fields).
func (k *columnKeeper) flush(s *arrow.Schema) error {
	if k.err != nil {
		return k.err
	}
	return k.gather.flush(s)
}

func (k *columnKeeper) release() { k.gather.release() }

// concat joins batches (of rows rows in all) into one record batch with schema s's
// fields and metadata md.
func concat(s *arrow.Schema, md map[string]string, batches []arrow.RecordBatch, rows int64) (arrow.RecordBatch, error) {
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
	return join(arrow.NewSchema(s.Fields(), &meta), batches, rows)
}

// join joins batches (of rows rows in all, with schema's fields) into one record batch
// of schema.
func join(schema *arrow.Schema, batches []arrow.RecordBatch, rows int64) (arrow.RecordBatch, error) {
	s := schema
	cols := make([]arrow.Array, len(s.Fields()))
	parts := make([]arrow.Array, 0, len(batches))
	for i := range cols {
		parts = parts[:0]
		for _, b := range batches {
			parts = append(parts, b.Column(i))
		}
		if len(parts) == 0 {
			parts = append(parts, array.MakeArrayOfNull(memory.DefaultAllocator, s.Field(i).Type, 0))
			defer parts[0].Release()
		}
		c, ok := concatColumn(s.Field(i).Type, parts)
		if !ok {
			var err error
			if c, err = array.Concatenate(parts, memory.DefaultAllocator); err != nil {
				return nil, fmt.Errorf("merge: column %s: %w", s.Field(i).Name, err)
			}
		}
		defer c.Release()
		cols[i] = c
	}
	return array.NewRecordBatch(schema, cols, rows), nil
}
