package main

import (
	"path/filepath"
	"testing"
)

// A mask option that no mask of the run reads is refused by name (the eighth pass left
// them ignored: masks --mask full --window 64 printed the full mask, exit 0); one that a
// mask of the run reads is taken. Which mask reads which option is mask.ReadsOf, held to
// the builders by mask's TestReadsAsDeclared.
func TestMaskOptionsNoMaskReads(t *testing.T) {
	for _, c := range []struct {
		args  []string
		wants []string
	}{
		{[]string{"masks", "--mask", "full", "--seqlen", "1K", "--window", "64"},
			[]string{"--window: mask full has no window (masks with one: sliding_window_causal, sliding_window): leave --window out"}},
		{[]string{"masks", "--mask", "causal_document", "--seqlen", "4K", "--block-size", "1024"},
			[]string{"--block-size: mask causal_document has no blocks (masks with them: block_causal_document)"}},
		{[]string{"masks", "--mask", "full", "--seqlen", "1K", "--dist", "pile"}, []string{"--dist: mask full draws no documents (masks that do: full_document,", "leave --dist out"}},
		{[]string{"masks", "--mask", "causal", "--seqlen", "1K", "--counts", countsText(t)}, []string{"--counts: mask causal draws no documents"}},
		{[]string{"masks", "--mask", "block_causal_document", "--seqlen", "4K", "--max-doc", "1K"}, []string{"--max-doc: mask block_causal_document draws no documents"}},
		{[]string{"masks", "--mask", "sliding_window", "--seqlen", "1K", "--purpose", "cp"}, []string{"--purpose: mask sliding_window draws no documents"}},
		{[]string{"masks", "--mask", "causal_document", "--seqlen", "1K", "--purpose", "cp", "--dist", "pile"}, []string{"--purpose cp with --dist", "leave one of them out"}},
		// lists: refused only when no mask of the list reads the option
		{[]string{"kernel", "--dry-run", "--masks", "full,causal", "--dist", "pile"},
			[]string{"--dist: no mask of --masks full,causal draws documents (masks that do: ", "leave --dist out, or add one of those to --masks"}},
		{[]string{"cp", "--dry-run", "--masks", "full,causal", "--max-doc", "1K"}, []string{"--max-doc: no mask of --masks full,causal draws documents"}},
		{[]string{"simulate", "--masks", "causal", "--dist", "pile", "--out", filepath.Join(t.TempDir(), "sim")}, []string{"--dist: no mask of --masks causal draws documents"}},
	} {
		_, errOut, code := captureRun(t, c.args...)
		checkUsageError(t, c.args, code, errOut, c.wants...)
	}
	for _, args := range [][]string{
		{"masks", "--mask", "sliding_window", "--seqlen", "1K", "--window", "64"},
		{"masks", "--mask", "block_causal_document", "--seqlen", "4K", "--block-size", "1024"},
		{"masks", "--mask", "causal_document", "--seqlen", "1K", "--dist", "pile", "--max-doc", "256"},
		{"masks", "--mask", "full_document_long", "--seqlen", "64K", "--purpose", "kernel"},
		{"masks", "--mask", "full", "--seqlen", "1K", "--seed", "7"}, // the seed is the spec's, recorded in its JSON
		{"kernel", "--dry-run", "--masks", "full,causal_document", "--seqlens", "1K", "--dist", "pile"},
		{"kernel", "--dry-run", "--seqlens", "1K", "--max-doc", "256"}, // the default masks have documents
		{"cp", "--dry-run", "--masks", "causal,causal_document_long", "--max-doc", "1K"},
	} {
		if _, errOut, code := captureRun(t, args...); code != 0 {
			t.Errorf("%v: exit %d, want 0: %s", args, code, errOut)
		}
	}
}
