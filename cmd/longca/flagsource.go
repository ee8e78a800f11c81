package main

import (
	"os"
	"slices"
	"strings"

	"github.com/urfave/cli/v2"
)

// flagFrom names where a flag's value came from, for a line that refuses it: the flag
// ("--run-id"), or, when the command line does not give it and an environment variable
// of the flag (EnvVars) is set, that variable ("LONGCA_RUN_ID (--run-id from the
// environment)"): urfave/cli reads both into one value and says neither.
func flagFrom(c *cli.Context, name string) string {
	if v := flagEnvVar(c, name); v != "" {
		return v + " (--" + name + " from the environment)"
	}
	return "--" + name
}

// flagEnvVar is the environment variable a flag's value came from: one of its EnvVars
// that is set, when the command line does not give the flag; "" otherwise.
func flagEnvVar(c *cli.Context, name string) string {
	f := findFlag(c.Command.Flags, name)
	ef, ok := f.(interface{ GetEnvVars() []string })
	if !ok || givenOnCommandLine(c, f.Names()) {
		return ""
	}
	for _, v := range ef.GetEnvVars() {
		if _, set := os.LookupEnv(v); set {
			return v
		}
	}
	return ""
}

// givenOnCommandLine says whether the command's own arguments (its parent's, after the
// command's name: what urfave/cli parsed its flags from) name a flag of names, as --name,
// -name, --name=v or -name=v, before a "--".
func givenOnCommandLine(c *cli.Context, names []string) bool {
	lineage := c.Lineage()
	if len(lineage) < 2 {
		return false
	}
	for _, a := range lineage[1].Args().Tail() {
		if a == "--" {
			break
		}
		if len(a) < 2 || a[0] != '-' {
			continue
		}
		name, _, _ := strings.Cut(strings.TrimLeft(a, "-"), "=")
		if slices.Contains(names, name) {
			return true
		}
	}
	return false
}
