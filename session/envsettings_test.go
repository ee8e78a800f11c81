package session

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/longca/longca/spmd"
)

// TestEnvSettings: the env column keeps the variables that change a result (NCCL's, CUDA's,
// the peers'), sorted, and leaves out the rest: per-rank values (CUDA_VISIBLE_DEVICES), places
// and installs (CUDA_HOME, TRITON_CACHE_DIR), what may be a secret, a URL's password, other
// programs' variables; long values and long lists are bounded.
func TestEnvSettings(t *testing.T) {
	env := []string{"PATH=/usr/bin", "NCCL_PROTO=Simple", "NCCL_ALGO=Ring", "CUDA_VISIBLE_DEVICES=3", "CUDA_DEVICE_MAX_CONNECTIONS=1",
		"TORCHINDUCTOR_MAX_AUTOTUNE=1", "TORCHELASTIC_RUN_ID=x", "NVIDIA_TF32_OVERRIDE=0", "NCCL_IB_PKEY=2", "TORCH_AUTH_TOKEN=s3cret",
		"CUDNN_API_KEY=k", "LONGCA_JOB_TOKEN=t", "HOSTNAME=a", "NCCL_SOME_RANK=1", "broken",
		// secrets by other names
		"TRITON_APIKEY=a", "TORCH_HUB_CREDENTIAL=c", "NCCL_PRIVATE_KEYS=p", "CUDA_PASS=p", "TORCH_hub_token=t", "TORCHINDUCTOR_CERT=c",
		// places and installs, which differ from node to node (or rank to rank) and change no result
		"CUDA_HOME=/usr/local/cuda", "CUDA_VERSION=12.8", "NCCL_VERSION=2.28.3", "TRITON_CACHE_DIR=/tmp/t0", "TORCH_EXTENSIONS_DIR=/x",
		"CUDA_MPS_PIPE_DIRECTORY=/tmp/mps", "NCCL_DEBUG_FILE=/tmp/n.%h", "NCCL_TOPO_FILE=/etc/topo.xml",
		// a URL's user and password are dropped, the rest kept
		"TORCHINDUCTOR_REDIS_URL=redis://user:hunter2@cache:6379/0"}
	got := EnvSettings(env)
	want := `{"CUDA_DEVICE_MAX_CONNECTIONS":"1","NCCL_ALGO":"Ring","NCCL_IB_PKEY":"2","NCCL_PROTO":"Simple","NCCL_TOPO_FILE":"/etc/topo.xml",` +
		`"NVIDIA_TF32_OVERRIDE":"0","TORCHINDUCTOR_MAX_AUTOTUNE":"1","TORCHINDUCTOR_REDIS_URL":"redis://cache:6379/0"}`
	if got != want {
		t.Fatalf("EnvSettings = %s\nwant %s", got, want)
	}
	if got := EnvSettings([]string{"PATH=/bin"}); got != "{}" {
		t.Fatalf("none set: %q, want {}", got)
	}
	long := EnvSettings([]string{"NCCL_ALGO=" + strings.Repeat("x", 1000)})
	var m map[string]string
	if err := json.Unmarshal([]byte(long), &m); err != nil || len(m["NCCL_ALGO"]) != envValueMax+3 {
		t.Fatalf("a long value: %s (%v)", long, err)
	}
	var many []string
	for i := 0; i < envCountMax+5; i++ {
		many = append(many, "NCCL_X"+strings.Repeat("A", i)+"=1")
	}
	m = nil
	if err := json.Unmarshal([]byte(EnvSettings(many)), &m); err != nil || len(m) != envCountMax+1 || m["..."] != "5 more" {
		t.Fatalf("a long list: %d names, %q (%v)", len(m), m["..."], err)
	}
}

// TestBaseRowRecordsEnv: every row of a measuring session carries the env column; a
// simulation's rows, which no variable changes, leave it empty.
func TestBaseRowRecordsEnv(t *testing.T) {
	t.Setenv("NCCL_ALGO", "Tree")
	s := New("cp", t.TempDir(), "r", spmd.World{Size: 1}, "v", nil, nil, nil)
	if r := s.BaseRow(s.World); !strings.Contains(r.Env, `"NCCL_ALGO":"Tree"`) {
		t.Fatalf("cp row env %q", r.Env)
	}
	if r := New("simulate", t.TempDir(), "r", spmd.World{Size: 1}, "v", nil, nil, nil).BaseRow(s.World); r.Env != "" {
		t.Fatalf("simulate row env %q, want empty", r.Env)
	}
}
