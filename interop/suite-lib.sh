# Sourced by interop/kgo-suite.sh and interop/kafkago-suite.sh: what the two
# runners of external Go test suites do alike.

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
