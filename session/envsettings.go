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

// Names left out of the rows, matched on the name in upper case:
//   - values that differ from rank to rank of one run by design: a launcher's
//     CUDA_VISIBLE_DEVICES per task (the device's index, name and UUID are columns of their
//     own), anything of a RANK;
//   - places and installs, which differ from node to node without changing a result
//     (CUDA_HOME, TRITON_CACHE_DIR, NCCL_DEBUG_FILE; an image's CUDA_VERSION and
//     NCCL_VERSION, whose libraries kernel_versions names): names ending in one of
//     envPlaceSuffixes, but for the files that steer NCCL's topology;
//   - anything that may be a secret: a name holding one of envSecretWords anywhere, or
//     a part (between '_') in envSecretParts.
var (
	envPlaceSuffixes = []string{"_HOME", "_PATH", "_DIR", "_DIRECTORY", "_ROOT", "_VERSION", "_FILE", "_CACHE", "_PREFIX"}
	envKeptFiles     = map[string]bool{"NCCL_TOPO_FILE": true, "NCCL_GRAPH_FILE": true}
	envSecretWords   = []string{"TOKEN", "SECRET", "PASSWORD", "PASSWD", "CREDENTIAL", "APIKEY", "API_KEY", "PRIVATE", "COOKIE", "AUTH"}
	envSecretParts   = map[string]bool{"KEY": true, "KEYS": true, "PASS": true, "CERT": true, "CERTS": true, "PWD": true}
)

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
		value = withoutUserinfo(value)
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
	if !hit || name == "CUDA_VISIBLE_DEVICES" {
		return false
	}
	up := strings.ToUpper(name)
	for _, w := range envSecretWords {
		if strings.Contains(up, w) {
			return false
		}
	}
	for _, part := range strings.Split(up, "_") {
		if part == "RANK" || envSecretParts[part] {
			return false
		}
	}
	if !envKeptFiles[name] {
		for _, suf := range envPlaceSuffixes {
			if strings.HasSuffix(up, suf) {
				return false
			}
		}
	}
	return true
}

// withoutUserinfo drops the user and password of a URL in a value
// ("redis://user:pw@cache:6379" gives "redis://cache:6379").
func withoutUserinfo(v string) string {
	i := strings.Index(v, "://")
	if i < 0 {
		return v
	}
	rest := v[i+3:]
	at := strings.IndexByte(rest, '@')
	if at < 0 || strings.ContainsAny(rest[:at], "/?#") {
		return v
	}
	return v[:i+3] + rest[at+1:]
}
