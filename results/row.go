// Package results holds the long-format Arrow record of longca: one Row per
// measurement, the per-rank writer that makes every finished row durable at once, the
// reader that accepts a file whose writer was killed, the merge of every rank's file into
// one Arrow (or Parquet, or CSV) file, and the text table and PNG plots of a report.
package results

import (
	"strings"
	"time"
)

// SchemaVersion is stored in every file's schema metadata under MetaSchemaVersion; bump
// it when a column is renamed, removed or changes type (adding a column does not).
const SchemaVersion = "1"

// Schema metadata keys.
const (
	MetaSchemaVersion = "longca.schema_version"
	MetaRunID         = "longca.run_id"
	MetaRank          = "longca.rank"
	MetaWorldSize     = "longca.world_size"
	// MetaAllowMissing is "true" on a merged file made with --allow-missing while ranks
	// were missing; MetaMissing then names them.
	MetaAllowMissing = "longca.allow_missing"
	MetaMissing      = "longca.missing"
	// MetaTruncated names rank files whose writer stopped without the end marker (killed,
	// crashed, out of memory): their finished rows are in the merge.
	MetaTruncated = "longca.truncated"
	MetaRuns      = "longca.runs"
	// MetaSkipped names the files a merge left out (damaged, not longca's, renamed from
	// another run or rank) and why; their ranks are in MetaMissing.
	MetaSkipped = "longca.skipped"
	// MetaUnverified names merged files whose rows had no checksums (older writers).
	MetaUnverified = "longca.unverified"
	// MetaRows is a merged file's row count, so a damaged batch length that reads as
	// fewer rows is detected rather than read silently.
	MetaRows = "longca.rows"
	// MetaPlannedRows is a rank file's count of the rows its run planned for the rank
	// (every case, sample and pass of the sweep), written when the file is created: a
	// closed file with fewer rows is a sweep stopped before its end (Ctrl-C, SIGTERM, a
	// worker failure, an error). A file without it (an older writer) is of unknown plan.
	MetaPlannedRows = "longca.planned_rows"
	// MetaIncomplete names a merged file's runs whose rank files hold fewer rows than
	// they planned (MetaPlannedRows), with their counts: "run t: 4 of 12 planned rows".
	MetaIncomplete = "longca.incomplete"
)

// Status is what became of a measurement.
type Status string

// The statuses. Only StatusOK rows (measured) and StatusPredicted rows (longca
// simulate's model, never a measurement) carry times and rates; the others carry nulls
// there.
const (
	StatusOK          Status = "ok"
	StatusUnsupported Status = "unsupported"
	StatusOOM         Status = "oom"
	StatusWrong       Status = "wrong"
	StatusError       Status = "error"
	StatusPredicted   Status = "predicted"
)

// Row is one measurement: one case (mask, lengths, heads, pass) of one kernel or CP
// method on one rank. Pointer fields are nullable: nil is written as null, never as a
// sentinel number. The arrow tag is the column name; unit is documented in
// docs/results-format.md.
type Row struct {
	// Who and where.
	RunID     string    `arrow:"run_id"`
	Time      time.Time `arrow:"time"`
	Host      string    `arrow:"host"`
	Rank      int64     `arrow:"rank"`
	WorldSize int64     `arrow:"world_size"`
	LocalRank int64     `arrow:"local_rank"`
	Launcher  string    `arrow:"launcher"`
	Device    string    `arrow:"device"`
	Backend   string    `arrow:"backend"`

	// What was measured.
	Bench  string `arrow:"bench"`  // kernel, sparse, cp or simulate
	Kernel string `arrow:"kernel"` // the attention kernel
	// KernelVariant is the kernel's code path that ran (sm90, sm80, a cuDNN engine).
	KernelVariant string `arrow:"kernel_variant"`
	// KernelVersions is a JSON object of the libraries behind the kernel and their
	// versions ({"torch":"2.11.0"}); "{}" when none are known.
	KernelVersions string `arrow:"kernel_versions"`
	// DeviceIndex is the GPU's index in the process (after CUDA_VISIBLE_DEVICES); nil on
	// the CPU.
	DeviceIndex *int64 `arrow:"device_index"`
	// DeviceUUID is the GPU's UUID ("GPU-5b7e..."): which physical card, where name and
	// index do not say (two nodes, CUDA_VISIBLE_DEVICES); "" on the CPU, where the driver
	// could not say, and in files written before it existed.
	DeviceUUID string `arrow:"device_uuid"`
	Method     string `arrow:"method"` // the CP method; empty for kernel runs

	// CP mesh: nil for kernel runs.
	Ulysses  *int64 `arrow:"cp_ulysses"`
	Ring     *int64 `arrow:"cp_ring"`
	Windows  *int64 `arrow:"cp_windows"`
	InnerDim string `arrow:"cp_inner_dim"` // ulysses or ring: the dimension inside a node
	// CPBlock is the dispatch block of the balanced method, in tokens (--cp-block).
	CPBlock *int64 `arrow:"cp_block"`
	// CPStages is the stages balanced's fetches took (the most of any rank; --cp-stages).
	CPStages *int64 `arrow:"cp_stages"`
	// CPLayout is how balanced laid out its ranks' keys for the kernel (--cp-layout):
	// "blocks", "thd" (packed documents), or "thd K/N" when K of N ranks took thd; ""
	// for the other methods.
	CPLayout string `arrow:"cp_layout"`
	// CPSharding is how the sequence was cut over the ring (--sharding, as the method
	// resolved it): contiguous or zigzag; default where the mesh was refused unresolved.
	CPSharding string `arrow:"cp_sharding"`

	// The mask and the problem.
	Mask       string `arrow:"mask"`
	MaskParams string `arrow:"mask_params"` // JSON object
	// DocSource is where a document mask's lengths came from: a preset (pile, prolong64k,
	// prolong512k, magiattention), "file:NAME@HASH" for a --dist file, "counts:NAME@HASH"
	// for --counts (HASH: the first 12 hex digits of the SHA-256 of the content); "" for
	// a mask without documents. MaxDoc is the document-length cap in tokens (--max-doc,
	// or the preset's own); null when none. Two rows on different data never agree on both.
	DocSource     string   `arrow:"doc_source"`
	MaxDoc        *int64   `arrow:"max_doc"`
	Seed          uint64   `arrow:"seed"`
	Sample        int64    `arrow:"sample"`
	SeqLen        int64    `arrow:"seqlen"`
	SeqLenPerRank int64    `arrow:"seqlen_per_rank"`
	Batch         int64    `arrow:"batch"`
	HeadsQ        int64    `arrow:"heads_q"`
	HeadsKV       int64    `arrow:"heads_kv"`
	HeadDim       int64    `arrow:"head_dim"`
	DType         string   `arrow:"dtype"`
	Pass          string   `arrow:"pass"` // fwd, bwd or fwd+bwd
	BlockSize     *int64   `arrow:"block_size"`
	KeptRatio     *float64 `arrow:"kept_ratio"`
	MaskArea      int64    `arrow:"mask_area"`
	FLOPs         float64  `arrow:"flops"`
	PadTokens     *int64   `arrow:"pad_tokens"`

	// Timing: nil unless status is ok.
	Warmups      int64    `arrow:"warmups"`
	Iters        int64    `arrow:"iters"`
	MedianMs     *float64 `arrow:"median_ms"`
	MinMs        *float64 `arrow:"min_ms"`
	MaxMs        *float64 `arrow:"max_ms"`
	MeanMs       *float64 `arrow:"mean_ms"`
	TFLOPs       *float64 `arrow:"tflops"`
	CommBytes    *int64   `arrow:"comm_bytes"`
	BandwidthGBs *float64 `arrow:"bandwidth_gbs"`
	PeakMemBytes *int64   `arrow:"peak_mem_bytes"`
	// The spread over mask samples of a case drawn from documents (--samples > 1): the
	// samples up to and including this row's (its sample index + 1; the case's last row
	// covers them all) and their per-GPU TFLOP/s median, minimum and maximum. Null for a
	// case of one sample.
	SamplesN            *int64   `arrow:"samples_n"`
	SamplesTFLOPsMedian *float64 `arrow:"samples_tflops_median"`
	SamplesTFLOPsMin    *float64 `arrow:"samples_tflops_min"`
	SamplesTFLOPsMax    *float64 `arrow:"samples_tflops_max"`

	// CP efficiency and overlap: nil for kernel runs (and when not measured).
	//
	// RanksPerDevice is how many ranks of the run share this rank's device (8 simulated
	// ranks on one GPU: 8); DeviceTFLOPs = TFLOPs x RanksPerDevice is what that device
	// did. KernelTFLOPs is the same kernel alone on one device at the same per-rank work
	// (the mask at seqlen_per_rank tokens, same heads and pass), KernelTFLOPsFrom where it
	// came from ("measured" in this run, or the results file it was read from), and
	// CPEfficiency = DeviceTFLOPs / KernelTFLOPs. NoCommMs is the median with every
	// transfer skipped (--overlap): the step time without communication.
	RanksPerDevice   *int64   `arrow:"ranks_per_device"`
	DeviceTFLOPs     *float64 `arrow:"device_tflops"`
	KernelTFLOPs     *float64 `arrow:"kernel_tflops"`
	KernelTFLOPsFrom string   `arrow:"kernel_tflops_from"`
	CPEfficiency     *float64 `arrow:"cp_efficiency"`
	NoCommMs         *float64 `arrow:"no_comm_ms"`

	// The GPU's state while the case was timed (read through NVML every 5 ms and as the
	// timing ended; kernel, sparse and CP rows on a GPU, a CP row its own rank's GPU's): the
	// SM clock's mean and lowest reading, the mean of the board's power readings (its power
	// now where NVML gives that field, else the driver's one-second average), the highest
	// temperature, NVML's clock event reasons seen (comma-separated: sw_power_cap,
	// hw_slowdown, sw_thermal, ...; the GPU's idle one left out) and the readings' count.
	// Null (and "") where nothing was read: the CPU, a machine without NVML, --gpu-state=false.
	SMClockMHz    *float64 `arrow:"sm_clock_mhz"`
	SMClockMinMHz *int64   `arrow:"sm_clock_min_mhz"`
	PowerW        *float64 `arrow:"power_w"`
	TempC         *int64   `arrow:"temp_c"`
	ClockEvents   string   `arrow:"clock_events"`
	GPUSamples    *int64   `arrow:"gpu_samples"`
	// How long the GPU was left idle before the case was timed (--settle), so that every
	// kernel starts from a rested card rather than from the power state the case before it
	// left (on a power-capped card the kernel timed second in a case runs at a lower clock).
	// Null where it was off (--settle 0; the default is 250 ms) or the case was not timed on
	// a GPU.
	SettleMs *float64 `arrow:"settle_ms"`

	// The correctness check of the case (or of a smaller case of the same mask).
	CheckPass     *bool    `arrow:"check_pass"`
	CheckWorst    string   `arrow:"check_worst"`
	CheckErr      *float64 `arrow:"check_err"`
	CheckNaiveErr *float64 `arrow:"check_naive_err"`
	CheckTol      *float64 `arrow:"check_tol"`
	CheckSeqLen   *int64   `arrow:"check_seqlen"`
	CheckHeadsQ   *int64   `arrow:"check_heads_q"`
	CheckHeadsKV  *int64   `arrow:"check_heads_kv"`

	// A prediction (bench simulate): the model's parameters (JSON: machine, kernel rate
	// model, approximations), the share of the time spent waiting on communication, and
	// what limits the method (compute, or a link class). Empty and null otherwise.
	ModelParams      string   `arrow:"model_params"`
	ExposedCommShare *float64 `arrow:"exposed_comm_share"`
	Bottleneck       string   `arrow:"bottleneck"`

	// Outcome and provenance.
	Status  Status `arrow:"status"`
	Reason  string `arrow:"reason"`
	Version string `arrow:"version"`
	Command string `arrow:"command"`
	// Env is the environment variables set for the run that can change a result without a
	// flag (NCCL's, CUDA's, cuDNN's and cuBLAS's, the torch peers'), as a JSON object;
	// "{}" when none was set, "" on simulate rows and in files written before it existed.
	Env string `arrow:"env"`
}

// DeviceModel is a device column's card without its index in the process: "cuda:0 NVIDIA
// H200" (longca's kernels) and "NVIDIA H200" (a torch worker's) both give "NVIDIA H200";
// "cpu" stays "cpu".
func DeviceModel(device string) string {
	if i := strings.IndexByte(device, ' '); i >= 0 && strings.HasPrefix(device, "cuda:") {
		return device[i+1:]
	}
	return device
}

// CheckFigure is a check's worst figure and the size that was checked, as SetCheck
// records it (results does not import the check package).
type CheckFigure struct {
	Name               string
	Err, NaiveErr, Tol float64
	Pass               bool
	SeqLen, HQ, HKV    int
	// NaNs counts the candidate's NaN elements (not a column: the reason says them).
	NaNs int
}

// SetCheck fills the check columns from the worst figure of a check.
func (r *Row) SetCheck(f CheckFigure) {
	r.CheckPass = Ptr(f.Pass)
	r.CheckWorst = f.Name
	r.CheckErr = Ptr(f.Err)
	r.CheckNaiveErr = Ptr(f.NaiveErr)
	r.CheckTol = Ptr(f.Tol)
	r.CheckSeqLen = Ptr(int64(f.SeqLen))
	r.CheckHeadsQ = Ptr(int64(f.HQ))
	r.CheckHeadsKV = Ptr(int64(f.HKV))
}

// SetTimes fills the time columns (milliseconds) and TFLOP/s = FLOPs / median.
func (r *Row) SetTimes(median, minimum, maximum, mean time.Duration) {
	ms := func(d time.Duration) *float64 { return Ptr(float64(d.Nanoseconds()) / 1e6) }
	r.MedianMs, r.MinMs, r.MaxMs, r.MeanMs = ms(median), ms(minimum), ms(maximum), ms(mean)
	if median > 0 {
		r.TFLOPs = Ptr(r.FLOPs / median.Seconds() / 1e12)
		if r.CommBytes != nil {
			r.BandwidthGBs = Ptr(float64(*r.CommBytes) / median.Seconds() / 1e9)
		}
	}
}

// Ptr returns a pointer to a copy of v: the way to set a nullable column.
func Ptr[T any](v T) *T { return &v }
