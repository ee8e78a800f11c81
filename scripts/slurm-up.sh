#!/usr/bin/env bash
# Start a one-node Slurm cluster on this machine (root, Debian 12: slurm-wlm, munge),
# as /work/shared/SLURM.md describes. Prints `export SLURM_CONF=...` for the caller to
# eval. State, logs and pids live in $LONGCA_SLURM_DIR (default /tmp/longca-slurm).
# Fails loudly, with the daemons' logs, when the cluster does not come up.
set -euo pipefail

dir=${LONGCA_SLURM_DIR:-/tmp/longca-slurm}
case $dir in
*[[:space:]]*)
	# slurm.conf takes its paths unquoted: a folder with a space can never work
	echo "slurm-up: LONGCA_SLURM_DIR='$dir' holds white space, which slurm.conf's paths cannot: choose a folder without" >&2
	exit 2
	;;
esac
mkdir -p "$dir"/{state,spool,log}
host=$(hostname -s)

# die prints the reason and the daemons' logs, stops what this script started, fails.
die() {
	echo "slurm-up: $*" >&2
	# the daemons' own output first (*.out: a fatal error at start is there), then their
	# logs, munge's last
	for f in "$dir"/log/*.out "$dir"/log/*.log /var/log/munge/munged.log; do
		[ -f "$f" ] && { echo "----- $f" >&2; tail -n 40 "$f" >&2; }
	done
	LONGCA_SLURM_DIR=$dir "$(dirname "$0")/slurm-down.sh"
	echo "slurm-up: $*" >&2
	exit 1
}

for b in munged munge unmunge slurmctld slurmd sinfo srun sbatch; do
	command -v "$b" >/dev/null || die "$b is not installed: apt-get install -y slurm-wlm munge"
done

# munge: a key, its folders, the daemon.
if [ ! -s /etc/munge/munge.key ]; then
	mungekey --create >/dev/null 2>&1 || dd if=/dev/urandom of=/etc/munge/munge.key bs=1024 count=1 2>/dev/null
fi
chown munge:munge /etc/munge/munge.key
chmod 400 /etc/munge/munge.key
mkdir -p /run/munge /var/log/munge /var/lib/munge
chown munge:munge /run/munge /var/log/munge /var/lib/munge
if ! munge -n 2>/dev/null | unmunge >/dev/null 2>&1; then
	runuser -u munge -- /usr/sbin/munged || die "munged did not start"
	for _ in $(seq 50); do munge -n 2>/dev/null | unmunge >/dev/null 2>&1 && break; sleep 0.1; done
fi
munge -n | unmunge >/dev/null 2>&1 || die "munge does not work (munge -n | unmunge fails)"

node=$(slurmd -C | head -1)
[ -n "$node" ] || die "slurmd -C printed no node line"
cat >"$dir/slurm.conf" <<CONF
ClusterName=longca-ci
SlurmctldHost=$host
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
MpiDefault=none
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
ReturnToService=2
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool
SlurmctldPidFile=$dir/slurmctld.pid
SlurmdPidFile=$dir/slurmd.pid
SlurmctldLogFile=$dir/log/slurmctld.log
SlurmdLogFile=$dir/log/slurmd.log
SlurmctldPort=${LONGCA_SLURMCTLD_PORT:-6817}
SlurmdPort=${LONGCA_SLURMD_PORT:-6818}
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
JobCompType=jobcomp/none
$node
PartitionName=ci Nodes=ALL Default=YES MaxTime=INFINITE State=UP OverSubscribe=FORCE
CONF
export SLURM_CONF=$dir/slurm.conf

slurmctld -D -f "$SLURM_CONF" >"$dir/log/slurmctld.out" 2>&1 &
echo $! >"$dir/slurmctld.launcher.pid"
sleep 2
slurmd -D -f "$SLURM_CONF" >"$dir/log/slurmd.out" 2>&1 &
echo $! >"$dir/slurmd.launcher.pid"

state=
for _ in $(seq 150); do
	state=$(sinfo -h -o %T 2>/dev/null | head -1 || true)
	[ "$state" = idle ] && break
	for d in slurmctld slurmd; do
		if ! kill -0 "$(cat "$dir/$d.launcher.pid")" 2>/dev/null; then
			die "$d exited at start"
		fi
	done
	sleep 0.2
done
if [ "$state" != idle ]; then
	die "the node did not become idle within 30 s (state: '${state:-none}')"
fi
echo "export SLURM_CONF=$SLURM_CONF"
