#!/usr/bin/env bash
# Benchmark: airlock's DNS listener (tests/dns/dnsd) against dnsmasq as a
# forwarder, side by side in one run, both forwarding to the same upstream
# dnsmasq, all inside a private network namespace with no route out.
#
#   bench/bench_dns.sh [BUILD_DIR] [SECONDS]
#
# For each resolver, dnsperf runs twice: at full speed (-q 100 outstanding
# queries) for throughput, and at a fixed 5,000 q/s for latency. p99 is
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
	--listen-address=192.0.2.53 --bind-interfaces --port=53 --addn-hosts="$S/hosts" \
	--local-ttl=300 --cache-size=10000 --dns-forward-max=1000 &
PIDS+=($!)

# Candidate 1: dnsmasq as a forwarder (what a user would otherwise run),
# default cache, to the same upstream.
dnsmasq --keep-in-foreground --no-resolv --no-hosts --user=root --group=root \
	--listen-address=127.0.0.1 --bind-interfaces --port=5400 \
	--server=192.0.2.53 --dns-forward-max=1000 &
PIDS+=($!)

# Candidate 2: airlock's resolver, with an egress log line per query.
cat >"$S/policy.yaml" <<'YAML'
version: 1
name: bench
allow:
  - host: "*.bench.test"
YAML
"$DNSD" -p "$S/policy.yaml" -l 127.0.0.1:5353 -u 192.0.2.53 -o "$S/egress.jsonl" 2>"$S/dnsd.err" &
PIDS+=($!)

for i in $(seq 1 200); do echo "h$i.bench.test A"; done >"$S/queries"
for _ in $(seq 50); do
	dig @127.0.0.1 -p 5353 +short +time=1 h1.bench.test >/dev/null 2>&1 &&
		dig @127.0.0.1 -p 5400 +short +time=1 h1.bench.test >/dev/null 2>&1 && break
	sleep 0.1
done

# run NAME PORT -> "qps lost avg_ms max_ms p50_ms p99_ms"
run() {
	local port=$1 out qps lost p
	# Throughput: as fast as it answers.
	out=$(dnsperf -s 127.0.0.1 -p "$port" -d "$S/queries" -l "$SECS" -c 4 -q 100 -t 2 2>&1)
	qps=$(awk '/Queries per second:/{print $4}' <<<"$out")
	lost=$(awk '/Queries lost:/{print $3}' <<<"$out")
	# Latency at a fixed rate, per query (-v prints one line each).
	out=$(dnsperf -s 127.0.0.1 -p "$port" -d "$S/queries" -l "$SECS" -c 4 -Q 5000 -t 2 -v 2>&1)
	p=$(awk '/^> [A-Z]+ / {print $NF}' <<<"$out" |
		sort -g | awk '{a[NR]=$1} END {if (NR==0) {print "- - - -"; exit}
			s=0; for (i=1;i<=NR;i++) s+=a[i];
			printf "%.3f %.3f %.3f %.3f\n", s/NR*1000, a[NR]*1000, a[int(NR*0.5)]*1000, a[int(NR*0.99)]*1000}')
	echo "$qps $lost $p"
}

# Warm both caches once, then measure, alternating so neither gets the
# quieter half of the machine's time.
run 5400 >/dev/null
run 5353 >/dev/null
read -r m_qps m_lost m_avg m_max m_p50 m_p99 <<<"$(run 5400)"
read -r a_qps a_lost a_avg a_max a_p50 a_p99 <<<"$(run 5353)"

printf '\n%-22s %12s %8s %10s %10s %10s\n' resolver "qps(max)" lost "avg ms" "p50 ms" "p99 ms"
printf '%-22s %12.0f %8s %10s %10s %10s\n' "dnsmasq (forwarder)" "$m_qps" "$m_lost" "$m_avg" "$m_p50" "$m_p99"
printf '%-22s %12.0f %8s %10s %10s %10s\n' "airlock dnsd" "$a_qps" "$a_lost" "$a_avg" "$a_p50" "$a_p99"
awk -v a="$a_qps" -v m="$m_qps" -v ap="$a_p99" -v mp="$m_p99" 'BEGIN {
	printf "\nqps ratio airlock/dnsmasq: %.2f\np99 ratio airlock/dnsmasq: %.2f\n", a/m, (mp > 0 ? ap/mp : 0) }'
echo "egress log lines written by airlock: $(wc -l <"$S/egress.jsonl")"
