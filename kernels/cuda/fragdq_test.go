package cuda

import (
	"bufio"
	"fmt"
	"os/exec"
	"strings"
	"testing"

	"github.com/longca/longca/internal/hostcc"
)

// The fragment-order dQ chunk of sm90f (dq_frag_slot, dq_frag_pos in attention_sm90.cu),
// compiled with the host C++ compiler: every consumer thread's every dQ element lands at
// the position the conversion reads dQ[row][col] from, by wgmma's m64n64 accumulator
// layout (thread lt holds dqa[4 jj + 2 r + e] = dQ[16 (lt/32) + (lt%32)/4 + 8 r][8 jj +
// 2 (lt%4) + e]), and the positions cover the 64 x 64 chunk once.
func TestFragmentOrderDQ(t *testing.T) {
	src := SourceSM90()
	fns := extract(t, src, "DEV int dq_frag_slot(int lt, int jj)", "\n}\n")
	prog := "#include <cstdio>\n#define DEV inline\n" + fns + `
int main() {
  for (int lt = 0; lt < 128; lt++)
    for (int jj = 0; jj < 8; jj++)
      for (int f = 0; f < 4; f++) {
        const int r = f / 2, e = f % 2;
        const int row = 16 * (lt / 32) + (lt % 32) / 4 + 8 * r, col = 8 * jj + 2 * (lt % 4) + e;
        printf("%d %d %d %d\n", row, col, dq_frag_slot(lt, jj) * 4 + f, dq_frag_pos(row, col));
      }
  return 0;
}
`
	bin := hostcc.Compile(t, "fragdq", prog)
	out, err := exec.Command(bin).Output()
	if err != nil {
		t.Fatal(err)
	}
	seenPos := make(map[int]bool)
	seenCell := make(map[[2]int]bool)
	n := 0
	sc := bufio.NewScanner(strings.NewReader(string(out)))
	for sc.Scan() {
		var row, col, stored, read int
		if _, err := fmt.Sscan(sc.Text(), &row, &col, &stored, &read); err != nil {
			t.Fatalf("line %q: %v", sc.Text(), err)
		}
		n++
		if stored != read {
			t.Errorf("dQ[%d][%d] stored at %d, read from %d", row, col, stored, read)
		}
		if stored < 0 || stored >= 64*64 || seenPos[stored] {
			t.Errorf("dQ[%d][%d] at %d: outside the chunk or taken twice", row, col, stored)
		}
		if seenCell[[2]int{row, col}] {
			t.Errorf("dQ[%d][%d] held twice", row, col)
		}
		seenPos[stored], seenCell[[2]int{row, col}] = true, true
	}
	if n != 64*64 {
		t.Fatalf("%d elements, want 4096", n)
	}
}
