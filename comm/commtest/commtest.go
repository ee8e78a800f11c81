// Package commtest is one table of collective tests that every comm.Comm backend must
// pass: in-process backends under go test (Run), and a backend with one rank per process
// under a launcher (RunRank, used by `longca selftest comm` under mpirun or srun). Data
// depends on the rank and is checked exactly: values are small integers, exact in bf16.
package commtest

import (
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/longca/longca/comm"
)

// Case is one test, run by every rank of a group at once. Run makes all its
// communication calls before checking anything, so a wrong value on one rank does not
// leave the others waiting.
type Case struct {
	Name string
	Run  func(c comm.Comm) error
}

// Cases is the table, in the order every rank runs it.
func Cases() []Case {
	var cs []Case
	cs = append(cs, p2pCases()...)
	cs = append(cs, collectiveCases()...)
	cs = append(cs, splitCases()...)
	cs = append(cs, counterCases()...)
	return cs
}

// RunRank runs every case on this rank's communicator, in order, with a barrier after
// each, and calls report with each case's result. It returns the number that failed.
// A case whose communication failed (a timeout, a lost peer) ends the run: later
// collectives could not match up.
func RunRank(c comm.Comm, report func(name string, err error)) int {
	failed := 0
	for _, tc := range Cases() {
		err := tc.Run(c)
		var ce *commError
		if !errors.As(err, &ce) {
			// Wrong values leave the ranks in step: meet at the barrier either way.
			if berr := c.Barrier(); berr != nil {
				err = errors.Join(err, &commError{fmt.Errorf("barrier after the case: %w", berr)})
			}
		}
		report(tc.Name, err)
		if err != nil {
			failed++
			if errors.As(err, &ce) {
				return failed
			}
		}
	}
	return failed
}

// Run runs the table on comms, one goroutine per rank, one subtest per case.
func Run(t *testing.T, comms []comm.Comm) {
	t.Helper()
	for _, tc := range Cases() {
		ok := t.Run(tc.Name, func(t *testing.T) {
			errs := make([]error, len(comms))
			var wg sync.WaitGroup
			for r, c := range comms {
				wg.Add(1)
				go func() {
					defer wg.Done()
					errs[r] = tc.Run(c)
				}()
			}
			wg.Wait()
			for r, err := range errs {
				if err != nil {
					t.Errorf("rank %d: %v", r, err)
				}
			}
		})
		if !ok {
			return // the ranks may be out of step now
		}
	}
}

// commError marks a failure of the communicator itself, as opposed to a wrong value.
type commError struct{ err error }

func (e *commError) Error() string { return e.err.Error() }
func (e *commError) Unwrap() error { return e.err }

// call wraps a communication error so that RunRank stops.
func call(what string, err error) error {
	if err == nil {
		return nil
	}
	return &commError{fmt.Errorf("%s: %w", what, err)}
}
