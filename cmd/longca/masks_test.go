package main

import (
	"encoding/json"
	"image/png"
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/longca/longca/mask"
)

var captureMu sync.Mutex

// captureRun runs the CLI with args and returns its stdout, stderr and exit status.
func captureRun(t *testing.T, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	captureMu.Lock()
	defer captureMu.Unlock()
	oldOut, oldErr := os.Stdout, os.Stderr
	ro, wo, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	re, we, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	var bo, be []byte
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); bo, _ = io.ReadAll(ro) }()
	go func() { defer wg.Done(); be, _ = io.ReadAll(re) }()
	os.Stdout, os.Stderr = wo, we
	code = run(append([]string{"longca"}, args...))
	os.Stdout, os.Stderr = oldOut, oldErr
	log = log.Output(oldErr) // a test's own calls after this log to the test's stderr, not a closed pipe
	wo.Close()
	we.Close()
	wg.Wait()
	return string(bo), string(be), code
}

func TestMasksList(t *testing.T) {
	out, errOut, code := captureRun(t, "masks")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	var names []string
	for _, l := range lines {
		if !strings.HasPrefix(l, "#") {
			names = append(names, strings.Fields(l)[0])
		}
	}
	if strings.Join(names, " ") != strings.Join(mask.Names(), " ") {
		t.Errorf("listed %v, want %v", names, mask.Names())
	}
}

func TestMasksCausal4MJSON(t *testing.T) {
	start := time.Now()
	out, errOut, code := captureRun(t, "masks", "--mask", "causal", "--seqlen", "4M", "--format", "json")
	elapsed := time.Since(start)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var v struct {
		Name   string `json:"name"`
		SeqLen int    `json:"seqlen"`
		Seed   uint64 `json:"seed"`
		Area   int64  `json:"area"`
		Slices []struct {
			Q, K [2]int
			Kind string
		} `json:"slices"`
	}
	if err := json.Unmarshal([]byte(out), &v); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, out)
	}
	if v.Name != "causal" || v.SeqLen != 4194304 || v.Seed != 42 || v.Area != 4194304*4194305/2 || len(v.Slices) != 1 || v.Slices[0].Kind != "causal" {
		t.Errorf("got %+v", v)
	}
	if elapsed > time.Second {
		t.Errorf("took %v, want well under a second", elapsed)
	}
}

func TestMasksTableAndFiles(t *testing.T) {
	dir := t.TempDir()
	jsonPath, pngPath := filepath.Join(dir, "m.json"), filepath.Join(dir, "m.png")
	out, errOut, code := captureRun(t, "masks", "--mask", "causal_document", "--seqlen", "16K", "--seed", "7",
		"--heads-q", "8", "--head-dim", "64", "--out", jsonPath, "--png", pngPath)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	want, err := mask.Build("causal_document", 16384, mask.Options{Seed: 7})
	if err != nil {
		t.Fatal(err)
	}
	var data []string
	var grid int
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		switch {
		case strings.HasPrefix(l, "#"):
		case strings.Trim(l, "#+.") == "":
			grid++
			if len(l) != 64 {
				t.Errorf("grid row of %d characters, want 64", len(l))
			}
		default:
			data = append(data, l)
		}
	}
	if len(data) != 1 || grid != 64 {
		t.Fatalf("want one data row and a 64-row grid, got %d and %d:\n%s", len(data), grid, out)
	}
	f := strings.Fields(data[0])
	area := want.Mask.Area()
	if f[0] != itoa(len(want.Mask.Slices)) || f[1] != itoa64(area) {
		t.Errorf("row %q, want %d slices, area %d", data[0], len(want.Mask.Slices), area)
	}
	var flops float64
	if err := json.Unmarshal([]byte(f[3]), &flops); err != nil || math.Abs(flops/(4*float64(area)*8*64)-1) > 1e-4 {
		t.Errorf("fwd FLOPs %q, want %g", f[3], 4*float64(area)*8*64)
	}
	// --out wrote the same mask in MASKS.md's JSON form.
	b, err := os.ReadFile(jsonPath)
	if err != nil {
		t.Fatal(err)
	}
	var back mask.Spec
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if back.Mask.Area() != area || len(back.Mask.Slices) != len(want.Mask.Slices) || back.Params["doc_lengths"] != want.Params["doc_lengths"] {
		t.Errorf("--out JSON differs from mask.Build")
	}
	pf, err := os.Open(pngPath)
	if err != nil {
		t.Fatal(err)
	}
	defer pf.Close()
	img, err := png.Decode(pf)
	if err != nil || img.Bounds().Dx() != 512 || img.Bounds().Dy() != 512 {
		t.Errorf("--png: %v, bounds %v", err, img.Bounds())
	}
}

func TestMasksSmallDrawing(t *testing.T) {
	out, errOut, code := captureRun(t, "masks", "--mask", "sliding_window_causal", "--seqlen", "5", "--window", "1")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	want := "#....\n##...\n.##..\n..##.\n...##\n"
	if !strings.HasSuffix(out, want) {
		t.Errorf("drawing:\n%s\nwant it to end with\n%s", out, want)
	}
}

func TestMasksBadInput(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.json")
	zero := filepath.Join(dir, "zero.json")
	os.WriteFile(bad, []byte(`{"[0,10": 1}`), 0o644)
	os.WriteFile(zero, []byte(`{"[0,10)": 0}`), 0o644)
	cases := []struct {
		args []string
		want []string
	}{
		{[]string{"masks", "--mask", "causal_docs", "--seqlen", "1K"}, []string{"--mask", "causal_document"}},
		{[]string{"masks", "--mask", "sliding_window", "--seqlen", "1K", "--window", "2048"}, []string{"--window", "larger than --seqlen"}},
		{[]string{"masks", "--mask", "sliding_window", "--seqlen", "1K", "--window", "0"}, []string{"--window", "at least 1"}},
		{[]string{"masks", "--mask", "block_causal_document", "--seqlen", "1000"}, []string{"--block-size", "1000"}},
		{[]string{"masks", "--mask", "causal_document", "--seqlen", "1K", "--dist", bad}, []string{"--dist", "bad.json", "[a,b)"}},
		{[]string{"masks", "--mask", "causal_document", "--seqlen", "1K", "--dist", zero}, []string{"--dist", "sum to 0"}},
		{[]string{"masks", "--mask", "causal_document", "--seqlen", "1K", "--dist", "pilee"}, []string{"--dist", "pile"}},
		{[]string{"masks", "--mask", "causal", "--seqlen", "12Q"}, []string{"--seqlen", "12Q"}},
		{[]string{"masks", "--mask", "causal", "--seqlen", "0"}, []string{"--seqlen", "at least 1"}},
		{[]string{"masks", "--mask", "causal"}, []string{"--seqlen", "required"}},
		{[]string{"masks", "--mask", "causal", "--seqlen", "1K", "--format", "xml"}, []string{"--format", "table or json"}},
		{[]string{"masks", "--mask", "causal", "--seqlen", "1K", "--heads-q", "0"}, []string{"--heads-q"}},
		{[]string{"masks", "--mask", "causal", "--seqlen", "1K", "--purpose", "train"}, []string{"--purpose"}},
		// one file for both: the PNG was written over the JSON, exit 0 (the twelfth pass)
		{[]string{"masks", "--mask", "causal", "--seqlen", "1K", "--format", "json", "--out", filepath.Join(dir, "m"), "--png", dir + "/./m"},
			[]string{"--out", "--png", "name one file"}},
	}
	for _, c := range cases {
		_, errOut, code := captureRun(t, c.args...)
		checkUsageError(t, c.args, code, errOut, c.want...)
	}
}

func itoa(n int) string { return itoa64(int64(n)) }

func itoa64(n int64) string {
	b, _ := json.Marshal(n)
	return string(b)
}

// Token counts take the size suffixes on every flag (a review found --window 1K, --block-size
// 1K and --cp-block 8K refused as "give a whole number" where the README says sizes take K, M
// and G).
func TestTokenFlagsTakeSuffixes(t *testing.T) {
	out, errOut, code := captureRun(t, "masks", "--mask", "sliding_window", "--seqlen", "4K", "--window", "1K")
	if code != 0 || !strings.Contains(out, "window=1024") {
		t.Errorf("masks --window 1K: exit %d, %s%s", code, out, errOut)
	}
	out, errOut, code = captureRun(t, "masks", "--mask", "block_causal_document", "--seqlen", "8K", "--block-size", "2K")
	if code != 0 || !strings.Contains(out, "block_size=2048") {
		t.Errorf("masks --block-size 2K: exit %d, %s%s", code, out, errOut)
	}
	out, errOut, code = captureRun(t, "cp", "--dry-run", "--ranks", "4", "--methods", "balanced", "--cp-block", "1K",
		"--tokens-per-rank", "1K", "--masks", "causal")
	if code != 0 || !strings.Contains(out, "-b1024-") {
		t.Errorf("cp --cp-block 1K: exit %d, %s%s", code, out, errOut)
	}
}
