package results

// Bad input from a fuzz pass of the binary: a file named for 10^9 ranks made merge,
// report and every reader of a folder walk (and list) each rank, growing to gigabytes.

import (
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/longca/longca/spmd"
)

func TestMaxWorldSizeIsSpmds(t *testing.T) {
	if MaxWorldSize != spmd.MaxWorld {
		t.Fatalf("results.MaxWorldSize %d, spmd.MaxWorld %d: they must agree", MaxWorldSize, spmd.MaxWorld)
	}
}

// A name claiming more ranks than a world may have, or numbers FileName would not
// write, is not a rank file; Create refuses such a size too.
func TestParseFileNameBoundsWorldSize(t *testing.T) {
	for _, c := range []struct {
		name string
		ok   bool
	}{
		{"good.rank-0-of-1048576.arrow", true},
		{"good.rank-1048575-of-1048576.arrow", true},
		{"good.rank-0-of-1048577.arrow", false},
		{"good.rank-0-of-1000000000.arrow", false},
		{"good.rank-0-of-99999999999999999999999.arrow", false},
		{"good.rank-01-of-2.arrow", false},
		{"good.rank-1-of-02.arrow", false},
	} {
		if _, _, _, ok := ParseFileName(c.name); ok != c.ok {
			t.Errorf("ParseFileName(%s): ok %v, want %v", c.name, ok, c.ok)
		}
	}
	if _, err := Create(t.TempDir(), "x", 0, MaxWorldSize+1); err == nil {
		t.Errorf("Create of rank 0 of %d succeeded", MaxWorldSize+1)
	}
}

// within runs f, failing the test when it takes longer than d (the cause, unfixed,
// hangs growing to gigabytes: the test ends rather than wait for it).
func within(t *testing.T, d time.Duration, what string, f func()) {
	t.Helper()
	done := make(chan struct{})
	go func() { defer close(done); f() }()
	select {
	case <-done:
	case <-time.After(d):
		panic(what + " ran past " + d.String() + ": a rank file's world size must be bounded (MaxWorldSize) and missing ranks described without walking them")
	}
}

// A folder holding a valid rank file renamed to rank 0 of 10^9 merges and loads at once:
// the name is no rank file, so the folder holds none.
func TestHugeWorldNameIsNoRankFile(t *testing.T) {
	src := t.TempDir()
	writeRanks(t, src, "good", 1, 2, 0)
	b, err := os.ReadFile(filepath.Join(src, FileName("good", 0, 1)))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "good.rank-0-of-1000000000.arrow"), b, 0o644); err != nil {
		t.Fatal(err)
	}
	var mergeErr, loadErr error
	within(t, 20*time.Second, "merge and load of a folder naming 10^9 ranks", func() {
		_, mergeErr = Merge(dir, MergeOptions{AllowMissing: true})
		_, loadErr = LoadChecked(dir)
	})
	for _, err := range []error{mergeErr, loadErr} {
		if !errors.Is(err, ErrUsage) || !strings.Contains(err.Error(), "good.rank-0-of-1000000000.arrow names 1000000000 ranks") {
			t.Errorf("got %v; want a usage error naming the file and its world size", err)
		}
	}
}

// A run of the most ranks allowed, with two present, is merged (refused for the missing
// ranks, which are described as ranges) in well under a second and a few megabytes.
func TestMissingRanksOfAHugeWorldAreRanges(t *testing.T) {
	dir := t.TempDir()
	writeRanks(t, dir, "big", MaxWorldSize, 1, 0, 7)
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	var err error
	within(t, 20*time.Second, "merge of 2 of 2^20 ranks", func() { _, err = Merge(dir, MergeOptions{}) })
	runtime.ReadMemStats(&after)
	want := "run big: ranks 1-6, 8-1048575 of 1048576 missing"
	if !errors.Is(err, ErrMissingRanks) || !strings.Contains(err.Error(), want) || len(err.Error()) > 1000 {
		t.Errorf("got %.300v; want ErrMissingRanks saying %q, in one short line", err, want)
	}
	if n := after.TotalAlloc - before.TotalAlloc; n > 16<<20 {
		t.Errorf("merge allocated %d MB; want a few (nothing per missing rank)", n>>20)
	}
}

func TestDescribeMissing(t *testing.T) {
	odd := []int{}
	for r := 1; r < 100; r += 2 {
		odd = append(odd, r)
	}
	for _, c := range []struct {
		size    int
		present []int
		want    string
	}{
		{4, []int{0, 1, 2, 3}, ""},
		{4, []int{0, 1, 3}, "rank 2 of 4 missing"},
		{4, []int{1, 3}, "ranks 0, 2 of 4 missing"},
		{5, []int{0, 1}, "ranks 2-4 of 5 missing"},
		{1000, []int{0}, "ranks 1-999 of 1000 missing"},
		{1000, nil, "ranks 0-999 of 1000 missing"},
		{100, odd, "ranks 0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30, ... (50 in all) of 100 missing"},
		{MaxWorldSize, []int{5}, "ranks 0-4, 6-1048575 of 1048576 missing"},
		// gaps of two ranks: 2 pieces each, and no more named once past the bound
		{60, []int{2, 5, 8, 11, 14, 17, 20, 23, 26, 29, 32, 35, 38, 41, 44, 47, 50, 53, 56, 59},
			"ranks 0, 1, 3, 4, 6, 7, 9, 10, 12, 13, 15, 16, 18, 19, 21, 22, ... (40 in all) of 60 missing"},
		{7, []int{2, 5}, "ranks 0, 1, 3, 4, 6 of 7 missing"},
	} {
		if got := describeMissing(c.size, c.present); got != c.want {
			t.Errorf("describeMissing(%d, %v) = %q, want %q", c.size, c.present, got, c.want)
		}
	}
}

// A merge with --allow-missing of a folder whose every rank file is garbage or empty is
// ErrMissingRanks (longca merge: exit 2, as without --allow-missing), in one line.
func TestMergeOfNothingReadableIsMissingRanks(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, FileName("x", 0, 2)), []byte("junk\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, FileName("y", 0, 1)), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, allow := range []bool{false, true} {
		_, err := Merge(dir, MergeOptions{AllowMissing: allow})
		if !errors.Is(err, ErrMissingRanks) || strings.Contains(err.Error(), "\n") {
			t.Errorf("allow-missing %v: %v; want ErrMissingRanks in one line", allow, err)
		}
	}
}
