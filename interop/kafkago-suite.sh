#!/usr/bin/env bash
# Runs segmentio/kafka-go's own test suite (from the Go module cache)
# against `verbatim serve`, inside a network namespace of its own.
#
# usage: interop/kafkago-suite.sh [-run REGEX] [-skip REGEX] [-all] [-kafka]
#                                 [-timeout DURATION] [-total-timeout DURATION]
#                                 [-v] [VERBATIM_BINARY]
#   VERBATIM_BINARY  the verbatim binary to serve with (default bin/verbatim)
#   -kafka           serve with Apache Kafka 4.4 (.peers/kafka/lib) instead
#                    (a baseline; the binary, if given, is not used)
#   -run             go test -run pattern (default: all tests)
#   -skip            go test -skip pattern, added to the exclusion list
#   -all             ignore interop/kafkago-excluded.txt (run every test)
#   -timeout         go test -timeout per package (default 10m)
#   -total-timeout   bound of the whole run, broker included (default 25m)
#   -v               stream the suite's full output (default: only the summary)
#
# kafka-go's tests dial fixed addresses (localhost:9092, the SASL listener
# localhost:9093), so the broker and the tests run in a new network, PID
# and mount namespace (unshare, as root) where Verbatim owns 127.0.0.1:9092
# and advertises localhost:9092; nothing on the host's ports is touched and
# everything in the namespace dies with it. The tests of
# interop/kafkago-excluded.txt (features Verbatim does not offer, one reason
# per test) are skipped. Prints "kafkago-suite: N passed, N failed, N
# skipped" (top-level tests), then the excluded and subtest counts, the
# failing names, and keeps the full log in .peers/kafkago-suite.log and the
# broker's in .peers/kafkago-broker.log; exits with go test's status.
set -euo pipefail

# v0.4.50 is the tag on commit 3ce2979 (the proxy serves it by tag only).
KAFKAGO_VERSION="v0.4.50"
KAFKAGO_COMMIT="3ce2979"
KAFKA_VERSION_ENV="3.7.0"

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
EXCLUDED="$ROOT/interop/kafkago-excluded.txt"
LOG="$ROOT/.peers/kafkago-suite.log"
BROKER_LOG="$ROOT/.peers/kafkago-broker.log"
. "$ROOT/interop/lib.sh"

# regex_quote escapes a test name for go test's -run/-skip patterns.
regex_quote() { printf '%s' "$1" | sed 's/[][\\.^$*+?(){}|]/\\&/g'; }

# skip_pattern turns the exclusion list into one -skip pattern: each entry
# TestName[/Sub[/Sub]] becomes ^TestName$/^Sub$, alternatives joined by |.
skip_pattern() {
	local pat="" name elems e alt
	while read -r name _; do
		case "$name" in '' | '#'*) continue ;; esac
		IFS=/ read -r -a elems <<<"$name"
		alt=""
		for e in "${elems[@]}"; do
			alt+="${alt:+/}^$(regex_quote "$e")\$"
		done
		pat+="${pat:+|}$alt"
	done <"$EXCLUDED"
	printf '%s' "$pat"
}

excluded_count() { grep -cvE '^[[:space:]]*(#|$)' "$EXCLUDED" || true; }

# ---- inside the namespace: start the broker, run the suite, stop it ----
if [ "${1:-}" = "--inside" ]; then
	shift
	BIN="$1"
	SRC="$2"
	shift 2
	ip link set lo up
	data="$(mktemp -d)"
	if [ "$BIN" = kafka ]; then
		# Apache Kafka 4.4 from .peers/kafka/lib (make peers): one KRaft
		# node, the controller on 127.0.0.1:9095 (9093 is the suite's
		# SASL address), otherwise Kafka's defaults as the suite's docker
		# setup has them.
		lib="$ROOT/.peers/kafka/lib"
		cat >"$data/server.properties" <<-PROPS
			process.roles=broker,controller
			node.id=1
			controller.quorum.voters=1@127.0.0.1:9095
			listeners=PLAINTEXT://127.0.0.1:9092,CONTROLLER://127.0.0.1:9095
			advertised.listeners=PLAINTEXT://localhost:9092
			controller.listener.names=CONTROLLER
			inter.broker.listener.name=PLAINTEXT
			listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT
			log.dirs=$data/data
			auto.create.topics.enable=true
			delete.topic.enable=true
			message.max.bytes=200000000
			offsets.topic.replication.factor=1
			transaction.state.log.replication.factor=1
			transaction.state.log.min.isr=1
			share.coordinator.state.topic.replication.factor=1
			share.coordinator.state.topic.min.isr=1
		PROPS
		jvm=(-Xms768m -Xmx768m -XX:+UseG1GC -XX:ParallelGCThreads=1 -XX:ConcGCThreads=1 -Djava.awt.headless=true -Dlog4j2.level=warn)
		java "${jvm[@]}" -cp "$lib/*" kafka.tools.StorageTool format -t "$(cat /proc/sys/kernel/random/uuid | tr -d - | head -c 22)" \
			-c "$data/server.properties" >"$BROKER_LOG" 2>&1 ||
			{ echo "kafkago-suite: formatting Kafka failed:" >&2; tail -n 20 "$BROKER_LOG" >&2; exit 2; }
		java "${jvm[@]}" -cp "$lib/*" kafka.Kafka "$data/server.properties" >>"$BROKER_LOG" 2>&1 &
		wait_s=120
	else
		"$BIN" serve --listen 127.0.0.1:9092 --advertised-listener localhost:9092 \
			--data-dir "$data/data" --auto-create-topics >"$BROKER_LOG" 2>&1 &
		wait_s=10
	fi
	broker=$!
	up=0
	for _ in $(seq 1 $((wait_s * 10))); do
		if (exec 3<>/dev/tcp/127.0.0.1/9092) 2>/dev/null; then up=1; break; fi
		kill -0 "$broker" 2>/dev/null || break
		sleep 0.1
	done
	if [ "$up" != 1 ]; then
		echo "kafkago-suite: the broker did not listen on 127.0.0.1:9092 in $wait_s s:" >&2
		tail -n 20 "$BROKER_LOG" >&2
		exit 2
	fi
	set +e
	(cd "$SRC" && GOWORK=off GOFLAGS=-mod=mod GOPROXY=off KAFKA_VERSION="$KAFKA_VERSION_ENV" \
		go test "${@}")
	status=$?
	set -e
	kill -TERM "$broker" 2>/dev/null || true
	for _ in $(seq 1 300); do
		kill -0 "$broker" 2>/dev/null || break
		sleep 0.1
	done
	rm -rf "$data"
	exit "$status"
fi

# ---- outside: fetch and build the suite, then enter the namespace ----
RUN=""
SKIP=""
ALL=0
KAFKA=0
TIMEOUT=10m
TOTAL=25m
VERBOSE=0
BIN=""

usage() { usage_lines 5 16; }

while [ $# -gt 0 ]; do
	case "$1" in
	-run) RUN="${2:?-run needs a pattern}"; shift 2 ;;
	-skip) SKIP="${2:?-skip needs a pattern}"; shift 2 ;;
	-all) ALL=1; shift ;;
	-kafka) KAFKA=1; shift ;;
	-timeout) TIMEOUT="${2:?-timeout needs a duration}"; shift 2 ;;
	-total-timeout) TOTAL="${2:?-total-timeout needs a duration}"; shift 2 ;;
	-v) VERBOSE=1; shift ;;
	-h | --help) usage ;;
	-*) echo "kafkago-suite.sh: unknown flag $1" >&2; usage ;;
	*)
		[ -z "$BIN" ] || { echo "kafkago-suite.sh: more than one binary" >&2; usage; }
		BIN="$1"; shift ;;
	esac
done
if [ "$KAFKA" = 1 ]; then
	[ -z "$BIN" ] || echo "kafkago-suite: -kafka: $BIN is not used"
	BIN=kafka
	command -v java >/dev/null 2>&1 && ls "$ROOT/.peers/kafka/lib/"kafka_2.13-*.jar >/dev/null 2>&1 ||
		{ echo "kafkago-suite.sh: java or the Kafka jars are missing: run \`make peers\`" >&2; exit 2; }
	label="Apache Kafka $(basename "$(ls "$ROOT/.peers/kafka/lib/"kafka_2.13-*.jar | head -n 1)" .jar | sed 's/^kafka_2.13-//')"
else
	BIN="${BIN:-$ROOT/bin/verbatim}"
	case "$BIN" in /*) ;; *) BIN="$PWD/$BIN" ;; esac
	[ -x "$BIN" ] || { echo "kafkago-suite.sh: $BIN is not an executable (make build)" >&2; exit 2; }
	label="$("$BIN" version 2>/dev/null | head -n 1 || echo verbatim)"
fi
command -v go >/dev/null 2>&1 || { echo "kafkago-suite.sh: go not found" >&2; exit 2; }
command -v unshare >/dev/null 2>&1 && command -v ip >/dev/null 2>&1 ||
	{ echo "kafkago-suite.sh: needs unshare (util-linux) and ip (iproute2)" >&2; exit 2; }
[ "$(id -u)" = 0 ] || { echo "kafkago-suite.sh: needs root for the network namespace" >&2; exit 2; }
mkdir -p "$ROOT/.peers"

# The module zip (with its _test.go files) lands in the module cache once;
# its dependencies are fetched and every test binary compiled here, outside
# the namespace (which has no network), without running any test.
SRC="$(GOWORK=off GOFLAGS=-mod=mod go mod download -json "github.com/segmentio/kafka-go@$KAFKAGO_VERSION" |
	sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')"
[ -n "$SRC" ] && [ -f "$SRC/go.mod" ] || { echo "kafkago-suite.sh: go mod download gave no module directory" >&2; exit 2; }
(cd "$SRC" && GOWORK=off GOFLAGS=-mod=mod go test -count=1 -exec /bin/true ./... >/dev/null) ||
	{ echo "kafkago-suite.sh: building kafka-go's tests failed" >&2; exit 2; }

skip=""
nexcluded=0
if [ "$ALL" = 0 ]; then
	skip="$(skip_pattern)"
	nexcluded="$(excluded_count)"
fi
[ -n "$SKIP" ] && skip="${skip:+$skip|}$SKIP"
# -p 1: one package at a time against the one broker.
args=(-count=1 -v -p 1 -timeout "$TIMEOUT")
[ -n "$RUN" ] && args+=(-run "$RUN")
[ -n "$skip" ] && args+=(-skip "$skip")
args+=(./...)

echo "kafkago-suite: kafka-go $KAFKAGO_VERSION ($KAFKAGO_COMMIT) KAFKA_VERSION=$KAFKA_VERSION_ENV against $label (run='${RUN:-all}', $nexcluded excluded${SKIP:+, skip='$SKIP'})"
start=$(date +%s)
export KAFKA_VERSION_ENV BROKER_LOG
inner=(timeout --kill-after=30s "$TOTAL" unshare --net --pid --mount-proc --fork --kill-child -- "$0" --inside "$BIN" "$SRC" "${args[@]}")
run_logged "$LOG" "$VERBOSE" "${inner[@]}"
elapsed=$(($(date +%s) - start))

passed=$(count '^--- PASS: ' "$LOG")
failed=$(count '^--- FAIL: ' "$LOG")
skipped=$(count '^--- SKIP: ' "$LOG")
subpassed=$(count '^[[:space:]]+--- PASS: ' "$LOG")
subfailed=$(count '^[[:space:]]+--- FAIL: ' "$LOG")
subskipped=$(count '^[[:space:]]+--- SKIP: ' "$LOG")
if [ "$failed" -gt 0 ] || [ "$subfailed" -gt 0 ]; then
	echo "failed tests:"
	grep -E '^[[:space:]]*--- FAIL: ' "$LOG" | sed -E 's/^([[:space:]]*)--- FAIL: /  \1/'
fi
if [ "$status" -ne 0 ] && [ "$failed" = 0 ]; then
	# Build failure, timeout or panic: show the end of the log.
	tail -n 40 "$LOG"
fi
[ "$status" = 124 ] && echo "kafkago-suite: stopped after -total-timeout $TOTAL"
echo "kafkago-suite: $passed passed, $failed failed, $skipped skipped"
echo "kafkago-suite: $nexcluded excluded (interop/kafkago-excluded.txt); subtests $subpassed passed, $subfailed failed, $subskipped skipped; ${elapsed}s (logs: .peers/kafkago-suite.log, .peers/kafkago-broker.log)"
exit "$status"
