package present

import (
	"fmt"
	"io"
	"slices"
	"sort"
	"strings"

	"github.com/longca/longca/results"
)

// TextTable is the one text table of longca, in the style of nccl-tests: '#' title
// lines, a '#' header of column names, a '#' units row, one line per row (starting with
// two spaces, so grep and awk tell data from the rest), and closing '#' summary lines.
// Every table longca prints (the kernel report, the CP table, dry-run plans) is one.
type TextTable struct {
	Title   []string
	Columns []TextColumn
	Rows    [][]string
	Summary []string
}

// TextColumn is a column: its name, its unit (empty: none), and whether it is text
// (left-aligned) rather than a number (right-aligned).
type TextColumn struct {
	Name, Unit string
	Left       bool
}

// Write prints the table; column widths fit the widest cell.
func (t TextTable) Write(w io.Writer) error {
	width := make([]int, len(t.Columns))
	for i, c := range t.Columns {
		width[i] = max(len(c.Name), len(unit(c.Unit)))
	}
	for _, r := range t.Rows {
		for i := range t.Columns {
			if i < len(r) {
				width[i] = max(width[i], len(r[i]))
			}
		}
	}
	var b strings.Builder
	for _, l := range t.Title {
		b.WriteString("# " + l + "\n")
	}
	if len(t.Title) > 0 {
		b.WriteString("#\n")
	}
	line := func(lead string, cell func(i int) string) {
		var l strings.Builder
		l.WriteString(lead)
		for i, c := range t.Columns {
			if i > 0 {
				l.WriteString(" ")
			}
			if c.Left {
				fmt.Fprintf(&l, "%-*s", width[i], cell(i))
			} else {
				fmt.Fprintf(&l, "%*s", width[i], cell(i))
			}
		}
		b.WriteString(strings.TrimRight(l.String(), " ") + "\n")
	}
	line("# ", func(i int) string { return t.Columns[i].Name })
	line("# ", func(i int) string { return unit(t.Columns[i].Unit) })
	for _, r := range t.Rows {
		line("  ", func(i int) string {
			if i < len(r) {
				return r[i]
			}
			return "-"
		})
	}
	for _, l := range t.Summary {
		b.WriteString("# " + l + "\n")
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func unit(u string) string {
	if u == "" {
		return ""
	}
	return "(" + u + ")"
}

// statusCounts is the summary's count of rows by status, in the order of the statuses,
// then any other status present (predicted), so that the counts add up to the rows.
func statusCounts(counts map[results.Status]int) string {
	return presentCounts(counts, results.StatusOK, results.StatusUnsupported, results.StatusOOM, results.StatusWrong, results.StatusError)
}

// presentCounts is "  status: n" for first (always) and then every other status present
// (sorted), so that the counts add up to the rows.
func presentCounts(counts map[results.Status]int, first ...results.Status) string {
	var b strings.Builder
	for _, st := range first {
		fmt.Fprintf(&b, "  %s: %d", st, counts[st])
	}
	var rest []string
	for st, n := range counts {
		if n > 0 && !slices.Contains(first, st) {
			rest = append(rest, string(st))
		}
	}
	sort.Strings(rest)
	for _, st := range rest {
		fmt.Fprintf(&b, "  %s: %d", st, counts[results.Status(st)])
	}
	return b.String()
}
