#!/usr/bin/env bash
# Installs the real peers Verbatim's tests run against, idempotently.
#
#   kcat             Debian package (librdkafka 2.0.2), via apt-get
#   wat2wasm         Debian package wabt, via apt-get (WAT policy modules)
#   Kafka 4.4 jars   Maven Central via interop/kafka/pom.xml; downloads land in
#                    Maven's local repository (~/.m2), the classpath is copied
#                    to .peers/kafka/lib (git-ignored)
#   confluent-kafka  PyPI; the wheel is downloaded once into a user-level
#                    wheelhouse (~/.cache/verbatim-peers/wheels) and installed
#                    from there into the virtualenv .peers/venv
#
# A second run on the same machine downloads nothing and takes seconds. Exits
# non-zero with a clear message when something cannot be installed.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PEERS="$ROOT/.peers"
POM="$ROOT/interop/kafka/pom.xml"
LIB="$PEERS/kafka/lib"
VENV="$PEERS/venv"
CONFLUENT_KAFKA_VERSION="2.16.1"
WHEELS="${XDG_CACHE_HOME:-$HOME/.cache}/verbatim-peers/wheels"
. "$ROOT/interop/lib.sh"

fail() {
	echo "interop/install.sh: ERROR: $*" >&2
	exit 1
}
note() { echo "interop/install.sh: $*"; }

mkdir -p "$PEERS"

# --- Debian packages -----------------------------------------------------------
APT_UPDATED=0
apt_install() { # apt_install PACKAGE...: installs with apt-get, updating the lists once
	command -v apt-get >/dev/null 2>&1 || fail "apt-get is not available to install: $*; install them by hand"
	local sudo=""
	if [ "$(id -u)" != 0 ]; then
		command -v sudo >/dev/null 2>&1 || fail "installing $* needs root (no sudo found)"
		sudo="sudo"
	fi
	if [ "$APT_UPDATED" = 0 ]; then
		$sudo apt-get update -qq >/dev/null || fail "apt-get update failed"
		APT_UPDATED=1
	fi
	note "installing $* with apt-get"
	DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "$@" >/dev/null ||
		fail "apt-get install $* failed"
}

command -v kcat >/dev/null 2>&1 || apt_install kcat
command -v kcat >/dev/null 2>&1 || fail "kcat still not on PATH after apt-get install kcat"
# wabt's wat2wasm assembles the hand-written WAT policy modules (policies/examples,
# wasmpolicy/testdata) in TestWATModulesAssemble.
command -v wat2wasm >/dev/null 2>&1 || apt_install wabt
command -v wat2wasm >/dev/null 2>&1 || fail "wat2wasm still not on PATH after apt-get install wabt"

# --- Java ------------------------------------------------------------------
command -v java >/dev/null 2>&1 || apt_install openjdk-17-jdk-headless
command -v java >/dev/null 2>&1 || fail "java (JDK 17+) not found and could not be installed"
JAVA_MAJOR="$(java -XshowSettings:properties -version 2>&1 | sed -n 's/^ *java.specification.version = //p' | head -n1)"
case "$JAVA_MAJOR" in
'' | 1.*) fail "Kafka 4.4 needs Java 17+, found '${JAVA_MAJOR:-unknown}'" ;;
esac
[ "${JAVA_MAJOR%%.*}" -ge 17 ] 2>/dev/null || fail "Kafka 4.4 needs Java 17+, found $JAVA_MAJOR"

# --- Kafka jars --------------------------------------------------------------
# The stamp holds the hash of pom.xml that produced .peers/kafka/lib; it is
# written only after a complete copy, so an interrupted run is redone.
STAMP="$PEERS/kafka/pom.sha256"
WANT="$(sha256sum "$POM" | cut -d' ' -f1)"
if [ -f "$STAMP" ] && [ "$(cat "$STAMP")" = "$WANT" ] && [ -d "$LIB" ] &&
	ls "$LIB"/kafka_2.13-*.jar "$LIB"/kafka-tools-[0-9]*.jar >/dev/null 2>&1; then
	:
else
	command -v mvn >/dev/null 2>&1 || apt_install maven
	command -v mvn >/dev/null 2>&1 || fail "mvn (Apache Maven) not found and could not be installed"
	note "resolving Kafka jars with Maven into $LIB"
	rm -rf "$LIB" "$STAMP"
	mkdir -p "$LIB"
	mvn_copy "$POM" "$LIB" "$PEERS/kafka/mvn.log" ||
		fail "mvn dependency:copy-dependencies failed (full log: .peers/kafka/mvn.log)"
	ls "$LIB"/kafka_2.13-*.jar "$LIB"/kafka-tools-[0-9]*.jar >/dev/null 2>&1 ||
		fail "Maven finished but kafka_2.13 / kafka-tools jars are missing in $LIB"
	# Exactly one SLF4J provider, or logging picks one at random.
	providers="$(ls "$LIB" | grep -cE '^(slf4j-(simple|reload4j|log4j12|jdk14|nop)|log4j-slf4j2?-impl|logback-classic)-' || true)"
	[ "$providers" = 1 ] || fail "expected exactly one SLF4J provider in $LIB, found $providers; fix the exclusions in interop/kafka/pom.xml"
	echo "$WANT" >"$STAMP"
fi

# --- confluent-kafka virtualenv ----------------------------------------------
venv_ok() {
	[ -x "$VENV/bin/python" ] &&
		"$VENV/bin/python" -c "import confluent_kafka, sys; sys.exit(0 if confluent_kafka.__version__ == '$CONFLUENT_KAFKA_VERSION' else 1)" >/dev/null 2>&1
}
if ! venv_ok; then
	command -v python3 >/dev/null 2>&1 || apt_install python3 python3-venv
	note "creating $VENV with confluent-kafka==$CONFLUENT_KAFKA_VERSION"
	rm -rf "$VENV"
	if ! python3 -m venv "$VENV" >/dev/null 2>&1; then
		# Debian's python3 ships venv (ensurepip) separately.
		rm -rf "$VENV"
		apt_install python3-venv
		python3 -m venv "$VENV" || fail "python3 -m venv failed"
	fi
	# pip's HTTP cache is not reliable behind every index mirror, so the
	# wheels are kept in a user-level wheelhouse: downloaded once per machine,
	# installed from there with --no-index ever after.
	pipq=("$VENV/bin/python" -m pip -q --disable-pip-version-check)
	if ! "${pipq[@]}" install --no-index --find-links "$WHEELS" "confluent-kafka==$CONFLUENT_KAFKA_VERSION" >"$PEERS/pip.log" 2>&1; then
		mkdir -p "$WHEELS"
		if ! "${pipq[@]}" download -d "$WHEELS" "confluent-kafka==$CONFLUENT_KAFKA_VERSION" >>"$PEERS/pip.log" 2>&1 ||
			! "${pipq[@]}" install --no-index --find-links "$WHEELS" "confluent-kafka==$CONFLUENT_KAFKA_VERSION" >>"$PEERS/pip.log" 2>&1; then
			tail -n 30 "$PEERS/pip.log" >&2
			rm -rf "$VENV"
			fail "pip could not install confluent-kafka==$CONFLUENT_KAFKA_VERSION (log: .peers/pip.log)"
		fi
	fi
	venv_ok || fail "confluent-kafka $CONFLUENT_KAFKA_VERSION does not import from $VENV"
fi

note "peers ready: kcat $(kcat -V 2>/dev/null | sed -n "s/^Version \([^ ]*\).*/\1/p" | head -n1), Kafka jars $(ls "$LIB" | wc -l) in .peers/kafka/lib, confluent-kafka $CONFLUENT_KAFKA_VERSION in .peers/venv"
