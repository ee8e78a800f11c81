#!/bin/sh
# by-card.sh OUT H200_SCRIPT [ARGS] -- OTHER_SCRIPT [ARGS]: runs the first script (a file of
# scripts/device) on an H200 and the second on any other card, so that a call that asks for an
# H200 and gets an H100 spends its time on the H100 round instead of H200-only tables (issue
# 19's cells are H200 rows). Each script gets OUT and its own arguments, quoted as given; the
# exit status is the script's, 2 where the card's side names no script.
#   sh scripts/device/by-card.sh OUT h200-round.sh 590 -- cp-final.sh
set -u
out=${1:?usage: by-card.sh OUT H200_SCRIPT [ARGS] -- OTHER_SCRIPT [ARGS]}
shift
. scripts/device/lib.sh
gpu=$(gpu_tag)
want=1
[ "$gpu" = h200 ] || want=2
# keep this card's side: the arguments before the first "--" (1) or after it (2), appended
# after the originals, which are then shifted off
side=1 count=$#
for a in "$@"; do
	if [ "$side" = 1 ] && [ "$a" = -- ]; then
		side=2
		continue
	fi
	[ "$side" = "$want" ] && set -- "$@" "$a"
done
shift "$count"
if [ $# -eq 0 ] || [ ! -f "scripts/device/$1" ]; then
	echo "by-card: no script of scripts/device for $gpu (side $want of: H200_SCRIPT [ARGS] -- OTHER_SCRIPT [ARGS])" >&2
	exit 2
fi
s=$1
shift
echo "# by-card: $gpu runs $s $*"
sh "scripts/device/$s" "$out" "$@"
