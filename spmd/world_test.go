package spmd

import (
	"reflect"
	"strings"
	"testing"
)

func envOf(m map[string]string) func(string) string {
	return func(k string) string { return m[k] }
}

func TestDiscover(t *testing.T) {
	cases := []struct {
		name string
		env  map[string]string
		want World // Host is ignored
	}{
		{"single", map[string]string{}, World{Launcher: "single", Size: 1, LocalSize: 1, MasterPort: DefaultMasterPort}},
		{"ompi", map[string]string{"OMPI_COMM_WORLD_RANK": "3", "OMPI_COMM_WORLD_SIZE": "8", "OMPI_COMM_WORLD_LOCAL_RANK": "1", "OMPI_COMM_WORLD_LOCAL_SIZE": "2", "OMPI_COMM_WORLD_NODE_RANK": "1", "MASTER_ADDR": "n0", "MASTER_PORT": "4000"},
			World{Launcher: "ompi", Rank: 3, Size: 8, LocalRank: 1, LocalSize: 2, NodeID: 1, MasterAddr: "n0", MasterPort: 4000}},
		{"ompi wins over slurm", map[string]string{"OMPI_COMM_WORLD_RANK": "2", "OMPI_COMM_WORLD_SIZE": "4", "SLURM_STEP_ID": "0", "SLURM_PROCID": "0", "SLURM_NTASKS": "1", "SLURM_NODEID": "1", "SLURM_JOB_NODELIST": "gpu[07-08]"},
			World{Launcher: "ompi", Rank: 2, Size: 4, LocalSize: 1, NodeID: 1, MasterAddr: "gpu07", MasterPort: DefaultMasterPort, NodeList: "gpu[07-08]"}},
		{"pmix", map[string]string{"PMIX_RANK": "5", "SLURM_NTASKS": "16", "SLURM_LOCALID": "5", "SLURM_NTASKS_PER_NODE": "8(x2)", "SLURM_NODEID": "0", "SLURM_JOB_NODELIST": "a1,a2"},
			World{Launcher: "pmix", Rank: 5, Size: 16, LocalRank: 5, LocalSize: 8, MasterAddr: "a1", MasterPort: DefaultMasterPort, NodeList: "a1,a2"}},
		{"mpich", map[string]string{"PMI_RANK": "1", "PMI_SIZE": "2", "MPI_LOCALRANKID": "1", "MPI_LOCALNRANKS": "2"},
			World{Launcher: "mpich", Rank: 1, Size: 2, LocalRank: 1, LocalSize: 2, MasterPort: DefaultMasterPort}},
		{"slurm", map[string]string{"SLURM_STEP_ID": "0", "SLURM_PROCID": "9", "SLURM_NTASKS": "16", "SLURM_LOCALID": "1", "SLURM_TASKS_PER_NODE": "8,8", "SLURM_NODEID": "1", "SLURM_JOB_NODELIST": "gpu[01-02]"},
			World{Launcher: "slurm", Rank: 9, Size: 16, LocalRank: 1, LocalSize: 8, NodeID: 1, MasterAddr: "gpu01", MasterPort: DefaultMasterPort, NodeList: "gpu[01-02]"}},
		{"slurm port from job id", map[string]string{"SLURM_STEP_ID": "0", "SLURM_PROCID": "0", "SLURM_NTASKS": "2", "SLURM_JOB_ID": "123456", "SLURM_JOB_NODELIST": "n1"},
			World{Launcher: "slurm", Size: 2, LocalSize: 1, MasterAddr: "n1", MasterPort: DefaultMasterPort + 456, NodeList: "n1", Job: "slurm:123456.0"}},
		// sbatch's own script has SLURM_PROCID and the job's SLURM_NTASKS but no step id:
		// a process started there without srun is one process
		{"sbatch's script, no srun", map[string]string{"SLURM_PROCID": "0", "SLURM_NTASKS": "2", "SLURM_LOCALID": "0", "SLURM_NODEID": "0", "SLURM_JOB_ID": "7", "SLURM_TASKS_PER_NODE": "2"},
			World{Launcher: "single", Size: 1, LocalSize: 1, MasterPort: DefaultMasterPort + 7, Job: "slurm:7"}},
		{"torchrun", map[string]string{"RANK": "1", "WORLD_SIZE": "4", "LOCAL_RANK": "1", "LOCAL_WORLD_SIZE": "4", "MASTER_ADDR": "10.0.0.1", "MASTER_PORT": "29500"},
			World{Launcher: "torchrun", Rank: 1, Size: 4, LocalRank: 1, LocalSize: 4, MasterAddr: "10.0.0.1", MasterPort: 29500}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Discover(envOf(tc.env))
			if err != nil {
				t.Fatal(err)
			}
			got.Host = ""
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got  %+v\nwant %+v", got, tc.want)
			}
		})
	}
}

func TestDiscoverErrors(t *testing.T) {
	cases := []struct {
		name, wantVar string
		env           map[string]string
	}{
		{"rank past size", "OMPI_COMM_WORLD_RANK", map[string]string{"OMPI_COMM_WORLD_RANK": "4", "OMPI_COMM_WORLD_SIZE": "4"}},
		{"no size", "OMPI_COMM_WORLD_SIZE", map[string]string{"OMPI_COMM_WORLD_RANK": "0"}},
		{"slurm not a number", "SLURM_PROCID", map[string]string{"SLURM_STEP_ID": "0", "SLURM_PROCID": "x", "SLURM_NTASKS": "2"}},
		{"slurm negative", "SLURM_PROCID", map[string]string{"SLURM_STEP_ID": "0", "SLURM_PROCID": "-1", "SLURM_NTASKS": "2"}},
		{"local past local size", "SLURM_LOCALID", map[string]string{"SLURM_STEP_ID": "0", "SLURM_PROCID": "3", "SLURM_NTASKS": "4", "SLURM_LOCALID": "3", "SLURM_NTASKS_PER_NODE": "2"}},
		{"bad tasks per node", "SLURM_TASKS_PER_NODE", map[string]string{"SLURM_STEP_ID": "0", "SLURM_PROCID": "0", "SLURM_NTASKS": "4", "SLURM_TASKS_PER_NODE": "4(y2)"}},
		{"heterogeneous nodes", "SLURM_LOCALID", map[string]string{"SLURM_STEP_ID": "0", "SLURM_PROCID": "2", "SLURM_NTASKS": "4", "SLURM_LOCALID": "1", "SLURM_NODEID": "1", "SLURM_TASKS_PER_NODE": "3,1"}},
		{"torchrun without master", "MASTER_ADDR", map[string]string{"RANK": "0", "WORLD_SIZE": "2"}},
		{"bad port", "MASTER_PORT", map[string]string{"MASTER_PORT": "70000"}},
		{"bad node list", "SLURM_JOB_NODELIST", map[string]string{"SLURM_STEP_ID": "0", "SLURM_PROCID": "0", "SLURM_NTASKS": "1", "SLURM_JOB_NODELIST": "gpu[01-"}},
		{"pmix without size", "PMIX_SIZE", map[string]string{"PMIX_RANK": "0"}},
		{"zero size", "PMI_SIZE", map[string]string{"PMI_RANK": "0", "PMI_SIZE": "0"}},
		// the tenth hardening pass: a node of more ranks than the world was taken (its memory
		// estimate multiplied by it), and negative node ids were printed as "node -1"
		{"tasks per node past the world", "SLURM_TASKS_PER_NODE", map[string]string{"SLURM_STEP_ID": "0", "SLURM_PROCID": "0", "SLURM_NTASKS": "1", "SLURM_TASKS_PER_NODE": "9223372036854775807"}},
		{"ompi local size past the world", "OMPI_COMM_WORLD_LOCAL_SIZE", map[string]string{"OMPI_COMM_WORLD_RANK": "0", "OMPI_COMM_WORLD_SIZE": "2", "OMPI_COMM_WORLD_LOCAL_SIZE": "3"}},
		{"negative node", "SLURM_NODEID", map[string]string{"SLURM_STEP_ID": "0", "SLURM_PROCID": "0", "SLURM_NTASKS": "2", "SLURM_NODEID": "-1"}},
		{"negative ompi node", "OMPI_COMM_WORLD_NODE_RANK", map[string]string{"OMPI_COMM_WORLD_RANK": "0", "OMPI_COMM_WORLD_SIZE": "2", "OMPI_COMM_WORLD_NODE_RANK": "-3"}},
		{"negative torchrun node", "GROUP_RANK", map[string]string{"RANK": "0", "WORLD_SIZE": "1", "GROUP_RANK": "-1"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Discover(envOf(tc.env))
			if err == nil || !strings.Contains(err.Error(), tc.wantVar) {
				t.Fatalf("error %v does not name %s", err, tc.wantVar)
			}
		})
	}
	// What the line says, not only which variable: a negative size is not "unset"; a job
	// id the store would refuse (over maxJobID) is refused here, not after --timeout.
	for _, tc := range []struct {
		name, want string
		env        map[string]string
	}{
		{"negative size", "OMPI_COMM_WORLD_SIZE=-3: world size -3 is not positive", map[string]string{"OMPI_COMM_WORLD_RANK": "0", "OMPI_COMM_WORLD_SIZE": "-3"}},
		{"long job id", "LONGCA_JOB_ID is 257 bytes, over the 256", map[string]string{EnvJobID: strings.Repeat("x", maxJobID+1)}},
		{"long launcher job id", "the launcher's job id is 270 bytes", map[string]string{"TORCHELASTIC_RUN_ID": strings.Repeat("7", 250)}},
		// the twelfth pass: a negative local rank said "local size -4 is not positive", and one
		// past the world blamed LOCAL_WORLD_SIZE, which was not set
		{"negative local rank", "LOCAL_RANK=-5 is not a local rank (0 or more)", map[string]string{"MASTER_ADDR": "h", "RANK": "0", "WORLD_SIZE": "1", "LOCAL_RANK": "-5"}},
		{"negative slurm local id", "SLURM_LOCALID=-2 is not a local rank", map[string]string{"SLURM_STEP_ID": "0", "SLURM_PROCID": "0", "SLURM_NTASKS": "2", "SLURM_LOCALID": "-2"}},
		{"local rank past the world", "LOCAL_RANK=9 is outside the world of 4 ranks (WORLD_SIZE)", map[string]string{"MASTER_ADDR": "h", "RANK": "3", "WORLD_SIZE": "4", "LOCAL_RANK": "9"}},
		{"negative local size", "OMPI_COMM_WORLD_LOCAL_SIZE: local size -2 is not positive", map[string]string{"OMPI_COMM_WORLD_RANK": "0", "OMPI_COMM_WORLD_SIZE": "2", "OMPI_COMM_WORLD_LOCAL_SIZE": "-2"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Discover(envOf(tc.env))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want it to say %q", err, tc.want)
			}
		})
	}
	// A step inherits its batch job's SLURM_NTASKS_PER_NODE (sbatch --ntasks-per-node=8,
	// then srun --mpi=pmix -n 2): where the launcher's own local size is not set, that
	// figure is capped at the world, not refused.
	w, err := Discover(envOf(map[string]string{"PMIX_RANK": "1", "PMIX_SIZE": "2", "SLURM_LOCALID": "1", "SLURM_NTASKS_PER_NODE": "8"}))
	if err != nil || w.LocalSize != 2 {
		t.Errorf("pmix with an inherited SLURM_NTASKS_PER_NODE=8 in a world of 2: local size %d, %v; want 2", w.LocalSize, err)
	}
	// ... and where srun says the step's own tasks a node, those (sbatch -N2
	// --ntasks-per-node=8, srun --mpi=pmix -N2 -n4: 2 a node; the cap alone said 4, and a
	// local size of the whole world sends the bootstrap to 127.0.0.1 from both nodes)
	w, err = Discover(envOf(map[string]string{"PMIX_RANK": "3", "PMIX_SIZE": "4", "SLURM_LOCALID": "1", "SLURM_NODEID": "1", "SLURM_NTASKS_PER_NODE": "8", "SLURM_TASKS_PER_NODE": "2(x2)"}))
	if err != nil || w.LocalSize != 2 {
		t.Errorf("pmix under srun with SLURM_TASKS_PER_NODE=2(x2): local size %d, %v; want 2", w.LocalSize, err)
	}
	// Open MPI's node rank counts across jobs (a DVM's second job): not bounded by the world
	if _, err := Discover(envOf(map[string]string{"OMPI_COMM_WORLD_RANK": "0", "OMPI_COMM_WORLD_SIZE": "2", "OMPI_COMM_WORLD_NODE_RANK": "4"})); err != nil {
		t.Errorf("an Open MPI node rank past the world: %v, want it taken", err)
	}
	if _, err := Discover(envOf(map[string]string{EnvJobID: strings.Repeat("x", maxJobID)})); err != nil {
		t.Errorf("a job id of exactly %d bytes: %v", maxJobID, err)
	}
}

func TestExpandNodeList(t *testing.T) {
	cases := []struct {
		in   string
		want []string
	}{
		{"gpu01", []string{"gpu01"}},
		{"gpu[01-03,07]", []string{"gpu01", "gpu02", "gpu03", "gpu07"}},
		{"gpu[8-10],login1", []string{"gpu8", "gpu9", "gpu10", "login1"}},
		{"a[1-2]b[3,5]", []string{"a1b3", "a1b5", "a2b3", "a2b5"}},
		{"n[009-011],m[1]", []string{"n009", "n010", "n011", "m1"}},
	}
	for _, tc := range cases {
		got, err := ExpandNodeList(tc.in)
		if err != nil || !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%q: got %v, %v; want %v", tc.in, got, err, tc.want)
		}
	}
	for _, bad := range []string{"", "gpu[01-", "gpu]1", "gpu[3-1]", "gpu[a-b]"} {
		if _, err := ExpandNodeList(bad); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
	// More hosts than a job may have ranks is refused before it is expanded: the product of
	// two long ranges was 2^32 names (a 3 GB process that never answered). MaxWorld exactly
	// is a list, one more is not, whether by one product, two, or a plain name after them.
	for _, c := range []struct {
		in string
		ok bool
	}{{"n[0-65535][0-65535]", false}, {"n[0-1023]m[0-1023]", true}, {"n[0-1023]m[0-1024]", false},
		{"n[0-511]m[0-1023],o[0-511]m[0-1023]", true}, {"n[0-511]m[0-1023],o[0-511]m[0-1023],p", false},
		{"a[0-1048575]", true}, {"a[0-1048576]", false}, {"a[0-1048575],b", false}} {
		hosts, err := ExpandNodeList(c.in)
		if (err == nil) != c.ok || (c.ok && len(hosts) != MaxWorld) {
			t.Errorf("%q: %d hosts, err %v; want ok %v", c.in, len(hosts), err, c.ok)
		}
	}
}

func TestTasksOnNode(t *testing.T) {
	cases := []struct {
		spec string
		node int
		want int
	}{
		{"4", 0, 4}, {"8(x2)", 1, 8}, {"2(x3),1", 2, 2}, {"2(x3),1", 3, 1}, {"1,3", 1, 3},
	}
	for _, tc := range cases {
		if got, err := TasksOnNode(tc.spec, tc.node); err != nil || got != tc.want {
			t.Errorf("%q node %d: %d, %v; want %d", tc.spec, tc.node, got, err, tc.want)
		}
	}
	for _, bad := range []string{"", "x", "2(3)", "0", "2(x0)", "2(x2"} {
		if _, err := TasksOnNode(bad, 0); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
	if _, err := TasksOnNode("2(x2)", 2); err == nil {
		t.Error("node past the list: no error")
	}
}

func TestDeviceIndex(t *testing.T) {
	cases := []struct {
		local   int
		visible string
		want    int
		errPart string
	}{
		{3, "", 3, ""},
		{3, "4", 0, ""},
		{1, "0,1,2,3", 1, ""},
		{5, "0,1,2,3", 0, "CUDA_VISIBLE_DEVICES"},
		{0, "-1", 0, "hides"},
		{2, "GPU-a,GPU-b,GPU-c", 2, ""},
	}
	for _, tc := range cases {
		w := World{Rank: tc.local, Size: 8, LocalRank: tc.local, LocalSize: 8}
		got, err := DeviceIndex(w, envOf(map[string]string{"CUDA_VISIBLE_DEVICES": tc.visible}))
		if tc.errPart != "" {
			if err == nil || !strings.Contains(err.Error(), tc.errPart) {
				t.Errorf("local %d visible %q: error %v, want one with %q", tc.local, tc.visible, err, tc.errPart)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("local %d visible %q: got %d, %v; want %d", tc.local, tc.visible, got, err, tc.want)
		}
	}
}
