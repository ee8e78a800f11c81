package cuda

import (
	"bufio"
	"fmt"
	"strings"
	"testing"

	"github.com/longca/longca/internal/hostcc"
)

// The P tile of the forward with P through shared memory (experiment sm90p: p_row_offset in
// attention_sm90.cu), compiled with the host C++ compiler: each warp's stmatrix of each
// 16-key step, as PTX defines it (matrix x's row j at the address lane 8 x + j gives, its
// elements 2 t' and 2 t' + 1 from register x of lane 4 j + t', register x of a thread being
// the A fragment's: rows g + 8 (x % 2), keys 8 (x / 2) + 2 t and the next), puts every
// element of the warpgroup's 64 x 192 P where wgmma's K-major 128-byte-swizzled operand has it
// (chunk key / 64 at 8192 bytes each, row r at r 128, 16-byte unit (key % 64) / 8 ^ r % 8), once;
// and P V's A descriptor of each step (p_step_offset: its start, unswizzled, from which the
// hardware reads row r's 16 keys at start + (r / 8) 1024 + (r % 8) 128 and swizzles the
// address, bits 4-6 with bits 7-9) reads each element from where it was stored.
func TestPSharedLayout(t *testing.T) {
	src := SourceSM90()
	fn := extract(t, src, "DEV int p_row_offset(int warp, int lane, int k4)", "\n}\n")
	step := extract(t, src, "DEV int p_step_offset(int kk)", "\n")
	prog := "#include <cstdio>\n#define DEV inline\n" + extract(t, src, "constexpr int CHUNK = 64;", "\n") + fn + step + `
int main() {
  for (int w = 0; w < 4; w++)
    for (int l = 0; l < 32; l++)
      for (int k4 = 0; k4 < 4; k4++) printf("%d %d %d %d\n", w, l, k4, p_row_offset(w, l, k4));
  for (int kk = 0; kk < 12; kk++) printf("%d\n", p_step_offset(kk));
  return 0;
}
`
	out := hostcc.Output(t, "playout", prog)
	const bn = 192
	var off [4][32][4]int
	var start [bn / 16]int
	sc := bufio.NewScanner(strings.NewReader(out))
	n := 0
	for ; n < 4*32*4 && sc.Scan(); n++ {
		var w, l, k4, o int
		if _, err := fmt.Sscan(sc.Text(), &w, &l, &k4, &o); err != nil {
			t.Fatalf("line %q: %v", sc.Text(), err)
		}
		off[w][l][k4] = o
	}
	for kk := 0; kk < bn/16 && sc.Scan(); kk++ {
		fmt.Sscan(sc.Text(), &start[kk])
		n++
	}
	if n != 4*32*4+bn/16 {
		t.Fatalf("%d offsets, want %d", n, 4*32*4+bn/16)
	}
	canon := func(row, key int) int { return key/64*64*128 + row*128 + ((key%64/8)^(row%8))*16 + key%8*2 }
	seen := map[int]bool{}
	for w := 0; w < 4; w++ {
		for kk := 0; kk < bn/16; kk++ {
			for x := 0; x < 4; x++ { // matrix x: its rows' addresses from lanes 8x .. 8x+7
				for j := 0; j < 8; j++ {
					rowAddr := kk/4*64*128 + off[w][8*x+j][kk%4]
					for tp := 0; tp < 4; tp++ { // register x of lane 4j + t': row j of matrix x
						for e := 0; e < 2; e++ {
							row, key := 16*w+j+8*(x%2), 16*kk+8*(x/2)+2*tp+e
							got := rowAddr + (2*tp+e)*2
							if want := canon(row, key); got != want {
								t.Fatalf("warp %d step %d matrix %d: P[%d][%d] stored at %d, wgmma reads it at %d", w, kk, x, row, key, got, want)
							}
							if seen[got] {
								t.Fatalf("P[%d][%d]: byte %d written twice", row, key, got)
							}
							seen[got] = true
						}
					}
				}
			}
		}
	}
	if len(seen) != 64*bn {
		t.Fatalf("%d elements stored, want %d", len(seen), 64*bn)
	}
	swizzle := func(a int) int { return a ^ (a>>7&7)<<4 }
	for kk := 0; kk < bn/16; kk++ {
		for row := 0; row < 64; row++ {
			for k := 0; k < 16; k++ {
				if got, want := swizzle(start[kk]+row/8*1024+row%8*128+2*k), canon(row, 16*kk+k); got != want {
					t.Fatalf("step %d: wgmma reads P[%d][%d] at %d, it was stored at %d", kk, row, 16*kk+k, got, want)
				}
			}
		}
	}
}
