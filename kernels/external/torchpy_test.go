package external_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/longca/longca/mask"
)

// python is the interpreter of the tests of the PyTorch worker's torch-free parts:
// LONGCA_TEST_PYTHON, else python3 on the PATH. They need no torch and no numpy, so a
// missing python3 fails them rather than skipping them.
func python(t *testing.T) string {
	t.Helper()
	if py := os.Getenv("LONGCA_TEST_PYTHON"); py != "" {
		return py
	}
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Fatalf("python3 is not on the PATH (%v): these tests run the PyTorch worker's torch-free parts; set LONGCA_TEST_PYTHON", err)
	}
	return py
}

// The worker's unit tests in plain Python (torch_worker_test.py): the varlen translation
// on hand-made masks against a pair-by-pair expansion, the FlexAttention backward's retry
// at 128-token blocks and its Inductor config extension against stand-ins for torch.
func TestTorchWorkerPython(t *testing.T) {
	cmd := exec.Command(python(t), "-m", "unittest", "-v", "torch_worker_test.py")
	out, err := cmd.CombinedOutput()
	t.Logf("%s", out)
	if err != nil {
		t.Fatalf("python3 -m unittest torch_worker_test.py: %v", err)
	}
	if !bytes.Contains(out, []byte("\nOK")) {
		t.Fatal("unittest did not say OK")
	}
}

// varlenPlan is one answer of torch_worker.py --varlen-plan.
type varlenPlan struct {
	Status string   `json:"status"`
	Reason string   `json:"reason"`
	Docs   [][2]int `json:"docs"`
	Window [2]int   `json:"window"`
}

type varlenCase struct {
	name   string
	seqlen int
	o      mask.Options
}

// The worker's translation of longca's masks into varlen_attn's documents and window,
// checked against the mask package row by row: every plan the worker answers allows,
// in every query row, exactly the keys the mask allows (FlashAttention's window rule
// within each document, implemented here independently); the masks varlen_attn can
// express (full, causal, full_document, causal_document and both sliding windows) are
// served, with the mask's own documents and window; masks it cannot express are refused.
func TestTorchWorkerVarlenPlan(t *testing.T) {
	var cases []varlenCase
	for _, name := range mask.KernelMasks() {
		for _, s := range []int{512, 1000, 4096} {
			cases = append(cases, varlenCase{name, s, mask.Options{Seed: 42}})
		}
	}
	for _, w := range []int{1, 100} {
		for _, name := range []string{"sliding_window_causal", "sliding_window"} {
			cases = append(cases, varlenCase{name, 2048, mask.Options{Seed: 42, Window: w}})
		}
	}
	var in bytes.Buffer
	var specs []mask.Spec
	var kept []varlenCase
	for _, c := range cases {
		sp, err := mask.Build(c.name, c.seqlen, c.o)
		if err != nil {
			if mask.IsInputError(err) { // block_causal_document needs a multiple of its block
				continue
			}
			t.Fatalf("%s at %d: %v", c.name, c.seqlen, err)
		}
		mj, err := json.Marshal(sp)
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&in, `{"seqlen_q":%d,"seqlen_k":%d,"heads_q":8,"heads_kv":2,"head_dim":128,"dtype":"bf16","scale":0.088,"mask":%s}`+"\n",
			c.seqlen, c.seqlen, mj)
		specs, kept = append(specs, sp), append(kept, c)
	}
	cmd := exec.Command(python(t), "torch_worker.py", "--varlen-plan")
	cmd.Stdin = &in
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("torch_worker.py --varlen-plan: %v: %s", err, stderr.String())
	}
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	i := 0
	served := map[string]int{}
	for ; sc.Scan(); i++ {
		if i >= len(kept) {
			t.Fatalf("more answers than problems: %s", sc.Text())
		}
		c, sp := kept[i], specs[i]
		label := fmt.Sprintf("%s S=%d window %d", c.name, c.seqlen, c.o.Window)
		var pl varlenPlan
		if err := json.Unmarshal(sc.Bytes(), &pl); err != nil {
			t.Fatalf("%s: answer %q: %v", label, sc.Text(), err)
		}
		must := expressible(c.name)
		switch {
		case pl.Status == "ok":
			served[c.name]++
			checkPlan(t, label, sp, pl)
		case pl.Status == "unsupported" && must:
			t.Errorf("%s: unsupported (%s), want served", label, pl.Reason)
		case pl.Status == "unsupported":
			if pl.Reason == "" {
				t.Errorf("%s: unsupported without a reason", label)
			}
		default:
			t.Errorf("%s: %s: %s", label, pl.Status, pl.Reason)
		}
		if !must && c.seqlen == 4096 && pl.Status == "ok" {
			t.Errorf("%s: served as %v window %v; at 4096 this mask has no varlen form", label, pl.Docs, pl.Window)
		}
	}
	if i != len(kept) {
		t.Fatalf("%d answers for %d problems", i, len(kept))
	}
	t.Logf("served: %v", served)
}

// expressible says whether a kernel mask is a packing varlen_attn runs at any length.
func expressible(name string) bool {
	switch name {
	case "full", "causal", "full_document", "causal_document", "sliding_window_causal", "sliding_window":
		return true
	}
	return false
}

// checkPlan compares the rows a plan allows with the mask's rows, and the plan's
// documents and window with the mask's parameters.
func checkPlan(t *testing.T, label string, sp mask.Spec, pl varlenPlan) {
	t.Helper()
	s := sp.Mask.SeqQ
	at := 0
	for _, d := range pl.Docs {
		if d[0] != at || d[1] <= d[0] {
			t.Errorf("%s: documents %v do not tile [0, %d)", label, pl.Docs, s)
			return
		}
		at = d[1]
	}
	if at != s {
		t.Errorf("%s: documents end at %d, not %d", label, at, s)
		return
	}
	rows := sp.Mask.RowSpans()
	left, right := pl.Window[0], pl.Window[1]
	for _, d := range pl.Docs {
		for q := d[0]; q < d[1]; q++ {
			lo, hi := d[0], d[1] // FlashAttention: within the document, q - left <= k <= q + right
			if left >= 0 {
				lo = max(lo, q-left)
			}
			if right >= 0 {
				hi = min(hi, q+right+1)
			}
			got := merged(rows[q])
			if len(got) != 1 || got[0] != (mask.Range{Start: lo, End: hi}) {
				t.Errorf("%s: row %d: the plan allows keys [%d, %d), the mask %v", label, q, lo, hi, got)
				return
			}
		}
	}
	switch {
	case strings.HasSuffix(sp.Name, "_document"):
		docs, err := sp.Docs()
		if err != nil {
			t.Fatal(err)
		}
		if len(docs) != len(pl.Docs) {
			t.Errorf("%s: %d documents, the mask has %d", label, len(pl.Docs), len(docs))
		}
		want := [2]int{-1, -1}
		if sp.Name == "causal_document" {
			want = [2]int{-1, 0}
		}
		if pl.Window != want {
			t.Errorf("%s: window %v, want %v", label, pl.Window, want)
		}
	case strings.HasPrefix(sp.Name, "sliding_window"):
		w := min(sp.Mask.SeqQ, 1024)
		if sp.Params["window"] != "" {
			fmt.Sscan(sp.Params["window"], &w)
		}
		want := [2]int{w, w}
		if sp.Name == "sliding_window_causal" {
			want[1] = 0
		}
		if w >= s-1 { // the window covers the sequence: unbounded
			want[0] = -1
			if want[1] != 0 {
				want[1] = -1
			}
		}
		if pl.Window != want || len(pl.Docs) != 1 {
			t.Errorf("%s: documents %v window %v, want one document, window %v", label, pl.Docs, pl.Window, want)
		}
	}
}

// merged joins touching intervals of one row.
func merged(r []mask.Range) []mask.Range {
	var out []mask.Range
	for _, x := range r {
		if n := len(out); n > 0 && x.Start <= out[n-1].End {
			out[n-1].End = max(out[n-1].End, x.End)
			continue
		}
		out = append(out, x)
	}
	return out
}
