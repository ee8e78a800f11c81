package session

import (
	"encoding/json"
	"sort"
	"strconv"
	"strings"
)

// Variables of the environment that change a measurement without any flag of longca's:
// NCCL's (NCCL_ALGO, NCCL_PROTO, NCCL_P2P_LEVEL, NCCL_NVLS_ENABLE, ...), the CUDA runtime's
// and driver's (CUDA_DEVICE_MAX_CONNECTIONS, CUDA_LAUNCH_BLOCKING, CUDA_MODULE_LOADING),
// cuDNN's and cuBLAS's, NVIDIA_TF32_OVERRIDE, and those of the torch:* peers (TORCH_*,
// PYTORCH_*, TORCHINDUCTOR_* and TRITON_*, which steer FlexAttention's compile). A run
// records the ones set in its rows' env column, so that two runs that differ only there
// do not read as one.
var envPrefixes = []string{"NCCL_", "CUDA_", "CUDNN_", "CUBLAS_", "CUBLASLT_", "NVIDIA_TF32_OVERRIDE", "TORCH_", "PYTORCH_", "TORCHINDUCTOR_", "TRITON_"}

// envLeftOut are parts of a name (split at '_') that keep a variable out of the rows:
// values that differ from rank to rank of one run by design (a launcher's
// CUDA_VISIBLE_DEVICES per task; the device's index and name are columns of their own),
// and anything that may be a secret.
var envLeftOut = map[string]bool{"VISIBLE": true, "RANK": true, "TOKEN": true, "SECRET": true, "PASSWORD": true, "PASSWD": true, "KEY": true, "CREDENTIALS": true, "AUTH": true}

// Bounds of the env column: a value's bytes, and the variables recorded (a longer list
// ends with the entry "..." giving how many more were set).
const (
	envValueMax = 256
	envCountMax = 64
)

// EnvSettings is the env column of a run's rows from its environment (os.Environ's
// "NAME=value" form): a JSON object of the variables set that envPrefixes names, sorted by
// name; "{}" when none is.
func EnvSettings(environ []string) string {
	m := map[string]string{}
	var names []string
	for _, kv := range environ {
		name, value, ok := strings.Cut(kv, "=")
		if !ok || !recordedEnv(name) {
			continue
		}
		if len(value) > envValueMax {
			value = value[:envValueMax] + "..."
		}
		if _, dup := m[name]; !dup {
			names = append(names, name)
		}
		m[name] = value
	}
	if len(names) > envCountMax {
		sort.Strings(names)
		for _, n := range names[envCountMax:] {
			delete(m, n)
		}
		m["..."] = strconv.Itoa(len(names)-envCountMax) + " more"
	}
	b, err := json.Marshal(m) // a map of strings always marshals; its keys sorted
	if err != nil {
		return "{}"
	}
	return string(b)
}

func recordedEnv(name string) bool {
	hit := false
	for _, p := range envPrefixes {
		if strings.HasPrefix(name, p) {
			hit = true
			break
		}
	}
	if !hit {
		return false
	}
	for _, part := range strings.Split(name, "_") {
		if envLeftOut[part] {
			return false
		}
	}
	return true
}
