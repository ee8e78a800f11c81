package present

import (
	"fmt"
	"io"

	"github.com/longca/longca/results"
)

// maxMergeRunsShown bounds the run ids WriteMerge's first line names: a folder of 20,000
// runs made it 160 KB long.
const maxMergeRunsShown = 10

// WriteMerge is what `longca merge` prints of a merge: rows and runs, what is missing,
// skipped, truncated or incomplete (each a '#' line), then the files written, one a line.
func WriteMerge(w io.Writer, res results.MergeResult) {
	runs := fmt.Sprint(res.Runs)
	if len(res.Runs) > maxMergeRunsShown { // (the merged file's longca.runs names them all)
		runs = fmt.Sprintf("%v and %d more", res.Runs[:maxMergeRunsShown], len(res.Runs)-maxMergeRunsShown)
	}
	fmt.Fprintf(w, "# merged %d rows of %d run(s): %s\n", res.Rows, len(res.Runs), runs)
	for _, m := range res.Missing {
		fmt.Fprintf(w, "# missing (--allow-missing): %s\n", m)
	}
	for _, s := range res.Skipped {
		fmt.Fprintf(w, "# skipped (left out; recorded in longca.skipped): %s\n", s)
	}
	for _, t := range res.Truncated {
		fmt.Fprintf(w, "# truncated (writer did not finish; its finished rows are kept): %s\n", t)
	}
	for _, t := range res.Incomplete {
		fmt.Fprintf(w, "# incomplete (its sweep stopped before the end: interrupted or stopped early; recorded in longca.incomplete): %s\n", t)
	}
	for _, f := range res.Files {
		fmt.Fprintln(w, f)
	}
}
