package main

import "testing"

// urfave/cli's own complaints (an unknown flag or command, a value that does not parse)
// end like every other bad input: exit status 2 and one line naming what was wrong.
func TestParseErrorsAreUsageErrors(t *testing.T) {
	for _, c := range []struct {
		args []string
		want []string
	}{
		{[]string{"masks", "--nope"}, []string{"-nope", "longca masks --help"}},
		{[]string{"kernel", "-w", "x"}, []string{"-w", `"x"`}},
		{[]string{"selftest", "comm", "--nope"}, []string{"-nope", "longca selftest comm --help"}},
		{[]string{"--bogus"}, []string{"-bogus"}},
		{[]string{"nosuchcmd"}, []string{`unknown command "nosuchcmd"`}},
	} {
		_, errOut, code := captureRun(t, c.args...)
		checkUsageError(t, c.args, code, errOut, c.want...)
	}
	if _, _, code := captureRun(t); code != 0 {
		t.Fatalf("no arguments (help): exit %d", code)
	}
}
