package present

import (
	"fmt"
	"io"
	"sort"
	"strings"

	"github.com/longca/longca/internal/dl"
	"github.com/longca/longca/spmd/cp"
)

// EnvReport is what `longca env` prints.
type EnvReport struct {
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
	Peers []PeerInfo `json:"peers"`
}

func WriteEnv(out io.Writer, r EnvReport) {
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
				fmt.Fprintf(out, "  %-16s available: %s\n", p.Kernel, p.VersionText())
			}
		}
	}
	fmt.Fprintf(out, "libraries\n")
	WriteLibraries(out, r.Libraries)
}

// WriteLibraries prints each library's probe, one line each.
func WriteLibraries(out io.Writer, probes []dl.Probe) {
	for _, l := range probes {
		if l.Found {
			fmt.Fprintf(out, "  %-9s %-22s %s\n", l.Library, l.Path, l.Version)
		} else {
			fmt.Fprintf(out, "  %-9s not found (tried %s)\n", l.Library, strings.Join(l.Tried, ", "))
		}
	}
}

// PeerInfo is whether a kernel can run here and, for an external one, its versions.
type PeerInfo struct {
	Kernel   string            `json:"kernel"`
	Peer     bool              `json:"peer"`
	Error    string            `json:"error,omitempty"`
	Versions map[string]string `json:"versions,omitempty"`
}

// VersionText is "torch 2.11.0, triton 3.6.0, ...", sorted.
func (p PeerInfo) VersionText() string {
	var parts []string
	for k, v := range p.Versions {
		parts = append(parts, k+" "+v)
	}
	sort.Strings(parts)
	return strings.Join(parts, ", ")
}

// WriteCPMethods prints the CP methods registered in spmd/cp with their descriptions.
func WriteCPMethods(w io.Writer) {
	fmt.Fprintln(w, "# cp methods")
	for _, n := range cp.Names() {
		doc := ""
		if m, err := cp.New(n); err == nil {
			doc = m.Doc()
		}
		fmt.Fprintf(w, "  %-24s %s\n", n, doc)
	}
}
