package main

import (
	"bytes"
	"fmt"
	"image/png"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/longca/longca/internal/smallfile"
	"github.com/longca/longca/internal/smallfile/fulltest"
)

// masks --out and --png are written whole or not at all: a disk that fills midway leaves
// the old file under the name as it was and no temporary file, and the command exits 2
// with one line naming the flag and the fix (they were written in place: the disk full
// or a kill midway left a partial file over the old one, exit 1). The real
// smallfile.WriteWhole writes, its bytes cut short after 10 (fulltest.Writer).
func TestMasksOutputsWholeOnAFullDisk(t *testing.T) {
	old := writeMaskFile
	t.Cleanup(func() { writeMaskFile = old })
	full := ""
	writeMaskFile = func(path string, fill func(io.Writer) error) error {
		if path != full {
			return smallfile.WriteWhole(path, fill)
		}
		return smallfile.WriteWhole(path, func(w io.Writer) error { return fill(&fulltest.Writer{W: w, N: 10}) })
	}
	dir := t.TempDir()
	jsonPath, pngPath := filepath.Join(dir, "m.json"), filepath.Join(dir, "m.png")
	before := map[string]string{jsonPath: `{"old": "json"}`, pngPath: "old png"}
	for p, b := range before {
		if err := os.WriteFile(p, []byte(b), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	args := func(extra ...string) []string {
		return append([]string{"masks", "--mask", "causal_document", "--seqlen", "4K", "--out", jsonPath, "--png", pngPath}, extra...)
	}
	for _, c := range []struct {
		flag, path string
	}{{"--out", jsonPath}, {"--png", pngPath}} {
		full = c.path
		out, errOut, code := captureRun(t, args()...)
		checkUsageError(t, args(), code, errOut, c.flag+" "+c.path, "no space left on device", "left as it was", "make room")
		if out != "" {
			t.Errorf("%s on a full disk: printed %q", c.flag, out)
		}
		if b, err := os.ReadFile(c.path); err != nil || string(b) != before[c.path] {
			t.Errorf("%s on a full disk: %s holds %d bytes (%v), want the old file %q", c.flag, c.path, len(b), err, before[c.path])
		}
		if tmp, _ := filepath.Glob(filepath.Join(dir, ".*.tmp-*")); len(tmp) > 0 {
			t.Errorf("%s on a full disk: temporary files left: %v", c.flag, tmp)
		}
	}
	// with room, both are replaced whole, and no temporary file is left
	full = ""
	if out, errOut, code := captureRun(t, args()...); code != 0 || !strings.Contains(out, "causal_document") {
		t.Fatalf("masks with room: exit %d: %s%s", code, out, errOut)
	}
	if b, err := os.ReadFile(jsonPath); err != nil || !bytes.HasPrefix(b, []byte("{")) || string(b) == before[jsonPath] {
		t.Errorf("--out with room: %d bytes (%v), want the mask's JSON", len(b), err)
	}
	if b, err := os.ReadFile(pngPath); err != nil {
		t.Error(err)
	} else if _, err := png.Decode(bytes.NewReader(b)); err != nil {
		t.Errorf("--png with room: %v", err)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 2 {
		var names []string
		for _, e := range ents {
			names = append(names, e.Name())
		}
		t.Errorf("files left in the folder: %v, want m.json and m.png", names)
	}
}

// An --out or --png that cannot be written is one line naming the flag and the path, exit
// 2: no such folder, a folder, a path under a file (the line named the flag alone); a
// device without room (/dev/full) is said as a full disk, exit 2 (exit 1 with the
// write's words).
func TestMasksOutputsThatCannotBeWritten(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "f")
	if err := os.WriteFile(file, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	base := []string{"masks", "--mask", "causal", "--seqlen", "1K"}
	cases := []struct {
		flag, path string
		wants      []string
	}{
		{"--out", filepath.Join(dir, "nosuch", "m.json"), []string{"no such file or directory", "a folder you can write"}},
		{"--png", filepath.Join(dir, "nosuch", "m.png"), []string{"no such file or directory", "a folder you can write"}},
		{"--out", dir, []string{"is a directory"}},
		{"--png", filepath.Join(file, "m.png"), []string{"not a directory"}},
	}
	if _, err := os.Stat("/dev/full"); err == nil {
		cases = append(cases, struct {
			flag, path string
			wants      []string
		}{"--png", "/dev/full", []string{"no space left on device", "make room"}})
	}
	for _, c := range cases {
		args := append(append([]string{}, base...), c.flag, c.path)
		_, errOut, code := captureRun(t, args...)
		checkUsageError(t, args, code, errOut, append([]string{c.flag + " " + c.path}, c.wants...)...)
	}
}

// A file written in place (its folder admits no temporary file: smallfile.WriteWhole's
// fallback) that a full disk cut midway is said to be cut short, not "left as it was" as
// the full disk that leaves the old file is. (The seam gives WriteWhole's error for it:
// the fallback's temporary-file refusal cannot be made from here, and is
// smallfile.TestWriteWholeInPlaceWriteFailsSaysCut's.)
func TestMasksOutputCutInPlaceIsSaid(t *testing.T) {
	old := writeMaskFile
	t.Cleanup(func() { writeMaskFile = old })
	writeMaskFile = func(path string, fill func(io.Writer) error) error {
		if err := fill(io.Discard); err != nil {
			return err
		}
		return fmt.Errorf("%w: %s %w", &os.PathError{Op: "write", Path: path, Err: syscall.ENOSPC}, path, smallfile.ErrCutInPlace)
	}
	path := filepath.Join(t.TempDir(), "m.json")
	args := []string{"masks", "--mask", "causal", "--seqlen", "1K", "--out", path}
	_, errOut, code := captureRun(t, args...)
	checkUsageError(t, args, code, errOut, "--out "+path, "no space left on device", "cut short", "make room")
	if strings.Contains(errOut, "left as it was") {
		t.Errorf("a file cut in place: %q says it was left as it was", strings.TrimSpace(errOut))
	}
}
