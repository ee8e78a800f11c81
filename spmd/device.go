package spmd

import (
	"fmt"
	"strconv"
	"strings"
)

// DeviceIndex is the GPU this rank uses, as an index into the devices CUDA shows it:
// the local rank by default. With CUDA_VISIBLE_DEVICES set to one device per task
// (srun --gpus-per-task, --gpu-bind=single:1), each rank sees one GPU and uses index 0;
// with a shared list, the local rank indexes the list. A local rank past the visible
// devices is an error naming CUDA_VISIBLE_DEVICES, since two ranks on one GPU would fail
// later in NCCL with a less clear message.
func DeviceIndex(w World, getenv func(string) string) (int, error) {
	vis, set := strings.TrimSpace(getenv("CUDA_VISIBLE_DEVICES")), getenv("CUDA_VISIBLE_DEVICES") != ""
	if !set {
		return w.LocalRank, nil
	}
	var devs []string
	for _, d := range strings.Split(vis, ",") {
		if d = strings.TrimSpace(d); d != "" {
			devs = append(devs, d)
		}
	}
	if len(devs) == 0 || devs[0] == "-1" || devs[0] == "NoDevFiles" {
		return 0, fmt.Errorf("spmd: CUDA_VISIBLE_DEVICES=%q hides every GPU from rank %d", vis, w.Rank)
	}
	if len(devs) == 1 {
		return 0, nil
	}
	if w.LocalRank >= len(devs) {
		return 0, fmt.Errorf("spmd: local rank %d has no GPU: CUDA_VISIBLE_DEVICES=%q lists %d; start at most %d ranks per node", w.LocalRank, vis, len(devs), len(devs))
	}
	return w.LocalRank, nil
}

// VisibleDevice is the name CUDA_VISIBLE_DEVICES gives device index i ("3", or a GPU
// UUID), or i itself when the variable is unset: what to print so a user can find it in
// nvidia-smi.
func VisibleDevice(i int, getenv func(string) string) string {
	vis := getenv("CUDA_VISIBLE_DEVICES")
	if vis == "" {
		return strconv.Itoa(i)
	}
	devs := strings.Split(vis, ",")
	if i < len(devs) {
		return strings.TrimSpace(devs[i])
	}
	return strconv.Itoa(i)
}
