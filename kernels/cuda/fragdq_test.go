package cuda

import (
	"bufio"
	"fmt"
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
	out := hostcc.Output(t, "fragdq", prog)
	seenPos := make(map[int]bool)
	seenCell := make(map[[2]int]bool)
	n := 0
	sc := bufio.NewScanner(strings.NewReader(out))
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

// sm90's conversion (dq90_convertc in attention_sm90.cu), compiled with the host C++
// compiler and run as one block of one thread (its loops then cover every index in turn,
// and its barriers have nothing to wait for): from an accumulator in fragment order, every
// dQ[q][h][d] of a ragged length (the last 64-query tile part padding) comes out scaled,
// both halves of head dim 128, and nothing past the last query is written. The pack is a
// truncating bf16 stand-in; the values are exact in bf16.
func TestConvertCoalescedDQ(t *testing.T) {
	src := SourceSM90()
	frag := extract(t, src, "DEV int dq_frag_slot(int lt, int jj)", "\n}\n")
	conv := extract(t, src, "constexpr int DQC_GROUP", "\n}\n\n")
	prog := `#include <cstdio>
#include <cstring>
#define DEV inline
#define __shared__ static
#define __align__(n) __attribute__((aligned(n)))
#define __restrict__
struct { int x; } threadIdx{0}, blockIdx{0}, blockDim{1}, gridDim{1};
inline void __syncthreads() {}
struct float2 { float x, y; };
struct alignas(16) float4 { float x, y, z, w; };
struct alignas(8) uint2 { unsigned x, y; };
inline uint2 make_uint2(unsigned x, unsigned y) { return uint2{x, y}; }
struct B16 { unsigned short x; };
inline unsigned bits(float f) { unsigned u; memcpy(&u, &f, 4); return u; }
template <class T> struct Ops;
template <> struct Ops<B16> { static unsigned pack(float a, float b) { return (bits(a) >> 16) | (bits(b) & 0xffff0000u); } };
` + frag + "\n" + conv + `
int main() {
  const int sq = 100, hq = 3, D = 128, sq_pad = 128;
  static float acc[3 * 128 * 128];
  static B16 dq[100 * 3 * 128 + 64];  // 64 guard elements past the end
  for (int i = 0; i < 100 * 3 * 128 + 64; i++) dq[i].x = 0xdead;
  // dQ[q][h][d] = v(q, h, d), in fragment order: chunk (h, q / 64, d / 64), then dq_frag_pos
  for (int h = 0; h < hq; h++)
    for (int q = 0; q < sq_pad; q++)
      for (int d = 0; d < D; d++) {
        const long long chunk = ((long long)h * (sq_pad / 64) + q / 64) * (D / 64) + d / 64;
        acc[chunk * 4096 + dq_frag_pos(q % 64, d % 64)] = (float)((q * 7 + h * 31 + d * 3) % 199 - 99);
      }
  dq90_convertc<128, B16>(acc, dq, sq, hq, sq_pad, 0.5f);
  for (int q = 0; q < sq; q++)
    for (int h = 0; h < hq; h++)
      for (int d = 0; d < D; d++) {
        const float want = 0.5f * (float)((q * 7 + h * 31 + d * 3) % 199 - 99);
        printf("%d %d %d %u %u\n", q, h, d, (unsigned)dq[(q * hq + h) * D + d].x, bits(want) >> 16);
      }
  for (int i = 100 * 3 * 128; i < 100 * 3 * 128 + 64; i++) printf("guard %u\n", (unsigned)dq[i].x);
  return 0;
}
`
	out := hostcc.Output(t, "convertc", prog)
	n, bad := 0, 0
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "guard ") {
			if line != "guard 57005" { // 0xdead
				t.Fatalf("written past the last query: %s", line)
			}
			continue
		}
		var q, h, d, got, want int
		if _, err := fmt.Sscan(line, &q, &h, &d, &got, &want); err != nil {
			t.Fatalf("line %q: %v", line, err)
		}
		n++
		if got != want && bad < 5 {
			bad++
			t.Errorf("dQ[%d][%d][%d] = %#04x, want %#04x", q, h, d, got, want)
		}
	}
	if n != 100*3*128 {
		t.Fatalf("%d elements, want %d", n, 100*3*128)
	}
}
