#!/bin/sh
# by-card.sh OUT H200_SCRIPT [ARGS] -- H100_SCRIPT [ARGS]: runs the first script on an H200 and
# the second on any other card, so that a call that asks for an H200 and gets an H100 spends its
# time on the H100 round instead of H200-only tables (issue 19's cells are H200 rows).
#   sh scripts/device/by-card.sh OUT run-final.sh 585 -- call67.sh
set -u
out=${1:?usage: by-card.sh OUT H200_SCRIPT [ARGS] -- OTHER_SCRIPT [ARGS]}
shift
. scripts/device/lib.sh
gpu=$(gpu_tag)
a=""
while [ $# -gt 0 ] && [ "$1" != "--" ]; do a="$a $1"; shift; done
[ $# -gt 0 ] && shift
b="$*"
if [ "$gpu" = h200 ]; then set -- $a; else set -- $b; fi
s=$1
shift
echo "# by-card: $gpu runs $s $*"
sh "scripts/device/$s" "$out" "$@"
