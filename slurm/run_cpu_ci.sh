#!/usr/bin/env bash
# The CPU job CI submits with `sbatch --wait`: four ranks on one node (more ranks than
# cores, hence --overcommit), no MPI (Slurm's MpiDefault=none), so the ranks talk over
# the TCP backend bootstrapped through rank 0's store.
#
#   sbatch --wait slurm/run_cpu_ci.sh            # from the repository root
#   LONGCA=/path/to/longca sbatch --wait slurm/run_cpu_ci.sh
#
# Results go to out/slurm-<job id>/: one Arrow file per rank, merged at the end.
#SBATCH --job-name=longca-cpu-ci
#SBATCH --ntasks=4
#SBATCH --overcommit
#SBATCH --time=00:10:00
#SBATCH --output=%x-%j.log
set -euo pipefail

LONGCA=${LONGCA:-bin/longca}
out=${LONGCA_OUT:-out/slurm-${SLURM_JOB_ID}}
# A requeued job (scontrol requeue, a node failure) keeps its job id: each attempt is a run
# of its own, so the second does not meet the first's rank files and the merge joins both.
run=${LONGCA_RUN_ID:-job${SLURM_JOB_ID}}
if [ -z "${LONGCA_RUN_ID:-}" ] && [ "${SLURM_RESTART_COUNT:-0}" != 0 ]; then
	run=$run-requeue$SLURM_RESTART_COUNT
fi
mkdir -p "$out"
# The bootstrap store admits only ranks that hold this job's secret (docs/cluster.md,
# Security); srun passes the environment to every task.
export LONGCA_JOB_TOKEN=${LONGCA_JOB_TOKEN:-$(head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n')}
echo "# job $SLURM_JOB_ID: $SLURM_NTASKS tasks on $SLURM_JOB_NODELIST, results in $out"

# Every collective, checked on every rank.
srun --overcommit -n "$SLURM_NTASKS" "$LONGCA" selftest comm --timeout 60s

# The CP benchmark: every case checked against the single-device reference, then timed.
cp_status=0
srun --overcommit -n "$SLURM_NTASKS" "$LONGCA" cp --out "$out" --run-id "$run" \
	${LONGCA_CP_ARGS:---methods ring-p2p,ulysses,balanced --masks causal_document --tokens-per-rank 256 --heads 4:4 --head-dim 16 --dtype fp32 --samples 1 -w 1 -n 2} ||
	cp_status=$?

# merged even when cp failed: a rank cut short keeps the rows it finished
merge_status=0
"$LONGCA" merge "$out" || merge_status=$?
echo "# merged: $(ls "$out"/merged.* 2>/dev/null | tr '\n' ' ')"
exit $((cp_status != 0 ? cp_status : merge_status))
