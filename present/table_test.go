package present

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/longca/longca/results"
)

func reportRows() []results.Row {
	var rows []results.Row
	for _, mask := range []string{"causal", "full"} {
		for _, n := range []int64{2048, 1024} {
			for _, pass := range []string{"fwd", "bwd"} {
				for _, k := range []string{"ref", "cuda"} {
					r := results.Row{Mask: mask, SeqLen: n, HeadsQ: 8, HeadsKV: 2, Pass: pass, Kernel: k, MaskArea: n * n / 2, FLOPs: 1e9, Status: results.StatusOK}
					r.TFLOPs = results.Ptr(float64(n) / 1000)
					if k == "cuda" && mask == "full" && n == 2048 {
						r.Status, r.TFLOPs = results.StatusOOM, nil
					}
					rows = append(rows, r)
				}
			}
		}
	}
	return rows
}

func TestTableStructure(t *testing.T) {
	var b strings.Builder
	if err := WriteTable(&b, "longca kernel report", Summarize(reportRows(), "")); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimRight(b.String(), "\n"), "\n")
	var data, units, header []string
	for _, l := range lines {
		switch {
		case strings.Contains(l, "(TFLOP/s)"):
			units = append(units, l)
		case strings.HasPrefix(l, "# ") && strings.Contains(l, "seqlen"), strings.HasPrefix(l, "#") && strings.Contains(l, " mask"):
			header = append(header, l)
		case !strings.HasPrefix(l, "#"):
			data = append(data, l)
		}
	}
	if len(data) != 8 || len(units) != 1 || len(header) != 1 {
		t.Fatalf("%d data lines, %d units rows, %d headers:\n%s", len(data), len(units), len(header), b.String())
	}
	if strings.Count(units[0], "(TFLOP/s)") != 2 || !strings.Contains(header[0], "ref") || !strings.Contains(header[0], "cuda") {
		t.Fatalf("kernel columns: %q / %q", header[0], units[0])
	}
	if last := lines[len(lines)-1]; !strings.HasPrefix(last, "# Cases: 8  Rows: 16") || !strings.Contains(last, "oom: 2") || !strings.Contains(last, "ok: 14") {
		t.Fatalf("summary line %q", last)
	}
	width := len(data[0])
	oom := 0
	for _, l := range data {
		f := strings.Fields(l)
		if len(f) != 6+2 || len(l) != width {
			t.Fatalf("data line has %d fields, width %d (want %d): %q", len(f), len(l), width, l)
		}
		if f[7] == "oom" {
			oom++
			if f[0] != "full" || f[1] != "2048" {
				t.Fatalf("oom in the wrong row: %q", l)
			}
		}
	}
	if oom != 2 {
		t.Fatalf("%d oom cells, want 2", oom)
	}
	// Ordered by mask (first seen), pass, length.
	if f := strings.Fields(data[0]); f[0] != "causal" || f[1] != "1024" || f[3] != "fwd" {
		t.Fatalf("first row %q", data[0])
	}

	b.Reset()
	if err := WriteTable(&b, "filtered", Summarize(reportRows(), "bwd")); err != nil {
		t.Fatal(err)
	}
	if strings.Count(b.String(), " fwd ") != 0 || strings.Count(b.String(), " bwd ") != 4 {
		t.Fatalf("--pass bwd:\n%s", b.String())
	}
}

func TestPlots(t *testing.T) {
	dir := t.TempDir()
	files, err := WritePlots(dir, Summarize(reportRows(), ""))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) != 4 { // 2 masks x 2 passes x 1 head setting
		t.Fatalf("%d plots: %v", len(files), files)
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil || len(b) < 1000 || string(b[1:4]) != "PNG" {
			t.Fatalf("%s is not a PNG (%d bytes, %v)", f, len(b), err)
		}
	}
	if filepath.Base(files[0]) != "causal_fwd_8-2.png" {
		t.Fatalf("first plot %s", files[0])
	}
}

func TestKernelLabelKeepsMeshesApart(t *testing.T) {
	for _, c := range []struct {
		r    results.Row
		want string
	}{
		{results.Row{Kernel: "cuda"}, "cuda"},
		{results.Row{Kernel: "cuda", Method: "ring-p2p", Ulysses: results.Ptr(int64(1)), Ring: results.Ptr(int64(8))}, "ring-p2p"},
		{results.Row{Kernel: "cuda", Method: "usp", Ulysses: results.Ptr(int64(2)), Ring: results.Ptr(int64(4))}, "usp-2x4"},
		{results.Row{Kernel: "cuda", Method: "loongtrain", Ulysses: results.Ptr(int64(2)), Ring: results.Ptr(int64(4)), Windows: results.Ptr(int64(2))}, "loongtrain-2x4-w2"},
	} {
		if got := kernelLabel(c.r); got != c.want {
			t.Errorf("%+v: %q, want %q", c.r, got, c.want)
		}
	}
}

// A CPU's rate below a thousandth of a TFLOP/s keeps three digits: cp's table printed
// 0.0000 in every cell of a 64-rank CPU run (probe of s40).
func TestFormatTFLOPsSmall(t *testing.T) {
	for v, want := range map[float64]string{3.4852e-4: "0.000349", 0.0034982: "0.0035", 0: "0.0000", 12.5: "12.50", 650.04: "650.0"} {
		if got := formatTFLOPs(v); got != want {
			t.Errorf("formatTFLOPs(%g) = %q, want %q", v, got, want)
		}
	}
}

// TestTableAreaOfDocumentSamples: a CP case of two document samples (areas 524800 and
// 416320) shows the mean area and FLOPs beside the mean of the samples' rates, and says
// so; the table had shown the first sample's area (524800: one causal document) alone.
func TestTableAreaOfDocumentSamples(t *testing.T) {
	var rows []results.Row
	for _, m := range []string{"ring-p2p", "ulysses"} {
		for i, area := range []int64{524800, 416320} {
			r := results.Row{Bench: "cp", RunID: "cp4", Method: m, Mask: "causal_document", SeqLen: 1024, HeadsQ: 8, HeadsKV: 2, Pass: "fwd",
				Seed: 42 + uint64(i), Sample: int64(i), MaskArea: area, FLOPs: float64(4 * area * 8 * 32), Status: results.StatusOK,
				Ulysses: results.Ptr(int64(1)), Ring: results.Ptr(int64(4)), WorldSize: 4}
			if m == "ulysses" {
				r.Ulysses, r.Ring = results.Ptr(int64(4)), results.Ptr(int64(1))
			}
			r.TFLOPs = results.Ptr(0.0005)
			rows = append(rows, r)
		}
	}
	var b strings.Builder
	if err := WriteTable(&b, "longca report", Summarize(rows, "")); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	var data []string
	for _, l := range strings.Split(out, "\n") {
		if l != "" && !strings.HasPrefix(l, "#") {
			data = append(data, l)
		}
	}
	if len(data) != 1 {
		t.Fatalf("want one case line:\n%s", out)
	}
	if f := strings.Fields(data[0]); f[4] != "470560" || f[5] != "0.482" {
		t.Errorf("area %s, GFLOP %s: want the samples' mean, 470560 and 0.482:\n%s", f[4], f[5], out)
	}
	if !strings.Contains(out, "the mean over their mask samples (up to 2") {
		t.Errorf("no line saying area and flops are the samples' mean:\n%s", out)
	}
	// one sample a case (kernel rows): its own area, no such line
	b.Reset()
	if err := WriteTable(&b, "longca kernel report", Summarize(reportRows(), "")); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(b.String(), "mask samples") {
		t.Errorf("a samples line for cases of one sample:\n%s", b.String())
	}
}
