#!/bin/sh
# bin/longca-c47.gz: longca as of commit 0f6a536 (calls 45-47's default, before the
# backward's key-tile pairs), built from a worktree, for call52.sh's same-call comparison.
#   sh scripts/device/build-c47.sh      (then carry bin/longca-c47.gz beside make device's)
set -eu
root=$(pwd)
wt=$(mktemp -d)/c47
git worktree add -f "$wt" 0f6a536 >/dev/null
(cd "$wt" && go build -ldflags '-X main.Version=0f6a536 -s -w' -o "$root/bin/longca-c47" ./cmd/longca)
git worktree remove --force "$wt"
gzip -kf bin/longca-c47
ls -l bin/longca-c47.gz
