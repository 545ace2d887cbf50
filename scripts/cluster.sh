#!/usr/bin/env bash
# A Verbatim cluster on loopback, for trying it out, for the tests and for
# fault scripts: every broker runs `verbatim serve` with an embedded etcd
# member (docs/cluster.md "Trying it out: scripts/cluster.sh").
#
# usage: scripts/cluster.sh start DIR N [name=value ...]
#        scripts/cluster.sh kill DIR NODE        SIGKILL one broker
#        scripts/cluster.sh restart DIR NODE     start it again (stopping it first if it runs)
#        scripts/cluster.sh pause DIR NODE       SIGSTOP
#        scripts/cluster.sh resume DIR NODE      SIGCONT
#        scripts/cluster.sh stop DIR             every broker: SIGTERM, then SIGKILL after a bounded wait
#        scripts/cluster.sh status DIR           node, pid, state, address
#        scripts/cluster.sh bootstrap DIR        the bootstrap list
#        scripts/cluster.sh etcd-start DIR M     an external M-member etcd cluster
#        scripts/cluster.sh etcd-kill DIR MEMBER     SIGKILL one etcd member
#        scripts/cluster.sh etcd-restart DIR MEMBER  start it again from its data
#
# With an external etcd (etcd-start first, then start with
# metadata.etcd.endpoints=$(cat DIR/etcd-endpoints)) the brokers run no
# embedded member; stop stops the etcd members after the brokers. etcd-start
# writes DIR/etcd-<i>/{data,etcd.log,pid,urls} for members 1..M and
# DIR/etcd-endpoints, and prints the client URLs as its last line; the
# binary is $ETCD_BIN, default bin/etcd (`make etcd`).
#
# start writes DIR/node-<id>/{server.properties,data,etcd,verbatim.log,pid}
# for node ids 1..N on free loopback ports (a Kafka listener, the metrics
# endpoint, the etcd member's client and peer URLs), waits until every
# broker serves as a cluster member (joined, its controller candidate
# running), and prints the bootstrap list as its last line. The
# name=value arguments are appended to every server.properties (they win
# over the script's settings), with {node} replaced by the node id,
# {kafka} by its PLAINTEXT port and {port:NAME} by a free port picked for
# NAME on that node (e.g. a second listener:
# listeners=PLAINTEXT://127.0.0.1:{kafka},BROKER://127.0.0.1:{port:broker}). The binary is $VERBATIM_BIN, default
# bin/verbatim (`make build`). $CLUSTER_START_TIMEOUT (seconds, default
# 90) bounds the wait of start and restart, $CLUSTER_STOP_TIMEOUT (default
# 30) that of stop.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BIN="${VERBATIM_BIN:-$ROOT/bin/verbatim}"
ETCD="${ETCD_BIN:-$ROOT/bin/etcd}"
START_TIMEOUT="${CLUSTER_START_TIMEOUT:-90}"
STOP_TIMEOUT="${CLUSTER_STOP_TIMEOUT:-30}"

usage() {
	sed -n '6,16p' "$0" | sed 's/^# \{0,1\}//' >&2
	exit 2
}

die() {
	echo "cluster.sh: $*" >&2
	exit 1
}

nodedir() { echo "$1/node-$2"; }

# pidin DIR: the pid recorded in DIR/pid (nothing if none).
pidin() { [ -f "$1/pid" ] && cat "$1/pid"; }

pidof_node() { pidin "$(nodedir "$1" "$2")"; }

# alive PID: the process runs (a zombie waiting to be reaped does not).
alive() {
	[ -n "${1:-}" ] && kill -0 "$1" 2>/dev/null || return 1
	[ "$(awk '/^State:/ {print $2}' "/proc/$1/status" 2>/dev/null)" != Z ]
}

# listening PORT: something accepts connections on 127.0.0.1:PORT.
listening() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

# pick_port sets PORT to a free port below the ephemeral range (so that
# no outgoing connection of another process takes it between the pick and
# the bind), not picked before.
USED=" "
PORT=
pick_port() {
	local low p
	low=$(awk '{print $1}' /proc/sys/net/ipv4/ip_local_port_range 2>/dev/null || echo 32768)
	[ "$low" -gt 12000 ] || low=32768
	while :; do
		p=$((10000 + (RANDOM * 32768 + RANDOM) % (low - 10000)))
		case "$USED" in *" $p "*) continue ;; esac
		listening "$p" && continue
		USED="$USED$p "
		PORT=$p
		return
	done
}

# expand KV NODE sets EXPANDED to the extra property KV with node NODE's
# placeholders replaced ({node}, {kafka}, {port:NAME}: NAME's port on the
# node, picked once); it reads cmd_start's kafka array.
declare -A NAMED_PORTS
EXPANDED=
expand() {
	local kv="$1" i="$2" name
	kv="${kv//\{node\}/$i}"
	kv="${kv//\{kafka\}/${kafka[i]}}"
	while [[ "$kv" =~ \{port:([A-Za-z0-9_]+)\} ]]; do
		name="${BASH_REMATCH[1]}"
		if [ -z "${NAMED_PORTS[$i.$name]:-}" ]; then
			pick_port
			NAMED_PORTS[$i.$name]=$PORT
		fi
		kv="${kv//\{port:$name\}/${NAMED_PORTS[$i.$name]}}"
	done
	EXPANDED="$kv"
}

# launch DIR NODE: starts the broker in the background, recording its pid.
launch() {
	local d
	d="$(nodedir "$1" "$2")"
	[ -x "$BIN" ] || die "$BIN is not an executable: run make build (or set VERBATIM_BIN)"
	echo "--- cluster.sh: starting node $2 at $(date -u +%FT%TZ)" >>"$d/verbatim.log"
	nohup "$BIN" serve --config "$d/server.properties" >>"$d/verbatim.log" 2>&1 </dev/null &
	echo $! >"$d/pid"
}

# wait_for WHAT PID LOG CMD...: until CMD succeeds, bounded by
# START_TIMEOUT; fails, showing the end of LOG, if PID dies first or the
# time runs out.
wait_for() {
	local what="$1" pid="$2" log="$3" deadline
	shift 3
	deadline=$(($(date +%s) + START_TIMEOUT))
	while :; do
		"$@" && return 0
		if ! alive "$pid"; then
			echo "cluster.sh: $what exited before it was ready; the end of $log:" >&2
			tail -n 30 "$log" >&2
			return 1
		fi
		if [ "$(date +%s)" -ge "$deadline" ]; then
			echo "cluster.sh: $what not ready within ${START_TIMEOUT}s; the end of $log:" >&2
			tail -n 30 "$log" >&2
			return 1
		fi
		sleep 0.1
	done
}

# joined LOG FROM_LINE: the log (after line FROM_LINE) says the broker
# serves as a cluster member (serve logs it once it joined and its
# controller candidate runs).
joined() { awk -v from="$2" 'NR > from && /msg="serving as a cluster member"/ {found = 1} END {exit !found}' "$1"; }

# wait_joined DIR NODE FROM_LINE: until the node joined (after line
# FROM_LINE of its log); fails if the process dies.
wait_joined() {
	local d
	d="$(nodedir "$1" "$2")"
	wait_for "node $2" "$(pidof_node "$1" "$2")" "$d/verbatim.log" joined "$d/verbatim.log" "$3"
}

# start_all DIR N LAUNCH WAIT [ARG...]: LAUNCH DIR i for i in 1..N, all
# at once (every etcd member waits for a quorum of the others), then WAIT
# DIR i ARG... for each; fails if one did not come up.
start_all() {
	local dir="$1" n="$2" launch="$3" wait="$4" i failed=0
	shift 4
	for ((i = 1; i <= n; i++)); do
		"$launch" "$dir" "$i"
	done
	for ((i = 1; i <= n; i++)); do
		"$wait" "$dir" "$i" "$@" || failed=1
	done
	return "$failed"
}

loglines() {
	local f
	f="$(nodedir "$1" "$2")/verbatim.log"
	if [ -f "$f" ]; then wc -l <"$f"; else echo 0; fi
}

nodes() {
	local d
	for d in "$1"/node-*; do
		[ -d "$d" ] && echo "${d##*/node-}"
	done | sort -n
}

bootstrap() { [ -f "$1/bootstrap" ] || die "$1 holds no cluster (no $1/bootstrap)"; cat "$1/bootstrap"; }

cmd_start() {
	local dir="$1" n="$2" i
	shift 2
	[[ "$n" =~ ^[1-9][0-9]*$ ]] || die "N must be a positive number, got $n"
	mkdir -p "$dir"
	dir="$(cd "$dir" && pwd)"
	[ -e "$dir/bootstrap" ] && die "$dir already holds a cluster: stop it and remove the directory, or restart its nodes"
	local -a kafka metrics client peer
	for ((i = 1; i <= n; i++)); do
		pick_port; kafka[i]=$PORT
		pick_port; metrics[i]=$PORT
		pick_port; client[i]=$PORT
		pick_port; peer[i]=$PORT
	done
	# An extra metadata.etcd.endpoints=... means an external etcd: no
	# embedded members.
	local external=0 kv
	for kv in "$@"; do
		case "$kv" in metadata.etcd.endpoints=*) external=1 ;; esac
	done
	local initial="" bs="" rf=$((n < 3 ? n : 3))
	for ((i = 1; i <= n; i++)); do
		initial+="${initial:+,}node-$i=http://127.0.0.1:${peer[i]}"
		bs+="${bs:+,}127.0.0.1:${kafka[i]}"
	done
	for ((i = 1; i <= n; i++)); do
		local d="$dir/node-$i"
		mkdir -p "$d/data"
		[ "$external" = 1 ] || mkdir -p "$d/etcd"
		{
			echo "# Written by scripts/cluster.sh start: node $i of $n."
			echo "node.id=$i"
			echo "log.dirs=$d/data"
			echo "listeners=PLAINTEXT://127.0.0.1:${kafka[i]}"
			echo "inter.broker.listener.name=PLAINTEXT"
			echo "metrics.listen=127.0.0.1:${metrics[i]}"
			echo "default.replication.factor=$rf"
			echo "offsets.topic.replication.factor=$rf"
			echo "transaction.state.log.replication.factor=$rf"
			if [ "$external" = 0 ]; then
				echo "metadata.etcd.embed.dir=$d/etcd"
				echo "metadata.etcd.embed.client.url=http://127.0.0.1:${client[i]}"
				echo "metadata.etcd.embed.peer.url=http://127.0.0.1:${peer[i]}"
				echo "metadata.etcd.embed.initial.cluster=$initial"
			fi
			for kv in "$@"; do
				[[ "$kv" == *=* ]] || die "extra property $kv is not name=value"
				expand "$kv" "$i"
				echo "$EXPANDED"
			done
		} >"$d/server.properties"
	done
	echo "$bs" >"$dir/bootstrap"
	if ! start_all "$dir" "$n" launch wait_joined 0; then
		cmd_stop "$dir" >/dev/null
		die "the cluster in $dir did not start"
	fi
	echo "cluster.sh: $n brokers in $dir (logs: $dir/node-*/verbatim.log)"
	echo "$bs"
}

checknode() {
	[ -d "$(nodedir "$1" "$2")" ] || die "no node $2 in $1"
}

cmd_signal() {
	local dir="$1" node="$2" sig="$3" pid
	checknode "$dir" "$node"
	pid="$(pidof_node "$dir" "$node")"
	alive "$pid" || die "node $node is not running"
	kill "-$sig" "$pid"
	if [ "$sig" = KILL ]; then
		while alive "$pid"; do sleep 0.05; done
	fi
}

cmd_restart() {
	local dir="$1" node="$2" pid from
	checknode "$dir" "$node"
	pid="$(pidof_node "$dir" "$node")"
	if alive "$pid"; then
		stop_pids "$pid"
	fi
	from=$(loglines "$dir" "$node")
	launch "$dir" "$node"
	wait_joined "$dir" "$node" "$from" || die "node $node did not rejoin"
	sed -n 's/^listeners=PLAINTEXT:\/\///p' "$(nodedir "$dir" "$node")/server.properties"
}

# stop_pids PID...: SIGTERM (resuming paused ones), then SIGKILL whatever
# still runs after STOP_TIMEOUT seconds.
stop_pids() {
	local pid deadline left
	for pid in "$@"; do
		kill -TERM "$pid" 2>/dev/null || true
		kill -CONT "$pid" 2>/dev/null || true
	done
	deadline=$(($(date +%s) + STOP_TIMEOUT))
	while :; do
		left=()
		for pid in "$@"; do
			alive "$pid" && left+=("$pid")
		done
		[ ${#left[@]} -eq 0 ] && return 0
		if [ "$(date +%s)" -ge "$deadline" ]; then
			echo "cluster.sh: ${#left[@]} broker(s) still running after ${STOP_TIMEOUT}s: SIGKILL" >&2
			kill -KILL "${left[@]}" 2>/dev/null || true
			sleep 0.2
			return 0
		fi
		sleep 0.1
	done
}

cmd_stop() {
	local dir="$1" node pid pids=()
	for node in $(nodes "$dir"); do
		pid="$(pidof_node "$dir" "$node")"
		alive "$pid" && pids+=("$pid")
	done
	if [ ${#pids[@]} -gt 0 ]; then stop_pids "${pids[@]}"; fi
	echo "cluster.sh: stopped ${#pids[@]} broker(s) in $dir"
	# The external etcd last: the brokers' shutdown still writes to it.
	local m epids=()
	for m in $(members "$dir"); do
		pid="$(pidof_member "$dir" "$m")"
		alive "$pid" && epids+=("$pid")
	done
	if [ ${#epids[@]} -gt 0 ]; then
		stop_pids "${epids[@]}"
		echo "cluster.sh: stopped ${#epids[@]} etcd member(s) in $dir"
	fi
}

cmd_status() {
	local dir="$1" node pid state addr
	for node in $(nodes "$dir"); do
		pid="$(pidof_node "$dir" "$node")"
		state=stopped
		if alive "$pid"; then
			state=running
			if [ "$(awk '/^State:/ {print $2}' "/proc/$pid/status" 2>/dev/null)" = T ]; then state=paused; fi
		fi
		addr="$(sed -n 's/^listeners=PLAINTEXT:\/\///p' "$(nodedir "$dir" "$node")/server.properties")"
		echo "node $node pid ${pid:--} $state $addr"
	done
	local m
	for m in $(members "$dir"); do
		pid="$(pidof_member "$dir" "$m")"
		state=stopped
		alive "$pid" && state=running
		echo "etcd $m pid ${pid:--} $state $(sed -n 1p "$(memberdir "$dir" "$m")/urls")"
	done
}

# The external etcd cluster: members 1..M under DIR/etcd-<i>/.
memberdir() { echo "$1/etcd-$2"; }

pidof_member() { pidin "$(memberdir "$1" "$2")"; }

members() {
	local d
	for d in "$1"/etcd-*/; do
		[ -d "$d" ] && { d="${d%/}"; echo "${d##*/etcd-}"; }
	done | sort -n
}

# launch_member DIR MEMBER: starts the member from DIR/etcd-<m>/urls
# (line 1 the client URL, 2 the peer URL, 3 the initial cluster).
launch_member() {
	local d client peer initial
	d="$(memberdir "$1" "$2")"
	[ -x "$ETCD" ] || die "$ETCD is not an executable: run make etcd (or set ETCD_BIN)"
	client="$(sed -n 1p "$d/urls")" peer="$(sed -n 2p "$d/urls")" initial="$(sed -n 3p "$d/urls")"
	echo "--- cluster.sh: starting etcd member $2 at $(date -u +%FT%TZ)" >>"$d/etcd.log"
	nohup "$ETCD" --name "etcd-$2" --data-dir "$d/data" \
		--listen-client-urls "$client" --advertise-client-urls "$client" \
		--listen-peer-urls "$peer" --initial-advertise-peer-urls "$peer" \
		--initial-cluster "$initial" --initial-cluster-state new \
		--initial-cluster-token verbatim-cluster-sh \
		--max-txn-ops 65536 --max-request-bytes 10485760 \
		--auto-compaction-mode revision --auto-compaction-retention 100000 \
		--log-level warn >>"$d/etcd.log" 2>&1 </dev/null &
	echo $! >"$d/pid"
}

# healthy PORT: the etcd member on 127.0.0.1:PORT answers /health with
# true (it has a leader).
healthy() {
	(exec 3<>"/dev/tcp/127.0.0.1/$1" && printf 'GET /health HTTP/1.0\r\n\r\n' >&3 && grep -q '"health":"true"' <&3) 2>/dev/null
}

# wait_healthy DIR MEMBER: until the member is healthy; fails if it dies.
wait_healthy() {
	local d port
	d="$(memberdir "$1" "$2")"
	port="$(sed -n 1p "$d/urls")"
	wait_for "etcd member $2" "$(pidof_member "$1" "$2")" "$d/etcd.log" healthy "${port##*:}"
}

cmd_etcd_start() {
	local dir="$1" m="$2" i
	[[ "$m" =~ ^[1-9][0-9]*$ ]] || die "M must be a positive number, got $m"
	mkdir -p "$dir"
	dir="$(cd "$dir" && pwd)"
	[ -e "$dir/etcd-endpoints" ] && die "$dir already holds an etcd cluster"
	local -a client peer
	for ((i = 1; i <= m; i++)); do
		pick_port; client[i]=$PORT
		pick_port; peer[i]=$PORT
	done
	local initial="" eps=""
	for ((i = 1; i <= m; i++)); do
		initial+="${initial:+,}etcd-$i=http://127.0.0.1:${peer[i]}"
		eps+="${eps:+,}http://127.0.0.1:${client[i]}"
	done
	for ((i = 1; i <= m; i++)); do
		mkdir -p "$(memberdir "$dir" "$i")/data"
		printf '%s\n%s\n%s\n' "http://127.0.0.1:${client[i]}" "http://127.0.0.1:${peer[i]}" "$initial" >"$(memberdir "$dir" "$i")/urls"
	done
	echo "$eps" >"$dir/etcd-endpoints"
	if ! start_all "$dir" "$m" launch_member wait_healthy; then
		cmd_stop "$dir" >/dev/null
		die "the etcd cluster in $dir did not start"
	fi
	echo "cluster.sh: $m etcd members in $dir (logs: $dir/etcd-*/etcd.log)"
	echo "$eps"
}

checkmember() {
	[ -d "$(memberdir "$1" "$2")" ] || die "no etcd member $2 in $1"
}

cmd_etcd_kill() {
	local pid
	checkmember "$1" "$2"
	pid="$(pidof_member "$1" "$2")"
	alive "$pid" || die "etcd member $2 is not running"
	kill -KILL "$pid"
	while alive "$pid"; do sleep 0.05; done
}

cmd_etcd_restart() {
	local pid
	checkmember "$1" "$2"
	pid="$(pidof_member "$1" "$2")"
	if alive "$pid"; then
		stop_pids "$pid"
	fi
	launch_member "$1" "$2"
	wait_healthy "$1" "$2" || die "etcd member $2 did not come back"
}

[ $# -ge 2 ] || usage
cmd="$1" dir="$2"
shift 2
case "$cmd" in
start) [ $# -ge 1 ] || usage; cmd_start "$dir" "$@" ;;
kill) [ $# -eq 1 ] || usage; cmd_signal "$dir" "$1" KILL ;;
pause) [ $# -eq 1 ] || usage; cmd_signal "$dir" "$1" STOP ;;
resume) [ $# -eq 1 ] || usage; cmd_signal "$dir" "$1" CONT ;;
restart) [ $# -eq 1 ] || usage; cmd_restart "$dir" "$1" ;;
stop) [ $# -eq 0 ] || usage; cmd_stop "$dir" ;;
status) [ $# -eq 0 ] || usage; cmd_status "$dir" ;;
bootstrap) [ $# -eq 0 ] || usage; bootstrap "$dir" ;;
etcd-start) [ $# -eq 1 ] || usage; cmd_etcd_start "$dir" "$1" ;;
etcd-kill) [ $# -eq 1 ] || usage; cmd_etcd_kill "$dir" "$1" ;;
etcd-restart) [ $# -eq 1 ] || usage; cmd_etcd_restart "$dir" "$1" ;;
*) usage ;;
esac
