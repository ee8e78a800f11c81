// Package sim predicts what a context-parallel method does on many GPUs without them:
// per-GPU TFLOP/s, the time of a forward and a backward pass, the share of that time
// spent waiting on communication, and the link that limits it.
//
// Nothing here describes a method a second time. Each method's own code (spmd/cp) runs
// against a Tracer (trace.go): placeholder tensors, a kernel that records instead of
// computing, and a communicator that records instead of sending. What comes out is the
// method's schedule: per rank, the kernel calls with their sub-masks, the helper
// operations, and the transfers with which compute they overlap. An event simulation
// (des.go) replays the schedule over a machine (this file: GPUs per node, link
// bandwidths and latencies, collective algorithms, network.go) with kernel times from a
// rate model of the sub-mask's tiles (kernelmodel.go), calibrated from measured rows.
package sim

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"sort"
	"strings"
	"unicode"

	"github.com/longca/longca/internal/jsonkeys"
	"github.com/longca/longca/internal/smallfile"
	"github.com/longca/longca/spmd"
)

// Link is one class of connection between ranks: its bandwidth in one direction, its
// latency per message, and whether its port is one per GPU or shared.
type Link struct {
	// BandwidthGBs is the bytes per second (1e9) one port moves in one direction: what
	// nccl-tests reports as bus bandwidth for this link.
	BandwidthGBs float64 `json:"bandwidth_gbs"`
	// LatencyUs is the time from a message's last byte leaving to its arrival (and the
	// per-step latency of a collective), in microseconds.
	LatencyUs float64 `json:"latency_us"`
	// Shared says one port serves a whole node (for intra and inter) or a whole GPU (for
	// local), divided among the ranks that use it at once; otherwise every GPU (every rank,
	// for local) has its own port of BandwidthGBs.
	Shared bool `json:"shared"`
}

// Helpers is the cost of the methods' helper kernels (rearrangements, accumulations,
// conversions, log-sum-exp merges): memory-bound, so bytes over a bandwidth, plus a
// launch overhead each.
type Helpers struct {
	BandwidthGBs float64 `json:"bandwidth_gbs"`
	LaunchUs     float64 `json:"launch_us"`
}

// Machine is the cluster a prediction is for.
type Machine struct {
	Name string `json:"name"`
	Doc  string `json:"doc,omitempty"`
	// GPUsPerNode is how many GPUs share a node (and its intra-node link).
	GPUsPerNode int `json:"gpus_per_node"`
	// RanksPerGPU is how many ranks share one GPU (1 on a real cluster; 8 for the 8
	// simulated ranks of longca cp --ranks 8 on one GPU). Ranks on one GPU share its
	// compute and its local link.
	RanksPerGPU int `json:"ranks_per_gpu"`
	// Local connects ranks on one GPU (device-to-device copies), Intra the GPUs of one
	// node (NVLink), Inter the nodes (InfiniBand, RoCE).
	Local Link `json:"local"`
	Intra Link `json:"intra"`
	Inter Link `json:"inter"`
	// Collectives is the algorithm family of the communicator: "nccl" (all-to-all as
	// grouped point-to-point, all-gather and reduce-scatter as rings, all-reduce as ring
	// or tree) or "direct" (every rank sends its block to every other, as comm/local does).
	Collectives string `json:"collectives"`
	// AllReduce is "ring" or "tree" (NCCL only).
	AllReduce string `json:"allreduce,omitempty"`
	// Rendezvous says a point-to-point transfer starts once both sides have posted it
	// (NCCL); otherwise a send leaves at once (comm/local).
	Rendezvous bool `json:"rendezvous"`
	// Helpers are the helper kernels' costs.
	Helpers Helpers `json:"helpers"`
	// Kernel names the kernel rate model (a preset of KernelPresets) unless calibrated
	// rows replace it.
	Kernel string `json:"kernel"`
	// ComputeScale multiplies every kernel and helper time (0 means 1): compute that runs
	// slower than the kernel model was calibrated for, such as in-process ranks sharing a
	// loaded machine's cores with other work (measured by the same run with fast links).
	ComputeScale float64 `json:"compute_scale,omitempty"`
	// StepUs is host-side work of one attention kernel call that neither the kernel model
	// nor the helpers hold (a ring step's launch path, sub-mask bookkeeping), in
	// microseconds per call; StepSliceUs is more of it per slice of the call's sub-mask
	// (the documents in the step). 0 in every preset: docs/simulate.md gives the values
	// measured and how much they change.
	StepUs      float64 `json:"step_us,omitempty"`
	StepSliceUs float64 `json:"step_slice_us,omitempty"`
	// Contention is how much longer an attention kernel takes when it starts while a
	// transfer of its rank is in flight (0.09: 9% longer): NCCL's kernels take SMs, device
	// copies take memory bandwidth. 0 in every preset (docs/simulate.md).
	Contention float64 `json:"contention,omitempty"`
}

// computeScale is ComputeScale, 1 when unset.
func (m Machine) computeScale() float64 {
	if m.ComputeScale > 0 {
		return m.ComputeScale
	}
	return 1
}

// Collective algorithm families.
const (
	CollNCCL   = "nccl"
	CollDirect = "direct"
)

// MachinePresets are ready-made clusters. Bandwidths are what nccl-tests measures (bus
// bandwidth), not datasheet figures: NVLink 4 on H100/H200 moves about 360 GB/s per GPU
// per direction through NCCL (900 GB/s bidirectional on paper); one 400 Gb/s NIC per GPU
// about 45 GB/s (50 on paper).
var MachinePresets = map[string]Machine{
	"h100-ib": {
		Name: "h100-ib", Doc: "nodes of 8 x H100 SXM, NVLink 4 (NVSwitch), one 400 Gb/s InfiniBand NIC per GPU (rail-optimised); FlashAttention-3 rates",
		GPUsPerNode: 8, RanksPerGPU: 1,
		Local:       Link{BandwidthGBs: 1000, LatencyUs: 10, Shared: true},
		Intra:       Link{BandwidthGBs: 360, LatencyUs: 3},
		Inter:       Link{BandwidthGBs: 45, LatencyUs: 8},
		Collectives: CollNCCL, AllReduce: "ring", Rendezvous: true,
		Helpers: Helpers{BandwidthGBs: 2600, LaunchUs: 5},
		Kernel:  "fa3-h100",
	},
	"h200-ib": {
		Name: "h200-ib", Doc: "nodes of 8 x H200 SXM, NVLink 4 (NVSwitch), one 400 Gb/s InfiniBand NIC per GPU (rail-optimised); FlashAttention-3 rates",
		GPUsPerNode: 8, RanksPerGPU: 1,
		Local:       Link{BandwidthGBs: 1400, LatencyUs: 10, Shared: true},
		Intra:       Link{BandwidthGBs: 360, LatencyUs: 3},
		Inter:       Link{BandwidthGBs: 45, LatencyUs: 8},
		Collectives: CollNCCL, AllReduce: "ring", Rendezvous: true,
		Helpers: Helpers{BandwidthGBs: 3800, LaunchUs: 5},
		Kernel:  "fa3-h100",
	},
	"h100-roce-shared": {
		Name: "h100-roce-shared", Doc: "nodes of 8 x H100 SXM, NVLink 4, two 200 Gb/s RoCE NICs shared by the node's 8 GPUs; FlashAttention-3 rates",
		GPUsPerNode: 8, RanksPerGPU: 1,
		Local:       Link{BandwidthGBs: 1000, LatencyUs: 10, Shared: true},
		Intra:       Link{BandwidthGBs: 360, LatencyUs: 3},
		Inter:       Link{BandwidthGBs: 45, LatencyUs: 12, Shared: true},
		Collectives: CollNCCL, AllReduce: "ring", Rendezvous: true,
		Helpers: Helpers{BandwidthGBs: 2600, LaunchUs: 5},
		Kernel:  "fa3-h100",
	},
	"a100-ib": {
		Name: "a100-ib", Doc: "nodes of 8 x A100 SXM 80GB, NVLink 3 (NVSwitch), one 200 Gb/s HDR InfiniBand NIC per GPU; FlashAttention-2 rates",
		GPUsPerNode: 8, RanksPerGPU: 1,
		Local:       Link{BandwidthGBs: 700, LatencyUs: 10, Shared: true},
		Intra:       Link{BandwidthGBs: 230, LatencyUs: 3},
		Inter:       Link{BandwidthGBs: 23, LatencyUs: 8},
		Collectives: CollNCCL, AllReduce: "ring", Rendezvous: true,
		Helpers: Helpers{BandwidthGBs: 1700, LaunchUs: 5},
		Kernel:  "fa2-a100",
	},
	"h200-1gpu": {
		Name: "h200-1gpu", Doc: "one H200 holding every rank (longca cp --ranks N --kernel cuda: comm/local with the CUDA device mover, two device copies and two stream syncs per message); longca's cuda kernel",
		GPUsPerNode: 1, RanksPerGPU: 8,
		Local:       Link{BandwidthGBs: 900, LatencyUs: 40, Shared: true},
		Intra:       Link{BandwidthGBs: 360, LatencyUs: 3},
		Inter:       Link{BandwidthGBs: 45, LatencyUs: 8},
		Collectives: CollDirect, Rendezvous: false,
		// the helpers' (merges, accumulations) effective rate, fitted with the kernel preset
		// to the 48 rows of 2026-12-05 (cmd/longca/testdata/h200/cp-ranks8-cuda-8k-ab7811c.arrow):
		// 4.4 TB/s against the model's bytes (the HBM's peak is 4.8; 3 TB/s before, fitted
		// to the rows of 2026-12-03, left ring-p2p's document rows 14-24% slow once the
		// kernel got faster)
		Helpers: Helpers{BandwidthGBs: 4400, LaunchUs: 8},
		Kernel:  "longca-cuda-h200",
	},
}

// DefaultPreset is the machine longca simulate assumes without --machine.
const DefaultPreset = "h100-ib"

// PresetNames lists the machine presets, sorted.
func PresetNames() []string {
	out := make([]string, 0, len(MachinePresets))
	for n := range MachinePresets {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// maxMachineBytes bounds a machine file (a few hundred bytes of JSON).
const maxMachineBytes = 1 << 20

// LoadMachine reads a machine: a preset's name, or a JSON file (the fields of Machine;
// a file may start from a preset with "preset": NAME and override fields). Every error
// names the field or the file.
func LoadMachine(spec string) (Machine, error) {
	if m, ok := MachinePresets[spec]; ok {
		return m, nil
	}
	b, err := smallfile.Read(spec, maxMachineBytes)
	if err != nil {
		if os.IsNotExist(err) {
			return Machine{}, fmt.Errorf("machine %q is neither a preset (%s) nor a readable file", spec, strings.Join(PresetNames(), ", "))
		}
		return Machine{}, fmt.Errorf("machine file %s: %w", spec, err)
	}
	return ParseMachine(b, spec)
}

// ParseMachine reads a machine file's JSON (name is for messages).
func ParseMachine(b []byte, name string) (Machine, error) {
	var base struct {
		Preset string `json:"preset"`
	}
	_ = json.Unmarshal(b, &base) // a syntax error is reported by the strict decode below
	m := Machine{Name: name}
	if base.Preset != "" {
		p, ok := MachinePresets[base.Preset]
		if !ok {
			return Machine{}, fmt.Errorf("machine file %s: unknown preset %q: use one of %s", name, base.Preset, strings.Join(PresetNames(), ", "))
		}
		m = p
		m.Name = name
	}
	var file struct {
		Machine
		Preset string `json:"preset"`
	}
	file.Machine = m
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&file); err != nil {
		return Machine{}, fmt.Errorf("machine file %s: %w", name, err)
	}
	// (Decode reads one value: with more after it, the preset above was not read either,
	// and the file was refused for "gpus_per_node 0".)
	if _, err := dec.Token(); err != io.EOF {
		return Machine{}, fmt.Errorf("machine file %s: more after its JSON object (at byte %d): a machine file holds one object", name, dec.InputOffset())
	}
	// (json keeps the last of a key given twice: "preset" twice took the first for the
	// fields and was otherwise silent)
	if key := jsonkeys.Duplicate(b); key != "" {
		return Machine{}, fmt.Errorf("machine file %s: %q is given twice: give each field once", name, key)
	}
	m = file.Machine
	// a name the file gives heads simulate's tables and is recorded in rows: one printable
	// line (a newline in it began a table line without its '#')
	if m.Name != name && (len(m.Name) > 200 || strings.IndexFunc(m.Name, func(r rune) bool { return !unicode.IsPrint(r) }) >= 0) {
		return Machine{}, fmt.Errorf("machine file %s: name %q: give a name of at most 200 printable characters, on one line", name, m.Name)
	}
	if err := m.Validate(); err != nil {
		if base.Preset == "" { // every field is the file's: the fault may be one it lacks
			return Machine{}, fmt.Errorf("machine file %s: %w (a file without \"preset\" gives every field; or start it from one: \"preset\": %s)", name, err, strings.Join(PresetNames(), ", "))
		}
		return Machine{}, fmt.Errorf("machine file %s: %w", name, err)
	}
	return m, nil
}

// MaxGPUsPerNode and MaxRanksPerGPU bound a machine's node and GPU at the largest world
// (spmd.MaxWorld ranks): a node or GPU that holds them all is one, and the port scopes
// they make (GPUsPerNode x RanksPerGPU ranks) stay far inside an int.
const (
	MaxGPUsPerNode = spmd.MaxWorld
	MaxRanksPerGPU = spmd.MaxWorld
)

// Validate checks the fields a prediction needs; errors name the field.
func (m Machine) Validate() error {
	if m.GPUsPerNode < 1 || m.GPUsPerNode > MaxGPUsPerNode {
		return fmt.Errorf("gpus_per_node %d: need 1 to %d", m.GPUsPerNode, MaxGPUsPerNode)
	}
	if m.RanksPerGPU < 1 || m.RanksPerGPU > MaxRanksPerGPU {
		return fmt.Errorf("ranks_per_gpu %d: need 1 to %d", m.RanksPerGPU, MaxRanksPerGPU)
	}
	for _, l := range []struct {
		name string
		l    Link
	}{{"local", m.Local}, {"intra", m.Intra}, {"inter", m.Inter}} {
		if !Positive(l.l.BandwidthGBs) || !NonNegative(l.l.LatencyUs) {
			return fmt.Errorf("%s: bandwidth_gbs %g and latency_us %g: need a finite positive bandwidth and a finite latency >= 0", l.name, l.l.BandwidthGBs, l.l.LatencyUs)
		}
	}
	if m.Collectives != CollNCCL && m.Collectives != CollDirect {
		return fmt.Errorf("collectives %q: use %q or %q", m.Collectives, CollNCCL, CollDirect)
	}
	if m.AllReduce != "" && m.AllReduce != "ring" && m.AllReduce != "tree" {
		return fmt.Errorf("allreduce %q: use ring or tree", m.AllReduce)
	}
	if !NonNegative(m.StepUs) || !NonNegative(m.StepSliceUs) || !NonNegative(m.Contention) {
		return fmt.Errorf("step_us %g, step_slice_us %g, contention %g: each must be finite and not negative", m.StepUs, m.StepSliceUs, m.Contention)
	}
	if !NonNegative(m.ComputeScale) {
		return fmt.Errorf("compute_scale %g: must be finite and not negative (0 or 1: as calibrated)", m.ComputeScale)
	}
	if !Positive(m.Helpers.BandwidthGBs) || !NonNegative(m.Helpers.LaunchUs) {
		return fmt.Errorf("helpers: bandwidth_gbs %g and launch_us %g: need a finite positive bandwidth and a finite launch >= 0", m.Helpers.BandwidthGBs, m.Helpers.LaunchUs)
	}
	return nil
}

// The ranges of a machine's numbers that a prediction takes (CheckRanges): past them a
// predicted time left time.Duration's range, and rows of -9.2e12 ms were written (a
// bandwidth of 1e-12 GB/s, a latency, step or compute_scale of 1e300). A link slower than
// a kilobyte a second (the CPU tests emulate 125 KB/s), a message later than 10 seconds,
// a kernel call 10 seconds slower or compute a million times slower or faster than its
// model is no machine's; a time still past a year, or under a nanosecond, is refused by
// Predict (MaxPredictedSeconds).
const (
	MinBandwidthGBs = 1e-6
	MaxLatencyUs    = 1e7
	MinComputeScale = 1e-6
	MaxComputeScale = 1e6
	MaxContention   = 100
)

// Bandwidth and Latency hold a link's numbers to the ranges (NaN fails both).
func Bandwidth(x float64) bool { return x >= MinBandwidthGBs && !math.IsInf(x, 1) }
func Latency(x float64) bool   { return x >= 0 && x <= MaxLatencyUs }

// CheckRanges checks that m's numbers lie in the ranges a prediction takes (Validate
// checks only that they are finite and of the right sign: longca cp --links emulates any
// that time.Duration holds); errors name the field.
func (m Machine) CheckRanges() error {
	for _, l := range []struct {
		name     string
		bw, lat  float64
		latField string
	}{{"local", m.Local.BandwidthGBs, m.Local.LatencyUs, "latency_us"}, {"intra", m.Intra.BandwidthGBs, m.Intra.LatencyUs, "latency_us"},
		{"inter", m.Inter.BandwidthGBs, m.Inter.LatencyUs, "latency_us"}, {"helpers", m.Helpers.BandwidthGBs, m.Helpers.LaunchUs, "launch_us"}} {
		if !Bandwidth(l.bw) {
			return fmt.Errorf("%s: bandwidth_gbs %g: give at least %g (a kilobyte a second)", l.name, l.bw, float64(MinBandwidthGBs))
		}
		if !Latency(l.lat) {
			return fmt.Errorf("%s: %s %g: give 0 to %g microseconds (10 seconds)", l.name, l.latField, l.lat, float64(MaxLatencyUs))
		}
	}
	for _, f := range []struct {
		name string
		v    float64
	}{{"step_us", m.StepUs}, {"step_slice_us", m.StepSliceUs}} {
		if !Latency(f.v) {
			return fmt.Errorf("%s %g: give 0 to %g microseconds (10 seconds a kernel call)", f.name, f.v, float64(MaxLatencyUs))
		}
	}
	if !(m.ComputeScale == 0 || m.ComputeScale >= MinComputeScale && m.ComputeScale <= MaxComputeScale) {
		return fmt.Errorf("compute_scale %g: give %g to %g, or 0 (0 or 1: as calibrated)", m.ComputeScale, float64(MinComputeScale), float64(MaxComputeScale))
	}
	if !(m.Contention >= 0 && m.Contention <= MaxContention) {
		return fmt.Errorf("contention %g: give 0 to %g (0.09: kernels 9%% longer while a transfer runs)", m.Contention, float64(MaxContention))
	}
	return nil
}

// Positive and NonNegative hold a machine's numbers (Validate, and the flags that set
// them): NaN fails both (a comparison with NaN is false: --inter-latency NaN passed "< 0"
// and no event ever ended), and so does an infinity.
func Positive(x float64) bool    { return x > 0 && !math.IsInf(x, 1) }
func NonNegative(x float64) bool { return x >= 0 && !math.IsInf(x, 1) }

// JSON is the machine as a machine file would write it (recorded in every row).
func (m Machine) JSON() string {
	b, _ := json.Marshal(m)
	return string(b)
}

// LinkClass says which link joins two ranks.
type LinkClass uint8

const (
	// ClassSelf is a rank to itself: a local copy, no link.
	ClassSelf LinkClass = iota
	ClassLocal
	ClassIntra
	ClassInter
	numClasses
)

var classNames = [...]string{"self", "local", "intra", "inter"}

func (c LinkClass) String() string { return classNames[c] }

// GPU is the GPU a rank runs on, and Node the node.
func (m Machine) GPU(rank int) int  { return rank / m.RanksPerGPU }
func (m Machine) Node(rank int) int { return m.GPU(rank) / m.GPUsPerNode }

// Class is the link between ranks a and b.
func (m Machine) Class(a, b int) LinkClass {
	switch {
	case a == b:
		return ClassSelf
	case m.GPU(a) == m.GPU(b):
		return ClassLocal
	case m.Node(a) == m.Node(b):
		return ClassIntra
	}
	return ClassInter
}

// Link is the link of a class (the zero Link for ClassSelf).
func (m Machine) Link(c LinkClass) Link {
	switch c {
	case ClassLocal:
		return m.Local
	case ClassIntra:
		return m.Intra
	case ClassInter:
		return m.Inter
	}
	return Link{}
}

// portScope is the ranks that share rank's port of class c (its own alone when the
// link is not shared).
func (m Machine) portScope(rank int, c LinkClass) (first, n int) {
	l := m.Link(c)
	if !l.Shared {
		if c == ClassLocal {
			return rank, 1
		}
		g := m.GPU(rank) * m.RanksPerGPU // a GPU's port serves its ranks
		return g, m.RanksPerGPU
	}
	if c == ClassLocal {
		return m.GPU(rank) * m.RanksPerGPU, m.RanksPerGPU
	}
	per := m.GPUsPerNode * m.RanksPerGPU
	return m.Node(rank) * per, per
}
