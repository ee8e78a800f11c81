package cuda

import (
	"bufio"
	"fmt"
	"os/exec"
	"strings"
	"testing"

	"github.com/longca/longca/internal/hostcc"
	"github.com/longca/longca/mask"
)

// square_empty (worklist.cuh; sm90bs's backward skips a warpgroup's step when its 64 keys x
// 64 queries allow no pair), compiled with the host C++ compiler and run for both 64-key
// halves of every partial entry of transposed (backward) work lists, against the work
// list's own Allowed over every pair of the square.
//
// It also asserts that no entry has both halves empty: the skipping warpgroup neither
// waits for the step's Q/dO (fullQ) nor reads them, so bwd_sm90's protocol needs the other
// warpgroup to wait for every step's loads. Were both to skip a step, nobody would wait for
// its fullQ phase: a later parity wait on that stage could pass a phase early, the producer
// could arrive on a phase still counting bytes, and a load could be in flight at exit.
// The work list lists a tile only when it allows a pair (BuildWorkList: area > 0), and the
// two halves cover the tile, so this holds; the test keeps it so.
func TestSquareEmptyMatchesWorkList(t *testing.T) {
	src := SourceSM90()
	var b strings.Builder
	b.WriteString("#include <cstdio>\n#include <algorithm>\nusing std::max; using std::min;\n#define DEV inline\n")
	b.WriteString(extract(t, src, "struct WorkList {", "};") + "\n")
	b.WriteString(extract(t, src, "DEV bool square_empty(", "\n}\n") + "\n")
	var masks []mask.Mask
	// 1000 keys: the last key tile's upper half partly past the keys; 1050: wholly past them
	for _, n := range []int{1000, 1050} {
		for _, name := range []string{"causal_document", "sliding_window", "share_question", "prefix_lm_document"} {
			spec, err := mask.Build(name, n, mask.Options{Seed: 7, Window: 150, BlockSize: 128})
			if err != nil {
				t.Fatal(err)
			}
			masks = append(masks, spec.Mask)
		}
	}
	for _, r := range []float64{0.2, 0.5} {
		sp, err := mask.BlockSparse(1024, mask.SparseOptions{Seed: 3, Block: 64, Ratio: r, HeadsKV: 1}, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		masks = append(masks, sp.Heads[0])
	}
	var calls strings.Builder
	var want []bool
	var where []string
	for mi, m := range masks {
		w, err := BuildWorkList([]mask.Mask{m}, 64, 128, true)
		if err != nil {
			t.Fatal(err)
		}
		id := fmt.Sprintf("w%d", mi)
		wlExpr := cWorkList(&b, id, w)
		fmt.Fprintf(&calls, "  { WorkList wl = %s;\n", wlExpr)
		for kt := 0; kt < w.RowTiles; kt++ {
			row := w.Row(0, kt)
			for e := 0; e < len(row); e += 2 {
				qt, ref := int(row[e]), row[e+1]
				if ref < 0 {
					continue
				}
				for half := 0; half < 2; half++ {
					k0, q0 := kt*128+half*64, qt*64
					empty := true
					for k := k0; k < min(k0+64, m.SeqK) && empty; k++ {
						for q := q0; q < min(q0+64, m.SeqQ); q++ {
							if w.Allowed(ref, q, k) {
								empty = false
								break
							}
						}
					}
					want = append(want, empty)
					where = append(where, fmt.Sprintf("mask %d key tile %d half %d query tile %d", mi, kt, half, qt))
					fmt.Fprintf(&calls, "    printf(\"%%d\\n\", (int)square_empty(wl, %d, %d, %d, 64));\n", ref, q0, k0)
				}
			}
		}
		calls.WriteString("  }\n")
	}
	b.WriteString("int main() {\n" + calls.String() + "  return 0;\n}\n")
	bin := hostcc.Compile(t, "square_empty", b.String())
	out, err := exec.Command(bin).Output()
	if err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(strings.NewReader(string(out)))
	var empties, bad, both int
	got := make([]bool, len(want))
	for i, w := range want {
		if !sc.Scan() {
			t.Fatalf("output ended after %d of %d", i, len(want))
		}
		got[i] = sc.Text() == "1"
		if w {
			empties++
		}
		if got[i] != w {
			if bad++; bad <= 5 {
				t.Errorf("%s: square_empty %v, want %v", where[i], got[i], w)
			}
		}
	}
	// the halves of an entry are consecutive (half 0, half 1)
	for i := 0; i+1 < len(got); i += 2 {
		if got[i] && got[i+1] {
			if both++; both <= 5 {
				t.Errorf("%s: both 64-key halves empty (both warpgroups would skip the step)", where[i])
			}
		}
	}
	// both answers must occur, or the test proves nothing
	if empties < 50 || len(want)-empties < 50 {
		t.Fatalf("%d squares, %d empty: too few of one kind", len(want), empties)
	}
	t.Logf("%d squares checked (%d empty), %d wrong, %d entries with both halves empty", len(want), empties, bad, both)
}
