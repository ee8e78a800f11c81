package spmd

import (
	"context"
	"fmt"

	"github.com/longca/longca/comm"
	"github.com/longca/longca/comm/local"
)

// InProcess asks RunRanks for ranks that are goroutines of this process (comm/local):
// Ranks of them, with Local's options (a device mover, emulated links).
type InProcess struct {
	Ranks int
	Local []local.Option
}

// RunRanks runs fn once for every rank this process holds, each with its communicator and
// its place in the world: under a launcher (or with a backend other than local) the one
// rank w is, through Open, its communicator closed together after every rank's fn
// returned nil (MPI_Finalize, ncclCommDestroy: launchers check for it); with ip (and a
// world of one process) ip.Ranks in-process ranks over comm/local, each seeing itself as
// rank r of ip.Ranks on this host. It is the one place a world is opened. An error of fn
// leaves a launched communicator open: the other ranks may be gone.
func RunRanks(ctx context.Context, w World, o Options, ip *InProcess, fn func(ctx context.Context, cm comm.Comm, w World) error) error {
	if ip == nil || w.Size > 1 {
		cm, err := Open(ctx, w, o)
		if err != nil {
			return err
		}
		if err := fn(ctx, cm, w); err != nil {
			return err
		}
		if err := cm.Close(); err != nil {
			return fmt.Errorf("closing the %s communicator: %w", Choose(w, o), err)
		}
		return nil
	}
	opts := append([]local.Option{local.WithTimeout(o.timeout())}, ip.Local...)
	return local.Run(ip.Ranks, func(cm comm.Comm) error {
		wr := w
		wr.Rank, wr.Size, wr.LocalRank, wr.LocalSize = cm.Rank(), ip.Ranks, cm.Rank(), ip.Ranks
		return fn(ctx, cm, wr)
	}, opts...)
}
