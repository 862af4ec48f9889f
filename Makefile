# leader-sidecar: build and test.
#
#   make run    run a sidecar on ./leader-sidecar.db (no cluster needed)
#   make image  the images for linux/amd64 and linux/arm64 as OCI archives
#               in bin/image, without a container engine (hack/image.sh)
#   make release VERSION=vX.Y.Z
#               binaries, images, charts and SHA256SUMS in dist/
#               (hack/release.sh; hack/set-version.sh sets the charts' version)
#   make unit   vet, then the unit tests of pkg/ and cmd/ with the race
#               detector and -short (the long race tests run fewer rounds):
#               no kube-apiserver, no database servers, no Helm
#   make test   vet, then every test with the race detector, including the
#               end-to-end tests, those on a real kube-apiserver (envtest
#               binaries are built once into ~/.cache, minutes when cold) and
#               those on PostgreSQL, MariaDB, Redis and etcd and the alert
#               tests on promtool (installed from Debian's packages if
#               missing, etcd with the envtest binaries; see
#               hack/test-deps.sh), then a short run of the
#               election's simulator (make sim)
#   make test-build
#               compiles what make test runs without running it
#   make mutants
#               seeds each bug of the catalogues (mutants.txt beside the
#               code) into a copy of the repository and fails unless the
#               check meant to catch it does; not part of make test, run
#               before a release (hack/mutants)
#   make jepsen the set test under faults (internal/settest) on SQLite,
#               PostgreSQL and a Lease, with the guard and without it,
#               the nemesis running JEPSEN_DURATION (5m); not part of
#               make test

GO      ?= go
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo devel)
LDFLAGS := -s -w -X main.version=$(VERSION)

.PHONY: all build image release run unit test test-build test-build-race test-build-cross vet deps sim mutants jepsen clean

all: build

build:
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags "$(LDFLAGS)" -o bin/sidecar ./cmd/sidecar

# The images, multi-platform, as OCI image layout archives: their paths are
# printed. Reproducible: building twice gives the same digests.
image:
	@VERSION="$(VERSION)" LDFLAGS="$(LDFLAGS)" hack/image.sh bin/image

# Everything a release publishes, in dist/. VERSION must be vX.Y.Z and equal
# the charts' appVersion (hack/set-version.sh VERSION sets it).
release:
	@VERSION="$(VERSION)" LDFLAGS="$(LDFLAGS)" hack/release.sh dist

run:
	$(GO) run ./cmd/sidecar

# pkg/fence is a Go module of its own (standard library only, so that
# applications importing it pull nothing else): ./... at the top does not
# enter it, so each step runs there too.
FENCE := pkg/fence

# vet and the build use the flags of the binaries the tests and the release
# build (CGO_ENABLED=0 -trimpath), so the packages they compile are the
# same ones, compiled once into the build cache.
vet:
	@unformatted=$$(gofmt -l cmd pkg e2e internal examples hack); \
	  if [ -n "$$unformatted" ]; then echo "gofmt needed:"; echo "$$unformatted"; exit 1; fi
	CGO_ENABLED=0 $(GO) vet -trimpath ./...
	CGO_ENABLED=0 $(GO) build -trimpath ./...
	cd $(FENCE) && CGO_ENABLED=0 $(GO) vet -trimpath ./... && CGO_ENABLED=0 $(GO) build -trimpath ./...
	@deps=$$(cd $(FENCE) && $(GO) list -deps -test -f '{{if not .Standard}}{{.ImportPath}}{{end}}' ./... | \
	  grep -v '^github.com/leader-sidecar/leader-sidecar/pkg/fence'); \
	  if [ -n "$$deps" ]; then echo "$(FENCE) must import the standard library only, not:"; echo "$$deps"; exit 1; fi

deps:
	@hack/test-deps.sh

# The packages of pkg/ and cmd/ whose tests need no envtest kube-apiserver
# and no PostgreSQL server (those importing internal/kubetest,
# controller-runtime's envtest or internal/pgtest are left to make test).
UNIT_PKGS = $(shell $(GO) list -f '{{.ImportPath}} {{join .TestImports " "}} {{join .XTestImports " "}}' ./pkg/... ./cmd/... | \
	grep -v -e '/internal/kubetest' -e 'controller-runtime/pkg/envtest' -e '/internal/pgtest' | cut -d' ' -f1)

unit: vet
	cd $(FENCE) && $(GO_TEST) -short ./...
	$(GO_TEST) -short $(UNIT_PKGS)

# The packages whose tests take longest, in the order given (measured warm:
# 293, 219, 127, 144, 67, 62, 57 and 56 s; cold, e2e/packaging's
# cross-compiles make it 317 s): go test starts the packages in the order
# given, TEST_PACKAGES at a time, so that none of them is left to run
# alone at the end while a core idles.
SLOW_PKGS = ./e2e/apiserver ./e2e/chart ./e2e/packaging ./hack/bench \
	./pkg/backend/sqlite ./e2e/process ./pkg/backend/lease ./e2e/alerts

# Test packages run at once: one more than the cores, since the slowest
# packages spend much of their time waiting on lease timings and processes
# (docs/development.md has the measurements).
TEST_PACKAGES ?= $(shell echo $$(($$(nproc) + 1)))

# How make test, make unit and make test-build run go test: the flags that
# decide how test binaries compile are here once, so make test-build
# compiles what the other two then find in the build cache.
GO_TEST = $(GO) test -race -count=1

test: vet deps
	cd $(FENCE) && $(GO_TEST) ./...
	KUBEBUILDER_ASSETS="$$(hack/envtest-binaries.sh | tail -1)" $(GO_TEST) -p $(TEST_PACKAGES) -timeout 30m $(SLOW_PKGS) ./...
	$(MAKE) sim

# make test-build: compiles what make test runs, and runs none of it: every
# test binary with the race detector (go test -exec true links each one
# and starts true in its place), and the binaries the packaging tests
# cross-compile (hack/release.sh's linux/arm64 and darwin ones, and
# hack/image.sh's linux/arm64 worker). make test then finds their packages
# in the build cache. .ci/run runs it at the lowest priority beside make
# test-cluster, whose tests mostly wait on Pods and leases, with make -j 2:
# the two halves have no package in common, and together they keep both
# cores busy where one go build waits on a link or a large package.
test-build: test-build-race test-build-cross

test-build-race:
	cd $(FENCE) && $(GO_TEST) -exec true ./...
	$(GO_TEST) -exec true ./...

test-build-cross:
	for p in linux/arm64 darwin/amd64 darwin/arm64; do \
	  GOOS=$${p%/*} GOARCH=$${p#*/} CGO_ENABLED=0 $(GO) build -trimpath -o /dev/null ./cmd/sidecar || exit; \
	done
	GOOS=linux GOARCH=arm64 CGO_ENABLED=0 $(GO) build -trimpath -o /dev/null ./examples/worker

# The election under the deterministic simulator: SIM_SEEDS schedules of
# faults, every invariant checked at every instant (internal/sim).
SIM_SEEDS ?= 10000
sim:
	CGO_ENABLED=0 $(GO) run -trimpath ./hack/sim -seeds $(SIM_SEEDS)

# make mutants: every seeded bug of the catalogues (the mutants.txt files
# beside the code they mutate) in a copy of the repository, each against
# the check meant to catch it, after every check passed on the copy
# unmodified. MUTANTS=id,id runs only those.
MUTANTS ?=
mutants:
	CGO_ENABLED=0 $(GO) run -trimpath ./hack/mutants $(if $(MUTANTS),-only $(MUTANTS))

# make jepsen: the set test (internal/settest) on SQLite and PostgreSQL
# (e2e/process) and on a Lease (e2e/apiserver), each guarded and as its
# unsafe baseline, with the nemesis running JEPSEN_DURATION instead of
# make test's 12 s; JEPSEN_SEED sets the seed. One package at a time.
JEPSEN_DURATION ?= 5m
JEPSEN_SEED ?=
jepsen:
	LEADER_SIDECAR_JEPSEN_DURATION=$(JEPSEN_DURATION) LEADER_SIDECAR_JEPSEN_SEED=$(JEPSEN_SEED) \
	KUBEBUILDER_ASSETS="$$(hack/envtest-binaries.sh | tail -1)" \
	  $(GO) test -count=1 -v -p 1 -timeout 2h -run '^Test(Lease)?(FencedSetUnderFaults|UnfencedSetLosesWrites)$$' ./e2e/process/ ./e2e/apiserver/

clean:
	rm -rf bin dist

# make test-cluster: the tests that run the product as Pods (e2e/cluster, build
# tag cluster) on a one-node cluster that hack/cluster.sh starts before them
# and removes after them. Not part of make test. Compiled with make vet's
# flags (CGO_ENABLED=0, -trimpath), whose build already holds every package
# it imports.
.PHONY: test-cluster
test-cluster:
	@kubeconfig=$$(hack/cluster.sh up | tail -1) && \
	  LEADER_SIDECAR_KUBECONFIG=$$kubeconfig CGO_ENABLED=0 $(GO) test -trimpath -tags cluster -count=1 -parallel 4 -timeout 20m ./e2e/cluster/...; \
	  rc=$$?; hack/cluster.sh down; exit $$rc

# make bench-rollouts: BenchmarkRollouts (e2e/cluster) on a one-node
# cluster that hack/cluster.sh starts before it and removes after it:
# moves of leadership per rollout, before and after issue 38, printed as a
# markdown table (docs/benchmarks.md, "Rollouts on the one-node cluster").
# Not part of make test-cluster. ROLLOUTS per cell (10); ROLLOUT_CELLS a
# -bench pattern of the cells, e.g. 'Rollouts/replicas=3/' (every cell:
# about 50 minutes on 2 busy cores).
ROLLOUTS ?= 10
ROLLOUT_CELLS ?= Rollouts
.PHONY: bench-rollouts
bench-rollouts:
	@kubeconfig=$$(hack/cluster.sh up | tail -1) && \
	  LEADER_SIDECAR_KUBECONFIG=$$kubeconfig LEADER_SIDECAR_ROLLOUTS=$(ROLLOUTS) CGO_ENABLED=0 $(GO) test -trimpath -tags cluster -count=1 \
	    -run '^$$' -bench '$(ROLLOUT_CELLS)' -benchtime 1x -timeout 4h ./e2e/cluster/; \
	  rc=$$?; hack/cluster.sh down; exit $$rc
