package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/longca/longca/comm/mpi"
	"github.com/longca/longca/comm/nccl"
	"github.com/longca/longca/internal/cuda"
	"github.com/longca/longca/internal/dl"
	"github.com/longca/longca/kernels"
	"github.com/longca/longca/kernels/cudnn"
	"github.com/longca/longca/kernels/external"
	"github.com/longca/longca/spmd"
	"github.com/urfave/cli/v2"
)

func init() {
	register(&cli.Command{
		Name:  "env",
		Usage: "show this rank's place in the world, the device it would use and the libraries it can open",
		Description: "Reads the launcher's environment (Open MPI, PMIx, MPICH, Slurm, torchrun, or none) the\n" +
			"way every SPMD subcommand does, and tries to open libmpi, libcuda, libnvrtc, libnccl and\n" +
			"libcudnn, printing the versions they report. Run it under srun or mpirun to see every rank.",
		Flags: append([]cli.Flag{
			&cli.StringFlag{Name: "format", Value: "text", Usage: "text or json"},
			&cli.StringFlag{Name: "python", EnvVars: []string{"LONGCA_PYTHON"}, Usage: "Python interpreter of the torch:* peers (default python3 on the PATH)"},
		}, worldFlags()...),
		Action: envAction,
	})
}

// worldFlags are the flags of every command that runs as one rank of a world.
func worldFlags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "backend", Value: "auto", Usage: "communicator: auto, mpi, tcp, local (or nccl when built in)"},
		&cli.IntFlag{Name: "master-port", Usage: "TCP port of rank 0's bootstrap store (default: MASTER_PORT, else 29517)"},
		&cli.DurationFlag{Name: "timeout", Value: spmd.DefaultTimeout, Usage: "bound on every rendezvous and collective: a missing rank fails the others after this"},
	}
}

// discoverWorld reads the world from the environment and applies the world flags.
func discoverWorld(c *cli.Context) (spmd.World, spmd.Options, error) {
	w, err := spmd.Discover(os.Getenv)
	if err != nil {
		return w, spmd.Options{}, cli.Exit("longca: "+err.Error(), 2)
	}
	if c.IsSet("master-port") {
		p := c.Int("master-port")
		if p < 1 || p > 65535 {
			return w, spmd.Options{}, usageError("--master-port %d: use a TCP port from 1 to 65535", p)
		}
		w.MasterPort = p
	}
	o := spmd.Options{Backend: c.String("backend"), Timeout: c.Duration("timeout")}
	if o.Timeout <= 0 {
		return w, o, usageError("--timeout %s: use a positive duration such as 60s", o.Timeout)
	}
	known := append(spmd.Backends(), "auto")
	if !contains(known, o.Backend) {
		return w, o, usageError("--backend %q: use one of %s", o.Backend, strings.Join(known, ", "))
	}
	return w, o, nil
}

func contains(xs []string, x string) bool {
	for _, v := range xs {
		if v == x {
			return true
		}
	}
	return false
}

// envReport is what `longca env` prints.
type envReport struct {
	Launcher           string     `json:"launcher"`
	Rank               int        `json:"rank"`
	WorldSize          int        `json:"world_size"`
	LocalRank          int        `json:"local_rank"`
	LocalSize          int        `json:"local_size"`
	NodeID             int        `json:"node_id"`
	Host               string     `json:"host"`
	MasterAddr         string     `json:"master_addr"`
	MasterPort         int        `json:"master_port"`
	NodeList           string     `json:"node_list,omitempty"`
	Backend            string     `json:"backend"`
	Backends           []string   `json:"backends"`
	Device             *int       `json:"device"`
	DeviceError        string     `json:"device_error,omitempty"`
	CUDAVisibleDevices string     `json:"cuda_visible_devices"`
	CUDA               string     `json:"cuda"`
	Libraries          []dl.Probe `json:"libraries"`
	// Peers are the torch:* kernels: available here or why not, with their versions.
	Peers []peerInfo `json:"peers"`
}

func envAction(c *cli.Context) error {
	format := c.String("format")
	if format != "text" && format != "json" {
		return usageError("--format %q: use text or json", format)
	}
	w, o, err := discoverWorld(c)
	if err != nil {
		return err
	}
	rep := envReport{Launcher: w.Launcher, Rank: w.Rank, WorldSize: w.Size, LocalRank: w.LocalRank, LocalSize: w.LocalSize,
		NodeID: w.NodeID, Host: w.Host, MasterAddr: w.MasterAddr, MasterPort: w.MasterPort, NodeList: w.NodeList,
		Backend: spmd.Choose(w, o), Backends: spmd.Backends(), CUDAVisibleDevices: os.Getenv("CUDA_VISIBLE_DEVICES")}
	if d, err := spmd.DeviceIndex(w, os.Getenv); err != nil {
		rep.DeviceError = err.Error()
	} else {
		rep.Device = &d
	}
	rep.Libraries = probeLibraries()
	po := kernels.Options{Python: c.String("python")}
	if rep.Device != nil {
		po.Device = *rep.Device
	}
	for _, name := range external.TorchNames() {
		rep.Peers = append(rep.Peers, peerStatus(c.Context, name, po))
	}
	rep.CUDA = "no CUDA driver found"
	for _, l := range rep.Libraries {
		if l.Library == "libcuda" && l.Found {
			rep.CUDA = "CUDA driver " + l.Version
		}
	}
	if format == "json" {
		enc := json.NewEncoder(c.App.Writer)
		return enc.Encode(rep)
	}
	writeEnv(c.App.Writer, rep)
	return nil
}

func writeEnv(out io.Writer, r envReport) {
	fmt.Fprintf(out, "launcher     %s\n", r.Launcher)
	fmt.Fprintf(out, "rank         %d of %d\n", r.Rank, r.WorldSize)
	fmt.Fprintf(out, "local rank   %d of %d (node %d)\n", r.LocalRank, r.LocalSize, r.NodeID)
	fmt.Fprintf(out, "host         %s\n", r.Host)
	if r.MasterAddr == "" {
		fmt.Fprintf(out, "master       127.0.0.1:%d (MASTER_ADDR unset: enough when every rank is on this node)\n", r.MasterPort)
	} else {
		fmt.Fprintf(out, "master       %s:%d\n", r.MasterAddr, r.MasterPort)
	}
	if r.NodeList != "" {
		fmt.Fprintf(out, "node list    %s\n", r.NodeList)
	}
	fmt.Fprintf(out, "backend      %s (built in: %s)\n", r.Backend, strings.Join(r.Backends, ", "))
	vis := r.CUDAVisibleDevices
	if vis == "" {
		vis = "unset"
	}
	if r.Device != nil {
		fmt.Fprintf(out, "device       cuda:%d (CUDA_VISIBLE_DEVICES %s)\n", *r.Device, vis)
	} else {
		fmt.Fprintf(out, "device       none: %s\n", r.DeviceError)
	}
	fmt.Fprintf(out, "cuda         %s\n", r.CUDA)
	if len(r.Peers) > 0 {
		fmt.Fprintf(out, "peers\n")
		for _, p := range r.Peers {
			if p.Error != "" {
				fmt.Fprintf(out, "  %-16s unavailable: %s\n", p.Kernel, p.Error)
			} else {
				fmt.Fprintf(out, "  %-16s available: %s\n", p.Kernel, p.versionText())
			}
		}
	}
	fmt.Fprintf(out, "libraries\n")
	writeLibraries(out, r.Libraries)
}

// writeLibraries prints each library's probe, one line each.
func writeLibraries(out io.Writer, probes []dl.Probe) {
	for _, l := range probes {
		if l.Found {
			fmt.Fprintf(out, "  %-9s %-22s %s\n", l.Library, l.Path, l.Version)
		} else {
			fmt.Fprintf(out, "  %-9s not found (tried %s)\n", l.Library, strings.Join(l.Tried, ", "))
		}
	}
}

// probeLibraries asks each library's owner for its probe: MPI, the CUDA driver and
// NVRTC, NCCL, cuDNN.
func probeLibraries() []dl.Probe {
	return []dl.Probe{mpi.Probe(), cuda.ProbeDriver(), cuda.ProbeNVRTC(), nccl.Probe(), cudnn.Probe()}
}
