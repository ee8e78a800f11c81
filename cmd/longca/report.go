package main

import (
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"github.com/longca/longca/present"

	"github.com/longca/longca/kernels"
	"github.com/longca/longca/mask"
	"github.com/longca/longca/results"
	"github.com/longca/longca/session"
	"github.com/urfave/cli/v2"
)

func init() {
	register(&cli.Command{
		Name:      "report",
		Usage:     "print the table of a results file or folder (nccl-tests style) and draw PNG plots",
		ArgsUsage: "FILE|DIR",
		Description: "One row per case (mask, seqlen, heads, pass), each kernel's TFLOP/s side by side (or its\n" +
			"status: unsupported, oom, wrong, error), then with several kernels the same cases as ratios to\n" +
			"the fastest kernel; lines that are not data start with '#'. A folder is read through its\n" +
			"merged.arrow when that holds every run whose rank files are there, as they are now (the\n" +
			"sizes its merge recorded), else through its rank files alone (never both). A CP case\n" +
			"counts once: the ranks agree on its row and each writes it, and the lowest rank's is shown.\n" +
			"--plot DIR draws TFLOP/s against the\n" +
			"sequence length, one line per kernel, and grouped bars (bars_*.png: one group per length, one\n" +
			"bar per kernel), one PNG of each per (mask, pass, heads). CP rows also get the CP table\n" +
			"(per-rank and per-device TFLOP/s, the kernel alone, efficiency, overlap, check).\n" +
			"--against KERNEL adds every kernel over that one: `longca report DIR --against cudnn` says on\n" +
			"which cases the cuda kernel reaches cuDNN's rate, `--against torch:flex --at 1.3` where it is\n" +
			"30% faster than Flex. With --pairs, over a folder of several runs of the same cases, a case's\n" +
			"ratio is the median of the same-process ratios (each process's own two rates, sample by\n" +
			"sample), for cards whose rate is set per process. Rows of `longca simulate` (status predicted)\n" +
			"are predictions, not measurements: they get tables of their own, grouped as simulate's (per\n" +
			"GPU count, each method's best mesh, the median over mask samples), and with --plot its\n" +
			"scaling plots.",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "pass", Usage: "only this pass: fwd, bwd or fwd+bwd"},
			&cli.StringFlag{Name: "plot", Usage: "write PNG plots into this folder"},
			&cli.StringFlag{Name: "masks", Usage: "only these masks, comma-separated (as the table names them: causal, block_sparse_uniform_b128_r0.5, ...)"},
			&cli.StringFlag{Name: "against", Usage: "also print every kernel's TFLOP/s over this kernel's (a column of the table: cudnn, torch:flex, ...), with each kernel's geometric mean, lowest case, and cases at --at or above; where the rows carry the GPU's SM clock (--gpu-state), which cases were timed at clocks 3% or more apart"},
			&cli.Float64Flag{Name: "at", Value: 1.0, Usage: "with --against: the ratio counted as reached (1.0: as fast; 1.3: 30% faster)"},
			&cli.BoolFlag{Name: "pairs", Usage: "with --against, over a folder of several runs of the same cases: a case's ratio is the median of the same-process ratios (each process's, or launched rank's, own two rates, sample by sample), not the ratio of the means; for cards that read one of two rates per process"},
			&cli.BoolFlag{Name: "clocks", Usage: "also print each kernel's SM clock while timed (MHz, the mean of its busy readings; rows timed with --gpu-state), per case, in the table's layout"},
		},
		Action: reportAction,
	})
}

func reportAction(c *cli.Context) error {
	args, err := positionalArgs(c)
	if err != nil {
		return err
	}
	if len(args) != 1 {
		return usageError("report takes one file or folder: longca report FILE|DIR (got %d arguments)", len(args))
	}
	if err := checkLists(c); err != nil { // (--masks causal,causal was taken)
		return err
	}
	pass := c.String("pass")
	if pass != "" {
		p, err := kernels.ParsePass(pass)

		if err != nil {
			return usageError("--pass: %v", err)
		}
		pass = p.String()
	}
	against, at := c.String("against"), c.Float64("at")
	if c.IsSet("against") && strings.TrimSpace(against) == "" {
		return usageError("--against needs a kernel of the report, as --against cudnn")
	}
	if c.IsSet("at") && against == "" {
		return usageError("--at counts the cases at a ratio to the --against kernel: give --against KERNEL too")
	}
	if c.Bool("pairs") && against == "" {
		return usageError("--pairs pairs each kernel with the --against kernel within processes: give --against KERNEL too")
	}
	if !(at > 0) || math.IsInf(at, 0) {
		return usageError("--at %v: give a positive ratio, such as 1.0 or 1.3", at)
	}
	path := args[0]
	if _, err := os.Stat(path); err != nil {
		return usageError("report %s: %v: give a results file or folder", path, cleanPathError(err))
	}
	dir := c.String("plot")
	if dir != "" {
		if err := writableDir(dir); err != nil {
			return usageError("--plot %s: %v", dir, err)
		}
	}
	loaded, err := results.LoadChecked(path)
	if errors.Is(err, results.ErrNotResults) || errors.Is(err, results.ErrDamaged) || errors.Is(err, results.ErrUsage) {
		return usageError("report %s: %v", path, strings.TrimPrefix(err.Error(), "results: "))
	}
	if err != nil {
		return err
	}
	// runs whose rank files hold no row (a run stopped before its first, or still
	// starting): a report of nothing but these printed a table of 0 rows and exited 0,
	// where merge refuses them (noRowsError)
	empty := runsWithoutRows(path, loaded)
	if len(loaded.Rows) == 0 {
		return nothingToReport(path, loaded, empty)
	}
	for _, s := range loaded.Skipped {
		log.Warn().Str("skipped", s).Msg("report: file left out")
	}
	if loaded.Stale != "" {
		fmt.Fprintf(c.App.ErrWriter, "longca: report: %s\n", loaded.Stale)
	}
	for _, t := range loaded.Truncated {
		if age, ok := loaded.Recent[t]; ok { // (a merge or report of a run still going)
			fmt.Fprintf(c.App.ErrWriter, "longca: report: %s is not closed and was last written %s ago: still being written (or its writer was stopped just now): the rows so far are reported\n", t, age)
			continue
		}
		fmt.Fprintf(c.App.ErrWriter, "longca: report: %s was cut short (its writer stopped before the end): the rows it finished are reported\n", t)
	}
	// ranks without a readable file (or merged without: --allow-missing): merge refuses such
	// a folder, and the report said nothing of them
	for _, m := range loaded.Missing {
		fmt.Fprintf(c.App.ErrWriter, "longca: report: %s (no readable rank file): the rows of the ranks there are reported\n", m)
	}
	for _, t := range loaded.Incomplete {
		fmt.Fprintf(c.App.ErrWriter, "longca: report: %s: its sweep stopped before the end (interrupted or stopped early): the rows it finished are reported\n", t)
	}
	if len(empty.runs) > 0 {
		fmt.Fprintf(c.App.ErrWriter, "longca: report: %s hold no rows %s; the other runs' rows are reported\n", empty.what(), empty.why(false))
	} else if none := mergedWithoutRows(loaded); len(none) > 0 {
		fmt.Fprintf(c.App.ErrWriter, "longca: report: run(s) %s merged into %s hold no rows (stopped before their first); the other runs' rows are reported\n", results.FewRuns(none, 5), path)
	}
	rows := onePerCPCase(loaded.Rows)
	if ms := c.String("masks"); ms != "" {
		var absent []string
		if rows, absent, err = onlyMasks(rows, ms); err != nil {
			return usageError("--masks: %v", err)
		}
		for _, m := range absent {
			fmt.Fprintf(c.App.ErrWriter, "longca: report --masks: no rows of %s in %s; left out\n", m, path)
		}
	}
	if pass != "" && !slices.ContainsFunc(rows, func(r results.Row) bool { return r.Pass == pass }) {
		var passes []string
		for _, r := range rows {
			if !slices.Contains(passes, r.Pass) {
				passes = append(passes, r.Pass)
			}
		}
		where := path
		if ms := c.String("masks"); ms != "" {
			where += " among --masks " + ms
		}
		return usageError("--pass %s: no %s rows in %s; its passes: %s", pass, pass, where, strings.Join(passes, ", "))
	}
	if against != "" {
		measured, _ := present.SplitPredicted(rows) // (simulate's rows have no kernel columns)
		if len(measured) == 0 {
			return usageError("--against %s: the rows of %s are longca simulate's predictions, not measurements: --against sets measured kernels side by side (`longca simulate ... --compare DIR` sets predictions beside measured cp rows)", against, path)
		}
		if ks := present.Summarize(measured, pass).Kernels; !slices.Contains(ks, against) {
			if pass != "" && slices.Contains(present.Summarize(measured, "").Kernels, against) {
				return usageError("--against %s: no %s rows of it in %s (--pass %s); its kernels there: %s", against, pass, path, pass, strings.Join(ks, ", "))
			}
			return usageError("--against %s: no such kernel in %s; its kernels: %s", against, path, strings.Join(ks, ", "))
		}
	}
	return present.WriteReportFull(c.App.Writer, path, rows, present.ReportOptions{Pass: pass, PlotDir: dir, Against: against, At: at, Clocks: c.Bool("clocks"), Pairs: c.Bool("pairs")})
}

// onePerCPCase keeps, of each run's CP rows, those of its lowest rank: the ranks of a CP
// case agree on one row and each writes it, so a folder or merged file of an N-rank run
// holds every CP case N times, and the kernel-style table counted each N times ("Cases: 4
// Rows: 8" for 2 ranks). Other rows (each rank's own measurement) are all kept.
func onePerCPCase(rows []results.Row) []results.Row {
	low := map[string]int64{}
	for _, r := range rows {
		if l, ok := low[r.RunID]; r.Bench == "cp" && (!ok || r.Rank < l) {
			low[r.RunID] = r.Rank
		}
	}
	if len(low) == 0 {
		return rows
	}
	out := rows[:0:0]
	for _, r := range rows {
		if r.Bench != "cp" || r.Rank == low[r.RunID] {
			out = append(out, r)
		}
	}
	return out
}

// onlyMasks keeps the rows of the listed masks (comma-separated, as the report's table names
// them: present.MaskLabel, or the label with the settings that tell apart rows of one case,
// present.CaseLabeler's causal_d64). A name that is no mask at all (not one of MASKS.md's, not a label
// of the rows) is an error naming the rows' masks; one of MASKS.md's masks the rows lack (a run
// stopped before it) is left out and returned in absent, so that a cut-short run still
// reports the rest.
func onlyMasks(rows []results.Row, list string) (keep []results.Row, absent []string, err error) {
	want := map[string]bool{}
	for _, m := range strings.Split(list, ",") {
		if m = strings.TrimSpace(m); m != "" {
			want[m] = true
		}
	}
	if len(want) == 0 {
		return nil, nil, fmt.Errorf("%q names no mask", list)
	}
	have := map[string]bool{}
	var names []string
	caseLabel := present.CaseLabeler(rows) // causal_d64 where the rows hold two head dims
	for _, r := range rows {
		l, cl := present.MaskLabel(r), caseLabel(r)
		for _, n := range []string{l, cl} {
			if !have[n] {
				have[n] = true
				names = append(names, n)
			}
		}
		if want[l] || want[cl] {
			keep = append(keep, r)
		}
	}
	var missing []string
	for m := range want {
		if !have[m] {
			missing = append(missing, m)
		}
	}
	sort.Strings(missing)
	for _, m := range missing {
		if !slices.Contains(mask.Names(), m) {
			return nil, nil, fmt.Errorf("no rows of mask %s, and it is no mask of MASKS.md; the masks here: %s", m, strings.Join(names, ", "))
		}
	}
	if len(keep) == 0 {
		return nil, nil, fmt.Errorf("no rows of %s here; the masks here: %s", list, strings.Join(names, ", "))
	}
	return keep, missing, nil
}

// rowless is what runsWithoutRows found: the runs of a folder whose rank files hold no
// row, their files, and how many of these are not closed.
type rowless struct {
	runs        []string // sorted
	files, open int
	dir         string // the folder they are in
}

// runsWithoutRows lists the runs of the folder path (a file: none) whose rank files were
// read and hold no row between them: what a run leaves that stopped before its first row
// (refused, failed, interrupted) or has not written one yet. A run any of whose files was
// left out (damaged, of another world size: named in loaded.Skipped) is not counted: its
// rows may be in the file that could not be read.
func runsWithoutRows(path string, loaded results.Loaded) rowless {
	out := rowless{dir: path}
	if st, err := os.Stat(path); err != nil || !st.IsDir() {
		return out
	}
	runs, err := results.Scan(path)
	if err != nil {
		return out
	}
	has := map[string]bool{}
	for _, r := range loaded.Rows {
		has[r.RunID] = true
	}
	for id, rf := range runs {
		if has[id] || mentioned(loaded.Skipped, rf) {
			continue
		}
		out.runs = append(out.runs, id)
		out.files += len(rf.Paths)
		for _, t := range loaded.Truncated {
			if strings.HasPrefix(t, results.TruncatedOfRun(id)) {
				out.open++
			}
		}
	}
	sort.Strings(out.runs)
	return out
}

// mergedWithoutRows are the runs of a merged file read (loaded.MergedRuns) of which it
// holds no row: a merged file given by name said nothing of them, where its folder names
// them (runsWithoutRows).
func mergedWithoutRows(loaded results.Loaded) []string {
	has := map[string]bool{}
	for _, r := range loaded.Rows {
		has[r.RunID] = true
	}
	var none []string
	for _, id := range loaded.MergedRuns {
		if !has[id] {
			none = append(none, id)
		}
	}
	sort.Strings(none)
	return none
}

// mentioned says whether a line of skipped names one of rf's files, or rf has files left
// out for their world size.
func mentioned(skipped []string, rf *results.RunFiles) bool {
	if len(rf.Skipped) > 0 {
		return true
	}
	for _, p := range rf.Paths {
		for _, s := range skipped {
			if namesPath(s, p) {
				return true
			}
		}
	}
	return false
}

// namesPath says whether line s names the path p whole: p not preceded by more of a path
// (a run x's file in a folder given as ".", x.rank-0-of-1.arrow, is in a line about
// ax.rank-0-of-1.arrow) nor followed by more of a name.
func namesPath(s, p string) bool {
	for i := 0; p != ""; {
		j := strings.Index(s[i:], p)
		if j < 0 {
			return false
		}
		at, end := i+j, i+j+len(p)
		before := at == 0 || strings.ContainsRune(" \t\"'`(,=", rune(s[at-1]))
		after := end == len(s) || strings.ContainsRune(" \t\"'`):,;", rune(s[end]))
		if before && after {
			return true
		}
		i = at + 1
	}
	return false
}

// what names the runs and their files: "the 4 rank file(s) of run(s) x".
func (e rowless) what() string {
	return fmt.Sprintf("the %d rank file(s) of run(s) %s", e.files, results.FewRuns(e.runs, 5))
}

// state says whether the files were closed, and what they are ("and were all closed:
// ...", after "hold no rows"); later is what to do with a run still writing.
func (e rowless) state(later string) string {
	if e.open > 0 {
		return fmt.Sprintf("and %d of them are not closed: a run still writing (%s) or killed before its first row", e.open, later)
	}
	return "and were all closed: a run that stopped before its first row (refused, failed or interrupted: its log says why) leaves them"
}

// rm is the command that removes the files and frees their run ids.
func (e rowless) rm() string {
	if len(e.runs) == 1 {
		return session.ShellWord(e.dir) + "/" + e.runs[0] + ".rank-*.arrow"
	}
	return session.ShellWord(e.dir) + "/RUN.rank-*.arrow"
}

// why says what such files are and how to free their run ids; all: they are all the
// report would have shown.
func (e rowless) why(all bool) string {
	if all {
		return fmt.Sprintf("%s; report a folder or file with rows, or remove these files to free the run id (rm %s)", e.state("report once it has rows"), e.rm())
	}
	return fmt.Sprintf("%s; remove them to free the run id (rm %s)", e.state("report once it has rows"), e.rm())
}

// nothingToReport is the refusal of a report with no row at all to show (exit 2, one
// line): it printed a table of 0 rows and exited 0, where merge refuses the same files.
// It names what the files are (a folder's runs without rows, a rank file of a run that
// wrote none, a merged file of such runs) and what to do.
func nothingToReport(path string, loaded results.Loaded, empty rowless) error {
	left := "" // (the files left out are said here: the report's warnings come after this)
	if n := len(loaded.Skipped); n > 0 {
		left = fmt.Sprintf("; %d file(s) could not be read, the first: %s", n, loaded.Skipped[0])
	}
	if len(empty.runs) > 0 {
		return usageError("report %s: nothing to report: %s hold no rows %s%s", path, empty.what(), empty.why(true), left)
	}
	stale := left
	if loaded.Stale != "" {
		stale += "; " + loaded.Stale
	}
	if id, rank, size, ok := results.ParseFileName(filepath.Base(path)); ok {
		state := "was closed: a run that stopped before its first row (refused, failed or interrupted: its log says why) leaves it"
		if len(loaded.Truncated) > 0 {
			state = "is not closed: its run is still writing (report once it has rows) or was killed before its first row"
		}
		dir := filepath.Dir(path)
		return usageError("report %s: nothing to report: rank %d of %d of run %s holds no rows and %s; report the run's folder for its other ranks (longca report %s), or, when none of them holds a row, remove them to free the run id (rm %s)",
			path, rank, size, id, state, session.ShellWord(dir), session.ShellWord(dir)+"/"+id+".rank-*.arrow")
	}
	if st, err := os.Stat(path); err == nil && st.IsDir() {
		return usageError("report %s: nothing to report: no rows in its files%s; report a folder or file with rows", path, stale)
	}
	return usageError("report %s: nothing to report: it holds no rows (a merge of runs that wrote none)%s; report a folder or file with rows", path, stale)
}
