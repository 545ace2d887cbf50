#!/usr/bin/env bash
# `make scale`: the cluster link at 10,000 partitions against a real Kafka
# 4.4 node (interop/link_scale_test.go, build tag "scale"), not part of
# `make test`. Both brokers keep one descriptor per segment open (its
# .log: Kafka maps its indexes, Verbatim opens them only to write them), so
# 10,000 one-segment partitions need about 10,000 files each; the soft
# limit is raised to the hard one (at most 262144) for this shell and its
# children first. Results: one JSON line appended to
# benchmarks/tmp/scale.jsonl (or $SCALE_OUT).
set -euo pipefail
cd "$(dirname "$0")/.."
want=262144
if [ "$(ulimit -n)" != unlimited ] && [ "$(ulimit -n)" -lt "$want" ]; then
	ulimit -n "$want" 2>/dev/null || ulimit -n "$(ulimit -Hn)"
fi
if [ "$(ulimit -n)" != unlimited ] && [ "$(ulimit -n)" -lt 16384 ]; then
	echo "scale: the open files limit is $(ulimit -n); 10,000 partitions need about 11,000 per broker" >&2
	exit 1
fi
echo "scale: open files limit $(ulimit -n)" >&2
exec "${GO:-go}" test -tags scale -count=1 -timeout 60m -run 'TestLinkScale10000' -v ./interop/ "$@"
