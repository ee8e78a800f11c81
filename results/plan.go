package results

import (
	"fmt"
	"strconv"
	"strings"
)

// A run stopped before the end of its sweep (Ctrl-C, SIGTERM from a batch system's time
// limit, a worker failure, an error) closes its rank files as a whole run does: the
// stream's end marker says only that the writer closed the file. What tells the two apart
// is the plan every rank file records when it is created (MetaPlannedRows): a file with
// fewer rows than it planned is of a sweep that stopped early. Merge records such runs in
// the merged file (MetaIncomplete) and LoadChecked returns them (Loaded.Incomplete), so
// that a notebook, a later merge or a report can tell a partial sweep from a whole one.
// A file without the key (written before it existed) is of unknown plan: never called
// incomplete.

// maxPlannedRows bounds a plan read from a file: more is no plan of ours (a file holds at
// most MaxFileBytes, over 100 bytes a row), and a sum of many cannot overflow.
const maxPlannedRows = 1 << 40

// PlannedRows is the rows the rank file f's run planned for it (MetaPlannedRows); ok is
// false where the file records no plan (an older writer) or one that is not a count.
func PlannedRows(f *File) (n int64, ok bool) {
	v := f.Meta(MetaPlannedRows)
	if v == "" {
		return 0, false
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < 0 || n > maxPlannedRows {
		return 0, false
	}
	return n, true
}

// planTally adds up, run by run, the rows of the rank files read and the rows they
// planned (files without a plan are left out of both).
type planTally struct {
	order         []string
	rows, planned map[string]int64
}

// add counts rank file f of run id, holding rows rows (f.NumRows before its batches are
// released). A file not closed (Truncated: its writer is still going, or was killed) is
// left out: the truncated line says what it is, and "stopped before the end" would be
// false of a run still writing.
func (t *planTally) add(id string, f *File, rows int64) {
	p, ok := PlannedRows(f)
	if !ok || f.Truncated {
		return
	}
	if t.rows == nil {
		t.rows, t.planned = map[string]int64{}, map[string]int64{}
	}
	if _, seen := t.planned[id]; !seen {
		t.order = append(t.order, id)
	}
	t.rows[id] += rows
	t.planned[id] += p
}

// incomplete names the runs whose files hold fewer rows than they planned, in the order
// first counted: "run t: 4 of 12 planned rows".
func (t *planTally) incomplete() []string {
	var out []string
	for _, id := range t.order {
		if t.rows[id] < t.planned[id] {
			out = append(out, incompleteLine(id, t.rows[id], t.planned[id]))
		}
	}
	return out
}

// incompleteLine is what MetaIncomplete says of one run.
func incompleteLine(id string, rows, planned int64) string {
	return fmt.Sprintf("run %s: %d of %d planned rows", id, rows, planned)
}

// incompleteOf is what LoadChecked says of one file read whole, holding rows rows: a
// merged file's record of its incomplete runs (MetaIncomplete), or a rank file's own
// count when it holds fewer rows than it planned.
func incompleteOf(f *File, rows int) []string {
	if f == nil {
		return nil
	}
	if m := f.Meta(MetaIncomplete); m != "" {
		return strings.Split(m, "; ")
	}
	var t planTally
	t.add(f.Meta(MetaRunID), f, int64(rows))
	return t.incomplete()
}
