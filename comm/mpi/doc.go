// Package mpi is a comm.Comm over MPI (cgo against Open MPI's mpi.h; build tag mpi).
// Every operation is non-blocking (MPI_Isend, MPI_Iallreduce, ...) and polled with
// MPI_Testall until a deadline, so a rank that never arrives makes the others fail
// within the timeout, with an error naming the ranks that did not report: after a
// timeout each rank sends a presence note on a side communicator and waits a grace
// period for the others'. bf16 and fp16 reductions convert through fp32 on the host.
//
// Without the mpi tag the package holds only Available() == false.
package mpi
