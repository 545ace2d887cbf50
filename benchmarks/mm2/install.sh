#!/usr/bin/env bash
# Resolves MirrorMaker 2 (connect-mirror and the Kafka jars it runs on, see pom.xml)
# from Maven Central into .peers/mm2/lib, idempotently, as interop/install.sh
# does for Kafka: downloads land in ~/.m2, the copy is redone only when
# pom.xml changes, and Maven runs offline first.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
. "$ROOT/interop/lib.sh"
POM="$ROOT/benchmarks/mm2/pom.xml"
OUT="$ROOT/.peers/mm2"
LIB="$OUT/lib"
STAMP="$OUT/pom.sha256"
WANT="$(sha256sum "$POM" | cut -d' ' -f1)"
if [ -f "$STAMP" ] && [ "$(cat "$STAMP")" = "$WANT" ] && ls "$LIB"/connect-mirror-[0-9]*.jar >/dev/null 2>&1; then
	exit 0
fi
command -v mvn >/dev/null 2>&1 || { echo "benchmarks/mm2/install.sh: mvn not found (run make peers)" >&2; exit 1; }
rm -rf "$LIB" "$STAMP"
mkdir -p "$LIB"
mvn_copy "$POM" "$LIB" "$OUT/mvn.log" ||
	{ echo "benchmarks/mm2/install.sh: mvn failed (log: .peers/mm2/mvn.log)" >&2; exit 1; }
ls "$LIB"/connect-mirror-[0-9]*.jar >/dev/null || { echo "benchmarks/mm2/install.sh: connect-mirror jar missing" >&2; exit 1; }
for j in connect-mirror-client connect-runtime kafka-clients; do
	ls "$LIB"/$j-[0-9]*.jar >/dev/null || { echo "benchmarks/mm2/install.sh: $j jar missing" >&2; exit 1; }
done
echo "$WANT" >"$STAMP"
echo "benchmarks/mm2/install.sh: MirrorMaker 2 ready: $(ls "$LIB" | wc -l) jars in .peers/mm2/lib"
