package main

import (
	"fmt"
	"strings"

	"github.com/urfave/cli/v2"
)

// repeatedFlags names the flags of args (a command line, args[0] the program) given more
// than once, each with the value that is used (the last): `data --seqlen 1K --seqlen 2K`
// measured 2K without a word. Repeating a flag stays allowed (a wrapper script's defaults
// and then the user's), so this is said, not refused. Switches given bare and the flags meant
// to be repeated (merge --run) are left out. flags are the app's own (--log-level), read up to
// the command, or nil where args start at the command; the command tree is followed as
// urfave/cli reads it (a word naming a subcommand descends into it; "--" ends the flags).
func repeatedFlags(args []string, flags []cli.Flag, cmds []*cli.Command) []string {
	count, last := map[string]int{}, map[string]string{}
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
	}
	var out []string
	for _, k := range order {
		out = append(out, fmt.Sprintf("%s given %d times: the last, %q, is used", k, count[k], last[k]))
	}
	return out
}

// warnRepeated runs action after saying the flags given more than once (repeatedFlags): at
// the action's start, so only once the flag parser has taken every value (`--samples=
// --samples 1` fails on the empty one, and saying the last is used would contradict that).
// The line is the whole one where run gave it (the app's flags too: --log-level twice),
// else the command and what follows, as the root context holds it.
func warnRepeated(action cli.ActionFunc) cli.ActionFunc {
	return func(c *cli.Context) error {
		var args []string
		var flags []cli.Flag
		if a, ok := c.App.Metadata[argsKey].([]string); ok {
			args, flags = a, c.App.Flags
		} else if l := c.Lineage(); len(l) > 0 {
			args = append([]string{c.App.Name}, l[len(l)-1].Args().Slice()...)
		}
		for _, w := range repeatedFlags(args, flags, c.App.Commands) {
			log.Warn().Msg(w)
		}
		return action(c)
	}
}
