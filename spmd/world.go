// Package spmd is the per-rank runtime of the one SPMD binary: it reads the launcher's
// environment (Open MPI, PMIx, MPICH/Hydra, Slurm, torchrun) into a World, picks the
// GPU by local rank, bootstraps the ranks through a small TCP store hosted by rank 0,
// and opens the communicator backend (MPI, TCP, local, or a registered one such as NCCL).
package spmd

import (
	"fmt"
	"os"
	"strconv"
	"strings"
)

// DefaultMasterPort is the TCP store's port when neither MASTER_PORT nor --master-port
// gives one; under Slurm it is offset by SLURM_JOB_ID % 1000.
const DefaultMasterPort = 29517

// World is where this process stands among the ranks of one run.
type World struct {
	Launcher   string // ompi, pmix, mpich, slurm, torchrun or single
	Rank       int
	Size       int
	LocalRank  int // rank among the processes of this node
	LocalSize  int
	NodeID     int
	Host       string
	MasterAddr string // where rank 0 hosts the bootstrap store; empty when nothing says
	MasterPort int
	NodeList   string // Slurm's compact node list, when launched by Slurm
	// Job is the job's identity, the same on every rank: LONGCA_JOB_ID, else the
	// launcher's job id (Slurm's job and step, PMIx's namespace, Open MPI's job id,
	// torchrun's run id); empty when nothing says. The bootstrap store refuses ranks of
	// another job.
	Job string
	// Token is the job's shared secret from LONGCA_JOB_TOKEN or LONGCA_JOB_TOKEN_FILE
	// (nil when neither is set): the bootstrap store admits only ranks that hold it.
	Token Secret

	// launches is where this rank keeps its launch ids (nil: the process's); tests give
	// each simulated process its own.
	launches *launchCache
}

// MPI says whether an MPI launcher (mpirun, mpiexec) started this process, so that an
// MPI backend can initialise.
func (w World) MPI() bool {
	return w.Launcher == "ompi" || w.Launcher == "pmix" || w.Launcher == "mpich"
}

// Discover reads the world from the environment. The first launcher whose variables are
// set wins, in this order: Open MPI, PMIx, MPICH/Hydra, Slurm, torchrun; with none, the
// process is a single rank. Slurm's variables still fill in what an MPI launcher started
// under srun leaves out (node id, node list, master address). Errors name the variable.
func Discover(getenv func(string) string) (World, error) {
	e := env{getenv: getenv}
	w := World{Size: 1, LocalSize: 1, MasterPort: DefaultMasterPort}
	// The kernel's name for this machine: HOSTNAME is only the fallback, since a launcher that
	// forwards the environment (srun's default --export=ALL) carries the submitting shell's
	// HOSTNAME to every node, which would name one host for all.
	if h, err := os.Hostname(); err == nil && h != "" {
		w.Host = h
	} else {
		w.Host = getenv("HOSTNAME")
	}
	switch {
	case e.has("OMPI_COMM_WORLD_RANK"):
		w.Launcher = "ompi"
		w.Rank = e.int("OMPI_COMM_WORLD_RANK", 0)
		w.Size = e.int("OMPI_COMM_WORLD_SIZE", -1)
		w.LocalRank = e.int("OMPI_COMM_WORLD_LOCAL_RANK", 0)
		w.LocalSize = e.int("OMPI_COMM_WORLD_LOCAL_SIZE", 0)
		w.NodeID = e.int("OMPI_COMM_WORLD_NODE_RANK", 0)
		if e.has("SLURM_NODEID") {
			w.NodeID = e.int("SLURM_NODEID", 0)
		}
		e.require("OMPI_COMM_WORLD_SIZE", w.Size)
	case e.has("PMIX_RANK"):
		w.Launcher = "pmix"
		w.Rank = e.int("PMIX_RANK", 0)
		w.Size = e.first(-1, "PMIX_SIZE", "SLURM_NTASKS", "PMI_SIZE")
		w.LocalRank = e.first(0, "PMIX_LOCAL_RANK", "SLURM_LOCALID", "MPI_LOCALRANKID")
		w.LocalSize = e.first(0, "PMIX_LOCAL_SIZE", "SLURM_NTASKS_PER_NODE", "MPI_LOCALNRANKS")
		w.NodeID = e.int("SLURM_NODEID", 0)
		if w.Size < 0 {
			e.fail("PMIX_RANK is set but the world size is not: set PMIX_SIZE or SLURM_NTASKS")
		}
		w.LocalSize = inheritedLocalSize(&e, "PMIX_LOCAL_SIZE", w.LocalSize, w.Size, w.NodeID)
	case e.has("PMI_RANK"):
		w.Launcher = "mpich"
		w.Rank = e.int("PMI_RANK", 0)
		w.Size = e.int("PMI_SIZE", -1)
		w.LocalRank = e.first(0, "MPI_LOCALRANKID", "SLURM_LOCALID")
		w.LocalSize = e.first(0, "MPI_LOCALNRANKS", "SLURM_NTASKS_PER_NODE")
		w.NodeID = e.int("SLURM_NODEID", 0)
		e.require("PMI_SIZE", w.Size)
		w.LocalSize = inheritedLocalSize(&e, "MPI_LOCALNRANKS", w.LocalSize, w.Size, w.NodeID)
	case e.has("SLURM_PROCID") && !e.has("SLURM_STEP_ID") && !e.has("SLURM_STEPID"):
		// sbatch's own script (the batch step) carries SLURM_PROCID 0 and the job's
		// SLURM_NTASKS, but no step id, which srun gives every task: a process started there
		// without srun is one process, not rank 0 of the job's tasks (it wrote rank-0-of-N
		// files that merge called half a run, and cp waited --timeout for ranks never started)
		w.Launcher = "single"
	case e.has("SLURM_PROCID"):
		w.Launcher = "slurm"
		w.Rank = e.int("SLURM_PROCID", 0)
		w.Size = e.first(-1, "SLURM_NTASKS", "SLURM_NPROCS")
		w.LocalRank = e.int("SLURM_LOCALID", 0)
		w.NodeID = e.int("SLURM_NODEID", 0)
		w.LocalSize = e.first(0, "SLURM_NTASKS_PER_NODE")
		if spec := e.getenv("SLURM_TASKS_PER_NODE"); spec != "" {
			n, err := TasksOnNode(spec, w.NodeID)
			if err != nil {
				e.fail("SLURM_TASKS_PER_NODE: %v", err)
			}
			w.LocalSize = n
		}
		e.require("SLURM_NTASKS", w.Size)
	case e.has("RANK") || e.has("WORLD_SIZE"):
		w.Launcher = "torchrun"
		w.Rank = e.int("RANK", 0)
		w.Size = e.int("WORLD_SIZE", -1)
		w.LocalRank = e.int("LOCAL_RANK", 0)
		w.LocalSize = e.int("LOCAL_WORLD_SIZE", 0)
		w.NodeID = e.int("GROUP_RANK", 0)
		e.require("WORLD_SIZE", w.Size)
		if !e.has("MASTER_ADDR") && w.Size > 1 {
			e.fail("RANK and WORLD_SIZE are set but MASTER_ADDR is not: set MASTER_ADDR to rank 0's host")
		}
	default:
		w.Launcher = "single"
	}
	if e.err != nil {
		return World{}, e.err
	}
	if w.LocalSize == 0 { // the launcher did not say: at least this rank's local rank + 1
		if w.Size > 0 && w.LocalRank >= w.Size { // (not a node's size the launcher never gave)
			return World{}, fmt.Errorf("spmd: %s=%d is outside the world of %d ranks (%s)", w.localVar(), w.LocalRank, w.Size, w.sizeVar())
		}
		w.LocalSize = w.LocalRank + 1
	}
	w.NodeList = getenv("SLURM_JOB_NODELIST")
	if w.NodeList == "" {
		w.NodeList = getenv("SLURM_NODELIST")
	}
	if err := w.fillMaster(e); err != nil {
		return World{}, err
	}
	w.Job = jobID(getenv)
	if len(w.Job) > maxJobID {
		// The store refuses a hello with a longer id: say so now, not after --timeout.
		src := "the launcher's job id"
		if getenv(EnvJobID) != "" {
			src = EnvJobID
		}
		return World{}, fmt.Errorf("spmd: %s is %d bytes, over the %d a job id may have: give a shorter %s", src, len(w.Job), maxJobID, EnvJobID)
	}
	tok, err := readToken(getenv)
	if err != nil {
		return World{}, err
	}
	w.Token = tok
	return w, w.check()
}

// inheritedLocalSize is the local size for a launcher whose own variable (own) is not set:
// under srun, the step's tasks on this node (SLURM_TASKS_PER_NODE, as the Slurm launcher
// reads it), not SLURM_NTASKS_PER_NODE, which a step inherits from its batch job (sbatch
// --ntasks-per-node=8, then srun --mpi=pmix -N2 -n4: 2 a node, not 8); any figure left over
// the world is capped at it. A launcher's own figure over the world is refused by check.
func inheritedLocalSize(e *env, own string, local, size, node int) int {
	if e.has(own) {
		return local
	}
	if spec := e.getenv("SLURM_TASKS_PER_NODE"); spec != "" {
		if n, err := TasksOnNode(spec, node); err == nil {
			local = n
		}
	}
	if size > 0 && local > size {
		return size
	}
	return local
}

// fillMaster sets the store's address: MASTER_ADDR/MASTER_PORT when set, else the first
// host of the Slurm node list, else nothing (Bootstrap then uses this host when every
// rank is on it, and refuses otherwise).
func (w *World) fillMaster(e env) error {
	w.MasterAddr = e.getenv("MASTER_ADDR")
	if e.has("MASTER_PORT") {
		w.MasterPort = e.int("MASTER_PORT", DefaultMasterPort)
	} else if e.has("SLURM_JOB_ID") {
		// Two jobs sharing a node must not share the port: offset it by the job id.
		w.MasterPort = DefaultMasterPort + e.int("SLURM_JOB_ID", 0)%1000
	}
	if w.MasterAddr == "" && w.NodeList != "" {
		hosts, err := ExpandNodeList(w.NodeList)
		if err != nil {
			return fmt.Errorf("spmd: SLURM_JOB_NODELIST: %w", err)
		}
		w.MasterAddr = hosts[0]
	}
	return e.err
}

func (w World) check() error {
	switch {
	case w.Size < 1:
		return fmt.Errorf("spmd: %s: world size %d is not positive", w.sizeVar(), w.Size)
	case w.Size > MaxWorld:
		return fmt.Errorf("spmd: %s=%d is over longca's %d ranks", w.sizeVar(), w.Size, MaxWorld)
	case w.Rank < 0 || w.Rank >= w.Size:
		return fmt.Errorf("spmd: %s=%d is outside the world of %d ranks (%s)", w.rankVar(), w.Rank, w.Size, w.sizeVar())
	case w.LocalRank < 0:
		return fmt.Errorf("spmd: %s=%d is not a local rank (0 or more)", w.localVar(), w.LocalRank)
	case w.LocalSize < 1:
		return fmt.Errorf("spmd: %s: local size %d is not positive", w.localSizeVar(), w.LocalSize)
	case w.LocalRank < 0 || w.LocalRank >= w.LocalSize:
		return fmt.Errorf("spmd: %s=%d is outside the %d ranks of this node", w.localVar(), w.LocalRank, w.LocalSize)
	case w.LocalSize > w.Size:
		return fmt.Errorf("spmd: %s: %d ranks on this node, more than the world's %d (%s): the launcher's variables disagree", w.localSizeVar(), w.LocalSize, w.Size, w.sizeVar())
	case w.NodeID < 0: // (not bounded by the world: Open MPI's node rank counts across jobs)
		return fmt.Errorf("spmd: %s=%d is not a node id (0 or more)", w.nodeVar(), w.NodeID)
	case w.LocalRank > w.Rank:
		return fmt.Errorf("spmd: %s=%d is larger than the global rank %d (%s)", w.localVar(), w.LocalRank, w.Rank, w.rankVar())
	case w.MasterPort < 1 || w.MasterPort > 65535:
		return fmt.Errorf("spmd: MASTER_PORT=%d is not a TCP port (1-65535)", w.MasterPort)
	}
	return nil
}

// rankVar, sizeVar and localVar name the launcher's variables for error messages.
func (w World) rankVar() string {
	return map[string]string{"ompi": "OMPI_COMM_WORLD_RANK", "pmix": "PMIX_RANK", "mpich": "PMI_RANK", "slurm": "SLURM_PROCID", "torchrun": "RANK"}[w.Launcher]
}

func (w World) sizeVar() string {
	return map[string]string{"ompi": "OMPI_COMM_WORLD_SIZE", "pmix": "PMIX_SIZE", "mpich": "PMI_SIZE", "slurm": "SLURM_NTASKS", "torchrun": "WORLD_SIZE"}[w.Launcher]
}

func (w World) localVar() string {
	return map[string]string{"ompi": "OMPI_COMM_WORLD_LOCAL_RANK", "pmix": "PMIX_LOCAL_RANK", "mpich": "MPI_LOCALRANKID", "slurm": "SLURM_LOCALID", "torchrun": "LOCAL_RANK"}[w.Launcher]
}

func (w World) localSizeVar() string {
	return map[string]string{"ompi": "OMPI_COMM_WORLD_LOCAL_SIZE", "pmix": "PMIX_LOCAL_SIZE", "mpich": "MPI_LOCALNRANKS", "slurm": "SLURM_TASKS_PER_NODE (or SLURM_NTASKS_PER_NODE)", "torchrun": "LOCAL_WORLD_SIZE"}[w.Launcher]
}

func (w World) nodeVar() string {
	return map[string]string{"ompi": "OMPI_COMM_WORLD_NODE_RANK (or SLURM_NODEID)", "pmix": "SLURM_NODEID", "mpich": "SLURM_NODEID", "slurm": "SLURM_NODEID", "torchrun": "GROUP_RANK"}[w.Launcher]
}

// env reads integers from the environment, keeping the first error, which names the
// variable.
type env struct {
	getenv func(string) string
	err    error
}

func (e *env) has(k string) bool { return e.getenv(k) != "" }

func (e *env) fail(format string, args ...any) {
	if e.err == nil {
		e.err = fmt.Errorf("spmd: "+format, args...)
	}
}

// int parses k, or returns def when k is unset.
func (e *env) int(k string, def int) int {
	s := strings.TrimSpace(e.getenv(k))
	if s == "" {
		return def
	}
	v, err := strconv.Atoi(s)
	if err != nil {
		e.fail("%s=%q is not an integer: set it to a number or unset it (the launcher sets it for a job)", k, s)
		return def
	}
	return v
}

// first parses the first of keys that is set. Slurm's per-node task counts such as
// "4(x2)" or "4,2" are read as their first number.
func (e *env) first(def int, keys ...string) int {
	for _, k := range keys {
		s := strings.TrimSpace(e.getenv(k))
		if s == "" {
			continue
		}
		if i := strings.IndexAny(s, "(,"); i > 0 {
			s = s[:i]
		}
		v, err := strconv.Atoi(s)
		if err != nil {
			e.fail("%s=%q is not an integer: set it to a number or unset it (the launcher sets it for a job)", k, e.getenv(k))
			return def
		}
		return v
	}
	return def
}

// require fails when a size variable was not set (v < 0).
func (e *env) require(k string, v int) {
	switch {
	case v < 0 && e.has(k):
		e.fail("%s=%d: world size %d is not positive", k, v, v)
	case v < 0:
		e.fail("%s is not set but the launcher's rank is: the environment is incomplete", k)
	}
}
