#!/usr/bin/env bash
# Side-by-side benchmark of airlock's proxy against squid and tinyproxy
# (Debian's packages, each configured as an equivalent allowlist proxy) and
# a direct connection, inside a private network and mount namespace this
# script creates (loopback only, no route anywhere). Results: bench/proxy.md.
#
#   sudo [AIRLOCK_BASE=/path/to/other/airlock] bench/bench_proxy.sh [BUILD_DIR]
#
# Sizes: ROUNDS, RATE_COUNT, RATE_SECONDS, TLS_COUNT, TLS_SECONDS, IDLE_N,
# BIG_BYTES; CONTENDERS (default all: "direct airlock airlock-base squid
# tinyproxy") picks some. BENCH_TRACE=1 traces the script.
#
# Clients connect BY NAME, as they do in use: the origin is
# origin.bench.test, answered by a dnsmasq in the namespace (127.0.0.1:53,
# also the namespace's /etc/resolv.conf); every proxy resolves it there
# (airlock --dns-upstream, squid dns_nameservers, tinyproxy through libc)
# and every CONNECT names it. The origin listens on 198.51.100.10, made
# local by a route (`ip route add local`), not an interface address: the
# address guard treats it as an ordinary public destination
# (docs/policy.md, "The address guard"), so no cidr rule is involved.
#
# Contenders: direct, airlock (BUILD_DIR), squid, tinyproxy, and with
# AIRLOCK_BASE a second airlock build (airlock-base) in the same rounds,
# for the cost of a change as a ratio.
#
# Measures, each over ROUNDS (7) rounds that alternate between the
# contenders (the order rotating each round), reported as the median round
# (and the best):
#   tunnels/s   new CONNECT tunnels with a small response (bench-proxy
#               rate: 50 concurrent clients, at most 20,000 tunnels or 15 s)
#   TLS/s       the same with a full TLS handshake (SNI = the name, the
#               certificate verified) and a GET inside each tunnel (at most
#               5,000 or 15 s)
#   1 GiB       one transfer through a tunnel of a file held in memory
# and the proxy's CPU time (and the DNS server's) per tunnel; then the RSS
# of each proxy with 10,000 idle tunnels open (bench-proxy idle; fewer if
# RLIMIT_NOFILE cannot be raised that far).
set -euo pipefail
[ -z "${BENCH_TRACE:-}" ] || set -x
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${1:-$ROOT/build}
case $BUILD in /*) ;; *) BUILD=$ROOT/$BUILD ;; esac
AIRLOCK=$BUILD/cli/airlock
BP=$BUILD/bench/bench-proxy
AIRLOCK_BASE=${AIRLOCK_BASE:-}
[ -x "$AIRLOCK" ] && [ -x "$BP" ] || { echo "build first: ninja -C $BUILD" >&2; exit 1; }
[ -z "$AIRLOCK_BASE" ] || [ -x "$AIRLOCK_BASE" ] || { echo "AIRLOCK_BASE=$AIRLOCK_BASE is not executable" >&2; exit 1; }
[ "$(id -u)" = 0 ] || { echo "needs root (a private network namespace)" >&2; exit 1; }

if [ -z "${BENCH_IN_NS:-}" ]; then
	# A mount namespace too, for the bind-mounted /etc/resolv.conf
	# (unshare makes its mounts private: nothing leaks to the host).
	exec unshare --net --mount -- env BENCH_IN_NS=1 "$0" "$BUILD"
fi
ip link set lo up
ORIGIN=origin.bench.test
ORIGIN_IP=198.51.100.10
ip route add local 198.51.100.0/24 dev lo
# Every proxy dials the same origin address and port from one source
# address, and a closed tunnel's port waits 60 s in TIME_WAIT: with the
# default 28,232 ephemeral ports, three idle tests of 9,900 tunnels in a
# row leave the fourth proxy none (squid got 8,432, tinyproxy 0). This
# namespace's range only (the sysctl is per network namespace).
sysctl -qw net.ipv4.ip_local_port_range="1024 65535"
# 10,000 tunnels are 20,000 sockets in the proxy, 10,000 in each end.
# Raise the descriptor limit as far as this machine lets us; without
# CAP_SYS_RESOURCE the hard limit stays, and fewer idle tunnels fit.
ulimit -Hn 200000 2>/dev/null || true
ulimit -n "$(ulimit -Hn)"

RATE_CONC=${RATE_CONC:-50}
RATE_COUNT=${RATE_COUNT:-20000}
RATE_SECONDS=${RATE_SECONDS:-15}
TLS_COUNT=${TLS_COUNT:-5000}
TLS_SECONDS=${TLS_SECONDS:-15}
ROUNDS=${ROUNDS:-7}
IDLE_N=${IDLE_N:-10000}
# Each idle tunnel is two sockets in the proxy; leave room for the rest.
MAX_IDLE=$(( ($(ulimit -n) - 200) / 2 ))
if [ "$IDLE_N" -gt "$MAX_IDLE" ]; then
	echo "RLIMIT_NOFILE is $(ulimit -n) here: idle test with $MAX_IDLE tunnels, not $IDLE_N" >&2
	IDLE_N=$MAX_IDLE
fi
BIG=${BIG_BYTES:-1073741824}

S=$(mktemp -d /tmp/airlock-bench.XXXXXX)
chmod 755 "$S"
# squid and tinyproxy drop to their own users and write there.
mkdir "$S/w"
chmod 777 "$S/w"
PIDS=()
cleanup() {
	local p i
	for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
	for i in $(seq 20); do
		for p in "${PIDS[@]}"; do kill -0 "$p" 2>/dev/null && break; done
		kill -0 "$p" 2>/dev/null || break
		sleep 0.1
	done
	for p in "${PIDS[@]}"; do kill -9 "$p" 2>/dev/null || true; done
	for p in "${PIDS[@]}"; do wait "$p" 2>/dev/null || true; done
	rm -rf "$S"
	[ -z "${BIGFILE:-}" ] || rm -f "$BIGFILE"
}
trap cleanup EXIT
echo "start $(date -u +%H:%M:%S) UTC; load: $(uptime)"

# --- the namespace's DNS: dnsmasq answering the origin's name (origin.sh) ---
. "$ROOT/bench/origin.sh"
origin_dns

# --- origin servers: nginx (small response over HTTP and TLS, 1 GiB file),
# an echo server ---
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
# nginx (origin.sh), with sendfile for the 1 GiB file.
origin_nginx "sendfile on;" "location = /big { alias $S/big; }"
"$BP" echo $ORIGIN_IP:18081 >"$S/echo.out" &
ECHO_PID=$!
PIDS+=($ECHO_PID)

# --- the proxies, each allowing exactly the origin's name, ports 18080,
# 18081 and 18443 ---
cat >"$S/policy.yaml" <<-YAML
	version: 1
	name: bench
	allow:
	  - host: $ORIGIN
	    ports: [18080, 18081, 18443]
YAML
"$AIRLOCK" proxy -p "$S/policy.yaml" --listen 127.0.0.1:3128 --log "$S/airlock.jsonl" \
	--dns-upstream 127.0.0.1 --max-conns 30000 2>"$S/airlock.err" &
AIRLOCK_PID=$!
PIDS+=($AIRLOCK_PID)
if [ -n "$AIRLOCK_BASE" ]; then
	"$AIRLOCK_BASE" proxy -p "$S/policy.yaml" --listen 127.0.0.1:3131 \
		--log "$S/airlock-base.jsonl" --dns-upstream 127.0.0.1 --max-conns 30000 \
		2>"$S/airlock-base.err" &
	BASE_PID=$!
	PIDS+=($BASE_PID)
fi

cat >"$S/squid.conf" <<-CONF
	http_port 127.0.0.1:3129
	dns_nameservers 127.0.0.1
	acl bench_dst dstdomain $ORIGIN
	acl bench_ports port 18080 18081 18443
	acl CONNECT method CONNECT
	http_access allow CONNECT bench_dst bench_ports
	http_access allow bench_dst bench_ports
	http_access deny all
	cache deny all
	cache_mem 8 MB
	access_log stdio:$S/w/squid-access.log
	cache_log $S/w/squid-cache.log
	pid_filename $S/w/squid.pid
	coredump_dir $S/w
	max_filedescriptors 100000
	shutdown_lifetime 0 seconds
	client_persistent_connections off
CONF
squid -N -f "$S/squid.conf" 2>"$S/squid.err" &
SQUID_PID=$!
PIDS+=($SQUID_PID)

echo "^${ORIGIN//./\\.}\$" >"$S/tinyproxy.filter"
cat >"$S/tinyproxy.conf" <<-CONF
	User nobody
	Group nogroup
	Port 3130
	Listen 127.0.0.1
	Timeout 600
	LogFile "$S/w/tinyproxy.log"
	LogLevel Warning
	MaxClients 20000
	Allow 127.0.0.1
	ConnectPort 18080
	ConnectPort 18081
	ConnectPort 18443
	FilterDefaultDeny Yes
	Filter "$S/tinyproxy.filter"
CONF
tinyproxy -d -c "$S/tinyproxy.conf" 2>"$S/tinyproxy.err" &
TINY_PID=$!
PIDS+=($TINY_PID)

for p in 18080 18081 18443; do wait_port $ORIGIN_IP $p; done
for p in 3128 3129 3130 ${AIRLOCK_BASE:+3131}; do wait_port 127.0.0.1 $p; done
# The name resolves here, through the namespace's resolv.conf, or nothing
# below means anything. (`getent hosts`, not `ahosts`: that one asks with
# AI_ADDRCONFIG, and a namespace with only loopback has no address that
# counts.)
for _ in $(seq 50); do
	got=$(getent hosts $ORIGIN | awk 'NR == 1 {print $1}' || true)
	[ "$got" != $ORIGIN_IP ] || break
	sleep 0.1
done
[ "$got" = $ORIGIN_IP ] || { echo "$ORIGIN resolves to '${got}', not $ORIGIN_IP" >&2; cat "$S/dnsmasq.err" >&2; exit 1; }

# What the binding checks refuse: a ClientHello naming another server in
# a tunnel to the origin (proxy/bind.c). Shown for each airlock build, so
# the figures below are known to be of a build that checks, or not.
sni_check() {
	if echo | timeout 10 openssl s_client -proxy "$1" -connect $ORIGIN:18443 \
		-servername other.bench.test -CAfile "$S/origin.pem" >"$S/sni.out" 2>&1 &&
		grep -q 'BEGIN CERTIFICATE' "$S/sni.out"; then
		echo "passed"
	else
		echo "refused"
	fi
}
for n in airlock ${AIRLOCK_BASE:+airlock-base}; do
	[ $n = airlock ] && a=127.0.0.1:3128 || a=127.0.0.1:3131
	echo "$n: a ClientHello for other.bench.test in a tunnel to $ORIGIN: $(sni_check $a)"
done

# RSS (KiB) of a process and its children.
rss_tree() {
	local total=0 p
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

# CONTENDERS picks some, e.g. "airlock airlock-base" for many quick
# rounds of two builds alone.
read -r -a NAMES <<<"${CONTENDERS:-direct airlock ${AIRLOCK_BASE:+airlock-base} squid tinyproxy}"
PROXIES=()
for n in "${NAMES[@]}"; do
	case $n in
	direct | airlock | squid | tinyproxy) ;;
	airlock-base) [ -n "$AIRLOCK_BASE" ] || { echo "airlock-base needs AIRLOCK_BASE" >&2; exit 1; } ;;
	*) echo "CONTENDERS: unknown '$n'" >&2; exit 1 ;;
	esac
	[ "$n" = direct ] || PROXIES+=("$n")
done
declare -A ADDR=([direct]=direct [airlock]=127.0.0.1:3128 [airlock-base]=127.0.0.1:3131
	[squid]=127.0.0.1:3129 [tinyproxy]=127.0.0.1:3130)
declare -A PID=([airlock]=$AIRLOCK_PID [airlock-base]=${BASE_PID:-0} [squid]=$SQUID_PID
	[tinyproxy]=$TINY_PID)
# Per contender and round ("name round"): figures of the rounds that
# counted (a rate round counts only if no tunnel failed).
declare -A RATE RCPU RDNS TLS TCPU BULK BCPU IDLE

# Warm-up, not counted: the file into the page cache, every proxy's first
# allocations done, squid's cache of the name filled (it keeps it for the
# TTL, as it would in use; airlock and tinyproxy ask on every tunnel).
"$BP" bulk direct $ORIGIN:18080 /big >/dev/null || true
for n in "${NAMES[@]}"; do
	"$BP" rate "${ADDR[$n]}" $ORIGIN:18080 10 1000 10 >/dev/null || echo "warm-up: $n failed" >&2
	"$BP" rate "${ADDR[$n]}" $ORIGIN:18443 10 200 10 "$S/origin.pem" >/dev/null ||
		echo "warm-up: $n TLS failed" >&2
done

# The contenders in round r's order: rotated by one each round, so none
# always runs right after the same neighbour.
order() {
	local i k=${#NAMES[@]}
	for ((i = 0; i < k; i++)); do echo "${NAMES[$(((i + $1) % k))]}"; done
}
# us per tunnel from a CPU delta (ms) and a count.
per_tunnel() { awk -v c="$1" -v k="$2" 'BEGIN { if (k > 0) printf "%.1f", 1000 * c / k; else print "-" }'; }
# One rate round of contender $2 on target $3 (TLS with $4 = CA file):
# prints the client's line; fills the arrays named by $5 (rate), $6 (proxy
# CPU), $7 (DNS CPU).
rate_round() {
	local r=$1 n=$2 target=$3 ca=$4 out c0=0 c1=0 d0 d1 ok
	local -n rr=$5 rc=$6
	[ "$n" = direct ] || c0=$(cpu_tree "${PID[$n]}")
	d0=$(cpu_tree $DNS_PID)
	out=$("$BP" rate "${ADDR[$n]}" "$target" "$RATE_CONC" "$COUNT" "$SECS" $ca || true)
	d1=$(cpu_tree $DNS_PID)
	[ "$n" = direct ] || c1=$(cpu_tree "${PID[$n]}")
	echo "round $r $n: $out"
	if echo "$out" | grep -q ' failed 0 '; then
		ok=$(echo "$out" | awk '{print $3}')
		rr["$n $r"]=$(echo "$out" | awk '{print $NF}')
		[ "$n" = direct ] || rc["$n $r"]=$(per_tunnel $((c1 - c0)) "$ok")
		if [ -n "$7" ]; then
			local -n rd=$7
			rd["$n $r"]=$(per_tunnel $((d1 - d0)) "$ok")
		fi
	fi
}

echo "--- tunnels/s: CONNECT $ORIGIN:18080, GET / in the tunnel"
COUNT=$RATE_COUNT SECS=$RATE_SECONDS
for round in $(seq "$ROUNDS"); do
	for n in $(order "$round"); do rate_round "$round" "$n" $ORIGIN:18080 "" RATE RCPU RDNS; done
done
echo "--- TLS tunnels/s: CONNECT $ORIGIN:18443, TLS handshake (SNI $ORIGIN), GET /"
COUNT=$TLS_COUNT SECS=$TLS_SECONDS
for round in $(seq "$ROUNDS"); do
	for n in $(order "$round"); do rate_round "$round" "$n" $ORIGIN:18443 "$S/origin.pem" TLS TCPU ""; done
done
echo "--- 1 GiB through one tunnel"
for round in $(seq "$ROUNDS"); do
	for n in $(order "$round"); do
		c0=$( [ "$n" = direct ] || cpu_tree "${PID[$n]}")
		out=$("$BP" bulk "${ADDR[$n]}" $ORIGIN:18080 /big || true)
		c1=$( [ "$n" = direct ] || cpu_tree "${PID[$n]}")
		echo "round $round $n: $out"
		got=$(echo "$out" | awk '{print $3}')
		if [ "${got:-0}" -ge $BIG ]; then
			BULK["$n $round"]=$(echo "$out" | awk '{print $NF}')
			[ "$n" = direct ] || BCPU["$n $round"]=$((c1 - c0))
		else
			echo "  ($n moved only ${got:-0} bytes)"
		fi
	done
done
echo "--- idle tunnels: CONNECT $ORIGIN:18081, one line echoed, held"
for n in "${PROXIES[@]}"; do
	sleep 1
	before=$(rss_tree "${PID[$n]}")
	"$BP" idle "${ADDR[$n]}" $ORIGIN:18081 "$IDLE_N" 30 >"$S/idle.out" 2>"$S/idle.err" &
	ip=$!
	for _ in $(seq 600); do grep -q idle-ready "$S/idle.out" && break; sleep 0.2; done
	sleep 1
	after=$(rss_tree "${PID[$n]}")
	ok=$(awk '{print $2}' "$S/idle.out")
	kill $ip 2>/dev/null || true
	wait $ip 2>/dev/null || true
	per=$(awk -v a="$after" -v b="$before" -v n="${ok:-0}" 'BEGIN { if (n > 0) printf "%.2f", (a - b) / n; else print "n/a" }')
	echo "$n: idle tunnels $ok, RSS $before KiB -> $after KiB, $per KiB per tunnel"
	if [ "${ok:-0}" -lt "$IDLE_N" ]; then
		kill -0 "${PID[$n]}" 2>/dev/null && alive=running || alive="not running"
		echo "  ($n is $alive; the client: $(tr '\n' ' ' <"$S/idle.err" | head -c 300))"
	fi
	IDLE[$n]="${ok:-0} $per"
	# The next proxy's tunnels need the echo server's descriptors back:
	# wait (bounded) until this proxy has closed its side of every tunnel.
	for _ in $(seq 300); do
		[ "$(ls /proc/$ECHO_PID/fd | wc -l)" -gt 50 ] || break
		sleep 0.1
	done
	left=$(ls /proc/$ECHO_PID/fd | wc -l)
	[ "$left" -le 50 ] || echo "  ($n still holds $((left - 5)) tunnels to the echo server after 30 s)"
done

# The figures of contender $2 in array $1, one per counted round.
figures() {
	local -n a=$1
	local r
	for r in $(seq "$ROUNDS"); do [ -z "${a["$2 $r"]:-}" ] || echo "${a["$2 $r"]}"; done
}
median() { sort -n | awk '{ v[NR] = $1 } END { if (NR) print v[int((NR + 1) / 2)]; else print "-" }'; }
best() { sort -n | tail -1 | grep . || echo "-"; }
med() { figures "$1" "$2" | median; }
ratio() { awk -v a="$1" -v b="$2" -v f="${3:-%.2fx}" 'BEGIN { if (a != "-" && b != "-" && b > 0) printf f, a / b; else print "-" }'; }

echo
echo "end $(date -u +%H:%M:%S) UTC; load: $(uptime)"
echo "median round of $ROUNDS (best round in brackets); ratios are of the medians; CPU in us per tunnel"
echo "| | tunnels/s | vs squid | proxy CPU | DNS server CPU | TLS tunnels/s | vs direct | proxy CPU per TLS tunnel | 1 GiB MiB/s | vs direct | proxy CPU ms / GiB | idle RSS KiB/tunnel (n) |"
echo "|---|---|---|---|---|---|---|---|---|---|---|---|"
squid_rate=$(med RATE squid) direct_tls=$(med TLS direct) direct_bulk=$(med BULK direct)
for n in "${NAMES[@]}"; do
	r=$(med RATE "$n") t=$(med TLS "$n") b=$(med BULK "$n")
	if [ "$n" = direct ]; then idle="-" rc="-" tc="-" bc="-"; else
		set -- ${IDLE[$n]}
		idle="$2 ($1)" rc=$(med RCPU "$n") tc=$(med TCPU "$n") bc=$(med BCPU "$n")
	fi
	echo "| $n | $r ($(figures RATE "$n" | best)) | $(ratio "$r" "$squid_rate") | $rc | $(med RDNS "$n") |" \
		"$t ($(figures TLS "$n" | best)) | $(ratio "$t" "$direct_tls") | $tc |" \
		"$b ($(figures BULK "$n" | best)) | $(ratio "$b" "$direct_bulk" "%.2f") | $bc | $idle |"
done
# Same-round ratios too: two contenders in one round ran seconds apart, so
# a burst of load elsewhere is more likely to have moved both. "a/b in
# array": the median of the rounds' ratios, and each round's.
per_round() {
	local -n a=$1
	local r x out=""
	for r in $(seq "$ROUNDS"); do
		x=$(ratio "${a["$2 $r"]:--}" "${a["$3 $r"]:--}" "%.3f")
		out="$out $x"
	done
	echo "$(echo $out | tr ' ' '\n' | grep -v '^-$' | median) (rounds:$out)"
}
echo
echo "same-round ratios, median of the rounds (each round in brackets):"
echo "  airlock / squid, tunnels/s: $(per_round RATE airlock squid)"
echo "  squid / airlock, proxy CPU per tunnel: $(per_round RCPU squid airlock)"
echo "  airlock / direct, TLS tunnels/s: $(per_round TLS airlock direct)"
if [ -n "$AIRLOCK_BASE" ]; then
	echo "airlock ($AIRLOCK) / airlock-base ($AIRLOCK_BASE):"
	echo "  tunnels/s: $(per_round RATE airlock airlock-base)"
	echo "  TLS tunnels/s: $(per_round TLS airlock airlock-base)"
	echo "  proxy CPU per tunnel: $(per_round RCPU airlock airlock-base)"
	echo "  proxy CPU per TLS tunnel: $(per_round TCPU airlock airlock-base)"
	echo "  1 GiB MiB/s: $(per_round BULK airlock airlock-base)"
fi
# What the proxies logged, as a check that they did what was asked: the
# verdicts, and one TLS tunnel's line (its sni is what the binding read).
echo
for n in airlock ${AIRLOCK_BASE:+airlock-base}; do
	echo "$n egress log: $(wc -l <"$S/$n.jsonl") lines;" \
		$(grep -o '"verdict":"[^"]*"' "$S/$n.jsonl" | sort | uniq -c | tr -s ' \n' ' ')
	grep '"port":18443' "$S/$n.jsonl" | tail -1
	grep -v '"verdict":"allow"' "$S/$n.jsonl" | head -5
done
