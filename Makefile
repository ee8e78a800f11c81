# longca: build, test, lint, benchmarks, and what the GPU machine needs.
GO      ?= go
BIN     ?= bin/longca
VERSION ?= $(shell git describe --always --dirty 2>/dev/null || echo dev)
# MPI support (comm/mpi) is compiled in when mpicc is on the PATH.
TAGS    ?= $(shell command -v mpicc >/dev/null 2>&1 && echo mpi)
LDFLAGS := -X main.Version=$(VERSION)

.PHONY: build run test unit integration lint bench doc-tables gpu-test device cp-device cp-gpu-test overhead-device merge-device cudnn-device clean

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

# doc-tables: rerun the command above every table of docs/simulate.md and rewrite the
# tables (TestDocTables checks the cheap ones in CI; the 512-GPU sweep takes minutes).
doc-tables:
	$(GO) test ./cmd/longca -run '^TestDocTables$$' -count=1 -timeout 60m -args -update

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
	gzip -kf bin/cuda.test
	$(GO) test -c -tags gpu -ldflags '-s -w' -o bin/icuda.test ./internal/cuda

# cp-device: what spmd/cp/gpu.sh runs on the GPU machine (longca cp over NCCL and on 8
# simulated ranks, the device mover's GPU test, comm/nccl's checks), in bin/, and the same
# packed as bin/cp-device.tgz (about 19 MB: carry it alone; gpu.sh unpacks it when the
# binaries are missing). The CP GPU tests (35 MB) are separate: make cp-gpu-test.
cp-device:
	mkdir -p bin
	$(GO) build -ldflags '$(LDFLAGS) -s -w' -o bin/longca ./cmd/longca
	$(GO) test -c -tags gpu -ldflags '-s -w' -o bin/cudamover.test ./comm/local/cudamover
	$(GO) test -c -tags gpu -ldflags '-s -w' -o bin/nccl.test ./comm/nccl
	tar -C bin -czf bin/cp-device.tgz longca cudamover.test nccl.test

# overhead-device: what spmd/cp/overhead.sh runs on the GPU machine (the CP engine's
# overhead at one rank, docs/cp-gpu.md): bin/longca, and bin/longca-before built from
# OVERHEAD_BEFORE (main just before the engine-overhead fix) for the A/B in the same call,
# packed as bin/overhead-device.tgz (carry it alone; overhead.sh unpacks it).
OVERHEAD_BEFORE ?= f781f68
overhead-device:
	mkdir -p bin
	$(GO) build -ldflags '$(LDFLAGS) -s -w' -o bin/longca ./cmd/longca
	d=$$(mktemp -d) && git archive $(OVERHEAD_BEFORE) | tar -x -C $$d && \
		(cd $$d && $(GO) build -ldflags '-s -w' -o $(CURDIR)/bin/longca-before ./cmd/longca); rc=$$?; rm -rf $$d; exit $$rc
	tar -C bin -czf bin/overhead-device.tgz longca longca-before

# merge-device: what spmd/cp/merge-bench.sh runs on the GPU machine (the ring's merges
# per step, docs/cp-gpu.md): bin/longca, bin/longca-before built from MERGE_BEFORE (main
# before the merge rewrite) for the A/B in the same call, and bin/cp.test (the helper
# kernels against their emulation), packed as bin/merge-device.tgz (carry it alone).
MERGE_BEFORE ?= 8bfcca3
merge-device:
	mkdir -p bin
	$(GO) build -ldflags '$(LDFLAGS) -s -w' -o bin/longca ./cmd/longca
	$(GO) test -c -tags gpu -ldflags '-s -w' -o bin/cp.test ./spmd/cp
	d=$$(mktemp -d) && git archive $(MERGE_BEFORE) | tar -x -C $$d && \
		(cd $$d && $(GO) build -ldflags '-s -w' -o $(CURDIR)/bin/longca-before ./cmd/longca); rc=$$?; rm -rf $$d; exit $$rc
	tar -C bin -czf bin/merge-device.tgz longca longca-before cp.test

# cp-gpu-test: spmd/cp's GPU tests (helper kernels against their emulation, every method
# on the GPU against the CPU reference): bin/cp.test, run there with -test.run '^TestGPU'.
cp-gpu-test:
	mkdir -p bin
	$(GO) test -c -tags gpu -ldflags '-s -w' -o bin/cp.test ./spmd/cp

# gpu-test: with Go (here) it builds the GPU test binaries (make device); without Go (the
# GPU machine) it runs them: every mask forward and backward against the CPU reference, for
# the kernel variant GPU_VARIANT (sm90), logs and summary in GPU_OUT (/tmp/cuda).
GPU_VARIANT ?= sm90
GPU_OUT ?= /tmp/cuda
gpu-test:
	@if command -v $(GO) >/dev/null 2>&1; then $(MAKE) --no-print-directory device; else sh kernels/cuda/gpu.sh $(GPU_OUT) test $(GPU_VARIANT); fi

# cudnn-device: what kernels/cudnn/gpu.sh runs on the GPU machine: the CLI and the cudnn
# kernel's GPU tests, packed as bin/cudnn-device.tgz (carry it alone; gpu.sh unpacks it).
cudnn-device:
	mkdir -p bin
	$(GO) build -ldflags '$(LDFLAGS) -s -w' -o bin/longca ./cmd/longca
	$(GO) test -c -tags gpu -ldflags '-s -w' -o bin/cudnn.test ./kernels/cudnn
	tar -C bin -czf bin/cudnn-device.tgz longca cudnn.test
