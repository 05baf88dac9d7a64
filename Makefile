# seglog — make run: the demo; make test: what CI runs.
GO       ?= go
PKGS     := ./...
FUZZTIME ?= 3s

.PHONY: run cluster build test vet examples clients lint console-screenshots bench bench-peers measure-hostile measure-sessions bench-micro fuzz fuzz-smoke crash jepsen clean

run: build
	./bin/seglog demo --dir ./data/demo

build:
	$(GO) build -o bin/seglog ./cmd/seglog

# cluster runs a cluster to try on this machine: three etcd members and
# three brokers in one process on loopback, its bootstrap servers and
# consoles printed; Ctrl-C stops it (seglog playground).
cluster: build
	./bin/seglog playground

# versitygw is the real S3 gateway the tiering tests start on loopback. It
# is built once per machine, in a cache outside the clone keyed by its
# version (TOOLCACHE=... to put it elsewhere).
VERSITYGW_VERSION := v1.8.0
TOOLCACHE ?= $(HOME)/.cache/seglog-tools
VERSITYGW := $(TOOLCACHE)/versitygw-$(VERSITYGW_VERSION)/versitygw
$(VERSITYGW):
	mkdir -p $(dir $@)
	GOBIN=$(dir $@) $(GO) install github.com/versity/versitygw/cmd/versitygw@$(VERSITYGW_VERSION)

# nats-server is the peer of the cluster workload's latencies at a fixed
# rate (NATS JetStream at R3), built once per machine as versitygw is.
NATS_SERVER_VERSION := v2.15.3
NATS_SERVER := $(TOOLCACHE)/nats-server-$(NATS_SERVER_VERSION)/nats-server
$(NATS_SERVER):
	mkdir -p $(dir $@)
	GOBIN=$(dir $@) $(GO) install github.com/nats-io/nats-server/v2@$(NATS_SERVER_VERSION)

# clients are the clients the broker's tests drive: from Debian, kcat
# (librdkafka), the Python client and chromium (the console's tests drive
# it headless with chromedp), and etcd-server (the fault checker runs its
# etcd members as processes); from npm, kafkajs (the lockfile in
# broker/testdata/kafkajs, installed with npm ci).
KAFKAJS_DIR := broker/testdata/kafkajs
clients:
	@command -v kcat >/dev/null && command -v chromium >/dev/null && command -v etcd >/dev/null && /usr/bin/python3 -c 'import confluent_kafka' 2>/dev/null || \
		(apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq kcat python3-confluent-kafka chromium etcd-server)
	@test $(KAFKAJS_DIR)/node_modules/.package-lock.json -nt $(KAFKAJS_DIR)/package-lock.json || \
		(cd $(KAFKAJS_DIR) && npm ci --no-audit --no-fund --loglevel=error)

# The benchmark harness's tests run every workload end to end: under -race
# they were the slowest package of make test (about 70 s against 18 s), and
# what they drive is raced by its own packages' tests; they run without it,
# beside the rest, followed there by the cluster's process tests, the fault
# checker's smoke run (a power cut followed by a controller crash, then a
# power cut, on seglog serve processes over etcd processes) and the fuzz
# smoke run (the race run is the longest part), and replica/state's randomized
# model whole (under the race detector it runs a few of its seeds). The race run builds and
# tests three packages at a time: its tests mostly wait (on processes,
# sessions, the network), each package using 50–90% of one core, and two
# at a time left the machine half idle (make test 5m10s against 4m22s).
# The longest packages first (go test starts them in the order given):
# three lanes finish together instead of one starting the longest last.
# tablet's sweeps over every byte or step (and its million records) sample
# under the race detector (tablet.Sweep) and run whole in the lane beside
# it, as does TestDocReferences (skipped under it).
TABLET_SWEEPS = TestCorruptionMatrix|TestCleanAMillionRecordsOverTenThousandKeys|TestCleanCrashAtEveryStep
RACE_SLOW = ./server ./tablet ./cmd/seglog ./tiering ./broker
RACE_PKGS = $(RACE_SLOW) $(shell $(GO) list $(PKGS) | grep -v -e '/bench$$' -e '/jepsen$$' -e '/server$$' -e '/tablet$$' -e '/cmd/seglog$$' -e '/tiering$$' -e '/broker$$')

test: vet examples clients $(VERSITYGW) $(NATS_SERVER)
	(SEGLOG_NATS_SERVER=$(NATS_SERVER) $(GO) test -count=1 ./bench ./replica/state && $(GO) test -count=1 -run '^($(TABLET_SWEEPS))$$' ./tablet && $(GO) test -count=1 -run '^TestDocReferences$$' . && $(GO) test -count=1 -run '^(TestClusterKillLoop|TestReassignCommand|TestServeExactlyOnceAcrossKills|TestServeGroupResumesAfterKill)$$' ./cmd/seglog && \
		$(MAKE) build && SEGLOG_BIN=$(CURDIR)/bin/seglog $(GO) test -count=1 ./jepsen && \
		$(MAKE) fuzz-smoke FUZZTIME=4000x) & bench=$$!; \
	SEGLOG_VERSITYGW=$(VERSITYGW) $(GO) test -race -count=1 -p 3 $(RACE_PKGS); raced=$$?; \
	wait $$bench && exit $$raced

vet:
	$(GO) vet $(PKGS)

# examples is a module of its own that embeds seglog as another program
# would (a replace of ../): it is vetted and each program run, checking
# what it reads back.
examples:
	cd examples && $(GO) vet ./... && $(GO) run ./quickstart && $(GO) run ./tiered

lint: vet
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || (gofmt -l $$(git ls-files '*.go'); exit 1)
	$(GO) run honnef.co/go/tools/cmd/staticcheck@v0.8.2 $(PKGS)
	cd examples && $(GO) run honnef.co/go/tools/cmd/staticcheck@v0.8.2 ./...

# console-screenshots drives the console in chromium (its browser tests)
# and keeps their screenshots in docs/console, the README's pictures.
console-screenshots: clients
	mkdir -p docs/console
	SEGLOG_SCREENSHOTS=$(CURDIR)/docs/console $(GO) test -count=1 -run '^TestConsole(Login)?InABrowser$$' ./server

# bench runs the harness's quick profile (about eight minutes) and rewrites
# BENCHMARKS.md and the plots in docs/bench; bench-micro runs every
# go test benchmark.
bench: $(NATS_SERVER)
	$(GO) run ./cmd/seglog bench all --quick --sizes 128,1KiB,8KiB --nats-server $(NATS_SERVER) --report docs/bench --benchmarks-md BENCHMARKS.md

# bench-peers runs the same append, read and random-read workloads against
# seglog and its Go peers (bench/peers, a module of its own) and writes
# docs/bench/peers.md.
bench-peers:
	cd bench/peers && $(GO) run ./cmd/seglog-peers -md ../../docs/bench/peers.md

# measure-hostile runs seglog serve (a separate process) under hostile
# clients — 5,000 idle connections, ten 100 MiB frames, 1,000 slowloris —
# with and without queued.max.request.bytes, and prints its memory; the
# figures go into docs/bench/hostile.md by hand.
measure-hostile:
	SEGLOG_MEASURE=1 $(GO) test -count=1 -run '^TestMeasureHostileRSS$$' -v ./cmd/seglog

# measure-sessions measures fetch request and response bytes and CPU at
# 1,000 partitions with and without an incremental fetch session; the
# figures go into docs/bench/fetch-sessions.md by hand.
measure-sessions:
	SEGLOG_MEASURE=1 $(GO) test -count=1 -run '^TestMeasureFetchSessions$$' -v ./broker

bench-micro:
	$(GO) test -run '^$$' -bench . -benchmem $(PKGS)

# fuzz runs every fuzz target for FUZZTIME each (make fuzz FUZZTIME=10m, or
# an execution count: FUZZTIME=1000000x); make test runs 4000 executions of
# each.
fuzz:
	@./scripts/fuzz.sh $(FUZZTIME)

fuzz-smoke:
	@./scripts/fuzz.sh $(FUZZTIME)

# crash runs the crash harnesses long — 400 SIGKILLs of child processes,
# power cuts through the simulator, the recovery fault loops with many
# seeds — and prints their summaries; make test runs them short.
crash: $(VERSITYGW)
	@SEGLOG_VERSITYGW=$(VERSITYGW) ./scripts/crash.sh

# jepsen runs the fault checker long: JEPSEN_FAULTS faults of every kind
# in turn (power cuts, crashes, zombies, etcd kills and quorum loss, and
# the combinations), from JEPSEN_SEED (default: the time), on three seglog
# serve processes over three etcd processes; its history, report and the
# processes' logs go to JEPSEN_DIR.
JEPSEN_FAULTS ?= 100
JEPSEN_SEED ?= 0
JEPSEN_DIR ?= $(CURDIR)/data/jepsen
jepsen: build clients
	rm -rf $(JEPSEN_DIR)
	SEGLOG_BIN=$(CURDIR)/bin/seglog $(GO) test -count=1 -timeout 60m -v -run '^TestJepsen$$' ./jepsen \
		-args -jepsen.faults=$(JEPSEN_FAULTS) -jepsen.seed=$(JEPSEN_SEED) -jepsen.dir=$(JEPSEN_DIR)

clean:
	rm -rf bin data
