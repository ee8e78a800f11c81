package session

import (
	"context"
	"fmt"
	"io"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/longca/longca/comm"
	"github.com/longca/longca/comm/local"
	"github.com/longca/longca/harness"
	"github.com/longca/longca/kernels"
	"github.com/longca/longca/kernels/ref"
	"github.com/longca/longca/results"
	"github.com/longca/longca/sim"
	"github.com/longca/longca/spmd"
	"github.com/longca/longca/spmd/cp"
	"github.com/longca/longca/tensor"
)

// smallSimulation is every CP method on gpus of 64 tokens each, heads q:kv, one causal
// forward sample, with a preset kernel model and the command's --head-first.
func smallSimulation(gpus, q, kv int, sharding cp.Sharding) *Simulation {
	o := &Simulation{
		Sweep: harness.CPSweep{Methods: []string{"balanced", "loongtrain", "ring-allgather", "ring-p2p", "ulysses", "usp"}, Masks: []string{"causal"},
			Heads: []harness.Heads{{Q: q, KV: kv}}, HeadDim: 16, DType: tensor.FP32, Passes: []kernels.Pass{kernels.Fwd}, Samples: 1, Seed: 42},
		TokensPerRank: 64, GPUs: []int{gpus}, Machine: sim.MachinePresets[sim.DefaultPreset], Kernel: sim.KernelPresets["fa3-h100"],
	}
	o.Sweep.Mesh.Sharding, o.Sweep.Mesh.HeadFirst = sharding, true
	return o
}

// predictRows runs o's sweep (predictAll) in a session given w, and returns its rows.
func predictRows(t *testing.T, o *Simulation, w spmd.World) []results.Row {
	t.Helper()
	s := New("simulate", t.TempDir(), "sim", w, "test", nil, io.Discard, io.Discard)
	maskFor := maskCache(o)
	if err := fitSimulation(o, maskFor); err != nil {
		t.Fatal(err)
	}
	pr, err := s.predictAll(context.Background(), o, maskFor)
	if err != nil {
		t.Fatal(err)
	}
	return pr.rows
}

func ptrString(p *int64) string {
	if p == nil {
		return "null"
	}
	return fmt.Sprint(*p)
}

// refusedColumns are the columns of an unsupported row that say which case it was.
func refusedColumns(r results.Row) string {
	return fmt.Sprintf("method %s status %s cp_ulysses %s cp_ring %s cp_windows %s cp_inner_dim %q cp_sharding %q seqlen %d seqlen_per_rank %d reason %q",
		r.Method, r.Status, ptrString(r.Ulysses), ptrString(r.Ring), ptrString(r.Windows), r.InnerDim, r.CPSharding, r.SeqLen, r.SeqLenPerRank, r.Reason)
}

// TestSimulateUnsupportedRowsAsCP: simulate's unsupported rows (a method refusing the
// heads of a mesh, or a rank count without a mesh of its own) carry the columns longca
// cp's rows of the same cases carry (harness.CPRunner, on in-process ranks): cp_ulysses
// and cp_ring null where the method refused before resolving a mesh, the mesh the case
// names otherwise; cp_sharding default (or the --sharding given); seqlen_per_rank the
// tokens a rank holds. They had seqlen_per_rank 0, ulysses' cp_ulysses and cp_ring 0, and
// cp_sharding "" (docs/results-format.md: numbers are never sentinels).
func TestSimulateUnsupportedRowsAsCP(t *testing.T) {
	for _, c := range []struct {
		gpus, q, kv int
		sharding    cp.Sharding
	}{
		{8, 2, 2, cp.DefaultSharding},  // ulysses, and usp and loongtrain's 4x2: 2 heads over 4 ranks
		{8, 2, 2, cp.Zigzag},           // the --sharding given
		{5, 5, 5, cp.DefaultSharding},  // usp and loongtrain: 5 ranks have no 2-D mesh
		{16, 8, 8, cp.DefaultSharding}, // the prober's --gpus 16 --heads 8:8
	} {
		t.Run(fmt.Sprintf("%d-gpus-%d:%d-%v", c.gpus, c.q, c.kv, c.sharding), func(t *testing.T) {
			o := smallSimulation(c.gpus, c.q, c.kv, c.sharding)
			var simRows []results.Row
			for _, r := range predictRows(t, o, spmd.World{Size: 1, Launcher: "single"}) {
				if r.Status == results.StatusUnsupported {
					simRows = append(simRows, r)
				}
			}
			if len(simRows) == 0 {
				t.Fatal("no unsupported row: the case tests nothing")
			}
			for _, r := range simRows {
				if r.SeqLenPerRank != 64 {
					t.Errorf("%s: seqlen_per_rank %d, want the 64 tokens a GPU holds", refusedColumns(r), r.SeqLenPerRank)
				}
				if r.CPSharding != c.sharding.String() {
					t.Errorf("%s: cp_sharding %q, want %q", refusedColumns(r), r.CPSharding, c.sharding.String())
				}
				if (r.Ulysses == nil) != (r.Ring == nil) || r.Ulysses != nil && (*r.Ulysses < 1 || *r.Ring < 1) {
					t.Errorf("%s: want a mesh of degrees >= 1, or null", refusedColumns(r))
				}
			}
			// longca cp's rows of the same refused cases
			sw := o.sweep(c.gpus)
			sw.Kernel = "ref"
			cases, err := sw.Cases(c.gpus)
			if err != nil {
				t.Fatal(err)
			}
			var refused []harness.CPCase
			for _, cs := range cases {
				if cs.Skip != nil {
					refused = append(refused, cs)
				}
			}
			var mu sync.Mutex
			var cpRows []results.Row
			err = local.Run(c.gpus, func(cm comm.Comm) error {
				r := &harness.CPRunner{Sweep: sw, Comm: cm, Kernel: ref.New(ref.Options{}), Iters: 1, Base: results.Row{Host: "test"}}
				return harness.RunCP(context.Background(), r, refused, func(_ int, row results.Row) error {
					if cm.Rank() == 0 {
						mu.Lock()
						cpRows = append(cpRows, row)
						mu.Unlock()
					}
					return nil
				})
			}, local.WithTimeout(time.Minute))
			if err != nil {
				t.Fatal(err)
			}
			if len(cpRows) != len(simRows) {
				t.Fatalf("cp wrote %d unsupported rows, simulate %d", len(cpRows), len(simRows))
			}
			for i := range cpRows {
				t.Logf("%s", refusedColumns(simRows[i]))
				if got, want := refusedColumns(simRows[i]), refusedColumns(cpRows[i]); got != want {
					t.Errorf("simulate's row\n  %s\nlongca cp's\n  %s", got, want)
				}
			}
		})
	}
}

// clearLauncherEnv unsets every variable spmd.Discover reads a launcher from.
func clearLauncherEnv(t *testing.T) {
	t.Helper()
	for _, k := range []string{"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_RANK", "PMI_SIZE",
		"SLURM_PROCID", "SLURM_STEP_ID", "SLURM_STEPID", "SLURM_NTASKS", "SLURM_NPROCS", "SLURM_LOCALID", "SLURM_NODEID",
		"SLURM_JOB_NODELIST", "SLURM_NODELIST", "SLURM_NTASKS_PER_NODE", "SLURM_TASKS_PER_NODE", "SLURM_JOB_ID",
		"RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "GROUP_RANK", "MASTER_ADDR", "MASTER_PORT"} {
		t.Setenv(k, "")
	}
}

// TestSimulateRecordsItsLauncher: simulate's rows (predicted and unsupported) record what
// started the simulate process, as kernel's and run's rows do (single with none, slurm
// under srun's variables), or the launcher its session was given. They said "none", a
// value docs/results-format.md does not list.
func TestSimulateRecordsItsLauncher(t *testing.T) {
	for _, c := range []struct {
		name  string
		given string
		env   map[string]string
		want  string
	}{
		{"none", "", nil, "single"},
		{"srun", "", map[string]string{"SLURM_PROCID": "0", "SLURM_NTASKS": "1", "SLURM_LOCALID": "0", "SLURM_NODEID": "0",
			"SLURM_STEP_ID": "0", "SLURM_JOB_ID": "4242", "SLURM_JOB_NODELIST": "node07"}, "slurm"},
		{"sbatch-script", "", map[string]string{"SLURM_PROCID": "0", "SLURM_NTASKS": "4", "SLURM_JOB_ID": "4242"}, "single"},
		{"given", "torchrun", nil, "torchrun"},
	} {
		t.Run(c.name, func(t *testing.T) {
			clearLauncherEnv(t)
			for k, v := range c.env {
				t.Setenv(k, v)
			}
			rows := predictRows(t, smallSimulation(8, 2, 2, cp.DefaultSharding), spmd.World{Size: 1, Launcher: c.given})
			statuses := map[results.Status]bool{}
			for _, r := range rows {
				statuses[r.Status] = true
				if r.Launcher != c.want {
					t.Fatalf("%s row of %s: launcher %q, want %q", r.Status, r.Method, r.Launcher, c.want)
				}
			}
			if !statuses[results.StatusPredicted] || !statuses[results.StatusUnsupported] {
				t.Fatalf("statuses %v: want predicted and unsupported rows", statuses)
			}
		})
	}
}

// TestSimulateCalibrationRecordsItsLauncher: the kernel rows --calibrate writes (run
// RUN-calibration) record the simulate process's launcher as kernel's rows do; they
// said "".
func TestSimulateCalibrationRecordsItsLauncher(t *testing.T) {
	for _, c := range []struct {
		name string
		env  map[string]string
		want string
	}{
		{"none", nil, "single"},
		{"srun", map[string]string{"SLURM_PROCID": "0", "SLURM_NTASKS": "1", "SLURM_LOCALID": "0", "SLURM_NODEID": "0",
			"SLURM_STEP_ID": "0", "SLURM_JOB_ID": "4242", "SLURM_JOB_NODELIST": "node07"}, "slurm"},
	} {
		t.Run(c.name, func(t *testing.T) {
			clearLauncherEnv(t)
			for k, v := range c.env {
				t.Setenv(k, v)
			}
			o := smallSimulation(8, 2, 1, cp.DefaultSharding)
			o.Calibrate, o.CalLens, o.CalIters = "ref", []int{64, 128, 256}, 1
			dir := t.TempDir()
			s := New("simulate", dir, "sim", spmd.World{Size: 1}, "test", nil, io.Discard, io.Discard)
			cal, err := s.prepareCalibration(context.Background(), o)
			if err != nil {
				t.Fatal(err)
			}
			if err := s.calibrateKernel(context.Background(), o, cal); err != nil {
				t.Fatal(err)
			}
			// the fitted model names the kernel it was fitted to (what simulate --compare
			// reads of a prediction's model_params)
			if o.Kernel.FittedTo != "ref" {
				t.Errorf("the calibrated kernel model is fitted to %q, want ref", o.Kernel.FittedTo)
			}
			rows, _, err := results.ReadRows(filepath.Join(dir, "sim-calibration.rank-0-of-1.arrow"))
			if err != nil || len(rows) == 0 {
				t.Fatalf("calibration rows: %d, %v", len(rows), err)
			}
			for _, r := range rows {
				if r.Launcher != c.want {
					t.Fatalf("calibration row (%s %s %d): launcher %q, want %q", r.Mask, r.Pass, r.SeqLen, r.Launcher, c.want)
				}
			}
		})
	}
}
