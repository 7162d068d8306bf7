#!/usr/bin/env bash
# Side-by-side benchmark of airlock's proxy against squid and tinyproxy
# (Debian's packages, each configured as an equivalent allowlist proxy) and
# a direct connection, on loopback inside a private network namespace this
# script creates (no route anywhere). Results: bench/proxy.md.
#
#   sudo bench/bench_proxy.sh [BUILD_DIR]      (default: build)
#
# Measures: new CONNECT tunnels per second with a small response (bench-proxy
# rate: 50 concurrent clients, at most 20,000 tunnels or 15 s each); one
# 1 GiB transfer through a tunnel (bench-proxy bulk) of a file held in
# memory (tmpfs); each over ROUNDS (5) rounds that alternate between the
# contenders, reported as the median round (and the best); RSS of the proxy
# with 10,000 idle tunnels open (bench-proxy idle, one byte echoed through
# each; fewer if RLIMIT_NOFILE cannot be raised that far).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${1:-$ROOT/build}
case $BUILD in /*) ;; *) BUILD=$ROOT/$BUILD ;; esac
AIRLOCK=$BUILD/cli/airlock
BP=$BUILD/bench/bench-proxy
[ -x "$AIRLOCK" ] && [ -x "$BP" ] || { echo "build first: ninja -C $BUILD" >&2; exit 1; }
[ "$(id -u)" = 0 ] || { echo "needs root (a private network namespace)" >&2; exit 1; }

if [ -z "${BENCH_IN_NS:-}" ]; then
	exec unshare --net -- env BENCH_IN_NS=1 "$0" "$BUILD"
fi
ip link set lo up
# 10,000 tunnels are 20,000 sockets in the proxy, 10,000 in each end.
# Raise the descriptor limit as far as this machine lets us; without
# CAP_SYS_RESOURCE the hard limit stays, and fewer idle tunnels fit.
ulimit -Hn 200000 2>/dev/null || true
ulimit -n "$(ulimit -Hn)"

RATE_CONC=${RATE_CONC:-50}
RATE_COUNT=${RATE_COUNT:-20000}
RATE_SECONDS=${RATE_SECONDS:-15}
ROUNDS=${ROUNDS:-5}
IDLE_N=${IDLE_N:-10000}
# Each idle tunnel is two sockets in the proxy; leave room for the rest.
MAX_IDLE=$(( ($(ulimit -n) - 200) / 2 ))
if [ "$IDLE_N" -gt "$MAX_IDLE" ]; then
	echo "RLIMIT_NOFILE is $(ulimit -n) here: idle test with $MAX_IDLE tunnels, not $IDLE_N" >&2
	IDLE_N=$MAX_IDLE
fi
BIG=1073741824

S=$(mktemp -d /tmp/airlock-bench.XXXXXX)
chmod 777 "$S"
PIDS=()
cleanup() {
	local p
	for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
	sleep 0.3
	for p in "${PIDS[@]}"; do kill -9 "$p" 2>/dev/null || true; done
	rm -rf "$S"
	[ -z "${BIGFILE:-}" ] || rm -f "$BIGFILE"
}
trap cleanup EXIT

# --- origin servers: nginx (small response, 1 GiB file), an echo server ---
# The file nginx serves: real pages in a tmpfs, like a mirror's hot file
# in the page cache. Not a sparse file (reading a hole zero-fills a page
# every time, which makes the origin the bottleneck), and not a file on
# disk (some VMs reclaim page cache within seconds, so every round would
# read the disk).
BIGDIR=/dev/shm
[ -d "$BIGDIR" ] && [ -w "$BIGDIR" ] || BIGDIR=$S
BIGFILE=$(mktemp "$BIGDIR/airlock-bench-big.XXXXXX")
head -c $BIG /dev/zero >"$BIGFILE"
chmod 644 "$BIGFILE"
ln -s "$BIGFILE" "$S/big"
mkdir -p "$S/nginx"
cat >"$S/nginx.conf" <<-CONF
	worker_processes 1;
	user root root;
	daemon off;
	pid $S/nginx.pid;
	error_log $S/nginx-error.log warn;
	worker_rlimit_nofile 100000;
	events { worker_connections 60000; }
	http {
		access_log off;
		sendfile on;
		client_body_temp_path $S/nginx/body;
		proxy_temp_path $S/nginx/proxy;
		fastcgi_temp_path $S/nginx/fastcgi;
		uwsgi_temp_path $S/nginx/uwsgi;
		scgi_temp_path $S/nginx/scgi;
		server {
			listen 127.0.0.1:18080 backlog=4096;
			location = / { return 200 "ok\n"; }
			location = /big { alias $S/big; }
		}
	}
CONF
nginx -c "$S/nginx.conf" &
PIDS+=($!)
"$BP" echo 127.0.0.1:18081 >"$S/echo.out" &
PIDS+=($!)

# --- the proxies, each allowing exactly 127.0.0.1 ports 18080 and 18081 ---
cat >"$S/policy.yaml" <<-'YAML'
	version: 1
	name: bench
	allow:
	  - cidr: 127.0.0.0/8
	    ports: [18080, 18081]
YAML
"$AIRLOCK" proxy -p "$S/policy.yaml" --listen 127.0.0.1:3128 --log "$S/airlock.jsonl" \
	--dns-upstream 127.0.0.1 --max-conns 30000 2>"$S/airlock.err" &
AIRLOCK_PID=$!
PIDS+=($AIRLOCK_PID)

cat >"$S/squid.conf" <<-CONF
	http_port 127.0.0.1:3129
	acl bench_dst dst 127.0.0.1
	acl bench_ports port 18080 18081
	acl CONNECT method CONNECT
	http_access allow CONNECT bench_dst bench_ports
	http_access allow bench_dst bench_ports
	http_access deny all
	cache deny all
	cache_mem 8 MB
	access_log stdio:$S/squid-access.log
	cache_log $S/squid-cache.log
	pid_filename $S/squid.pid
	coredump_dir $S
	max_filedescriptors 100000
	shutdown_lifetime 0 seconds
	client_persistent_connections off
CONF
squid -N -f "$S/squid.conf" &
SQUID_PID=$!
PIDS+=($SQUID_PID)

echo '^127\.0\.0\.1$' >"$S/tinyproxy.filter"
cat >"$S/tinyproxy.conf" <<-CONF
	User nobody
	Group nogroup
	Port 3130
	Listen 127.0.0.1
	Timeout 600
	LogFile "$S/tinyproxy.log"
	LogLevel Warning
	MaxClients 20000
	Allow 127.0.0.1
	ConnectPort 18080
	ConnectPort 18081
	FilterDefaultDeny Yes
	Filter "$S/tinyproxy.filter"
CONF
tinyproxy -d -c "$S/tinyproxy.conf" 2>"$S/tinyproxy.err" &
TINY_PID=$!
PIDS+=($TINY_PID)

wait_port() {
	local i
	for i in $(seq 200); do
		(exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null && return 0
		sleep 0.05
	done
	echo "nothing listens on port $1" >&2
	return 1
}
for p in 18080 18081 3128 3129 3130; do wait_port $p; done

# RSS (KiB) of a process and its children.
rss_tree() {
	local total=0 p kids
	for p in $1 $(pgrep -P "$1" 2>/dev/null || true); do
		total=$((total + $(awk '/^VmRSS/ {print $2}' "/proc/$p/status" 2>/dev/null || echo 0)))
	done
	echo $total
}

# CPU time (ms) of a process and its children so far: a measure of cost
# that, unlike throughput, other load on the machine hardly moves.
TICK_MS=$((1000 / $(getconf CLK_TCK)))
cpu_tree() {
	local total=0 p
	for p in $1 $(pgrep -P "$1" 2>/dev/null || true); do
		total=$((total + $(awk '{print $14 + $15}' "/proc/$p/stat" 2>/dev/null || echo 0)))
	done
	echo $((total * TICK_MS))
}

declare -A RATE BULK IDLE RCPU BCPU
NAMES=(direct airlock squid tinyproxy)
declare -A ADDR=([direct]=direct [airlock]=127.0.0.1:3128 [squid]=127.0.0.1:3129 [tinyproxy]=127.0.0.1:3130)
declare -A PID=([airlock]=$AIRLOCK_PID [squid]=$SQUID_PID [tinyproxy]=$TINY_PID)

# Warm-up, not counted: the file into the page cache, every proxy's first
# allocations done.
"$BP" bulk direct 127.0.0.1:18080 /big >/dev/null || true
for n in "${NAMES[@]}"; do "$BP" rate "${ADDR[$n]}" 127.0.0.1:18080 10 1000 10 >/dev/null || true; done

# Rounds alternate between the contenders and the best round counts, so a
# burst of load from elsewhere on the machine does not pick a winner.
# The rounds' figures are kept as lists; the table shows the median round
# (and the best) of each contender.
median() { printf '%s\n' "$@" | sort -n | awk '{ v[NR] = $1 } END { if (NR) print v[int((NR + 1) / 2)]; else print 0 }'; }
best() { printf '%s\n' "$@" | sort -n | tail -1; }
for round in $(seq "$ROUNDS"); do
	for n in "${NAMES[@]}"; do
		c0=$( [ "$n" = direct ] || cpu_tree "${PID[$n]}")
		out=$("$BP" rate "${ADDR[$n]}" 127.0.0.1:18080 "$RATE_CONC" "$RATE_COUNT" "$RATE_SECONDS" || true)
		c1=$( [ "$n" = direct ] || cpu_tree "${PID[$n]}")
		echo "round $round $n: $out"
		if echo "$out" | grep -q ' failed 0 '; then
			RATE[$n]="${RATE[$n]:-} $(echo "$out" | awk '{print $NF}')"
			[ "$n" = direct ] || RCPU[$n]="${RCPU[$n]:-} $(awk -v c=$((c1 - c0)) -v k="$(echo "$out" | awk '{print $3}')" 'BEGIN { printf "%.1f", 1000 * c / k }')"
		fi
	done
done
for round in $(seq "$ROUNDS"); do
	for n in "${NAMES[@]}"; do
		c0=$( [ "$n" = direct ] || cpu_tree "${PID[$n]}")
		out=$("$BP" bulk "${ADDR[$n]}" 127.0.0.1:18080 /big || true)
		c1=$( [ "$n" = direct ] || cpu_tree "${PID[$n]}")
		echo "round $round $n: $out"
		got=$(echo "$out" | awk '{print $3}')
		if [ "${got:-0}" -ge $BIG ]; then
			BULK[$n]="${BULK[$n]:-} $(echo "$out" | awk '{print $NF}')"
			[ "$n" = direct ] || BCPU[$n]="${BCPU[$n]:-} $((c1 - c0))"
		else
			echo "  ($n moved only ${got:-0} bytes)"
		fi
	done
done
for n in airlock squid tinyproxy; do
	sleep 1
	before=$(rss_tree "${PID[$n]}")
	"$BP" idle "${ADDR[$n]}" 127.0.0.1:18081 "$IDLE_N" 30 >"$S/idle.out" &
	ip=$!
	for _ in $(seq 600); do grep -q idle-ready "$S/idle.out" && break; sleep 0.2; done
	sleep 1
	after=$(rss_tree "${PID[$n]}")
	ok=$(awk '{print $2}' "$S/idle.out")
	kill $ip 2>/dev/null || true
	wait $ip 2>/dev/null || true
	per=$(awk -v a="$after" -v b="$before" -v n="${ok:-0}" 'BEGIN { if (n > 0) printf "%.2f", (a - b) / n; else print "n/a" }')
	echo "$n: idle tunnels $ok, RSS $before KiB -> $after KiB, $per KiB per tunnel"
	IDLE[$n]="$ok $before $after $per"
done

echo
echo "median round of $ROUNDS (best round in brackets); ratios are of the medians"
echo "| | tunnels/s | vs squid | proxy CPU ms / 1000 tunnels | 1 GiB MiB/s | vs direct | proxy CPU ms / GiB | idle RSS KiB/tunnel (n) |"
echo "|---|---|---|---|---|---|---|---|"
# shellcheck disable=SC2086
squid_rate=$(median ${RATE[squid]:-0})
# shellcheck disable=SC2086
direct_bulk=$(median ${BULK[direct]:-0})
for n in "${NAMES[@]}"; do
	# shellcheck disable=SC2086
	r=$(median ${RATE[$n]:-0}) rb=$(best ${RATE[$n]:-0}) b=$(median ${BULK[$n]:-0}) bb=$(best ${BULK[$n]:-0})
	vs=$(awk -v a="$r" -v s="$squid_rate" 'BEGIN { if (s > 0) printf "%.2fx", a / s; else print "-" }')
	vd=$(awk -v a="$b" -v d="$direct_bulk" 'BEGIN { if (d > 0) printf "%.0f%%", 100 * a / d; else print "-" }')
	if [ "$n" = direct ]; then idle="-" rc="-" bc="-"; else
		set -- ${IDLE[$n]}; idle="$4 ($1)"
		# shellcheck disable=SC2086
		rc=$(median ${RCPU[$n]:-}) bc=$(median ${BCPU[$n]:-})
	fi
	echo "| $n | $r ($rb) | $vs | $rc | $b ($bb) | $vd | $bc | $idle |"
done
