package session

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"sync"
	"time"

	"github.com/longca/longca/comm"
	"github.com/longca/longca/comm/local"
	"github.com/longca/longca/comm/local/cudamover"
	"github.com/longca/longca/harness"
	"github.com/longca/longca/internal/cuda"
	"github.com/longca/longca/internal/dl"
	"github.com/longca/longca/kernels"
	"github.com/longca/longca/present"
	"github.com/longca/longca/results"
	"github.com/longca/longca/sim"
	"github.com/longca/longca/spmd"
	"github.com/longca/longca/spmd/cp"
	"github.com/rs/zerolog"
)

// CPRun is what `longca cp` describes: the sweep on Ranks ranks and its cases
// (harness.CPSweep.Cases), and how each is checked and timed.
type CPRun struct {
	Sweep harness.CPSweep
	Cases []harness.CPCase
	// Ranks is the world's size; InProcess runs them as goroutines of this process
	// (comm/local, with the device mover when the kernel is a cp.DeviceKernel), else this
	// process is one rank of a launched world (spmd.Open with Options).
	Ranks     int
	InProcess bool
	Options   spmd.Options
	// Kernel is the probed kernel (its device); every in-process rank makes its own.
	Kernel        kernels.Kernel
	KernelOptions kernels.Options
	Staged        bool
	Check         bool
	CheckBudget   float64
	Warmup, Iters int
	Overlap       bool
	Baseline      *harness.Baseline
	// Links emulates a machine's links between in-process ranks (--links).
	Links *sim.Machine
	// GPUState reads each rank's GPU's state while its passes are timed (--gpu-state).
	GPUState bool
	// Settle leaves each rank's GPU idle this long before each pass it times (--settle).
	Settle time.Duration
	// Estimate is the run's time estimate (EstimateCP): rank 0's progress lines give its
	// ETA, learned from the rows as they come. Nil: no ETA.
	Estimate *harness.CPEstimate
}

// cpRanks is what the ranks of this process share: rank 0's rows.
type cpRanks struct {
	mu    sync.Mutex
	rows  []results.Row
	wrong int
	// gpu reads the device's state for every rank of this process (one NVML monitor, one
	// warning where there is none: in-process ranks share the device)
	gpu harness.GPUSampler
	// uuid names the device (its UUID) for every rank of this process
	uuid func() string
}

// CP runs a CP sweep: the world (spmd.RunRanks), each rank's communicator, kernel, rank
// file and harness.CPRunner; rank 0 logs each agreed row, the in-process ranks' files are
// merged, and rank 0 prints the CP table. A row that failed its check makes the command
// exit 1. Ctrl-C (or SIGTERM) stops every rank at the next point where they agree (after
// the iteration at hand; a rank not signalled learns of it there): the rows so far are
// merged and shown, and the command exits 130 on every rank.
func (s *Session) CP(ctx context.Context, r CPRun) error {
	ctx, stop := Interruptible(ctx)
	defer stop()
	backend := "local"
	var ip *spmd.InProcess
	if r.InProcess {
		ip = &spmd.InProcess{Ranks: r.Ranks}
		if r.Links != nil {
			ip.Local = append(ip.Local, local.WithLinks(LinksOf(*r.Links)))
		}
		mover, err := deviceMover(r.Kernel, r.Ranks)
		if err != nil {
			return err
		}
		if mover != nil {
			defer mover.Close()
			ip.Local = append(ip.Local, local.WithMover(mover))
		}
	} else {
		s.TagRank(s.World.Rank, s.World.Size)
		backend = spmd.Choose(s.World, r.Options)
	}
	var shared cpRanks
	var closeGPU func()
	shared.gpu, closeGPU = gpuSampler(r.GPUState, r.KernelOptions.Device, s.log())
	shared.uuid = deviceUUID(r.KernelOptions.Device, s.log())
	defer closeGPU()
	err := spmd.RunRanks(ctx, s.World, r.Options, ip, func(ctx context.Context, cm comm.Comm, w spmd.World) error {
		k := r.Kernel
		if r.InProcess { // every in-process rank has its own kernel (and so its own device stream)
			var err error
			if k, err = kernels.New(r.Sweep.Kernel, r.KernelOptions); err != nil {
				return fmt.Errorf("rank %d: kernel %s: %w", w.Rank, r.Sweep.Kernel, err)
			}
		}
		return s.cpRank(ctx, r, backend, cm, w, k, &shared)
	})
	// This rank's interrupt, or a peer's that the ranks agreed to stop for (RunCP): every
	// rank of the world stops the same way, keeping its rows.
	interrupted := harness.Interrupted(ctx, err) || errors.Is(err, harness.ErrInterrupted)
	if err != nil && !interrupted {
		return oneUsage(dropPeerFileErrors(err))
	}
	if interrupted && s.World.Rank == 0 {
		s.log().Warn().Int("rows", len(shared.rows)).Msg("interrupted: rows so far are in the file")
	}
	if r.InProcess {
		res, err := s.MergeRun(results.MergedPath(s.Out, s.RunID), false)
		if err != nil {
			return fmt.Errorf("merging the rank files: %w", err)
		}
		fmt.Fprintf(s.Stderr, "# results: %s (%d rows from %d ranks)\n", res.Files[0], res.Rows, r.Ranks)
	} else if s.World.Rank == 0 {
		fmt.Fprintf(s.Stderr, "# rank files in %s: join them with longca merge %s\n", s.Out, shellWord(s.Out))
	}
	if s.World.Rank == 0 {
		title := fmt.Sprintf("longca cp: %d ranks (%s), seqlen %d, kernel %s", r.Ranks, backend, r.Sweep.SeqLen, r.Sweep.Kernel)
		if err := present.WriteCPTable(s.Stdout, title, shared.rows); err != nil {
			return err
		}
	}
	if interrupted {
		return &ExitError{130, fmt.Sprintf("longca cp: interrupted after %d row(s); the files above hold them", len(shared.rows))}
	}
	if shared.wrong > 0 {
		return &ExitError{1, fmt.Sprintf("longca cp: %d row(s) failed the check against the reference (status wrong)", shared.wrong)}
	}
	return nil
}

// cpRank is one rank: its rank file, its harness.CPRunner, every row written as it is
// agreed, rank 0's progress logged.
func (s *Session) cpRank(ctx context.Context, r CPRun, backend string, cm comm.Comm, w spmd.World, k kernels.Kernel, shared *cpRanks) error {
	kern, err := harness.CPKernel(k, r.Staged)
	if err != nil {
		return err
	}
	rank := cm.Rank()
	// rank 0's first: of two runs given one run id, one writes
	wr, err := s.claimRankFile(cm, harness.CPPlannedRows(r.Sweep, r.Cases))
	if err != nil {
		return err
	}
	defer wr.Close()
	base := s.BaseRow(w)
	base.Backend = backend
	if r.Links != nil {
		base.Backend = "local+links"
		base.ModelParams = fmt.Sprintf(`{"links":%s}`, r.Links.JSON())
	}
	run := &harness.CPRunner{
		Sweep: r.Sweep, Comm: cm, Kernel: kern, KernelOptions: r.KernelOptions, Check: r.Check, CheckBudget: r.CheckBudget,
		Warmup: r.Warmup, Iters: r.Iters, Overlap: r.Overlap, Baseline: r.Baseline, Base: base, GPU: shared.gpu, DeviceUUID: shared.uuid, Settle: r.Settle,
	}
	log := s.log()
	if rank == 0 {
		run.OnBaseline = func(row results.Row) { logBaseline(log, row) }
		run.OnNoBaseline = func(k harness.BaselineKey, why string) {
			log.Warn().Str("baseline", r.Baseline.File).Str("kernel", k.Kernel).Str("mask", k.Mask).Int("seqlen", k.SeqLen).
				Str("heads", fmt.Sprintf("%d:%d", k.HeadsQ, k.HeadsKV)).Int("head_dim", k.HeadDim).Str("dtype", k.DType).Str("pass", k.Pass).
				Msg("--baseline: " + why + "; this case's rows have no kernel_tflops or cp_efficiency")
		}
	}
	est := r.Estimate
	if rank != 0 {
		est = nil
	}
	if est != nil {
		log.Info().Str("run", s.RunID).Int("cases", len(r.Cases)).Int("samples", r.Sweep.Samples).
			Str("estimate", est.Total().Round(time.Second).String()).Msg("cp sweep")
		est.Start(time.Now())
	}
	err = harness.RunCP(ctx, run, r.Cases, func(ci int, row results.Row) error {
		if err := wr.Write(row); err != nil {
			return s.NoRoom(err, cpKept)
		}
		dl.SignalsOnStack() // on every rank: a library may have installed a careless handler during the case
		if rank == 0 {
			shared.mu.Lock()
			shared.rows = append(shared.rows, row)
			if row.Status == results.StatusWrong {
				shared.wrong++
			}
			shared.mu.Unlock()
			var eta time.Duration = -1
			if est != nil {
				est.Row(ci, row, time.Now())
				eta = est.Remaining()
			}
			s.logCPRow(ci, len(r.Cases), row, eta)
		}
		return nil
	})
	if err != nil {
		return err
	}
	return s.NoRoom(wr.Close(), cpKept)
}

// cpKept is where a cp run's rows are when a rank could not write the next (each rank
// writes every agreed row: they stop one row apart at most).
const cpKept = "the rows agreed before are in the run's rank files (longca merge joins them)"

// logCPRow is rank 0's progress line of a row (scripts read its fields); eta is the
// estimate's time left (negative: none).
func (s *Session) logCPRow(ci, of int, row results.Row, eta time.Duration) {
	mesh := "-"
	if row.Ulysses != nil && row.Ring != nil {
		mesh = fmt.Sprintf("%dx%d", *row.Ulysses, *row.Ring)
	}
	ev := s.log().Info().Int("case", ci+1).Int("of", of).Int64("sample", row.Sample).Str("method", row.Method).
		Str("mesh", mesh).Str("mask", row.Mask).
		Str("heads", fmt.Sprintf("%d:%d", row.HeadsQ, row.HeadsKV)).Str("pass", row.Pass).Str("status", string(row.Status))
	if row.MedianMs != nil {
		ev = ev.Float64("median_ms", *row.MedianMs).Float64("tflops_per_gpu", *row.TFLOPs)
	}
	if row.RanksPerDevice != nil {
		ev = ev.Int64("ranks_per_device", *row.RanksPerDevice)
	}
	if row.DeviceTFLOPs != nil {
		ev = ev.Float64("device_tflops", *row.DeviceTFLOPs)
	}
	if row.KernelTFLOPs != nil {
		ev = ev.Float64("kernel_tflops", *row.KernelTFLOPs).Float64("cp_efficiency", *row.CPEfficiency)
	}
	if row.NoCommMs != nil {
		ev = ev.Float64("no_comm_ms", *row.NoCommMs)
	}
	if row.PeakMemBytes != nil {
		ev = ev.Int64("peak_mem_bytes", *row.PeakMemBytes)
	}
	if row.CPLayout != "" {
		ev = ev.Str("cp_layout", row.CPLayout)
	}
	if row.SettleMs != nil {
		ev = ev.Float64("settle_ms", *row.SettleMs)
	}
	if row.Reason != "" {
		ev = ev.Str("reason", row.Reason)
	}
	if eta >= 0 {
		ev = ev.Str("eta", eta.Round(time.Second).String())
	}
	ev.Msg("cp")
}

// deviceMover is the device mover for n in-process ranks when the kernel is a
// cp.DeviceKernel (nil otherwise): the ranks' transfers become device-to-device copies
// on the kernel's GPU.
func deviceMover(k kernels.Kernel, n int) (*cudamover.Mover, error) {
	dk, ok := k.(cp.DeviceKernel)
	if !ok {
		return nil, nil
	}
	g, err := cuda.Open(dk.CUDADevice().Index)
	if err != nil {
		return nil, fmt.Errorf("longca cp: device mover: GPU %d: %w", dk.CUDADevice().Index, err)
	}
	m, err := cudamover.New(g, 2*n)
	if err != nil {
		return nil, fmt.Errorf("longca cp: device mover for %d ranks: %w", n, err)
	}
	return m, nil
}

// CheckLinks says why a machine's links cannot be emulated between in-process ranks
// (--links), or nil: a latency of more than the longest wait (2^63 ns, 292 years), a
// bandwidth over the largest number in bytes/s, or one so low that a byte takes longer
// than the longest wait. sim.Machine.Validate holds them finite and positive, but
// --links 1e300 microseconds of latency wrapped to a negative wait and panicked in
// comm/local, and 5e-324 GB/s a negative time on the wire (no wait at all). A latency of
// timeout (--timeout) or more is refused too: every message on that link would time out.
func CheckLinks(m sim.Machine, timeout time.Duration) error {
	for _, k := range []struct {
		name string
		l    sim.Link
	}{{"local", m.Local}, {"intra", m.Intra}, {"inter", m.Inter}} {
		if !(k.l.LatencyUs*float64(time.Microsecond) < math.MaxInt64) {
			return fmt.Errorf("%s: latency_us %g cannot be emulated: give under 9.2e15 microseconds (292 years, the longest wait)", k.name, k.l.LatencyUs)
		}
		if timeout > 0 && k.l.LatencyUs*float64(time.Microsecond) >= float64(timeout) {
			return fmt.Errorf("%s: latency_us %g is --timeout %v or more: every message on the link would time out: give a shorter latency, or a longer --timeout", k.name, k.l.LatencyUs, timeout)
		}
		if bps := k.l.BandwidthGBs * 1e9; math.IsInf(bps, 1) || !(float64(time.Second)/bps < math.MaxInt64) {
			return fmt.Errorf("%s: bandwidth_gbs %g cannot be emulated: give at most 1e299 GB/s, and enough that a byte takes under 292 years", k.name, k.l.BandwidthGBs)
		}
	}
	return LinksOf(m).Validate()
}

// LinksOf is the link emulator of comm/local for a machine (check it with CheckLinks).
func LinksOf(m sim.Machine) local.Links {
	l := func(k sim.Link) local.Link {
		return local.Link{Bandwidth: k.BandwidthGBs * 1e9, Latency: time.Duration(k.LatencyUs * float64(time.Microsecond)), Shared: k.Shared}
	}
	return local.Links{GPUsPerNode: m.GPUsPerNode, RanksPerGPU: m.RanksPerGPU, Local: l(m.Local), Intra: l(m.Intra), Inter: l(m.Inter)}
}

// logBaseline logs one kernel-alone row a CP sweep measured (the eff column's denominator),
// with the GPU's SM clock while it was timed where that was read: on a power-capped card eff
// sets two clocks against each other, and the CP rows carry only the method's.
func logBaseline(log *zerolog.Logger, row results.Row) {
	ev := log.Info().Str("kernel", row.Kernel).Str("mask", row.Mask).Int64("seqlen", row.SeqLen).Str("pass", row.Pass).Str("status", string(row.Status))
	if row.TFLOPs != nil {
		ev = ev.Float64("tflops", *row.TFLOPs)
	}
	if row.SMClockMHz != nil {
		ev = ev.Float64("sm_clock_mhz", *row.SMClockMHz).Str("clock_events", row.ClockEvents)
	}
	if row.SettleMs != nil {
		ev = ev.Float64("settle_ms", *row.SettleMs)
	}
	ev.Str("reason", row.Reason).Msg("kernel baseline")
}

// shellWord is path as one word of a shell command line: as it is when it holds only
// letters, digits and /._-+,:=@%, else in single quotes (a line to copy and paste: a
// results folder with a space gave a merge command that did not work).
func shellWord(path string) string {
	if path != "" && strings.Trim(path, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789/._-+,:=@%") == "" {
		return path
	}
	return "'" + strings.ReplaceAll(path, "'", `'\''`) + "'"
}
