#!/bin/sh
# The CP time estimate against the wall time on the GPU (harness.CPEstimate), from the
# repository root with bin/longca or bin/longca.gz carried (make device):
#   sh scripts/device/cp-eta.sh OUT
# One `longca cp --ranks 8 --kernel cuda` sweep at 8K tokens per rank: three methods x the
# 4 CP masks x fwd,bwd, one sample, every case checked, --overlap --baseline measure, as
# the H200 rows the estimate was fitted to (cmd/longca/testdata/h200/cp-ranks8-cuda-8k.arrow)
# but three methods in one process. Bounded by CP_ETA_TIMEOUT (default 240 s; expected
# about 150 s). Prints last: the up-front estimate against the wall time, and the ETA of
# every progress line against the time that was really left.
set -u
out=${1:?usage: cp-eta.sh OUT}
mkdir -p "$out"
[ -x bin/longca ] || { [ -f bin/longca.gz ] && gunzip -c bin/longca.gz >bin/longca && chmod +x bin/longca; }
export LONGCA_CACHE_DIR=${LONGCA_CACHE_DIR:-/tmp/longca-nvrtc}
t0=$(date +%s.%N)
timeout "${CP_ETA_TIMEOUT:-240}" bin/longca --log-format json cp --ranks 8 --kernel cuda \
	--methods "${CP_ETA_METHODS:-balanced,ulysses,ring-p2p}" --tokens-per-rank 8K \
	--masks full,causal,full_document_long,causal_document_long --heads 64:8 --head-dim 128 --dtype bf16 \
	--passes fwd,bwd --samples 1 -w 1 -n 2 --check --check-budget 5e8 --overlap --baseline measure \
	--out "$out/eta" --run-id eta >"$out/table.txt" 2>"$out/log.jsonl"
rc=$?
t1=$(date +%s.%N)
echo "# longca cp rc=$rc"
tail -4 "$out/table.txt"
python3 - "$out/log.jsonl" "$t0" "$t1" <<'EOF'
import json, sys, datetime
path, t0, t1 = sys.argv[1], float(sys.argv[2]), float(sys.argv[3])
def secs(d):  # a Go duration string: 1h2m3s, 4m5s, 6s, 0s
    s, num = 0.0, ""
    for ch in d:
        if ch.isdigit() or ch == ".":
            num += ch
            continue
        s += float(num) * {"h": 3600, "m": 60, "s": 1}[ch]
        num = ""
    return s
up, rows = None, []
for line in open(path):
    try:
        j = json.loads(line)
    except ValueError:
        continue
    if j.get("message") == "cp sweep":
        up = j["estimate"]
    if j.get("message") == "cp" and "eta" in j:
        t = datetime.datetime.strptime(j["time"], "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=datetime.timezone.utc).timestamp()
        rows.append((j["case"], j["method"], j["mask"], j["pass"], j["status"], secs(j["eta"]), t1 - t))
wall = t1 - t0
print("# up-front estimate %s; wall %.0f s (the process, with its start)" % (up, wall))
print("# case method         mask                   pass status  eta(s)  left(s)  eta/left")
for c, m, k, p, st, eta, left in rows:
    r = "%.2f" % (eta / left) if left > 20 else "-"
    print("  %4d %-14s %-22s %-4s %-7s %6.0f %8.0f %9s" % (c, m, k, p, st, eta, left, r))
EOF
