# Verbatim build and test entry points. `make test` is what CI runs (.ci/run).
GO        ?= go
BIN       := bin/verbatim
PKGS_UNIT := $(shell $(GO) list ./... | grep -v /interop)
FUZZTIME  ?= 20s

.PHONY: build run test vet unit alloc interop peers bench bench-quick bench-hotpath bench-ingest bench-ingest-tls bench-cleaner bench-link bench-cluster scale link-repair-long sim-link fuzz clean

build:
	$(GO) build -o $(BIN) ./cmd/verbatim

# The etcd server (the module's own main package) for an external etcd
# cluster: scripts/cluster.sh etcd-start, make chaos.
.PHONY: etcd
etcd:
	$(GO) build -o bin/etcd go.etcd.io/etcd/server/v3

run: build
	./$(BIN) serve --listen 127.0.0.1:9092 --data-dir ./data --metrics-listen 127.0.0.1:9404

# peers first (some unit tests use wat2wasm), vet, unit tests with -race, allocation tests without -race (the race
# detector makes sync.Pool drop items), then the real-peer tests.
test: peers vet unit alloc interop

vet:
	$(GO) vet ./...
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi

unit:
	$(GO) test -race -count=1 -timeout 20m $(PKGS_UNIT)

# Allocation tests live in files built with `//go:build !race` and are named
# TestAlloc*; under -race they are not compiled at all.
alloc:
	$(GO) test -count=1 -run 'Alloc' $(PKGS_UNIT)

interop: peers build
	$(GO) test -count=1 -timeout 25m ./interop/...

# The link's failback acceptance with 2,000 records per producer step
# (make test runs it with 60) and its divergence repair; not in make test.
link-repair-long: peers
	VERBATIM_LINK_FAILBACK_RECORDS=2000 $(GO) test -count=1 -timeout 15m -run '^(TestLinkFailback|TestLinkDivergenceRepair)$$' ./interop/

# The link's deterministic simulation with more seeds and steps than make
# test runs (link/sim_test.go); SIM_SEEDS and SIM_STEPS override.
SIM_SEEDS ?= 200
SIM_STEPS ?= 30
sim-link:
	VERBATIM_LINK_SIM_SEEDS=$(SIM_SEEDS) VERBATIM_LINK_SIM_STEPS=$(SIM_STEPS) $(GO) test -count=1 -timeout 60m -run '^TestLinkSimulation$$' ./link/

# Installs the real peers idempotently (apt, Maven, pip caches).
peers:
	./interop/install.sh

# Peer benchmarks (benchmarks/README.md): Verbatim vs Apache Kafka 4.4, MM2
# vs mirror push, bench-ingest; writes benchmarks/results/<date>-<commit>.json
# and the charts. bench-quick is the same harness at smoke sizes, 1 round.
bench: peers build
	./benchmarks/mm2/install.sh
	$(GO) build -o bin/bench-ingest ./benchmarks/cmd/bench-ingest
	$(GO) test -tags peerbench -count=1 -timeout 170m -run '^TestPeerBench$$' ./benchmarks/ -args -bench.profile=full -bench.out=results
	cd benchmarks/charts && $(GO) run . -in ../results -readme ../README.md

bench-quick: peers build
	./benchmarks/mm2/install.sh
	$(GO) build -o bin/bench-ingest ./benchmarks/cmd/bench-ingest
	$(GO) test -tags peerbench -count=1 -timeout 10m -run '^TestPeerBench$$' ./benchmarks/ -args -bench.profile=quick -bench.out=tmp

# The cluster link against the reference copier (fetch + write into the
# write-only sink), mirror push and MirrorMaker 2, from one pre-loaded Kafka
# 4.4 node at 4 and 1,000 partitions (benchmarks/README.md "Cluster link");
# writes benchmarks/results/<date>-<commit>-link.json and its chart.
# BENCH_LINK_ARGS passes flags (e.g. -linkbench.rounds=5 -linkbench.mb=512,1024).
# LINK_OLD_PUSH: the revision whose `mirror push` the link's ">= 2x push" target was set against,
# timed as a fourth system (push-old) beside today's push; empty to skip it.
LINK_OLD_PUSH ?= aee9a91
bench-link: peers
	./benchmarks/mm2/install.sh
	$(GO) test -tags peerbench -count=1 -timeout 120m -run '^TestLinkBench$$' ./benchmarks/ -v -args -linkbench.out=results -linkbench.old-push=$(LINK_OLD_PUSH) $(BENCH_LINK_ARGS)
	cd benchmarks/charts && $(GO) run . -in $$(ls -t ../results/*-link.json | head -1) -readme ''

# Replicated cluster beside Kafka (benchmarks/README.md "Replicated cluster
# beside Kafka"): 3 Verbatim brokers (scripts/cluster.sh) and 3 Kafka 4.4
# brokers on this machine, acks=all at RF 3, raw generator and
# ProducerPerformance, leader SIGKILL failover; writes
# benchmarks/results/<date>-<commit>-cluster.jsonl and its charts.
# BENCH_CLUSTER_ARGS passes flags (e.g. -clusterbench.rounds=5).
bench-cluster: peers
	$(GO) test -tags peerbench -count=1 -timeout 90m -run '^TestClusterBench$$' ./benchmarks/ -v -args -clusterbench.out=results $(BENCH_CLUSTER_ARGS)
	cd benchmarks/charts && $(GO) run . -in $$(ls -t ../results/*-cluster.jsonl | head -1) -readme ''

bench-hotpath:
	$(GO) test -run '^$$' -bench '^BenchmarkHotpathReport$$' -benchtime 1x -timeout 30m ./hotpath

# Raw produce load against verbatim serve and the reference sink (JSON lines
# on stdout, also kept in benchmarks/tmp/ingest.jsonl); BENCH_INGEST_ARGS
# passes flags (e.g. -rounds 5 -batches 16384).
bench-ingest: build
	$(GO) build -o bin/bench-ingest ./benchmarks/cmd/bench-ingest
	mkdir -p benchmarks/tmp
	./bin/bench-ingest -verbatim $(BIN) -work-dir benchmarks/tmp -out benchmarks/tmp/ingest.jsonl $(BENCH_INGEST_ARGS)

# The TLS rows: plaintext, SSL and SASL_SSL (Verbatim on an SSL or SASL_SSL
# listener, SASL PLAIN per connection; the sink speaking TLS too) for 256 KiB
# and 1 MiB batches, flush never, in one run so the TLS/plaintext ratio
# compares like with like; BENCH_INGEST_ARGS adds flags.
bench-ingest-tls: build
	$(GO) build -o bin/bench-ingest ./benchmarks/cmd/bench-ingest
	mkdir -p benchmarks/tmp
	./bin/bench-ingest -verbatim $(BIN) -work-dir benchmarks/tmp -out benchmarks/tmp/ingest-tls.jsonl \
		-security plaintext,ssl,sasl_ssl -batches 262144,1048576 -flush never -codecs none $(BENCH_INGEST_ARGS)

# The log cleaner (benchmarks/README.md): 600k offset commits with and
# without the cleaner, cleaner MB/s against a sequential read+write, the
# foreground produce ratio while it cleans; JSON lines in
# benchmarks/tmp/cleaner.jsonl. BENCH_CLEANER_ARGS passes flags.
bench-cleaner: build
	$(GO) build -o bin/bench-cleaner ./benchmarks/cmd/bench-cleaner
	mkdir -p benchmarks/tmp
	./bin/bench-cleaner -verbatim $(BIN) $(BENCH_CLEANER_ARGS) | tee benchmarks/tmp/cleaner.jsonl

# The cluster link at 10,000 partitions (not in `make test`, ~15 min):
# catch-up time, idle CPU, RSS, open files, stop time (scripts/scale.sh).
scale: peers build
	./scripts/scale.sh

fuzz:
	./scripts/fuzz.sh $(FUZZTIME)

clean:
	rm -rf bin data .peers

# The fault test at its larger size (docs/cluster.md "Fault testing"):
# 30 faults (broker SIGKILL, SIGSTOP past the session timeout, etcd member
# SIGKILL) under idempotent and transactional producers and consumer
# groups, on a 3-broker cluster over an external 3-member etcd; minutes.
# `make test` runs it small. CHAOS_ARGS passes env, e.g.
# VERBATIM_CHAOS_FAULTS=30 VERBATIM_CHAOS_SEED=1.
.PHONY: chaos
chaos: peers
	$(CHAOS_ARGS) VERBATIM_CHAOS=large $(GO) test -count=1 -timeout 30m -run '^TestChaos' -v ./interop/

# franz-go's kgo suite with KGO_TEST_RF=3 against a 3-broker Verbatim cluster
# started by scripts/cluster.sh (not part of `make test` yet). KGO_SUITE_RUN /
# KGO_SUITE_SKIP pass -run / -skip patterns to the suite.
.PHONY: kgo-rf3
kgo-rf3: peers
	$(GO) test -tags kgosuite -count=1 -timeout 45m -run '^TestKgoSuiteRF3$$' -v ./interop/

# segmentio/kafka-go's own test suite against verbatim serve, in a network
# namespace of its own (root; not part of `make test`: ~4 min). The tests of
# interop/kafkago-excluded.txt (features not offered) are skipped.
# KAFKAGO_SUITE_ARGS passes flags (e.g. -run TestConn, -kafka for a baseline).
.PHONY: kafkago-suite
kafkago-suite: build
	./interop/kafkago-suite.sh $(KAFKAGO_SUITE_ARGS) $(BIN)
