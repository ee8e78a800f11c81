package main

import "testing"

// A list item given twice under two spellings of one value is refused as one given twice
// in one spelling is: --seqlens 1K,1024 timed the same case twice (probe of s40, finding 7).
func TestListItemsOnceByValue(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"kernel", "--dry-run", "--kernels", "ref", "--seqlens", "1K,1024"}, `--seqlens "1K,1024": 1K and 1024 are the same 1024`},
		{[]string{"kernel", "--dry-run", "--kernels", "ref", "--seqlens", "1K", "--passes", "fwd,forward"}, "fwd and forward are the same fwd"},
		{[]string{"kernel", "--dry-run", "--kernels", "ref", "--seqlens", "1K", "--heads", "8:2,8:02"}, "8:2 and 8:02 are the same 8:2"},
		{[]string{"sparse", "--dry-run", "--ratios", "0.5,0.50"}, "0.5 and 0.50 are the same 0.5"},
		{[]string{"kernel", "--dry-run", "--kernels", "ref", "--seqlens", "2K,2K"}, "2K given twice"},
	} {
		_, stderr, code := runCLI(t, c.args...)
		checkUsageError(t, c.args, code, stderr, c.want)
	}
	// different values still run
	args := []string{"kernel", "--dry-run", "--kernels", "ref", "--seqlens", "1K,1025", "--passes", "fwd,bwd"}
	if _, stderr, code := runCLI(t, args...); code != 0 {
		t.Errorf("%v: exit %d: %s", args, code, stderr)
	}
}
