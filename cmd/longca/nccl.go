package main

// The NCCL communicator registers itself as spmd's "nccl" backend (--backend nccl).
// It opens libnccl.so.2 only when chosen, so the binary still runs without NCCL.
import _ "github.com/longca/longca/comm/nccl"
