package harness

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/longca/longca/comm"
	"github.com/longca/longca/kernels"
	"github.com/longca/longca/results"
	"github.com/longca/longca/tensor"
)

// A CP case's row is written only after the ranks agree on what became of it: every
// rank reports its own outcome (and time) through one all-reduce over the world, the
// worst outcome wins, and its reason travels to every rank, so all ranks write the same
// status and reason and stop together.

// outcome codes, in the order the agreement prefers them: a root cause over the
// failures it caused (a peer aborted, a wait that timed out), and among root causes the
// more severe; above them all a rank that was interrupted (codeStop), so that every rank
// learns of it at the agreement and the world stops there together.
const (
	codeOK = iota
	codeSecondary
	codeUnsupported
	codeOOM
	codeWrong
	codeError
	codeStop
)

// ErrInterrupted is wrapped by the error every rank returns at an agreement where a rank
// reported that it was interrupted (its context cancelled: Ctrl-C, SIGTERM), whether or
// not this rank's own context was: a rank learns of a peer's interrupt there. RunCP's
// error wraps it (and context.Canceled) when the world stopped for an interrupt.
var ErrInterrupted = errors.New("interrupted")

// stopping is what a rank reports at an agreement: err, or ErrInterrupted once ctx is
// done. An interrupt is acted on only at agreements, where every rank is outside the
// methods' collectives: a rank that left an exchange its peers are inside would leave
// them waiting there until --timeout.
func stopping(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return fmt.Errorf("%w (%w)", ErrInterrupted, context.Cause(ctx))
	}
	return err
}

// codeOf is the agreement code of a rank's error.
func codeOf(err error) int {
	if err == nil {
		return codeOK
	}
	if errors.Is(err, ErrInterrupted) {
		return codeStop
	}
	if errors.Is(err, comm.ErrAborted) || errors.Is(err, comm.ErrTimeout) {
		return codeSecondary
	}
	switch st, _ := Classify(err); st {
	case results.StatusUnsupported:
		return codeUnsupported
	case results.StatusOOM:
		return codeOOM
	case results.StatusWrong:
		return codeWrong
	}
	return codeError
}

// agreedError is the error every rank returns for an agreed code: the status the code
// stands for, and the reason of the rank that caused it.
func agreedError(code int, reason string) error {
	base := errors.New(reason)
	switch code {
	case codeUnsupported:
		return kernels.Unsupported(base)
	case codeOOM:
		return kernels.OOM(base)
	case codeWrong:
		return fmt.Errorf("%w: %s", ErrWrong, reason)
	}
	return base
}

// FatalError is a failure of the world communicator itself (the agreement could not be
// reached): the run cannot go on, and the rows so far are all there is.
type FatalError struct{ Err error }

func (e *FatalError) Error() string { return "the ranks could not agree: " + e.Err.Error() }
func (e *FatalError) Unwrap() error { return e.Err }

// reasonBytes is how much of the failing rank's reason travels.
const reasonBytes = 512

// agree is every rank's report of its outcome (err, nil when it succeeded) and time d;
// it returns the slowest rank's time and the agreed error (nil when every rank
// succeeded), the same on every rank, or a *FatalError when the world failed.
func agree(c comm.Comm, d time.Duration, err error) (time.Duration, error) {
	n, me := c.Size(), c.Rank()
	v := tensor.NewHost(tensor.FP64, 1+n)
	v.Set(0, d.Seconds())
	v.Set(1+me, float64(codeOf(err)))
	if aerr := c.AllReduce(v, comm.Max); aerr != nil {
		return 0, &FatalError{fmt.Errorf("agreeing on the outcome: %w", aerr)}
	}
	code, root := codeOK, -1
	for r := range n {
		if c := int(v.At(1 + r)); c > code {
			code, root = c, r
		}
	}
	slowest := time.Duration(v.At(0) * 1e9)
	if code == codeOK {
		return slowest, nil
	}
	if code == codeStop { // every rank knows which: no reason to share
		return slowest, fmt.Errorf("rank %d was %w", root, ErrInterrupted)
	}
	// The reason of the rank that caused it, to every rank: its bytes, the others zeros.
	var mine string
	if me == root {
		mine = fmt.Sprintf("rank %d: %v", me, err)
	}
	reason, aerr := comm.ShareText(c, root, mine, reasonBytes)
	if aerr != nil {
		return 0, &FatalError{fmt.Errorf("sharing rank %d's failure: %w", root, aerr)}
	}
	if code == codeSecondary {
		code = codeError // every rank failed waiting: nothing else to blame
	}
	return slowest, agreedError(code, reason)
}
