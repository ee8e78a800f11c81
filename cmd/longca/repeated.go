package main

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/urfave/cli/v2"
)

// repeatedFlags names the flags of args (a command line, args[0] the program) given more
// than once, each with the value that is used (the last): `data --seqlen 1K --seqlen 2K`
// measured 2K without a word. Repeating a flag stays allowed (a wrapper script's defaults
// and then the user's), so this is said, not refused. Switches given bare and the flags meant
// to be repeated (merge --run) are left out, and so is a flag one of whose values its parser
// refuses (the parse error that follows names it; nothing is used). flags are the app's own (--log-level), read up to
// the command, or nil where args start at the command; the command tree is followed as
// urfave/cli reads it (a word naming a subcommand descends into it; "--" ends the flags).
func repeatedFlags(args []string, flags []cli.Flag, cmds []*cli.Command) []string {
	count, last, bad := map[string]int{}, map[string]string{}, map[string]bool{}
	var order []string
	for i := 1; i < len(args); i++ {
		t := args[i]
		if t == "--" {
			break
		}
		if len(t) < 2 || t[0] != '-' {
			for _, c := range cmds {
				if c.HasName(t) {
					flags, cmds = c.Flags, c.Subcommands
					break
				}
			}
			continue
		}
		name, value, hasValue := strings.Cut(strings.TrimLeft(t, "-"), "=")
		f := findFlag(flags, name)
		if f == nil {
			continue
		}
		switch f.(type) {
		case *cli.BoolFlag: // a switch given twice says the same; with values (--x=false, --x=true) it may not
			if !hasValue {
				continue
			}
		case *cli.StringSliceFlag, *cli.IntSliceFlag, *cli.Int64SliceFlag, *cli.Float64SliceFlag, *cli.UintSliceFlag, *cli.Uint64SliceFlag:
			continue
		}
		if !hasValue && i+1 < len(args) {
			i++
			value = args[i]
		}
		key := "--" + f.Names()[0]
		if count[key]++; count[key] == 2 {
			order = append(order, key)
		}
		last[key] = value
		bad[key] = bad[key] || !flagValueParses(f, value)
	}
	var out []string
	for _, k := range order {
		if bad[k] { // the flag parser stops at that value and says so: the last is not used
			continue
		}
		out = append(out, fmt.Sprintf("%s given %d times: the last, %q, is used", k, count[k], last[k]))
	}
	return out
}

// flagValueParses says whether the flag parser takes v for f, as Go's flag package reads
// its kind (`--samples= --samples 1` was said to use the last, "1", then refused the
// empty one); values that commands read themselves (strings) are taken.
func flagValueParses(f cli.Flag, v string) bool {
	var err error
	switch f.(type) {
	case *cli.IntFlag:
		_, err = strconv.ParseInt(v, 0, strconv.IntSize)
	case *cli.Int64Flag:
		_, err = strconv.ParseInt(v, 0, 64)
	case *cli.UintFlag:
		_, err = strconv.ParseUint(v, 0, strconv.IntSize)
	case *cli.Uint64Flag:
		_, err = strconv.ParseUint(v, 0, 64)
	case *cli.Float64Flag:
		_, err = strconv.ParseFloat(v, 64)
	case *cli.DurationFlag:
		_, err = time.ParseDuration(v)
	case *cli.BoolFlag:
		_, err = strconv.ParseBool(v)
	}
	return err == nil
}
