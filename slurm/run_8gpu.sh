#!/usr/bin/env bash
# Context-parallel benchmark on one node of 8 GPUs: one task per GPU.
#
#   sbatch slurm/run_8gpu.sh
#   LONGCA_CP_ARGS="--methods ulysses --masks causal --tokens-per-rank 16K --kernel cuda --samples 5" sbatch slurm/run_8gpu.sh
#
# Results: out/cp-8gpu-<job id>/ (one Arrow file per rank, then merged.arrow/.parquet).
#SBATCH --job-name=longca-cp-8gpu
#SBATCH --nodes=1
#SBATCH --ntasks-per-node=8
#SBATCH --gpus-per-task=1
#SBATCH --cpus-per-task=8
#SBATCH --exclusive
#SBATCH --time=02:00:00
#SBATCH --output=%x-%j.log
set -euo pipefail

LONGCA=${LONGCA:-bin/longca}
out=${LONGCA_OUT:-out/cp-8gpu-${SLURM_JOB_ID}}
mkdir -p "$out"
# A requeued job (scontrol requeue, a node failure) keeps its job id: each attempt is a run
# of its own, so the second does not meet the first's rank files and the merge joins both.
run=${LONGCA_RUN_ID:-job${SLURM_JOB_ID}}
if [ -z "${LONGCA_RUN_ID:-}" ] && [ "${SLURM_RESTART_COUNT:-0}" != 0 ]; then
	run=$run-requeue$SLURM_RESTART_COUNT
fi
# The bootstrap store admits only ranks that hold this job's secret (docs/cluster.md,
# Security); srun passes the environment to every task.
export LONGCA_JOB_TOKEN=${LONGCA_JOB_TOKEN:-$(head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n')}

# NCCL on H200 nodes: NVLink SHARP (NVLS) off; say what NCCL picked in the log.
export NCCL_NVLS_ENABLE=${NCCL_NVLS_ENABLE:-0}
export NCCL_DEBUG=${NCCL_DEBUG:-WARN}
# Rank 0's bootstrap store: the first node of the job (longca derives it from
# SLURM_JOB_NODELIST when unset), on a port unique to the job.
export MASTER_PORT=${MASTER_PORT:-$((20000 + SLURM_JOB_ID % 20000))}

srun --gpus-per-task=1 --gpu-bind=single:1 --cpu-bind=cores "$LONGCA" env --backend "${LONGCA_BACKEND:-nccl}"
# LONGCA_CP_ARGS replaces every argument below (keep --kernel cuda: cp's default kernel is
# the CPU reference).
cp_status=0
srun --gpus-per-task=1 --gpu-bind=single:1 --cpu-bind=cores \
	"$LONGCA" cp --backend "${LONGCA_BACKEND:-nccl}" --out "$out" --run-id "$run" \
	${LONGCA_CP_ARGS:---methods ring-p2p,ring-allgather,ulysses,usp,loongtrain --masks full,causal,causal_document_long,full_document_long --tokens-per-rank 16K --kernel cuda --samples 5 --heads 64:8} ||
	cp_status=$?

# Merged even when cp failed or hit the time limit: a rank cut short keeps the rows it
# finished (marked truncated); merge refuses a run with a missing rank file.
merge_status=0
"$LONGCA" merge --parquet "$out" || merge_status=$?
exit $((cp_status != 0 ? cp_status : merge_status))
