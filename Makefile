# longca: build, test, lint, benchmarks, and what the GPU machine needs.
GO      ?= go
BIN     ?= bin/longca
VERSION ?= $(shell git describe --always --dirty 2>/dev/null || echo dev)
# MPI support (comm/mpi) is compiled in when mpicc is on the PATH.
TAGS    ?= $(shell command -v mpicc >/dev/null 2>&1 && echo mpi)
LDFLAGS := -X main.Version=$(VERSION)

.PHONY: build test lint bench gpu-test device clean

build:
	$(GO) build -tags '$(TAGS)' -ldflags '$(LDFLAGS)' -o $(BIN) ./cmd/longca

test: build
	$(GO) test -tags '$(TAGS)' -timeout 30m ./...

lint:
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "not gofmt-formatted:"; echo "$$out"; exit 1; fi
	$(GO) vet -tags '$(TAGS)' ./...

clean:
	rm -rf bin
