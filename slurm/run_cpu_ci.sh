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
run=${LONGCA_RUN_ID:-job${SLURM_JOB_ID}}
mkdir -p "$out"
# The bootstrap store admits only ranks that hold this job's secret (docs/cluster.md,
# Security); srun passes the environment to every task.
export LONGCA_JOB_TOKEN=${LONGCA_JOB_TOKEN:-$(head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n')}
echo "# job $SLURM_JOB_ID: $SLURM_NTASKS tasks on $SLURM_JOB_NODELIST, results in $out"

# Every collective, checked on every rank.
srun --overcommit -n "$SLURM_NTASKS" "$LONGCA" selftest comm --timeout 60s

# The CP benchmark: every case checked against the single-device reference, then timed.
srun --overcommit -n "$SLURM_NTASKS" "$LONGCA" cp --out "$out" --run-id "$run" \
	${LONGCA_CP_ARGS:---methods ring-p2p,ulysses,balanced --masks causal_document --tokens-per-rank 256 --heads 4:4 --head-dim 16 --dtype fp32 --samples 1 -w 1 -n 2}

"$LONGCA" merge "$out"
echo "# merged: $(ls "$out"/merged.* 2>/dev/null | tr '\n' ' ')"
