// Command longca is the long-context attention benchmark: kernels on one GPU, context
// parallelism over many, one SPMD binary started once per rank by mpirun or srun.
package main

import (
	"errors"
	"fmt"
	"math"
	"os"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/longca/longca/dataset"
	"github.com/longca/longca/results"
	"github.com/longca/longca/session"
	"github.com/longca/longca/spmd"

	"github.com/longca/longca/kernels/external"
	"github.com/rs/zerolog"
	"github.com/urfave/cli/v2"
)

// Version is set at link time (-ldflags "-X main.Version=...").
var Version = "dev"

var (
	cmdMu    sync.Mutex
	commands []*cli.Command
	wrapped  = map[*cli.Command]bool{} // the leaf commands whose actions setFlagErrors wrapped
)

// register adds a subcommand; each subcommand's file calls it from init.
func register(c *cli.Command) {
	cmdMu.Lock()
	defer cmdMu.Unlock()
	commands = append(commands, c)
}

// usageError is bad input: one clear line naming the flag, exit status 2.
func usageError(format string, args ...any) error {
	return cli.Exit("longca: "+fmt.Sprintf(format, args...), 2)
}

// tokensFlag reads a token-count flag, which takes the size suffixes as every size does (1K =
// 1024): def where the flag is not given; one line naming it where its value is no count.
func tokensFlag(c *cli.Context, name string, def int) (int, error) {
	if !c.IsSet(name) {
		return def, nil
	}
	v, err := dataset.ParseSize(c.String(name))
	if err != nil {
		return 0, usageError("--%s %s: give a whole number of tokens with an optional K, M or G suffix (1K = 1024)", name, c.String(name))
	}
	return v, nil
}

func newApp() *cli.App {
	sort.Slice(commands, func(i, j int) bool { return commands[i].Name < commands[j].Name })
	for _, c := range commands {
		setFlagErrors(c, "")
	}
	flags := []cli.Flag{
		&cli.StringFlag{Name: "log-format", Value: "auto", Usage: "auto (text on a terminal, JSON otherwise), text or json"},
		&cli.StringFlag{Name: "log-level", Value: "info", Usage: "debug, info, warn or error"},
	}
	return &cli.App{
		Name:    "longca",
		Usage:   "benchmark long-context attention kernels and context-parallel methods",
		Version: Version,
		Flags:   flags,
		Before: func(c *cli.Context) error {
			if err := setupLogger(c.String("log-format"), c.String("log-level")); err != nil {
				return err
			}
			return nil
		},
		Commands:               commands,
		UseShortOptionHandling: false,
		ExitErrHandler:         func(*cli.Context, error) {},
		OnUsageError:           flagError("", func() []cli.Flag { return flags }),
		Action: func(c *cli.Context) error {
			if c.Args().Present() {
				return usageError("unknown command %q%s: see longca --help for the commands", c.Args().First(), didYouMean(c.Args().First(), commandNames(commands), plain, " (", ")"))
			}
			return cli.ShowAppHelp(c)
		},
	}
}

// setFlagErrors gives c and its subcommands flagError as their usage-error handler.
func setFlagErrors(c *cli.Command, parent string) {
	name := parent + c.Name + " "
	if c.OnUsageError == nil {
		c.OnUsageError = flagError(name, func() []cli.Flag { return c.Flags })
	}
	if c.Action != nil && len(c.Subcommands) == 0 && !wrapped[c] { // once: newApp runs again in tests
		wrapped[c] = true
		c.Action = warnRepeated(c.Action)
		if c.ArgsUsage == "" {
			c.Action = noArgs(strings.TrimSpace(name), c.Action)
		}
	}
	if c.Action == nil && len(c.Subcommands) > 0 { // urfave/cli: "No help topic", exit 3
		cmd := strings.TrimSpace(name)
		c.Action = func(x *cli.Context) error {
			if x.Args().Present() {
				return usageError("%s: unknown command %q%s: see longca %s --help for its commands", cmd, x.Args().First(), didYouMean(x.Args().First(), commandNames(c.Subcommands), plain, " (", ")"), cmd)
			}
			return cli.ShowSubcommandHelp(x)
		}
	}
	for _, sub := range c.Subcommands {
		setFlagErrors(sub, name)
	}
}

// noArgs refuses positional arguments for a command that takes none: urfave/cli stops
// reading flags at the first argument, so `longca cp x --dry-run` ran a whole sweep with
// --dry-run as a second argument, and `simulate x --gpus 8` the default GPU counts.
func noArgs(cmd string, action cli.ActionFunc) cli.ActionFunc {
	return func(c *cli.Context) error {
		if c.NArg() > 0 {
			return usageError("%s takes no arguments (got %q; the flags after it were not read): see longca %s --help", cmd, c.Args().First(), cmd)
		}
		return action(c)
	}
}

// flagError turns urfave/cli's flag parsing errors (an unknown flag, a value that does
// not parse) into usage errors: one line, exit status 2, naming the flag as it is written
// (--samples; Go's flag package says -samples) and, for a value, what the flag takes
// (flagParseError); flags are the command's, looked up when an error comes.
func flagError(cmd string, flags func() []cli.Flag) cli.OnUsageErrorFunc {
	return func(_ *cli.Context, err error, _ bool) error {
		if line, ok := flagParseError(err.Error(), flags(), cmd); ok {
			return usageError("%s", line)
		}
		return usageError("%v (see longca %s--help)", err, cmd)
	}
}

// The errors of Go's flag package that urfave/cli passes on (flag.FlagSet.failf), each
// naming the flag with one dash.
var (
	flagValueRE   = regexp.MustCompile(`^invalid value ("(?:[^"\\]|\\.)*") for flag -([^\s:]+): (.+)$`)
	flagBoolRE    = regexp.MustCompile(`^invalid boolean value ("(?:[^"\\]|\\.)*") for -([^\s:]+): (.+)$`)
	flagNoValueRE = regexp.MustCompile(`^flag needs an argument: -(\S+)$`)
	flagUnknownRE = regexp.MustCompile(`^flag provided but not defined: -(\S+)$`)
)

// flagParseError rewrites one of Go's flag errors (msg) about a flag of flags into the
// project's line: `--samples x: give a whole number`; false for any other error.
func flagParseError(msg string, flags []cli.Flag, cmd string) (string, bool) {
	if m := flagUnknownRE.FindStringSubmatch(msg); m != nil {
		if cmd != "" && (m[1] == "log-format" || m[1] == "log-level") { // the app's own flags
			return fmt.Sprintf("%s: longca's own flag: give it before the command (longca %s ... %s...)", dashed(m[1]), dashed(m[1]), cmd), true
		}
		return fmt.Sprintf("%s: no such flag%s (see longca %s--help)", dashed(m[1]), didYouMean(m[1], flagNames(flags), dashed, ": ", ""), cmd), true
	}
	if m := flagNoValueRE.FindStringSubmatch(msg); m != nil {
		return fmt.Sprintf("%s given without a value: %s", dashed(m[1]), flagWants(findFlag(flags, m[1]), false, cmd)), true
	}
	m := flagValueRE.FindStringSubmatch(msg)
	if m == nil {
		m = flagBoolRE.FindStringSubmatch(msg)
	}
	if m == nil {
		return "", false
	}
	v, err := strconv.Unquote(m[1])
	if err != nil {
		return "", false
	}
	f := findFlag(flags, m[2])
	given := dashed(m[2]) + " " + shownValue(v)
	if _, ok := f.(*cli.BoolFlag); ok {
		given = dashed(m[2]) + "=" + shownValue(v)
	}
	if m[3] == "value out of range" {
		return fmt.Sprintf("%s: %s", given, outOfRange(f, v, cmd)), true
	}
	return fmt.Sprintf("%s: %s", given, flagWants(f, false, cmd)), true
}

// outOfRange says which end of its type a number given to f passed: a value too large is
// told the largest, one too small the smallest, so that "--device 1e20" is not told it may
// go down to -2^63 when the command then refuses every negative.
func outOfRange(f cli.Flag, v string, cmd string) string {
	negative := strings.HasPrefix(strings.TrimSpace(v), "-")
	switch f.(type) {
	case *cli.IntFlag, *cli.Int64Flag:
		if negative {
			return fmt.Sprintf("out of range: too small for a whole number (at least %d)", math.MinInt64)
		}
		return fmt.Sprintf("out of range: too large for a whole number (at most %d)", math.MaxInt64)
	case *cli.UintFlag, *cli.Uint64Flag:
		if !negative {
			return fmt.Sprintf("out of range: too large for a whole number (at most %d)", uint64(math.MaxUint64))
		}
	}
	return flagWants(f, true, cmd)
}

// plain writes a command's name as it is.
func plain(name string) string { return name }

// dashed writes a flag's name as given: -w for a one-letter alias, else --samples.
func dashed(name string) string {
	if len(name) == 1 {
		return "-" + name
	}
	return "--" + name
}

// shownValue is a value as a line shows it: quoted when empty or holding spaces.
func shownValue(v string) string {
	if v == "" || strings.ContainsAny(v, " \t\n\"'") {
		return strconv.Quote(v)
	}
	return v
}

// flagWants says what value a flag of f's type takes; outOfRange for a number too large;
// a flag of text (or none found) points at the help of cmd ("kernel ", "" for longca's).
func flagWants(f cli.Flag, outOfRange bool, cmd string) string {
	switch f.(type) {
	case *cli.IntFlag, *cli.Int64Flag:
		return "give a whole number"
	case *cli.UintFlag, *cli.Uint64Flag:
		return "give a whole number, 0 or more"
	case *cli.Float64Flag:
		if outOfRange {
			return "out of range: give a number below 1.8e308 in size"
		}
		return "give a number (such as 0.5 or 1e9)"
	case *cli.BoolFlag:
		return "give true or false (the flag alone is true)"
	case *cli.DurationFlag:
		return "give a duration with its unit (such as 90s or 10m)"
	}
	return fmt.Sprintf("give a value (see longca %s--help)", cmd)
}

func main() {
	os.Exit(run(os.Args))
}

// argsKey is the app's Metadata entry holding the command line run was given.
const argsKey = "args"

// run is main without the exit, for tests.
func run(args []string) int {
	external.Version = Version
	// merge and report hold their read of a folder against what this process may take
	results.HostBytes = func() float64 { return session.Machine().HostBytes }
	defer external.CloseAll() // external workers end, and their folders go, with longca
	madeMu.Lock()
	madeDirs = nil // this run's folders only (tests call run many times in one process)
	madeMu.Unlock()
	app := newApp()
	app.Metadata = map[string]any{argsKey: args}
	err := app.Run(args)
	if err == nil {
		return 0
	}
	if topic, ok := strings.CutPrefix(err.Error(), "No help topic for "); ok && exitCode(err) == 3 {
		// urfave/cli's help command (`longca help nope`, `longca kernel help nope`) exits 3
		err = usageError("help: no command %s: see longca --help for the commands", topic)
	}
	if exitCode(err) == 2 { // a refused command leaves no empty results folder behind (a run that failed
		removeEmptyMade() // while measuring keeps it: another rank may still be writing there)
	}
	var ec cli.ExitCoder
	if errors.As(err, &ec) {
		if msg := err.Error(); msg != "" {
			fmt.Fprintln(os.Stderr, msg)
		}
	} else {
		fmt.Fprintln(os.Stderr, "longca:", err)
	}
	return exitCode(err)
}

// exitCode is the status an error from the app exits with: its own code (2 for bad
// usage, see usageError), else 1 (0 for nil).
func exitCode(err error) int {
	var ec cli.ExitCoder
	switch {
	case err == nil:
		return 0
	case errors.As(err, &ec):
		return ec.ExitCode()
	case errors.Is(err, results.ErrUsage), errors.Is(err, spmd.ErrLaunch):
		return 2
	}
	return 1
}

var log zerolog.Logger = zerolog.New(os.Stderr).With().Timestamp().Logger()
