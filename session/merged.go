package session

import (
	"fmt"
	"sort"

	"github.com/longca/longca/results"
)

// CheckMerged checks that a merged results file holds rows from each of n ranks, as many
// from each, and none from outside the world: the line to print, or an exit-1 error
// naming what is off.
func CheckMerged(path string, n int) (string, error) {
	loaded, err := results.LoadChecked(path)
	if err != nil {
		return "", err
	}
	seen := map[int64]int{}
	for _, r := range loaded.Rows {
		seen[r.Rank]++
	}
	// The ranks off are named up to maxNamed, then counted: n may be up to spmd.MaxWorld.
	const maxNamed = 8
	var problems []string
	off := 0
	per := seen[0]
	for r := range int64(n) {
		if seen[r] == 0 || seen[r] != per {
			if off++; off <= maxNamed {
				problems = append(problems, fmt.Sprintf("rank %d has %d rows (rank 0 has %d)", r, seen[r], per))
			}
		}
		delete(seen, r)
	}
	if off > maxNamed {
		problems = append(problems, fmt.Sprintf("and %d more ranks (%d of %d in all)", off-maxNamed, off, n))
	}
	var extra []int
	for r := range seen {
		extra = append(extra, int(r))
	}
	sort.Ints(extra)
	if len(extra) > maxNamed {
		problems = append(problems, fmt.Sprintf("%d ranks are outside 0..%d (%v ...)", len(extra), n-1, extra[:maxNamed]))
	} else if len(extra) > 0 {
		problems = append(problems, fmt.Sprintf("ranks %v are outside 0..%d", extra, n-1))
	}
	if len(problems) > 0 {
		return "", &ExitError{1, fmt.Sprintf("selftest merged: %s: %v", path, problems)}
	}
	return fmt.Sprintf("selftest merged: %s holds %d rows from each of %d ranks", path, per, n), nil
}
