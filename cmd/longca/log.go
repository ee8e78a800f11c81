package main

import (
	"fmt"
	"os"
	"time"

	"github.com/longca/longca/spmd"
	"github.com/mattn/go-isatty"
	"github.com/rs/zerolog"
)

// setupLogger makes the one logger: text on a terminal, JSON otherwise or on request.
func setupLogger(format, level string) error {
	lv, err := zerolog.ParseLevel(level)
	if err != nil {
		return usageError("--log-level %q: use debug, info, warn or error", level)
	}
	tty := isatty.IsTerminal(os.Stderr.Fd())
	switch format {
	case "auto":
		if tty {
			format = "text"
		} else {
			format = "json"
		}
	case "text", "json":
	default:
		return usageError("--log-format %q: use auto, text or json", format)
	}
	if format == "text" {
		// colours only on a terminal: text asked for into a file or a pipe had its escape codes
		log = zerolog.New(zerolog.ConsoleWriter{Out: os.Stderr, TimeFormat: time.TimeOnly, NoColor: !tty}).With().Timestamp().Logger().Level(lv)
	} else {
		log = zerolog.New(os.Stderr).With().Timestamp().Logger().Level(lv)
	}
	return nil
}

// init routes the runtime's warnings (a job without a shared secret) to the one logger.
func init() { spmd.Warn = func(msg string) { log.Warn().Msg(msg) } }

// withRank tags every later log line with the rank and world size.
func withRank(rank, size int) {
	log = log.With().Str("rank", fmt.Sprintf("%d/%d", rank, size)).Logger()
}
