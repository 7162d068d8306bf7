#!/usr/bin/env bash
# CPU per tunnel of each airlock process (the `airlock proxy` worker, its
# broker and its logger), for one or more airlock builds, over a fixed
# number of tunnels: a cost that a loaded machine hardly moves, unlike
# throughput. Inside a private network and mount namespace this script
# creates (loopback only, no route anywhere), with the origin and DNS of
# bench_proxy.sh (nginx on 198.51.100.10, dnsmasq on 127.0.0.1:53).
#
#   sudo [N=5000] [ROUNDS=3] [TLS=1] [MODE=perf|strace|trace|record] \
#        [TOP=60] [SORT=comm,sym] bench/bench_cpu.sh BUILD_DIR AIRLOCK_BINARY...
#
# Each binary in turn (the order repeated ROUNDS times) is started as
# `airlock proxy`, warmed up with 200 tunnels, then N tunnels (50
# concurrent; TLS=1: with a TLS handshake inside) are counted on each of
# its processes:
# MODE=perf (default): `perf stat -e task-clock --per-thread`; prints µs
# per tunnel for each process.
# MODE=strace: `strace -c` of each process; prints calls per tunnel.
# MODE=trace: every call of each process, the N tunnels one at a time
# (use a small N).
# MODE=record: `perf record -g -e cpu-clock`; prints the top TOP lines of
# `perf report --sort SORT`.
# No instruction counts: this VM has no hardware counters, and valgrind
# cannot run the confined broker and logger (it does not implement
# seccomp filters).
set -euo pipefail
[ -z "${BENCH_TRACE:-}" ] || set -x
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${1:?usage: bench_cpu.sh BUILD_DIR AIRLOCK...}
shift
BP=$BUILD/bench/bench-proxy
[ -x "$BP" ] || { echo "build first: ninja -C $BUILD" >&2; exit 1; }
[ "$#" -ge 1 ] || { echo "name at least one airlock binary" >&2; exit 1; }
[ "$(id -u)" = 0 ] || { echo "needs root (a private network namespace)" >&2; exit 1; }
if [ -z "${BENCH_IN_NS:-}" ]; then
	exec unshare --net --mount -- env BENCH_IN_NS=1 BENCH_TRACE=${BENCH_TRACE:-} "$0" "$BUILD" "$@"
fi
N=${N:-5000}
ROUNDS=${ROUNDS:-3}
MODE=${MODE:-perf}
TLS=${TLS:-0}
ip link set lo up
ORIGIN=origin.bench.test
ORIGIN_IP=198.51.100.10
ip route add local 198.51.100.0/24 dev lo
sysctl -qw net.ipv4.ip_local_port_range="1024 65535"
ulimit -n "$(ulimit -Hn)"

S=$(mktemp -d /tmp/airlock-bcpu.XXXXXX)
chmod 755 "$S"
PIDS=()
CUR=
cleanup() {
	local p
	# the proxy of a round cut short; its children end with its socket
	[ -z "$CUR" ] || { kill "$CUR" 2>/dev/null || true; wait "$CUR" 2>/dev/null || true; }
	for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
	for p in "${PIDS[@]}"; do wait "$p" 2>/dev/null || true; done
	rm -rf "$S"
}
trap cleanup EXIT
echo "start $(date -u +%H:%M:%S) UTC; load: $(cut -d' ' -f1-3 /proc/loadavg)"

. "$ROOT/bench/origin.sh"
origin_dns
origin_nginx "" ""
cat >"$S/policy.yaml" <<-YAML
	version: 1
	name: bench
	allow:
	  - host: $ORIGIN
	    ports: [18080, 18443]
YAML
wait_port $ORIGIN_IP 18080
if [ "$TLS" = 1 ]; then
	TARGET=$ORIGIN:18443
	CA=$S/origin.pem
else
	TARGET=$ORIGIN:18080
	CA=
fi

# The proxy's processes: the one started and its children.
tree() { echo "$1" $(pgrep -P "$1" || true); }
pname() { tr -d '\0' <"/proc/$1/comm" 2>/dev/null || echo "?"; }

# One build, one round: start it, warm it up, count N tunnels, stop it.
round() {
	local bin=$1 tag=$2 pid p out pids spids=()
	local run=("$bin" proxy -p "$S/policy.yaml" --listen 127.0.0.1:3128
		--log "$S/$tag.jsonl" --dns-upstream 127.0.0.1 --max-conns 30000)
	"${run[@]}" 2>"$S/$tag.err" &
	pid=$!
	CUR=$pid
	wait_port 127.0.0.1 3128
	"$BP" rate 127.0.0.1:3128 $TARGET 10 200 20 $CA >/dev/null ||
		{ echo "$tag: the warm-up failed" >&2; tail -5 "$S/$tag.err" >&2; exit 1; }
	sleep 0.3
	pids=$(tree $pid)
	case $MODE in
	perf)
		perf stat -e task-clock --per-thread -p "${pids// /,}" -x, -o "$S/perf.out" &
		local ppid=$!
		sleep 0.2
		out=$("$BP" rate 127.0.0.1:3128 $TARGET 50 "$N" 120 $CA)
		kill -INT $ppid
		wait $ppid || true
		echo "$tag: $out"
		for p in $pids; do
			awk -F, -v p="$p" -v n="$N" -v name="$(pname "$p")" \
				'$1 ~ "-"p"$" { t += $2 } END { printf "  %-16s pid %-7s %8.1f us/tunnel\n", name, p, t * 1000 / n }' \
				"$S/perf.out"
		done
		;;
	strace)
		for p in $pids; do
			strace -c -p "$p" -o "$S/strace.$tag.$p" 2>/dev/null &
			spids+=($!)
		done
		sleep 0.5
		out=$("$BP" rate 127.0.0.1:3128 $TARGET 50 "$N" 120 $CA)
		kill -INT "${spids[@]}"
		wait "${spids[@]}" || true
		echo "$tag: $out"
		for p in $pids; do
			echo "  $(pname "$p") (pid $p), calls per tunnel:"
			awk -v n="$N" '$NF ~ /^[a-z_0-9]+$/ && $(NF-1) ~ /^[0-9]+$/ {
				calls = ($(NF-2) ~ /^[0-9]+$/ && NF == 6) ? $(NF-2) : $(NF-1)
				if (NF == 6) { c = $4; e = $5 } else { c = $4; e = 0 }
				if ($NF != "total") printf "    %-14s %6.2f%s\n", $NF, c / n, e ? sprintf(" (%.2f failed)", e / n) : ""
			}' "$S/strace.$tag.$p"
		done
		;;
	trace)
		# every call of each process over N tunnels (use a small N)
		for p in $pids; do
			strace -tt -p "$p" -o "$S/trace.$tag.$p" 2>/dev/null &
			spids+=($!)
		done
		sleep 0.5
		out=$("$BP" rate 127.0.0.1:3128 $TARGET 1 "$N" 120 $CA)
		sleep 0.2
		kill -INT "${spids[@]}"
		wait "${spids[@]}" || true
		echo "$tag: $out"
		for p in $pids; do
			echo "  $(pname "$p") (pid $p):"
			sed 's/^/    /' "$S/trace.$tag.$p"
		done
		;;
	record)
		perf record -q -g -e cpu-clock -p "${pids// /,}" -o "$S/perf.$tag.data" 2>/dev/null &
		local rpid=$!
		sleep 0.5
		out=$("$BP" rate 127.0.0.1:3128 $TARGET 50 "$N" 120 $CA)
		kill -INT $rpid
		wait $rpid || true
		echo "$tag: $out"
		perf report -i "$S/perf.$tag.data" --no-children --sort "${SORT:-comm,sym}" -g none --stdio 2>/dev/null |
			{ grep -v '^$' | grep -E '^ +[0-9]' | head -"${TOP:-60}"; } || true
		;;
	esac
	kill -TERM $pid
	wait $pid 2>/dev/null || true
	CUR=
	rm -f "$S/$tag.jsonl"
}

for r in $(seq "$ROUNDS"); do
	i=0
	for b in "$@"; do
		i=$((i + 1))
		round "$b" "b$i"
	done
done
echo "end $(date -u +%H:%M:%S) UTC; load: $(cut -d' ' -f1-3 /proc/loadavg)"
