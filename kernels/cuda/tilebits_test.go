package cuda

import (
	"bufio"
	"fmt"
	"strings"
	"testing"

	"github.com/longca/longca/internal/hostcc"
	"github.com/longca/longca/mask"
)

// The sm90 kernel's partial-tile test (tile_bits in attention_sm90.cu), compiled with the
// host C++ compiler and run for every partial entry of forward and transposed (backward)
// work lists, every thread's rows and columns, against the work list's own Allowed: the
// index arithmetic of both orientations is checked here, the GPU runs the same source.
// The wide forward's 176-key tiles (sm90's since call 62) go through mask_tile, which takes
// their bits in two parts: the scores it sets to -inf are checked instead.
func TestTileBitsMatchWorkList(t *testing.T) {
	for _, span := range []bool{false, true} {
		t.Run(fmt.Sprintf("span=%v", span), func(t *testing.T) { tileBitsMatchWorkList(t, span) })
	}
}

// tileBitsMatchWorkList checks tile_bits as sm90-prev compiles it, or with span as sm90 does
// (LONGCA_TILE_BITS_SPAN: the columns of a row by interval arithmetic).
func tileBitsMatchWorkList(t *testing.T, span bool) {
	src := SourceSM90()
	wl := extract(t, src, "struct WorkList {", "};")
	fn := extract(t, src, "template <int N, bool KEYROWS> DEV unsigned long long tile_bits(", "\n}\n")
	mt := extract(t, src, "template <int N> DEV void mask_tile(", "\n}\n")
	type job struct {
		w        *WorkList
		rowTile  int // rows a block owns
		n        int // columns of a tile (N)
		keyRows  bool
		rowSpan  int // rows a thread group starts at: every 8-row pair from the tile start
		colTiles int
	}
	var b strings.Builder
	b.WriteString("#include <cstdio>\n#include <cmath>\n#include <algorithm>\nusing std::max; using std::min;\n#define DEV inline\n")
	if span {
		b.WriteString("#define LONGCA_TILE_BITS_SPAN 1\n")
	}
	b.WriteString(wl + "\n" + fn + "\n" + mt + "\n")
	// the scores mask_tile<N> leaves finite, as bits (j < 64, then j >= 64)
	b.WriteString(`template <int N> void masked(const WorkList &wl, int ref, int r0, int c0, int t) {
  float sc[N / 2] = {};
  mask_tile<N>(sc, wl, ref, r0, c0, t);
  unsigned long long lo = 0, hi = 0;
  for (int j = 0; j < N / 2; j++)
    if (!std::isinf(sc[j])) (j < 64 ? lo : hi) |= 1ull << (j % 64);
  printf("%llu %llu\n", lo, hi);
}
`)
	var checks []func(sc *bufio.Scanner) error
	var calls strings.Builder
	for mi, name := range []string{"causal_document", "sliding_window", "share_question", "prefix_lm_document"} {
		spec, err := mask.Build(name, 1000, mask.Options{Seed: 7, Window: 150, BlockSize: 128})
		if err != nil {
			t.Fatal(err)
		}
		// the forward's 128 x 128 tiles, sm90m's 192 x 128 ones (head dim 64), sm90s's 128 x 64
		// ones, the wide forward's 128 x 176 ones (through mask_tile), the backward's transposed
		// 64-query tiles
		for _, cfg := range []struct {
			tr     bool
			qt, kt int
		}{{false, 128, 128}, {false, 192, 128}, {false, 128, 64}, {false, 128, 176}, {true, 64, 128}} {
			tr, qt, kt := cfg.tr, cfg.qt, cfg.kt
			w, err := BuildWorkList([]mask.Mask{spec.Mask}, qt, kt, tr)
			if err != nil {
				t.Fatal(err)
			}
			id := fmt.Sprintf("w%d_%v_%d_%d", mi, tr, qt, kt)
			wlExpr := cWorkList(&b, id, w)
			var args []string // ref, r0, c0, t of every call
			n := w.ColTile
			for r := 0; r < w.RowTiles; r++ {
				row := w.Row(0, r)
				for e := 0; e < len(row); e += 2 {
					col, ref := int(row[e]), row[e+1]
					if ref < 0 {
						continue
					}
					for base := 0; base < w.RowTile; base += 16 {
						for g := 0; g < 8; g++ {
							for th := 0; th < 4; th++ {
								r0, c0 := r*w.RowTile+base+g, col*n
								args = append(args, fmt.Sprintf("%d,%d,%d,%d", ref, r0, c0, th))
								w, ref, tr, r0, c0, th := w, ref, tr, r0, c0, th
								checks = append(checks, func(sc *bufio.Scanner) error {
									if !sc.Scan() {
										return fmt.Errorf("output ended")
									}
									var got, want [2]uint64 // bits j < 64 and j >= 64 (n > 128 only)
									fmt.Sscan(sc.Text(), &got[0], &got[1])
									for j := 0; j < n/8; j++ {
										for rr := 0; rr < 2; rr++ {
											for cc := 0; cc < 2; cc++ {
												ri, ci := r0+rr*8, c0+j*8+2*th+cc
												q, k := ri, ci
												if tr {
													q, k = ci, ri
												}
												if bit := j*4 + rr*2 + cc; w.Allowed(ref, q, k) {
													want[bit/64] |= 1 << (bit % 64)
												}
											}
										}
									}
									if got != want {
										return fmt.Errorf("%s transposed=%v %dx%d ref %d rows %d,+8 cols from %d t %d: bits %x, want %x", name, tr, w.RowTile, n, ref, r0, c0, th, got, want)
									}
									return nil
								})
							}
						}
					}
				}
			}
			fmt.Fprintf(&b, "static const int %s_args[] = {%s};\n", id, strings.Join(args, ","))
			fmt.Fprintf(&calls, "  { WorkList wl = %s;\n", wlExpr)
			fmt.Fprintf(&calls, "    for (unsigned i = 0; i < sizeof(%[1]s_args) / sizeof(int); i += 4) {\n      const int *a = %[1]s_args + i;\n", id)
			if n > 128 {
				fmt.Fprintf(&calls, "      masked<%d>(wl, a[0], a[1], a[2], a[3]);\n    }\n  }\n", n)
			} else {
				fmt.Fprintf(&calls, "      printf(\"%%llu\\n\", tile_bits<%d, %v>(wl, a[0], a[1], a[2], a[3]));\n    }\n  }\n", n, tr)
			}
		}
	}
	b.WriteString("int main() {\n" + calls.String() + "  return 0;\n}\n")
	out := hostcc.Output(t, "tile_bits", b.String())
	sc := bufio.NewScanner(strings.NewReader(out))
	bad := 0
	for _, c := range checks {
		if err := c(sc); err != nil {
			if bad++; bad <= 5 {
				t.Error(err)
			}
		}
	}
	if len(checks) < 1000 {
		t.Fatalf("only %d checks: the masks have too few partial tiles to test", len(checks))
	}
	t.Logf("%d thread tiles checked, %d wrong", len(checks), bad)
}

// extract returns src from the line starting with start through the first end after it.
func extract(t *testing.T, src, start, end string) string {
	t.Helper()
	i := strings.Index(src, start)
	if i < 0 {
		t.Fatalf("%q not in the source", start)
	}
	j := strings.Index(src[i:], end)
	if j < 0 {
		t.Fatalf("no %q after %q", end, start)
	}
	return src[i : i+j+len(end)]
}

// cWorkList writes w's arrays as C arrays named id_order, id_start, ... into b, for the host
// programs that run the kernels' work-list code (tile_bits), and returns the
// C expression of a WorkList over them.
func cWorkList(b *strings.Builder, id string, w *WorkList) string {
	for _, a := range []struct {
		n string
		v []int32
	}{{"order", w.Order}, {"start", w.Start}, {"entries", w.Entries}, {"refs", w.Refs}, {"slices", w.Slices}} {
		v := a.v
		if len(v) == 0 {
			v = []int32{0}
		}
		s := make([]string, len(v))
		for i, x := range v {
			s[i] = fmt.Sprint(x)
		}
		fmt.Fprintf(b, "static const int %s_%s[] = {%s};\n", id, a.n, strings.Join(s, ","))
	}
	return fmt.Sprintf("WorkList{%[1]s_order, %[1]s_start, %[1]s_entries, %[1]s_refs, %[1]s_slices, %[2]d, 0}", id, w.RowTiles)
}
