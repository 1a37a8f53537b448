# The README's two commands: `make run` (the CLI runs a command under a lock on its
# embedded SQLite default, no server) and
# `make test` (installs the servers the tests start, checks that every module is tidy,
# vets and lints it with staticcheck, then runs every test under -race, the external
# example module's included, the allocation guards once without -race, and
# smoke-tests the benchmarks module).
# `make matrix` measures the README's matrix; `make render` rebuilds it from
# benchmarks/results/matrix.csv without measuring.
GO ?= go
TEST_FLAGS ?= -race -count=1 -timeout 60m

.PHONY: run test vet lint tidy install matrix render explore

run:
	$(GO) run ./cmd/distlock run job -- echo "hi from under the lock"

install:
	bash scripts/install.sh

vet:
	$(GO) vet ./...

# staticcheck, pinned; go run fetches and builds it through the Go module proxy
# (then from the build cache). lint checks every module (benchmarks with and without
# its matrix tag) and fails when any finding remains, after printing them all.
STATICCHECK ?= $(GO) run honnef.co/go/tools/cmd/staticcheck@v0.8.2
lint:
	@status=0; \
	$(STATICCHECK) ./... || status=1; \
	(cd benchmarks && $(STATICCHECK) ./... && $(STATICCHECK) -tags matrix ./...) || status=1; \
	(cd examples/ownbackend && $(STATICCHECK) ./...) || status=1; \
	exit $$status

# go mod tidy -diff prints the changes tidy would make and fails when there are any.
tidy:
	$(GO) mod tidy -diff
	cd benchmarks && $(GO) mod tidy -diff
	cd examples/ownbackend && $(GO) mod tidy -diff

# The allocation guards skip themselves under -race (sync.Pool drops items at random
# then): test runs them once more without it.
test: install tidy vet lint
	$(GO) test $(TEST_FLAGS) ./...
	$(GO) test -count=1 -run '^TestAllocs' ./etcdlock/
	cd examples/ownbackend && $(GO) vet ./... && $(GO) test $(TEST_FLAGS) ./...
	$(MAKE) -C benchmarks smoke

# A long exploration of one backend: `make explore BACKEND=zklock SECONDS=120`
# runs the Explore subtest of every conformance test of ./$(BACKEND) for SECONDS
# each (make test runs 5s); SEED=n replays the schedule a failure printed.
BACKEND ?= memlock
SECONDS ?= 60
explore: install
	$(GO) test -race -count=1 -timeout 120m -run 'Conformance.*/Explore$$' -v ./$(BACKEND)/ \
		-args -conformance.explore=$(SECONDS)s $(if $(SEED),-conformance.seed=$(SEED))

matrix:
	$(MAKE) -C benchmarks matrix

render:
	$(MAKE) -C benchmarks render
