//go:build !mpi

package mpi

// Available says whether this binary was built with MPI (the mpi build tag).
func Available() bool { return false }
