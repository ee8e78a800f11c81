package results

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"
)

// A merged file is a copy of its rank files as they were when merged. `longca merge DIR`
// run while a run is still writing (to watch a long job) copies the rows so far, with the
// rank files recorded as truncated; once the run goes on, that copy no longer stands for
// the folder: report DIR read the 5 rows of such a merged.arrow where the rank file held
// 12, and called the writer, which finished cleanly, cut short. So a merge records the
// size of each rank file it read (MetaRankBytes), and a reader holds the merged file to
// its rank files by their sizes (a stat each): a rank file only grows while its writer
// writes (every row, and the end marker, are appended), so one of another size now, or
// one that was not there, says the merged file is out of date (staleMerged). Rank files
// deleted since the merge say nothing: the merged file still holds their rows.

// MetaRankBytes is a merged file's record of the rank files it was merged from: per run,
// its world size and the size in bytes of each rank file when the merge read it, as
// JSON: {"r1":{"of":2,"bytes":{"0":4120,"1":4120}}}. Ranks without a file are absent.
const MetaRankBytes = "longca.rank_bytes"

// RecentWrite is how recently a rank file without its end marker may have been written
// for a merge or report to say that its writer may still be writing it (Recent), rather
// than that it was cut short.
const RecentWrite = 10 * time.Minute

// rankRecord is one run's entry of MetaRankBytes.
type rankRecord struct {
	Of    int              `json:"of"`
	Bytes map[string]int64 `json:"bytes"`
}

// seenFile is what collect noted of a rank file just before reading it: its size (the
// merge read at least that much of it: a file only grows) and when it was last written.
type seenFile struct {
	run      string
	rank, of int
	size     int64
	mod      time.Time
}

// note records the size and time of the rank file at path (rank r of n of run id) before
// collect reads it; a file that cannot be stat'ed is not noted (Open says why).
func (c *collected) note(id string, r, n int, path string) {
	st, err := os.Stat(path)
	if err != nil {
		return
	}
	c.seen = append(c.seen, seenFile{run: id, rank: r, of: n, size: st.Size(), mod: st.ModTime()})
}

// rankBytes is the MetaRankBytes of the files noted of the runs merged.
func (c *collected) rankBytes() string {
	merged := map[string]bool{}
	for _, id := range c.runs {
		merged[id] = true
	}
	rec := map[string]*rankRecord{}
	for _, s := range c.seen {
		if !merged[s.run] {
			continue
		}
		r := rec[s.run]
		if r == nil {
			r = &rankRecord{Of: s.of, Bytes: map[string]int64{}}
			rec[s.run] = r
		}
		r.Bytes[strconv.Itoa(s.rank)] = s.size
	}
	b, _ := json.Marshal(rec) // (maps of strings and numbers: no error)
	return string(b)
}

// truncLine is how collect names a rank file its writer did not close (Truncated).
func truncLine(id string, rank, of int) string {
	return fmt.Sprintf("%srank %d of %d", TruncatedOfRun(id), rank, of)
}

// TruncatedOfRun is how a line of Loaded.Truncated (or MergeResult.Truncated) naming a
// rank file of run id begins.
func TruncatedOfRun(id string) string {
	return "run " + id + ": "
}

// recent is, of the truncated files noted, those last written less than RecentWrite
// before now, with how long before: their writer may be writing them still.
func (c *collected) recent(now time.Time) map[string]time.Duration {
	trunc := map[string]bool{}
	for _, t := range c.truncated {
		trunc[t] = true
	}
	var out map[string]time.Duration
	for _, s := range c.seen {
		if l := truncLine(s.run, s.rank, s.of); trunc[l] {
			if age, ok := recentAge(now, s.mod); ok {
				if out == nil {
					out = map[string]time.Duration{}
				}
				out[l] = age
			}
		}
	}
	return out
}

// recentAge is how long before now mod was (0 for a time ahead of now: another host's
// clock), and whether that is less than RecentWrite.
func recentAge(now, mod time.Time) (time.Duration, bool) {
	age := max(now.Sub(mod), 0)
	return age.Round(time.Second), age < RecentWrite
}

// rankRecordOf reads f's MetaRankBytes; ok is false where it has none (a merge by a
// longca before it) or one that does not parse.
func rankRecordOf(f *File) (map[string]rankRecord, bool) {
	v := f.Meta(MetaRankBytes)
	if v == "" {
		return nil, false
	}
	var rec map[string]rankRecord
	if err := json.Unmarshal([]byte(v), &rec); err != nil {
		return nil, false
	}
	for id, r := range rec {
		if CheckRunID(id) != nil || r.Of <= 0 || r.Of > MaxWorldSize {
			return nil, false
		}
	}
	return rec, true
}

// eachRecorded calls fn for each rank file of its run that r records, with its rank and its
// size when merged, in rank order; entries that name no rank of the run are passed over.
func (r rankRecord) eachRecorded(fn func(rank int, was int64)) {
	ranks := make([]int, 0, len(r.Bytes))
	for k := range r.Bytes {
		if rank, err := strconv.Atoi(k); err == nil && rank >= 0 && rank < r.Of {
			ranks = append(ranks, rank)
		}
	}
	sort.Ints(ranks)
	for _, rank := range ranks {
		fn(rank, r.Bytes[strconv.Itoa(rank)])
	}
}

// staleness compares the merged file f's record of its rank files with the rank files in
// dir now. It returns what changed since the merge ("run r: rank 0 of 1 is 100464 bytes,
// 20602 when merged"; "run r: rank 3 of 4 was written since"), sorted, and the
// Truncated lines (truncLine) of the rank files that changed, each with its run. recorded
// is false where f has no record (staleByTime stands in for it).
func staleness(dir string, f *File) (changes []string, grown map[string]string, recorded bool) {
	rec, ok := rankRecordOf(f)
	if !ok {
		return nil, nil, false
	}
	all, _ := Scan(dir) // (unreadable: nothing is known to have changed)
	ids := make([]string, 0, len(rec))
	for id := range rec {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		r := rec[id]
		r.eachRecorded(func(rank int, was int64) {
			st, err := os.Stat(filepath.Join(dir, FileName(id, rank, r.Of)))
			if err != nil || st.Size() == was { // (deleted since: its rows are in f)
				return
			}
			changes = append(changes, fmt.Sprintf("%s is %d bytes, %d when merged", truncLine(id, rank, r.Of), st.Size(), was))
			if grown == nil {
				grown = map[string]string{}
			}
			grown[truncLine(id, rank, r.Of)] = id
		})
		if rf := all[id]; rf != nil && rf.Size == r.Of {
			for rank := range rf.Paths {
				if _, had := r.Bytes[strconv.Itoa(rank)]; !had {
					changes = append(changes, truncLine(id, rank, r.Of)+" was written since")
				}
			}
		}
	}
	sort.Strings(changes)
	return changes, grown, true
}

// staleByTime stands in for staleness where the merged file at path records no sizes (a
// merge by an older longca): the rank files of its runs in dir written after it, by
// their modification times.
func staleByTime(dir, path string, f *File) []string {
	st, err := os.Stat(path)
	if err != nil {
		return nil
	}
	all, err := Scan(dir)
	if err != nil {
		return nil
	}
	var out []string
	for _, id := range strings.Split(f.Meta(MetaRuns), ",") {
		rf := all[id]
		if rf == nil {
			continue
		}
		for rank, p := range rf.Paths {
			if rst, err := os.Stat(p); err == nil && rst.ModTime().After(st.ModTime()) {
				out = append(out, truncLine(id, rank, rf.Size)+" was written after it")
			}
		}
	}
	sort.Strings(out)
	return out
}

// staleMerged says why the folder dir's merged file (at path, read as f) does not stand
// for the folder's rank files, "" when it does: a rank file of its runs changed or came
// since the merge (or, for a file without MetaRankBytes, was written after it).
func staleMerged(dir, path string, f *File) string {
	changes, _, recorded := staleness(dir, f)
	if !recorded {
		if late := staleByTime(dir, path, f); len(late) > 0 {
			return fmt.Sprintf("%s records no rank file sizes (an older longca's merge) and %s: it may be out of date, so the rank files are read instead (`longca merge %s` writes it anew)", path, firstFew(late, 3), dir)
		}
		return ""
	}
	if len(changes) == 0 {
		return ""
	}
	return fmt.Sprintf("%s is out of date: %s (it was merged while its run was writing): the rank files are read instead (`longca merge %s` writes it anew)", path, firstFew(changes, 3), dir)
}

// staleFile is what LoadChecked says of a merged file given by name whose rank files,
// beside it, changed since it was merged ("" when none did, or it records none), and its
// Truncated lines less those of the rank files that changed, and its Incomplete lines
// less those of their runs: their writers went on after the merge, so they were not cut
// short, nor (as far as the file can tell) their sweeps stopped.
func staleFile(path string, f *File, truncated, incomplete []string) (string, []string, []string) {
	changes, grown, _ := staleness(filepath.Dir(path), f)
	if len(changes) == 0 {
		return "", truncated, incomplete
	}
	went := map[string]bool{}
	keptT := truncated[:0:0]
	for _, t := range truncated {
		if id, ok := grown[t]; ok {
			went[id] = true
			continue
		}
		keptT = append(keptT, t)
	}
	keptI := incomplete[:0:0]
	for _, l := range incomplete {
		id, _, _ := strings.Cut(strings.TrimPrefix(l, "run "), ": ") // (incompleteLine's)
		if !went[id] {
			keptI = append(keptI, l)
		}
	}
	dir := filepath.Dir(path)
	return fmt.Sprintf("%s is out of date: %s (it was merged while its run was writing): its rows are those of the merge; `longca report %s` reads the rank files, `longca merge %s` writes it anew", path, firstFew(changes, 3), dir, dir), keptT, keptI
}

// recentOf is, of the truncated lines a merged file in dir records (its MetaRankBytes
// naming the rank files), those whose rank file was last written less than RecentWrite
// before now, with how long before.
func recentOf(dir string, f *File, truncated []string, now time.Time) map[string]time.Duration {
	rec, ok := rankRecordOf(f)
	if !ok || len(truncated) == 0 {
		return nil
	}
	trunc := map[string]bool{}
	for _, t := range truncated {
		trunc[t] = true
	}
	var out map[string]time.Duration
	for id, r := range rec {
		r.eachRecorded(func(rank int, _ int64) {
			line := truncLine(id, rank, r.Of)
			if !trunc[line] {
				return
			}
			st, err := os.Stat(filepath.Join(dir, FileName(id, rank, r.Of)))
			if err != nil {
				return
			}
			if age, ok := recentAge(now, st.ModTime()); ok {
				if out == nil {
					out = map[string]time.Duration{}
				}
				out[line] = age
			}
		})
	}
	return out
}
