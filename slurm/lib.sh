# shellcheck shell=bash
# The steps slurm/run_8gpu.sh and slurm/run_64gpu.sh share, kept once so that a fix lands
# in both. Sourced by them after `set -euo pipefail`, never submitted: it only defines
# functions.
#
# sbatch runs a copy of the job script from its spool folder ($0 is .../slurm_script), so a
# job script looks for this file in $LONGCA_SLURM_LIB_DIR (when set, there only: not
# LONGCA_SLURM_DIR, which is scripts/slurm-up.sh's state folder), else beside $0 (`bash
# slurm/run_8gpu.sh`), then beside the script as submitted (`scontrol show job`'s Command=,
# less the script's arguments that Slurm appends; both through any symbolic link),
# then in slurm/ of the working folder and of the folder sbatch ran in (SLURM_SUBMIT_DIR,
# the repository root that bin/longca and out/ are relative to), taking only a lib.sh that
# defines longca_gpu_job_start (another project's is passed over). Those lines are the same
# in both scripts (TestSlurmGPUScriptsShareLib).

# longca_gpu_job_start NAME: sets LONGCA, out (out/cp-NAME-<job id>, made) and run (one run
# id an attempt of a requeued job), and exports the job's secret and the NCCL and store
# settings both jobs use.
longca_gpu_job_start() {
	LONGCA=${LONGCA:-bin/longca}
	out=${LONGCA_OUT:-out/cp-$1-${SLURM_JOB_ID}}
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

	# NCCL: NVLink SHARP (NVLS) off on these machines; say what NCCL picked in the log.
	export NCCL_NVLS_ENABLE=${NCCL_NVLS_ENABLE:-0}
	export NCCL_DEBUG=${NCCL_DEBUG:-WARN}
	# Rank 0's bootstrap store: the first node of the job (longca derives it from
	# SLURM_JOB_NODELIST when unset), on a port unique to the job, which keeps two jobs
	# sharing a node apart.
	export MASTER_PORT=${MASTER_PORT:-$((20000 + SLURM_JOB_ID % 20000))}
}

# longca_gpu_cp_and_merge [SRUN OPTION...]: cp on every task, one GPU each (the options given
# follow srun's common ones), then the merge of the folder; exits with cp's status, else the
# merge's.
longca_gpu_cp_and_merge() {
	# LONGCA_CP_ARGS replaces every argument below (keep --kernel cuda: cp's default kernel is
	# the CPU reference). Unquoted on purpose: it is a list of arguments.
	cp_status=0
	# shellcheck disable=SC2086
	srun --gpus-per-task=1 --gpu-bind=single:1 --cpu-bind=cores "$@" \
		"$LONGCA" cp --backend "${LONGCA_BACKEND:-nccl}" --out "$out" --run-id "$run" \
		${LONGCA_CP_ARGS:---methods ring-p2p,ring-allgather,ulysses,usp,loongtrain --masks full,causal,causal_document_long,full_document_long --tokens-per-rank 16K --kernel cuda --samples 5 --heads 64:8} ||
		cp_status=$?

	# Merged even when cp failed or hit the time limit: a rank cut short keeps the rows it
	# finished (marked truncated); merge refuses a run with a missing rank file.
	merge_status=0
	"$LONGCA" merge --parquet "$out" || merge_status=$?
	exit $((cp_status != 0 ? cp_status : merge_status))
}
