#!/usr/bin/env bash
# Context-parallel benchmark on 8 nodes x 8 GPUs (64 ranks): one task per GPU, ranks
# numbered node by node (block distribution), so ranks 8k..8k+7 share a node's NVLink
# and the 2-D methods (usp, loongtrain) can keep one dimension inside a node.
#
#   sbatch slurm/run_64gpu.sh
#   sbatch --nodes=4 slurm/run_64gpu.sh          # 32 GPUs: the task count follows
#   LONGCA_CP_ARGS="--methods loongtrain --tokens-per-rank 16K --kernel cuda --samples 5" sbatch slurm/run_64gpu.sh
#
# Results: out/cp-64gpu-<job id>/ (one Arrow file per rank; merged at the end). The job's log:
# longca-cp-64gpu-<job id>.log in the folder sbatch ran in (Slurm opens it before the
# script runs, so it cannot live in out/, which the script makes).
#SBATCH --job-name=longca-cp-64gpu
#SBATCH --nodes=8
#SBATCH --ntasks-per-node=8
#SBATCH --gpus-per-node=8
#SBATCH --gpus-per-task=1
#SBATCH --cpus-per-task=8
#SBATCH --distribution=block:block
#SBATCH --exclusive
#SBATCH --time=04:00:00
#SBATCH --output=%x-%j.log
set -euo pipefail

LONGCA=${LONGCA:-bin/longca}
out=${LONGCA_OUT:-out/cp-64gpu-${SLURM_JOB_ID}}
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

# NCCL across nodes. Set the interface and HCAs of your fabric (see docs/cluster.md);
# NVLS stays off on these machines.
export NCCL_NVLS_ENABLE=${NCCL_NVLS_ENABLE:-0}
export NCCL_DEBUG=${NCCL_DEBUG:-WARN}
[ -n "${LONGCA_IFNAME:-}" ] && export NCCL_SOCKET_IFNAME=$LONGCA_IFNAME
[ -n "${LONGCA_IB_HCA:-}" ] && export NCCL_IB_HCA=$LONGCA_IB_HCA
# Rank 0's store runs on the first node of SLURM_JOB_NODELIST (longca expands it);
# a port unique to the job keeps two jobs sharing a node apart.
export MASTER_PORT=${MASTER_PORT:-$((20000 + SLURM_JOB_ID % 20000))}

# One line per rank: host, local rank, the GPU it will use, NCCL/CUDA versions.
# One file per attempt, named by its run, with the backend cp uses.
srun --gpus-per-task=1 --gpu-bind=single:1 --cpu-bind=cores "$LONGCA" env --format json \
	--backend "${LONGCA_BACKEND:-nccl}" >"$out/$run.env.jsonl"

# LONGCA_CP_ARGS replaces every argument below (keep --kernel cuda: cp's default kernel is
# the CPU reference).
cp_status=0
srun --gpus-per-task=1 --gpu-bind=single:1 --cpu-bind=cores --kill-on-bad-exit=1 \
	"$LONGCA" cp --backend "${LONGCA_BACKEND:-nccl}" --out "$out" --run-id "$run" \
	${LONGCA_CP_ARGS:---methods ring-p2p,ring-allgather,ulysses,usp,loongtrain --masks full,causal,causal_document_long,full_document_long --tokens-per-rank 16K --kernel cuda --samples 5 --heads 64:8} ||
	cp_status=$?

# Merged even when cp failed or hit the time limit: a rank cut short keeps the rows it
# finished (marked truncated); merge refuses a run with a missing rank file.
merge_status=0
"$LONGCA" merge --parquet "$out" || merge_status=$?
exit $((cp_status != 0 ? cp_status : merge_status))
