package main

import (
	"regexp"
	"strings"

	"github.com/urfave/cli/v2"
)

// suggest is the name of names closest to what was typed, for a "did you mean" hint: one
// that differs only by a plural s, by '_' for '-', or by at most two edits (one for names
// of four letters or fewer), the closest first and ties in names' order; "" when none is
// close. Commands differ between each other in exactly these ways (kernel's --seqlens,
// cp's --seqlen; --kernels and --kernel; --masks and masks' --mask).
func suggest(typed string, names []string) string {
	t := strings.ToLower(strings.ReplaceAll(typed, "_", "-"))
	best, bestD := "", 3
	for _, n := range names {
		if len(n) < 2 || n == typed {
			continue
		}
		d := editDistance(t, strings.ToLower(n))
		if t+"s" == n || n+"s" == t {
			d = 0
		}
		limit := 2
		if len(n) <= 4 {
			limit = 1
		}
		if d <= limit && d < bestD {
			best, bestD = n, d
		}
	}
	return best
}

// editDistance is the Levenshtein distance of a and b, by bytes (names are ASCII).
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// flagNames lists every name and alias of flags.
func flagNames(flags []cli.Flag) []string {
	var n []string
	for _, f := range flags {
		n = append(n, f.Names()...)
	}
	return n
}

// commandNames lists every name and alias of commands, hidden ones left out.
func commandNames(cs []*cli.Command) []string {
	var n []string
	for _, c := range cs {
		if !c.Hidden {
			n = append(n, c.Names()...)
		}
	}
	return n
}

// didYouMean is before+"did you mean X?"+after for the name of names closest to typed
// (written by dash), or "" when none is close.
func didYouMean(typed string, names []string, dash func(string) string, before, after string) string {
	if s := suggest(typed, names); s != "" {
		return before + "did you mean " + dash(s) + "?" + after
	}
	return ""
}

// A flag whose usage already says its default (the flag's Value is only a sentinel, such
// as 0 for "every mesh") had urfave/cli's own "(default: 0)" printed after it too:
// `--ranks ... (default 1) (default: 0)`. oneDefault leaves the usage's.
func init() {
	stringer := cli.FlagStringer
	cli.FlagStringer = func(f cli.Flag) string { return oneDefault(f, stringer(f)) }
}

// ownDefault finds a usage's own statement of its default: "(default 1)", "default: 16",
// not the value named default (--sharding's "or default (zigzag; ...)").
var ownDefault = regexp.MustCompile(`\(default[ :]|\bdefault:`)

// oneDefault is line, f's help line, without its last "(default: ...)" where f's usage
// says a default of its own.
func oneDefault(f cli.Flag, line string) string {
	d, ok := f.(cli.DocGenerationFlag)
	if !ok || !ownDefault.MatchString(d.GetUsage()) || !strings.HasSuffix(line, ")") {
		return line
	}
	if i := strings.LastIndex(line, " (default: "); i >= 0 && ownDefault.MatchString(line[:i]) {
		return line[:i]
	}
	return line
}
