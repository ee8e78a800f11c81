#!/bin/sh
# Both sides of sm90's persistence rule on the standard suite (issue 19: "replace the rule
# fitted to three points with one fitted and tested across every mask and length"), from
# the repository root with bin/longca.gz carried (make device):
#   sh scripts/device/persist-rule.sh OUT
# The forward of the 12 masks at 8K, 16K, 32K, 48K, 64:8, d128, every case checked, once
# with the forward always persistent (--variant sm90-persist) and once never
# (sm90-plain), interleaved by length so that drift hits both alike; then one line a case:
# mask, length, key tiles per query tile (from the rows' area), both rates, their ratio,
# and what today's rule (persistent below 32 tiles a row) picks. At most 8 x 34 s.
# Since the twenty-eighth session sm90-persist's overlapped forwards walk their items by the
# work counter (sm90dw), not statically: the rule was fitted against the static walk, and at
# head dim 64 both of its sides now take the counter (fwd90mopd), so it decides nothing there.
set -u
out=${1:?usage: persist-rule.sh OUT}
mkdir -p "$out"
export LONGCA_CACHE_DIR=${LONGCA_CACHE_DIR:-/tmp/longca-nvrtc}
[ -f bin/longca.gz ] && gunzip -c bin/longca.gz >bin/longca && chmod +x bin/longca
t0=$(date +%s)
for s in ${PERSIST_SEQLENS:-8K 16K 32K 48K}; do  # PERSIST_SEQLENS narrows the lengths
	for v in sm90-persist sm90-plain; do
		timeout -s INT -k 10 34 bin/longca kernel --kernels cuda --variant "$v" --seqlens "$s" --heads 64:8 --passes fwd \
			-w 3 -n 10 --out "$out/$v-$s" --run-id "$v-$s" >"$out/$v-$s.log" 2>&1
		echo "# $v $s rc=$? at $(($(date +%s) - t0)) s" | tee -a "$out/summary.txt"
	done
done
# mask seqlen area TFLOP/s from each log's table ("  mask seqlen heads pass area flops tflops")
for v in sm90-persist sm90-plain; do
	cat "$out"/$v-*.log | awk -v v=$v '/^  [a-z_]+ +[0-9]+ +[0-9]+:[0-9]+ +fwd / { print v, $1, $2, $5, $7 }'
done >"$out/rates.txt"
echo "# tiles/row: the mask's area in full 128 x 128 tiles over the row tiles (the rule counts work-list"
echo "# entries, partial tiles whole: near 32 the two can fall on different sides)"
echo "# mask                     seqlen  tiles/row  persist    plain  persist/plain  rule picks (approx.)"
awk '{ r[$2 " " $3, $1] = $5; a[$2 " " $3] = $4 } END {
	for (k in a) {
		split(k, f, " "); p = r[k, "sm90-persist"]; q = r[k, "sm90-plain"]
		rows = f[2] / 128; tiles = a[k] / (128 * 128) / rows
		printf "  %-24s %6d %10.1f %8s %8s %14s  %s\n", f[1], f[2], tiles, p, q, (p + 0 > 0 && q + 0 > 0) ? sprintf("%.3f", p / q) : "-", tiles < 32 ? "persist" : "plain"
	}
}' "$out/rates.txt" | sort -k3 -n
