# Shell functions the harness scripts share (sourced, never run).

# ---- the runners of external Go test suites (kgo-suite.sh, kafkago-suite.sh)

# usage_lines FIRST LAST prints lines FIRST-LAST of the calling script's
# header comment (its usage) and exits 2.
usage_lines() {
	sed -n "$1,$2p" "$0" | sed 's/^# \{0,1\}//' >&2
	exit 2
}

# run_logged LOG VERBOSE CMD... runs CMD with its output in LOG, streamed
# too when VERBOSE is 1, and sets status to CMD's exit status (errexit
# stays on).
run_logged() {
	local log=$1 verbose=$2
	shift 2
	set +e
	if [ "$verbose" = 1 ]; then
		"$@" 2>&1 | tee "$log"
		status=${PIPESTATUS[0]}
	else
		"$@" >"$log" 2>&1
		status=$?
	fi
	set -e
}

# count PATTERN LOG counts LOG's lines matching the extended regex PATTERN.
count() { grep -cE "$1" "$2" || true; }

# ---- the Maven-resolved peers (install.sh, benchmarks/mm2/install.sh)

# mvn_copy POM LIB LOG copies POM's runtime dependencies into LIB, Maven's
# output in LOG. Offline first: when ~/.m2 already holds every jar (a
# second clone on the same machine) Maven must not touch the network at
# all. On failure it shows the end of LOG and returns 1.
mvn_copy() {
	local copy=(-q -B -f "$1" dependency:copy-dependencies -DoutputDirectory="$2" -DincludeScope=runtime)
	mvn -o "${copy[@]}" >"$3" 2>&1 || mvn "${copy[@]}" >"$3" 2>&1 || {
		tail -n 30 "$3" >&2
		return 1
	}
}
