#!/usr/bin/env bash
# Context-parallel benchmark on one node of 8 GPUs: one task per GPU.
#
#   sbatch slurm/run_8gpu.sh
#   LONGCA_CP_ARGS="--methods ulysses --masks causal --tokens-per-rank 16K --kernel cuda --samples 5" sbatch slurm/run_8gpu.sh
#
# Results: out/cp-8gpu-<job id>/ (one Arrow file per rank, then merged.arrow/.parquet).
# The steps it shares with run_64gpu.sh (run id, secret, store port, cp and merge) are in
# slurm/lib.sh.
#SBATCH --job-name=longca-cp-8gpu
#SBATCH --nodes=1
#SBATCH --ntasks-per-node=8
#SBATCH --gpus-per-task=1
#SBATCH --cpus-per-task=8
#SBATCH --exclusive
#SBATCH --time=02:00:00
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

longca_gpu_job_start 8gpu

srun --gpus-per-task=1 --gpu-bind=single:1 --cpu-bind=cores "$LONGCA" env --backend "${LONGCA_BACKEND:-nccl}"
# shellcheck disable=SC2119 # no srun options beyond the common ones
longca_gpu_cp_and_merge
