#!/usr/bin/env bash
# Stop the one-node Slurm cluster that slurm-up.sh started, by the process ids it
# recorded (munged is left running: other users of munge may need it).
set -uo pipefail
dir=${LONGCA_SLURM_DIR:-/tmp/longca-slurm}
for d in slurmd slurmctld; do
	f=$dir/$d.launcher.pid
	[ -f "$f" ] || continue
	pid=$(cat "$f")
	if kill -0 "$pid" 2>/dev/null; then
		kill "$pid"
		for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
		kill -0 "$pid" 2>/dev/null && kill -9 "$pid"
	fi
	rm -f "$f"
done
exit 0
