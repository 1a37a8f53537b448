# The README's two commands: `make run` (the CLI runs a command under a lock on its
# embedded SQLite default, no server) and
# `make test` (installs the servers the tests start, then runs every test under -race,
# and smoke-tests the benchmarks module). `make matrix` measures the README's matrix.
GO ?= go
TEST_FLAGS ?= -race -count=1 -timeout 60m

.PHONY: run test vet install matrix

run:
	$(GO) run ./cmd/distlock run job -- echo "hi from under the lock"

install:
	bash scripts/install.sh

vet:
	$(GO) vet ./...

test: install vet
	$(GO) test $(TEST_FLAGS) ./...
	cd examples/ownbackend && $(GO) vet ./... && $(GO) test $(TEST_FLAGS) ./...
	$(MAKE) -C benchmarks smoke

matrix:
	$(MAKE) -C benchmarks matrix
