package present

import (
	"path/filepath"
	"strings"
	"testing"
)

// TestPlotFileNamesStayInTheFolder: a plot's file name is made from a results file's mask
// and pass, which may be a stranger's: a 1 MB mask failed report --plot on "file name too
// long" (exit 1), and "/" in one would have written out of --plot's folder. The
// registry's names are kept as they are; others are cut and marked with their hash, so
// that two stay two.
func TestPlotFileNamesStayInTheFolder(t *testing.T) {
	for _, m := range []string{"causal_document", "block_sparse_uniform_b128_r0.2_content", "sliding_window_causal"} {
		if got := fileSafe(m); got != m {
			t.Errorf("fileSafe(%q) = %q: a registry name should be kept", m, got)
		}
	}
	long1, long2 := strings.Repeat("a", 1<<20), strings.Repeat("a", 1<<20-1)+"b"
	seen := map[string]string{}
	for _, m := range []string{"../../etc/x", "..\\x", "a/b", "a b", "naïve", "a\nb", "a_b", long1, long2, "/abs"} {
		name := PlotFileName(m, "fwd+bwd", 64, 8)
		if strings.ContainsAny(name, "/\\ \n") || len(name) > 120 {
			t.Errorf("PlotFileName(%.20q) = %q: want a short name of safe characters", m, name)
		}
		if filepath.Dir(filepath.Join("plots", name)) != "plots" {
			t.Errorf("PlotFileName(%.20q) = %q leaves the folder", m, name)
		}
		if other, dup := seen[name]; dup {
			t.Errorf("%.20q and %.20q share the file %q", m, other, name)
		}
		seen[name] = m
	}
}
