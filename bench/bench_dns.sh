#!/usr/bin/env bash
# Benchmark: airlock's DNS listener (tests/dns/dnsd) against dnsmasq as a
# forwarder, side by side in one run, both forwarding to the same upstream
# dnsmasq, all inside a private network namespace with no route out.
#
#   [ROUNDS=3] bench/bench_dns.sh [BUILD_DIR] [SECONDS]
#
# For each resolver, dnsperf runs twice: at full speed (-q 100 outstanding
# queries) for throughput, and at a fixed 5,000 q/s for latency (200 names,
# so after the warm-up round every resolver answers from its cache when it
# has one; airlock still checks the policy and writes a log line per query). p99 is
# computed from dnsperf -v's per-query latencies. Needs root, dnsmasq,
# dnsperf. Prints a table and the ratios.
set -euo pipefail

BUILD=${1:-build}
SECS=${2:-5}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
DNSD=$ROOT/$BUILD/tests/dns/dnsd
[ -x "$DNSD" ] || { echo "bench_dns: build $DNSD first (ninja -C $BUILD tests/dns/dnsd)" >&2; exit 1; }

if [ "${BENCH_DNS_INNER:-0}" != 1 ]; then
	[ "$(id -u)" -eq 0 ] || { echo "bench_dns: needs root (network namespace)" >&2; exit 1; }
	export BENCH_DNS_INNER=1
	exec unshare -n -- "$BASH" "$0" "$@"
fi

S=$(mktemp -d /tmp/airlock-bench-dns.XXXXXX)
PIDS=()
cleanup() {
	local p
	for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
	for p in "${PIDS[@]}"; do wait "$p" 2>/dev/null || true; done
	rm -rf "$S"
}
trap cleanup EXIT

ip link set lo up
ip addr add 192.0.2.53/32 dev lo

# The shared upstream: authoritative for 200 names.
: >"$S/hosts"
for i in $(seq 1 200); do echo "203.0.113.$((i % 250 + 1)) h$i.bench.test" >>"$S/hosts"; done
dnsmasq --keep-in-foreground --no-resolv --no-hosts --user=root --group=root \
	--pid-file="$S/upstream.pid" \
	--listen-address=192.0.2.53 --bind-interfaces --port=53 --addn-hosts="$S/hosts" \
	--local-ttl=300 --cache-size=10000 --dns-forward-max=1000 &
PIDS+=($!)

# Candidates 1 and 2: dnsmasq as a forwarder (what a user would otherwise
# run) to the same upstream, with its default cache (150 names, fewer than
# the 200 queried) and with a cache big enough for all of them.
dnsmasq --keep-in-foreground --no-resolv --no-hosts --user=root --group=root \
	--pid-file="$S/5400.pid" --listen-address=127.0.0.1 --bind-interfaces --port=5400 \
	--server=192.0.2.53 --dns-forward-max=1000 &
PIDS+=($!)
PID_5400=$!
dnsmasq --keep-in-foreground --no-resolv --no-hosts --user=root --group=root \
	--pid-file="$S/5401.pid" --listen-address=127.0.0.1 --bind-interfaces --port=5401 \
	--server=192.0.2.53 --dns-forward-max=1000 --cache-size=10000 &
PIDS+=($!)
PID_5401=$!

# Candidate 2: airlock's resolver, with an egress log line per query.
cat >"$S/policy.yaml" <<'YAML'
version: 1
name: bench
allow:
  - host: "*.bench.test"
YAML
"$DNSD" -p "$S/policy.yaml" -l 127.0.0.1:5353 -u 192.0.2.53 -o "$S/egress.jsonl" 2>"$S/dnsd.err" &
PIDS+=($!)
PID_5353=$!

for i in $(seq 1 200); do echo "h$i.bench.test A"; done >"$S/queries"
for _ in $(seq 50); do
	dig @127.0.0.1 -p 5353 +short +time=1 h1.bench.test >/dev/null 2>&1 &&
		dig @127.0.0.1 -p 5400 +short +time=1 h1.bench.test >/dev/null 2>&1 && break
	sleep 0.1
done

# user + system CPU ticks of a process
cpu_ticks() {
	awk '{print $14 + $15}' "/proc/$1/stat"
}

# run PORT -> "qps lost avg_ms max_ms p50_ms p99_ms cpu_us_per_query"
run() {
	local port=$1 out qps lost p lost2
	# Throughput: as fast as it answers.
	local pidvar=PID_$port c0 c1 done_q
	c0=$(cpu_ticks "${!pidvar}")
	out=$(dnsperf -s 127.0.0.1 -p "$port" -d "$S/queries" -l "$SECS" -c 4 -q 100 -t 2 2>&1)
	c1=$(cpu_ticks "${!pidvar}")
	qps=$(awk '/Queries per second:/{print $4}' <<<"$out")
	lost=$(awk '/Queries lost:/{print $3}' <<<"$out")
	done_q=$(awk '/Queries completed:/{print $3}' <<<"$out")
	# The server's own CPU time per answered query: unlike qps and
	# latency, this hardly depends on what else the machine is doing.
	cpu_us=$(awk -v t=$((c1 - c0)) -v hz="$(getconf CLK_TCK)" -v n="$done_q" \
		'BEGIN {printf "%.2f", (n > 0 ? t / hz * 1e6 / n : 0)}')
	# Latency at a fixed rate, per query (-v prints one line each).
	out=$(dnsperf -s 127.0.0.1 -p "$port" -d "$S/queries" -l "$SECS" -c 4 -Q 5000 -t 2 -v 2>&1)
	lost2=$(awk '/Queries lost:/{print $3}' <<<"$out")
	p=$(awk '/^> [A-Z]+ / {print $NF}' <<<"$out" |
		sort -g | awk '{a[NR]=$1} END {if (NR==0) {print "- - - -"; exit}
			s=0; for (i=1;i<=NR;i++) s+=a[i];
			printf "%.3f %.3f %.3f %.3f\n", s/NR*1000, a[NR]*1000, a[int(NR*0.5)]*1000, a[int(NR*0.99)]*1000}')
	echo "$qps $lost $p $cpu_us $lost2"
}

# Warm every cache once, then ROUNDS rounds, alternating the resolvers so
# none gets the quieter share of a busy machine; report the median round.
ROUNDS=${ROUNDS:-3}
for port in 5400 5401 5353; do run "$port" >/dev/null; done
for r in $(seq "$ROUNDS"); do
	for port in 5400 5401 5353; do echo "$port $(run "$port")"; done
done >"$S/results"

# median PORT COLUMN (2 = qps, 3 = lost, 4 = avg, 5 = max, 6 = p50, 7 = p99,
# 8 = CPU us per query, 9 = lost in the latency run)
median() {
	awk -v p="$1" -v c="$2" '$1 == p {print $c}' "$S/results" | sort -g |
		awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'
}
row() {
	printf '%-30s %10.0f %6s %8s %8s %8s %8s %8s\n' "$1" "$(median "$2" 2)" \
		"$(awk -v p="$2" '$1 == p {s += $3 + $9} END {print s}' "$S/results")" \
		"$(median "$2" 4)" "$(median "$2" 6)" "$(median "$2" 7)" "$(median "$2" 5)" \
		"$(median "$2" 8)"
}
printf '\n%s rounds of %s s per measurement, medians; load average: %s\n' "$ROUNDS" "$SECS" \
	"$(cut -d' ' -f1-3 /proc/loadavg)"
printf '%-30s %10s %6s %8s %8s %8s %8s %8s\n' resolver "qps(max)" lost "avg ms" "p50 ms" "p99 ms" "max ms" "cpu us/q"
row "dnsmasq forwarder (default)" 5400
row "dnsmasq forwarder (cache 10k)" 5401
row "airlock dnsd" 5353
awk -v a="$(median 5353 2)" -v m="$(median 5400 2)" -v b="$(median 5401 2)" \
	-v ap="$(median 5353 7)" -v mp="$(median 5400 7)" -v bp="$(median 5401 7)" 'BEGIN {
	printf "\nqps ratio airlock/dnsmasq(default): %.2f   airlock/dnsmasq(cache 10k): %.2f\n", a/m, a/b
	printf "p99 ratio airlock/dnsmasq(default): %.2f   airlock/dnsmasq(cache 10k): %.2f\n", (mp > 0 ? ap/mp : 0), (bp > 0 ? ap/bp : 0) }'
awk -v a="$(median 5353 8)" -v m="$(median 5400 8)" -v b="$(median 5401 8)" 'BEGIN {
	printf "CPU per query ratio airlock/dnsmasq(default): %.2f   airlock/dnsmasq(cache 10k): %.2f\n", (m > 0 ? a/m : 0), (b > 0 ? a/b : 0) }'
echo "per-round figures (port qps lost avg max p50 p99 cpu_us lost@5000qps; 5400/5401 dnsmasq, 5353 airlock):"
cat "$S/results"
echo "egress log lines written by airlock: $(wc -l <"$S/egress.jsonl")"
# Datagrams the kernel dropped for full buffers, over the whole run, all
# resolvers (the namespace is ours alone).
awk '/^Udp:/ {if (!h) {split($0, n); h = 1} else {for (i = 2; i <= NF; i++) if (n[i] ~ /Errors/) printf "%s=%s ", n[i], $i; print ""}}' /proc/net/snmp
