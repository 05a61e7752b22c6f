# rocelab — the two commands that are the contract: `make demo` and `make test`.
SHELL      := /bin/bash
GO         ?= go
BIN        := bin
OUT        := out
GOBIN      := $(CURDIR)/$(BIN)/tools
STATICCHECK_VERSION := v0.8.2
STATICCHECK := $(GOBIN)/staticcheck
FUZZTIME   ?= 30s
# how long the fuzzer may minimize each new input it finds; go test's default (60 s)
# froze the exec count for a minute per find, which looked like a stalled target
FUZZMINIMIZE ?= 5s
BENCHTIME  ?= 1s
PKGS       := ./...
# the sample apps, built next to bin/rocelab (rocelab exec puts that directory on PATH)
APPS       := ./cmd/rc_pingpong ./cmd/uc_pingpong ./cmd/ud_pingpong ./cmd/srq_pingpong \
              ./cmd/write_bw ./cmd/read_bw ./cmd/send_bw ./cmd/atomic_bw ./cmd/send_lat ./cmd/write_lat ./cmd/read_lat \
              ./cmd/cmatose
# the kernel rxe VM of the interop suite (tools/rxe-peer)
RXE_CACHE  ?= /var/cache/rxe-peer
# the real RDMA stack that rocelab's libibverbs.so.1 runs (docs/libibverbs.md)
RDMA_PACKAGES := libibverbs-dev librdmacm-dev ibverbs-utils perftest rdmacm-utils
# what RDMA people bring beyond those tools, run unmodified in lab hosts: rdma-core's own
# test suite (pyverbs), UCX, Open MPI (with mpicc for the MPI test program), and the TCP
# programs librspreload.so runs over rsockets
RDMA_SOFTWARE := python3-pyverbs ucx-utils openmpi-bin libopenmpi-dev iperf3 socat
# what lab tests run beside them: ping in the hosts, ethtool on the multi-machine test's
# underlay (docs/multi-machine.md)
LAB_TOOLS := iputils-ping ethtool
# the lab `make lab` starts
LAB_TOPO   ?= topologies/two-hosts.yaml
LAB        ?= $(basename $(notdir $(LAB_TOPO)))

export PATH := $(GOBIN):$(PATH)

.PHONY: k8s-check all build test lint pgo vet fmt-check staticcheck importcheck doccheck tidy-check unit bench fuzz demo deps clean lab down interop

all: build

## build: compile every package and the rocelab binary into bin/, and rocelab's
## libibverbs.so.1 and librdmacm.so.1 into bin/lib (rocelab exec puts that directory on
## LD_LIBRARY_PATH)
build: libibverbs librdmacm
	$(GO) build $(PKGS)
	$(GO) build -o $(BIN)/rocelab ./cmd/rocelab
	$(GO) build -o $(BIN)/ $(APPS)

## libibverbs: the drop-in libibverbs.so.1 (C, docs/libibverbs.md); needs libibverbs-dev's
## headers, which deps-system installs as root
LIBIBVERBS_SRC := $(wildcard libibverbs/*.c libibverbs/*.h) libibverbs/libibverbs.map
.PHONY: libibverbs
libibverbs: $(BIN)/lib/libibverbs.so.1
$(BIN)/lib/libibverbs.so.1: $(LIBIBVERBS_SRC)
	@if [ -f /usr/include/infiniband/verbs.h ]; then \
	  mkdir -p $(BIN)/lib && ./libibverbs/build.sh $@; \
	else echo "libibverbs: /usr/include/infiniband/verbs.h is missing (libibverbs-dev; make deps-system as root installs it): not built"; fi

## librdmacm: the drop-in librdmacm.so.1 over it (C, docs/rdmacm.md); needs librdmacm-dev's
## headers
LIBRDMACM_SRC := $(wildcard librdmacm/*.c librdmacm/*.h) librdmacm/librdmacm.map libibverbs/private.h
.PHONY: librdmacm
librdmacm: $(BIN)/lib/librdmacm.so.1
$(BIN)/lib/librdmacm.so.1: $(LIBRDMACM_SRC) $(BIN)/lib/libibverbs.so.1
	@if [ -f /usr/include/rdma/rdma_cma.h ] && [ -f $(BIN)/lib/libibverbs.so.1 ]; then \
	  ./librdmacm/build.sh $@; \
	else echo "librdmacm: /usr/include/rdma/rdma_cma.h (librdmacm-dev) or libibverbs.so.1 is missing: not built"; fi

## deps: Go modules and the tools the suite needs (installed, never assumed)
deps: $(STATICCHECK)
	$(GO) mod download

$(STATICCHECK):
	GOBIN=$(GOBIN) $(GO) install honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION)

## lint: gofmt, go vet, staticcheck, the import directions of docs/architecture.md, a tidy go.mod,
## a doc comment on every exported identifier
lint: fmt-check vet staticcheck importcheck tidy-check doccheck

fmt-check:
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi

vet:
	$(GO) vet $(PKGS)

staticcheck: $(STATICCHECK)
	$(STATICCHECK) $(PKGS)

importcheck:
	$(GO) run ./tools/importcheck

# every package documents every exported identifier
doccheck:
	$(GO) run ./tools/doccheck -enforce ./... ./...

# go mod tidy -diff prints what tidying would change and fails if anything would
tidy-check:
	@$(GO) mod tidy -diff || { echo "go.mod/go.sum are not tidy: run go mod tidy"; exit 1; }

# issue 21's real-time incasts, in a lab and in process: run alone, one package at a
# time, since their figures are the share of two cores the loop gets
REALTIME_ALONE := ^(TestLabRealTimeIncastTargets|TestLabRealTimeIncastTwin|TestIncastTwinRealTime)$$

## unit: the Go test suite with the race detector (fuzz seed corpora included), then
## without it what skips under -race: the real-time tests (issue 21's incasts in a step
## of their own) and the rxe interop suite (the detector slows their loops below real
## time), the data path's allocation tests (it allocates), the verbs-socket flood's
## memory check (its shadow memory grows) and the experiments' golden output hashes
## (16 s under the detector, and it changes no output)
unit:
	@# -timeout: the race pass of cmd/rocelab alone takes 8-9 minutes on 2 idle cores, and
	@# a busy machine took it past go test's default 10 (TestUdpong under the race detector)
	$(GO) test -race -count=1 -timeout 30m $(PKGS)
	$(GO) test -count=1 -run 'RealTime|^TestGoldenOutputs$$' -skip '$(REALTIME_ALONE)' ./experiment/ ./cmd/rocelab/
	$(GO) test -p 1 -count=1 -v -run '$(REALTIME_ALONE)' ./experiment/ ./cmd/rocelab/
	@# -v streams each interop case as it passes or fails (76 cases, ~7 min in all)
	$(GO) test -count=1 -timeout 30m -v -run 'TestInteropRXE' ./conformance/interop/
	$(GO) test -count=1 -run '^(TestDataPathAllocs|TestDataPathAllocatesNothing|TestFlood.*)$$' ./rnic/ ./rnic/verbs/
	$(GO) test -count=1 -run 'All$$' ./apps/perftest/

## test: everything CI checks
test: deps deps-system build lint unit

## bench: benchmarks as a table on stdout and JSON in out/bench.json, built with the
## profile rocelab is built with (cmd/rocelab/default.pgo), so that they measure its code
bench: build
	@mkdir -p $(OUT)
	$(GO) test -pgo=$(CURDIR)/cmd/rocelab/default.pgo -run '^$$' -bench . -benchmem -benchtime $(BENCHTIME) $(PKGS) | tee $(OUT)/bench.txt
	$(GO) run ./tools/benchreport -in $(OUT)/bench.txt -json $(OUT)/bench.json

## pgo: profile rocelab's virtual-time workloads — the 16:1 incast of 50 MB a sender
## under --preset ns3 (HPCC hops) and the 320-host fat tree's first 300 µs (INT-MD) — and
## merge the profiles into cmd/rocelab/default.pgo, with which go build optimizes rocelab
## (profile-guided optimization; docs/performance.md). Run it after changing the data path.
pgo: build
	@mkdir -p $(OUT)/pgo
	./$(BIN)/rocelab --cpuprofile $(OUT)/pgo/incast.prof experiment incast --senders 16 --flow-size 50MB --preset ns3 --json >/dev/null
	./$(BIN)/rocelab --cpuprofile $(OUT)/pgo/mix.prof experiment mix --topology fat-tree-3tier --link-rate 100G --load 0.3 --duration 300us --json >/dev/null
	$(GO) tool pprof -proto $(OUT)/pgo/incast.prof $(OUT)/pgo/mix.prof > cmd/rocelab/default.pgo

## fuzz: run every fuzz target for FUZZTIME each (make fuzz FUZZTIME=10m)
fuzz:
	@set -e; for pkg in $$($(GO) list $(PKGS)); do \
	  for t in $$($(GO) test -list '^Fuzz' $$pkg | grep '^Fuzz' || true); do \
	    echo "== $$pkg $$t ($(FUZZTIME))"; \
	    $(GO) test -run '^$$' -fuzz "^$$t\$$" -fuzztime $(FUZZTIME) -fuzzminimizetime $(FUZZMINIMIZE) $$pkg; \
	  done; \
	done

## demo: the main job, end to end
demo: build
	./scripts/demo.sh

## lab: start the lab LAB_TOPO describes (root); make down stops it
lab: build
	./$(BIN)/rocelab up -f $(LAB_TOPO) --name $(LAB)

down:
	./$(BIN)/rocelab down $(LAB)

clean:
	rm -rf $(BIN) $(OUT)

## deps-system: what the independent checks use — tshark (decodes rocelab's output), the
## real RDMA stack (rdma-core's libibverbs headers and tools, perftest), promtool (Debian's
## prometheus package: checks the metrics exposition), headless chromium (loads the live web
## view) and, as root, the kernel rxe VM of the interop suite (QEMU + Debian packages, ~30 s once)
.PHONY: deps-system wireshark
deps-system:
	@if [ -f /usr/include/infiniband/verbs.h ] && command -v ib_write_bw >/dev/null && command -v ibv_devinfo >/dev/null && command -v rping >/dev/null; then :; \
	elif [ "$$(id -u)" = 0 ]; then apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y $(RDMA_PACKAGES); \
	else echo "deps-system: $(RDMA_PACKAGES) are missing and installing them needs root; the libibverbs tests will skip"; fi
	@if dpkg -s $(RDMA_SOFTWARE) >/dev/null 2>&1; then :; \
	elif [ "$$(id -u)" = 0 ]; then apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends $(RDMA_SOFTWARE); \
	else echo "deps-system: $(RDMA_SOFTWARE) are missing and installing them needs root; the rdma-core suite, UCX and MPI tests will skip"; fi
	@if dpkg -s $(LAB_TOOLS) >/dev/null 2>&1; then :; \
	elif [ "$$(id -u)" = 0 ]; then apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends $(LAB_TOOLS); \
	else echo "deps-system: $(LAB_TOOLS) are missing and installing them needs root; the tests that ping and the multi-machine test will skip"; fi
	@if command -v tshark >/dev/null; then :; \
	elif [ "$$(id -u)" = 0 ]; then apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y tshark; \
	else echo "deps-system: tshark is missing and installing it needs root; the tshark checks will skip"; fi
	@if command -v promtool >/dev/null; then :; \
	elif [ "$$(id -u)" = 0 ]; then apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends prometheus; \
	else echo "deps-system: promtool is missing and installing it needs root; the metrics test skips its promtool check"; fi
	@if command -v chromium >/dev/null; then :; \
	elif [ "$$(id -u)" = 0 ]; then apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends chromium; \
	else echo "deps-system: chromium is missing and installing it needs root; the web view test will skip"; fi
	@if [ "$$(id -u)" = 0 ]; then RXE_CACHE=$(RXE_CACHE) ./tools/rxe-peer/build.sh; \
	else echo "deps-system: the rxe interop VM needs root to build and run; the interop suite will skip"; fi

## interop: rocelab's apps against the Linux kernel's rxe and rdma-core/perftest in a
## QEMU VM, through a lab (root; make test runs it too when root). Captures in out/interop.
interop: deps-system
	@mkdir -p $(OUT)/interop
	INTEROP_OUT=$(CURDIR)/$(OUT)/interop $(GO) test -count=1 -timeout 30m -v -run TestInteropRXE ./conformance/interop/

## wireshark: install rocelab's Lua dissectors into ~/.local/lib/wireshark/plugins
wireshark: build
	./$(BIN)/rocelab wireshark install

## k8s-check (opt-in, not part of test): apply `rocelab k8s render`'s objects to a real
## kube-apiserver (built once from k8s.io/kubernetes, ~9 min) on Debian's etcd, check them
## as stored, delete them (docs/kubernetes.md)
k8s-check: build
	scripts/k8s-check.sh
