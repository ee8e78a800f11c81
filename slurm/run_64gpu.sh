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
# script runs, so it cannot live in out/, which the script makes). The steps it shares with
# run_8gpu.sh (run id, secret, store port, cp and merge) are in slurm/lib.sh.
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

# -- find slurm/lib.sh, the steps both GPU jobs share (these lines are the same in each; see lib.sh)
submitted=
if [ -n "${SLURM_JOB_ID:-}" ]; then
	submitted=$(scontrol show job "$SLURM_JOB_ID" 2>/dev/null | sed -n 's/^ *Command=//p' | head -n 1) || true
	# Command= is the script's path, then its arguments joined by spaces (one with a / had sent the search to a wrong
	# folder): taken off, up to the first line break, where scontrol's line ends; an older Slurm shows the path alone
	if [ $# -gt 0 ]; then
		args=$(printf '%s\n' "$*" | head -n 1)
		case $submitted in *" $args") submitted=${submitted%" $args"} ;; esac
	fi
	case $submitted in '' | /*) ;; *) submitted=${SLURM_SUBMIT_DIR:-.}/$submitted ;; esac # as given to sbatch
fi
# the folder of a path, symbolic links followed: a script submitted or run through a link is longca's, beside its lib.sh
real_dir() { dirname -- "$(readlink -f -- "$1" 2>/dev/null || printf '%s\n' "$1")"; }
lib=
for dir in "${LONGCA_SLURM_LIB_DIR:-}" "$(real_dir "$0")" "${submitted:+$(real_dir "$submitted")}" slurm "${SLURM_SUBMIT_DIR:-.}/slurm"; do
	# only longca's: another lib.sh (beside a copy of this script, another project's slurm/) is passed over
	if [ -n "$dir" ] && [ -f "$dir/lib.sh" ] && grep -qs '^longca_gpu_job_start() {$' "$dir/lib.sh"; then lib=$dir/lib.sh && break; fi
	[ -z "${LONGCA_SLURM_LIB_DIR:-}" ] || break # given, that folder only
done
if [ -z "$lib" ]; then
	echo "longca's slurm/lib.sh not found${LONGCA_SLURM_LIB_DIR:+ in LONGCA_SLURM_LIB_DIR=$LONGCA_SLURM_LIB_DIR}: sbatch runs a copy of the job script; set LONGCA_SLURM_LIB_DIR=/path/to/longca/slurm (or, unset, submit from the repository root)" >&2
	exit 2
fi
# shellcheck source-path=SCRIPTDIR source=lib.sh
. "$lib"
# -- end of the lines the same in each

longca_gpu_job_start 64gpu

# NCCL across nodes. Set the interface and HCAs of your fabric (see docs/cluster.md);
# NVLS stays off on these machines (lib.sh).
[ -n "${LONGCA_IFNAME:-}" ] && export NCCL_SOCKET_IFNAME=$LONGCA_IFNAME
[ -n "${LONGCA_IB_HCA:-}" ] && export NCCL_IB_HCA=$LONGCA_IB_HCA

# One line per rank: host, local rank, the GPU it will use, NCCL/CUDA versions.
# One file per attempt, named by its run, with the backend cp uses.
srun --gpus-per-task=1 --gpu-bind=single:1 --cpu-bind=cores "$LONGCA" env --format json \
	--backend "${LONGCA_BACKEND:-nccl}" >"$out/$run.env.jsonl"

longca_gpu_cp_and_merge --kill-on-bad-exit=1
