// The work list of a mask as both kernels read it (kernels/cuda/worklist.go), and the
// partial-tile test they share. Included by attention.cu and attention_sm90.cu (the Go
// side inlines it before NVRTC compiles them); needs DEV defined.
struct WorkList {
  const int *order, *start, *entries, *refs, *slices;
  int row_tiles, per_head;
  const int *bounds;  // row tiles' starts and ends, column tiles' starts (worklist.go's Bounds)
};

// The allowed pairs of a partial tile as bits, for a thread that holds rows r0 and r0 + 8
// and, of each group of 8 columns from c0, columns 2t and 2t+1 (the wgmma accumulator
// layout); bit j*4 + r*2 + c is row r, column 8j + 2t + c. Rows are queries and columns
// keys, or with KEYROWS the other way round (the backward's transposed tiles). Each slice
// gives each row an interval of allowed columns, read once per slice, not per element.
template <int N, bool KEYROWS> DEV unsigned long long tile_bits(const WorkList &wl, int ref, int r0, int c0, int t) {
  unsigned long long bits = 0;
  const int n = wl.refs[ref];
  for (int x = 0; x < n; x++) {
    const int *sl = wl.slices + 6 * wl.refs[ref + 1 + x];
    const int qa = sl[0], qb = sl[1], ka = sl[2], kb = sl[3], lo = sl[4], hi = sl[5];
#pragma unroll
    for (int r = 0; r < 2; r++) {
      const int ri = r0 + r * 8;
      // a query row allows keys ri+lo .. ri+hi; a key row allows queries ri-hi .. ri-lo
      const int cl = KEYROWS ? max(qa, ri - hi) : max(ka, ri + lo);
      const int ch = KEYROWS ? min(qb - 1, ri - lo) : min(kb - 1, ri + hi);
      const bool in = KEYROWS ? ri >= ka && ri < kb : ri >= qa && ri < qb;
#ifdef LONGCA_TILE_BITS_SPAN
      // (sm90 since call 15) the columns c0 + 8 j + 2 t + cc inside [cl, ch] are the j of one
      // interval: set them at once through a mask of every fourth bit (about 12 operations
      // a row and column pair instead of 2 comparisons a column)
      if (in && cl <= ch) {
        constexpr unsigned long long every4 = 0x1111111111111111ull >> (64 - N / 2);
#pragma unroll
        for (int cc = 0; cc < 2; cc++) {
          const int base = c0 + 2 * t + cc;
          const int jlo = max((cl - base + 7) >> 3, 0), jhi = min((ch - base) >> 3, N / 8 - 1);
          if (jlo <= jhi) bits |= (every4 & (~0ull >> (60 - 4 * jhi)) & (~0ull << (4 * jlo))) << (r * 2 + cc);
        }
      }
#else
#pragma unroll
      for (int j = 0; j < N / 8; j++)
#pragma unroll
        for (int cc = 0; cc < 2; cc++) {
          const int ci = c0 + j * 8 + 2 * t + cc;
          if (in && ci >= cl && ci <= ch) bits |= 1ull << (j * 4 + r * 2 + cc);
        }
#endif
    }
  }
  return bits;
}
