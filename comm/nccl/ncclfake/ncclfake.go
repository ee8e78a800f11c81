// Package ncclfake builds the fake libnccl.so.2 that the CPU tests of comm/nccl and of
// the packages above it (the CP methods over NCCL) load instead of NCCL: ranks are
// threads of one process, "device" pointers are host memory, and misuse that NCCL would
// turn into a hang or a crash (a receive from oneself with no send, a call on a
// communicator being destroyed or after it was destroyed or aborted) fails with an NCCL
// error code and is counted (fake_use_after_destroy), so a test sees it.
//
// Faults and delays come through the environment: FAKE_NCCL_ASYNC=<code> (what
// ncclCommGetAsyncError reports), FAKE_NCCL_INIT_HANG=1 (ncclCommInitRank blocks),
// FAKE_NCCL_DESTROY_US=<n> (how long ncclCommDestroy takes, default 1000).
package ncclfake

import (
	_ "embed"
	"fmt"
	"os"
	"path/filepath"

	"github.com/longca/longca/internal/hostcc"
)

// Source is the fake library's C source.
//
//go:embed testdata/fakenccl.c
var Source []byte

// Build compiles the fake into dir through internal/hostcc (the C compiler cgo uses): lib has
// ncclAlltoAll (as NCCL 2.28.3 does), noA2A does not (older NCCL, so AllToAll falls back
// to grouped sends and receives).
func Build(dir string) (lib, noA2A string, err error) {
	src := filepath.Join(dir, "fakenccl.c")
	if err := os.WriteFile(src, Source, 0o644); err != nil {
		return "", "", err
	}
	lib = filepath.Join(dir, "libfakenccl.so")
	noA2A = filepath.Join(dir, "libfakenccl-noa2a.so")
	for out, flags := range map[string][]string{lib: {"-DWITH_ALLTOALL"}, noA2A: nil} {
		if err := hostcc.SharedLibrary(out, src, append([]string{"-Wl,-Bsymbolic", "-lpthread"}, flags...)...); err != nil {
			return "", "", fmt.Errorf("building the fake NCCL: %w", err)
		}
	}
	return lib, noA2A, nil
}
