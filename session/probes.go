package session

import (
	"context"
	"os"

	"github.com/longca/longca/comm/mpi"
	"github.com/longca/longca/comm/nccl"
	"github.com/longca/longca/internal/cuda"
	"github.com/longca/longca/internal/dl"
	"github.com/longca/longca/kernels"
	"github.com/longca/longca/kernels/cudnn"
	"github.com/longca/longca/kernels/external"
	"github.com/longca/longca/present"
	"github.com/longca/longca/spmd"
)

// ProbeLibraries asks each library's owner for its probe: MPI, the CUDA driver and
// NVRTC, NCCL, cuDNN.
func ProbeLibraries() []dl.Probe {
	return []dl.Probe{mpi.Probe(), cuda.ProbeDriver(), cuda.ProbeNVRTC(), nccl.Probe(), cudnn.Probe()}
}

// PeerStatus makes the kernel and, for an external worker's, asks it (starting the
// worker: a Python import of torch takes seconds).
func PeerStatus(ctx context.Context, name string, o kernels.Options) present.PeerInfo {
	if ctx == nil {
		ctx = context.Background()
	}
	p := present.PeerInfo{Kernel: name}
	k, err := NewKernel(name, o)
	if err != nil {
		p.Error = err.Error()
		return p
	}
	a, ok := k.(interface {
		Available(context.Context) (external.Versions, error)
	})
	if !ok {
		return p
	}
	p.Peer = true
	v, err := a.Available(ctx)
	p.Versions = v
	if err != nil {
		p.Error = err.Error()
	}
	return p
}

// AvailablePeers are the kernels the GPU suite times beside cuda that run here: cudnn
// when libcudnn opens (its rows say which cuDNN), and the torch:* kernels whose worker
// runs (a GPU, torch, the interpreter); the others are named in the log with the reason.
func (s *Session) AvailablePeers(ctx context.Context, o kernels.Options) []string {
	if ctx == nil {
		ctx = context.Background()
	}
	var out []string
	for _, name := range append([]string{"cudnn"}, external.TorchNames()...) {
		k, err := NewKernel(name, o)
		if err == nil {
			if a, ok := k.(interface {
				Available(context.Context) (external.Versions, error)
			}); ok {
				_, err = a.Available(ctx)
			}
		}
		if err != nil {
			s.log().Warn().Str("kernel", name).Str("reason", err.Error()).Msg("peer not available here: left out of the suite")
			continue
		}
		out = append(out, name)
	}
	return out
}

// Env is what `longca env` reports of this rank: its place in the world, the backend
// Open would use, its device, the device libraries' probes and the torch peers (made
// with python, on the rank's device).
func Env(ctx context.Context, w spmd.World, o spmd.Options, python string) present.EnvReport {
	rep := present.EnvReport{Launcher: w.Launcher, Rank: w.Rank, WorldSize: w.Size, LocalRank: w.LocalRank, LocalSize: w.LocalSize,
		NodeID: w.NodeID, Host: w.Host, MasterAddr: w.MasterAddr, MasterPort: w.MasterPort, NodeList: w.NodeList,
		Backend: spmd.Choose(w, o), Backends: spmd.Backends(), CUDAVisibleDevices: os.Getenv("CUDA_VISIBLE_DEVICES")}
	if d, err := spmd.DeviceIndex(w, os.Getenv); err != nil {
		rep.DeviceError = err.Error()
	} else {
		rep.Device = &d
	}
	rep.Libraries = ProbeLibraries()
	po := kernels.Options{Python: python}
	if rep.Device != nil {
		po.Device = *rep.Device
	}
	for _, name := range external.TorchNames() {
		rep.Peers = append(rep.Peers, PeerStatus(ctx, name, po))
	}
	rep.CUDA = "no CUDA driver found"
	for _, l := range rep.Libraries {
		if l.Library == "libcuda" && l.Found {
			rep.CUDA = "CUDA driver " + l.Version
		}
	}
	return rep
}
