# longca: build, test, lint, benchmarks, and what the GPU machine needs.
GO      ?= go
BIN     ?= bin/longca
VERSION ?= $(shell git describe --always --dirty 2>/dev/null || echo dev)
# MPI support (comm/mpi) is compiled in when mpicc is on the PATH.
TAGS    ?= $(shell command -v mpicc >/dev/null 2>&1 && echo mpi)
LDFLAGS := -X main.Version=$(VERSION)

.PHONY: build run test unit integration lint bench gpu-test device cp-device cudnn-device clean

build:
	$(GO) build -tags '$(TAGS)' -ldflags '$(LDFLAGS)' -o $(BIN) ./cmd/longca

# run: the main job: the standard suite that fits this machine (a small CPU suite without a
# GPU, all 12 masks at 8K..48K with the cuda kernel on one); RUN_ARGS adds flags.
run: build
	$(BIN) run $(RUN_ARGS)

# bench: Go benchmarks of the CPU reference and the check (performance is shown here and by
# `longca kernel`, never by a timed unit test).
bench:
	$(GO) test -run '^$$' -bench . -benchtime 1x ./kernels/ref ./kernels/check

# test: everything CI checks, on a fresh machine too (scripts/test.sh installs Open MPI,
# Slurm and munge as root when missing): vet, unit tests, then the mpirun and Slurm
# integration tests, ending with `N passed, N failed`.
test:
	GO=$(GO) ./scripts/test.sh

# unit: only go test (no launcher needed).
unit: build
	$(GO) test -tags '$(TAGS)' -timeout 30m ./...

# integration: only the mpirun and Slurm part of test.
integration:
	GO=$(GO) LONGCA_SKIP_UNIT=1 ./scripts/test.sh

lint:
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "not gofmt-formatted:"; echo "$$out"; exit 1; fi
	$(GO) vet -tags '$(TAGS)' ./...

clean:
	rm -rf bin

# device: build what the GPU machine runs (it has no Go), all under bin/: the CLI, gzipped
# (bin/longca.gz, ~15 MB; its PyTorch peer worker is embedded), and the GPU test
# binaries. Carry bin in the device call; kernels/external/gpu.sh unpacks the CLI.
device:
	mkdir -p bin
	$(GO) build -ldflags '$(LDFLAGS) -s -w' -o bin/longca ./cmd/longca
	gzip -kf bin/longca
	$(GO) test -c -tags gpu -ldflags '-s -w' -o bin/cuda.test ./kernels/cuda
	$(GO) test -c -tags gpu -ldflags '-s -w' -o bin/icuda.test ./internal/cuda

# cp-device: what spmd/cp/gpu.sh runs on the GPU machine (the CP methods device-resident):
# the CLI and the GPU test binaries of spmd/cp, comm/local/cudamover and comm/nccl, in bin/,
# and the same packed as bin/cp-device.tgz (about 30 MB: carry it alone to stay under the
# device call's 64 MiB; gpu.sh unpacks it when the binaries are missing).
cp-device:
	mkdir -p bin
	$(GO) build -ldflags '$(LDFLAGS) -s -w' -o bin/longca ./cmd/longca
	$(GO) test -c -tags gpu -ldflags '-s -w' -o bin/cp.test ./spmd/cp
	$(GO) test -c -tags gpu -ldflags '-s -w' -o bin/cudamover.test ./comm/local/cudamover
	$(GO) test -c -tags gpu -ldflags '-s -w' -o bin/nccl.test ./comm/nccl
	tar -C bin -czf bin/cp-device.tgz longca cp.test cudamover.test nccl.test

# gpu-test: with Go (here) it builds the GPU test binaries (make device); without Go (the
# GPU machine) it runs them: every mask forward and backward against the CPU reference.
gpu-test:
	@if command -v $(GO) >/dev/null 2>&1; then $(MAKE) --no-print-directory device; else sh kernels/cuda/gpu.sh test; fi

# cudnn-device: what kernels/cudnn/gpu.sh runs on the GPU machine: the CLI and the cudnn
# kernel's GPU tests, packed as bin/cudnn-device.tgz (carry it alone; gpu.sh unpacks it).
cudnn-device:
	mkdir -p bin
	$(GO) build -ldflags '$(LDFLAGS) -s -w' -o bin/longca ./cmd/longca
	$(GO) test -c -tags gpu -ldflags '-s -w' -o bin/cudnn.test ./kernels/cudnn
	tar -C bin -czf bin/cudnn-device.tgz longca cudnn.test
