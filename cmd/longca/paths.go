package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/longca/longca/results"
	"github.com/longca/longca/session"
	"github.com/longca/longca/spmd"
	"github.com/urfave/cli/v2"
)

// resultsTarget checks where a command will write its rows, before any work: the run id
// (given, or the folder's name) must be a valid one, and the folder must exist or be
// creatable, and be writable, and must not hold the run id already on another number of
// ranks (size: this run's, results.CheckNewRun), nor, when this process writes the files
// of several ranks (allHere: in-process ranks, each of which said it), any rank file of
// it. Bad input is a usage error naming --run-id (runIDFrom: flagFrom's name of where it
// came from) or --out, so that it is said once, before ranks start.
func resultsTarget(out, runID, runIDFrom string, size int, allHere bool) (string, error) {
	if runID == "" {
		runID = filepath.Base(filepath.Clean(out))
		if err := results.CheckRunID(runID); err != nil {
			return "", usageError("--out %s: the folder's name is the run id by default, and %v: give --run-id", out, err)
		}
	} else if err := results.CheckRunID(runID); err != nil {
		return "", usageError("%s: %v", runIDFrom, err)
	}
	if err := writableDir(out); err != nil {
		return "", usageError("--out %s: %v", out, err)
	}
	if err := results.CheckNewRun(out, runID, size, allHere); err != nil {
		msg := strings.TrimPrefix(err.Error(), "results: ")
		if note := session.RunFilesNote(out, runID); note != "" { // (files left by a run that wrote no row)
			msg += "; " + note
		}
		return "", usageError("--out %s: %s", out, msg)
	}
	return runID, nil
}

// madeDirs are the folders this process made for its results (writableDir), deepest
// first; a command then refused (exit status 2) removes those still empty
// (removeEmptyMade), so that a refused run leaves no empty --out folder behind.
var (
	madeMu   sync.Mutex
	madeDirs []string
)

// writableDir makes dir if needed and checks that a file can be created in it.
func writableDir(dir string) error {
	if st, err := os.Stat(dir); err == nil && !st.IsDir() {
		return fmt.Errorf("is a file, not a folder")
	}
	if to, err := os.Readlink(dir); err == nil { // a link to nothing: MkdirAll said "file exists"
		if _, err := os.Stat(dir); err != nil {
			return fmt.Errorf("is a symbolic link to %s, which is not there (%v): make that folder, or give another", to, cleanPathError(err))
		}
	}
	var missing []string // dir and its missing parents, deepest first
	for d := filepath.Clean(dir); ; d = filepath.Dir(d) {
		if _, err := os.Stat(d); err == nil || !errors.Is(err, fs.ErrNotExist) {
			break
		}
		missing = append(missing, d)
		if filepath.Dir(d) == d {
			break
		}
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		if _, werr := os.Getwd(); werr != nil && !filepath.IsAbs(dir) {
			return fmt.Errorf("the current folder is gone (%v): cd to one that exists, or give a full path", cleanPathError(werr))
		}
		return cleanPathError(err)
	}
	madeMu.Lock()
	madeDirs = append(missing, madeDirs...)
	madeMu.Unlock()
	f, err := os.CreateTemp(dir, ".longca-probe-*")
	if err != nil {
		return fmt.Errorf("cannot write in it: %w", cleanPathError(err))
	}
	name := f.Name()
	f.Close()
	os.Remove(name)
	return nil
}

// cleanPathError drops the operation and path from a *fs.PathError (the caller names the
// flag and the path already).
func cleanPathError(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// writableFileFlag checks that the file named by flag can be created (its folder exists
// and is writable).
func writableFileFlag(flag, path string) error {
	dir := filepath.Dir(path)
	st, err := os.Stat(dir)
	if err != nil {
		return usageError("--%s %s: its folder %s: %v", flag, path, dir, cleanPathError(err))
	}
	if !st.IsDir() {
		return usageError("--%s %s: %s is not a folder", flag, path, dir)
	}
	if st, err := os.Stat(path); err == nil && st.IsDir() {
		return usageError("--%s %s: is a folder: give a file name", flag, path)
	}
	f, err := os.CreateTemp(dir, ".longca-probe-*")
	if err != nil {
		return usageError("--%s %s: cannot write in %s: %v", flag, path, dir, cleanPathError(err))
	}
	name := f.Name()
	f.Close()
	os.Remove(name)
	return nil
}

// usageOnRankZero keeps a usage error (exit status 2) to rank 0's output: every rank of
// a launch finds the same bad flag, and one line says it. The other ranks exit with the
// same status, silently.
func usageOnRankZero(err error) error {
	var ec cli.ExitCoder
	if err == nil || !errors.As(err, &ec) || ec.ExitCode() != 2 {
		return err
	}
	if w, derr := spmd.Discover(os.Getenv); derr == nil && w.Rank > 0 {
		return cli.Exit("", 2)
	}
	return err
}

// removeEmptyMade removes the folders writableDir made that are still empty (a folder with
// anything in it, rows or logs, stays), deepest first.
func removeEmptyMade() {
	madeMu.Lock()
	defer madeMu.Unlock()
	for _, d := range madeDirs {
		_ = os.Remove(d) // fails, and keeps it, unless empty
	}
	madeDirs = nil
}

// sameFile says whether two output paths name one file: the same path once cleaned and
// made absolute, or (where both exist) one file through links.
func sameFile(a, b string) bool {
	if a == "" || b == "" {
		return false
	}
	if x, err1 := filepath.Abs(a); err1 == nil {
		if y, err2 := filepath.Abs(b); err2 == nil && x == y {
			return true
		}
	}
	fa, err1 := os.Stat(a)
	fb, err2 := os.Stat(b)
	return err1 == nil && err2 == nil && os.SameFile(fa, fb)
}
