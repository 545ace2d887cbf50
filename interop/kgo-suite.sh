#!/usr/bin/env bash
# Runs franz-go's kgo integration test suite (from the Go module cache)
# against any Kafka-protocol broker.
#
# usage: interop/kgo-suite.sh [-run REGEX] [-skip REGEX] [-records N] [-rf N]
#                             [-timeout DURATION] [-v] SEEDS
#   SEEDS     comma-separated host:port list, e.g. 127.0.0.1:9092
#   -run      go test -run pattern (default: all tests)
#   -skip     go test -skip pattern (default: none)
#   -records  KGO_TEST_RECORDS, records per produce/consume test (default 500)
#   -rf       KGO_TEST_RF, replication factor of the suite's topics (default 1)
#   -timeout  go test -timeout (default 20m)
#   -v        stream the suite's full output (default: only the summary)
#
# Prints "kgo-suite: N passed, N failed, N skipped" (top-level tests) and
# exits with go test's status. The full log is kept in .peers/kgo-suite.log.
# Running a -run/-skip subset of this external suite is how an issue says
# which part applies yet; it does not skip any Verbatim test.
set -euo pipefail

FRANZ_VERSION="v1.22.3"
RUN=""
SKIP=""
RECORDS=500
RF=1
TIMEOUT=20m
VERBOSE=0
SEEDS=""

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
. "$ROOT/interop/lib.sh"

usage() { usage_lines 5 13; }

while [ $# -gt 0 ]; do
	case "$1" in
	-run) RUN="${2:?-run needs a pattern}"; shift 2 ;;
	-skip) SKIP="${2:?-skip needs a pattern}"; shift 2 ;;
	-records) RECORDS="${2:?-records needs a number}"; shift 2 ;;
	-rf) RF="${2:?-rf needs a number}"; shift 2 ;;
	-timeout) TIMEOUT="${2:?-timeout needs a duration}"; shift 2 ;;
	-v) VERBOSE=1; shift ;;
	-h | --help) usage ;;
	-*) echo "kgo-suite.sh: unknown flag $1" >&2; usage ;;
	*)
		[ -z "$SEEDS" ] || { echo "kgo-suite.sh: more than one SEEDS argument" >&2; usage; }
		SEEDS="$1"; shift ;;
	esac
done
[ -n "$SEEDS" ] || { echo "kgo-suite.sh: SEEDS missing" >&2; usage; }

mkdir -p "$ROOT/.peers"
LOG="$ROOT/.peers/kgo-suite.log"

command -v go >/dev/null 2>&1 || { echo "kgo-suite.sh: go not found" >&2; exit 2; }
# Fetches the module zip (with its _test.go files) into the module cache once.
go mod download "github.com/twmb/franz-go@$FRANZ_VERSION" >/dev/null
SRC="$(go env GOMODCACHE)/github.com/twmb/franz-go@$FRANZ_VERSION"
[ -d "$SRC/pkg/kgo" ] || { echo "kgo-suite.sh: $SRC/pkg/kgo missing after go mod download" >&2; exit 2; }

# The module cache is read-only; go test builds in its own cache and writes
# nothing there. GOWORK=off keeps a surrounding workspace out of the build.
args=(test -count=1 -v -timeout "$TIMEOUT")
[ -n "$RUN" ] && args+=(-run "$RUN")
[ -n "$SKIP" ] && args+=(-skip "$SKIP")
args+=(./pkg/kgo)

echo "kgo-suite: franz-go $FRANZ_VERSION against $SEEDS (rf=$RF records=$RECORDS run='${RUN:-all}' skip='${SKIP:-none}')"
# A subshell body, so the cd does not outlive the suite.
suite() (
	cd "$SRC" && GOWORK=off KGO_SEEDS="$SEEDS" KGO_TEST_RF="$RF" KGO_TEST_RECORDS="$RECORDS" KGO_LOG_LEVEL="${KGO_LOG_LEVEL:-none}" \
		go "${args[@]}"
)
start=$(date +%s)
run_logged "$LOG" "$VERBOSE" suite
elapsed=$(($(date +%s) - start))

passed=$(count '^--- PASS: ' "$LOG")
failed=$(count '^--- FAIL: ' "$LOG")
skipped=$(count '^--- SKIP: ' "$LOG")
if [ "$failed" -gt 0 ]; then
	echo "failed tests:"
	grep '^--- FAIL: ' "$LOG" | sed 's/^--- FAIL: /  /'
fi
if [ "$status" -ne 0 ] && [ "$failed" = 0 ]; then
	# Build failure, timeout or panic: show the end of the log.
	tail -n 40 "$LOG"
fi
echo "kgo-suite: $passed passed, $failed failed, $skipped skipped in ${elapsed}s (log: .peers/kgo-suite.log)"
exit "$status"
