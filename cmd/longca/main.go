// Command longca is the long-context attention benchmark: kernels on one GPU, context
// parallelism over many, one SPMD binary started once per rank by mpirun or srun.
package main

import (
	"errors"
	"fmt"
	"os"
	"sort"
	"sync"

	"github.com/rs/zerolog"
	"github.com/urfave/cli/v2"
)

// Version is set at link time (-ldflags "-X main.Version=...").
var Version = "dev"

var (
	cmdMu    sync.Mutex
	commands []*cli.Command
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

func newApp() *cli.App {
	sort.Slice(commands, func(i, j int) bool { return commands[i].Name < commands[j].Name })
	return &cli.App{
		Name:    "longca",
		Usage:   "benchmark long-context attention kernels and context-parallel methods",
		Version: Version,
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "log-format", Value: "auto", Usage: "auto (text on a terminal, JSON otherwise), text or json"},
			&cli.StringFlag{Name: "log-level", Value: "info", Usage: "debug, info, warn or error"},
		},
		Before: func(c *cli.Context) error {
			return setupLogger(c.String("log-format"), c.String("log-level"))
		},
		Commands:               commands,
		UseShortOptionHandling: false,
		ExitErrHandler:         func(*cli.Context, error) {},
	}
}

func main() {
	os.Exit(run(os.Args))
}

// run is main without the exit, for tests.
func run(args []string) int {
	err := newApp().Run(args)
	if err == nil {
		return 0
	}
	var ec cli.ExitCoder
	if errors.As(err, &ec) {
		if msg := err.Error(); msg != "" {
			fmt.Fprintln(os.Stderr, msg)
		}
		return ec.ExitCode()
	}
	fmt.Fprintln(os.Stderr, "longca:", err)
	if isUsage(err) {
		return 2
	}
	return 1
}

// isUsage recognises urfave/cli's own complaints about flags and arguments.
func isUsage(err error) bool {
	var u interface{ Usage() bool }
	return errors.As(err, &u) && u.Usage()
}

var log zerolog.Logger = zerolog.New(os.Stderr).With().Timestamp().Logger()
