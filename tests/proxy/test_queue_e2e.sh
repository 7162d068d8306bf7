#!/usr/bin/env bash
# Queued bytes in the proxy (docs/proxy.md, Limits): clients that never read
# and a destination that never reads, through `airlock proxy` in the test
# lab (tests/lab). Per connection, what one direction queues stays within
# the documented bound on every path (CONNECT tunnel by splice,
# absolute-form response, absolute-form request body); across connections,
# the global cap holds. Measured two ways: bytes (what tests/proxy/bulk.py
# sent, or what the clients sent, less what the kernel's small socket
# buffers hold), and the proxy's RSS.
. "$(dirname "$0")/../lib.sh"
. "$TESTS_DIR/lab/lib.sh"
lab_start

# Small fixed TCP buffers in both namespaces: what the kernel holds between
# the two ends is then a few KiB per socket, and what the ends count is what
# the proxy queued.
for ns in exec inet; do
	"$LAB_SH" "$ns" "$LAB" sysctl -q -w net.ipv4.tcp_rmem="4096 8192 8192" \
		net.ipv4.tcp_wmem="4096 8192 8192" net.ipv4.tcp_moderate_rcvbuf=0
done

BULK=$LAB_PYPI_V4:8088
POL=$LAB_WORK/queue.yaml
cat >"$POL" <<-YAML
	version: 1
	name: queue-e2e
	allow:
	  - cidr: $LAB_PYPI_V4/32
	    ports: [8088]
YAML

"$LAB_SH" inet "$LAB" "$LAB_PYTHON" "$SOURCE_ROOT/tests/proxy/bulk.py" "$LAB_PYPI_V4" 8088 \
	"$LAB_WORK/bulk.status" >"$LAB_LOG/bulk.out" 2>&1 &
for _ in $(seq 100); do grep -q ready "$LAB_LOG/bulk.out" 2>/dev/null && break; sleep 0.05; done
grep -q ready "$LAB_LOG/bulk.out" || fail "bulk.py did not start: $(cat "$LAB_LOG/bulk.out")"

# start_proxy PORT ARGS...: airlock proxy on 127.0.0.1:PORT; PXPID is its pid.
start_proxy() {
	local port=$1
	shift
	"$LAB_SH" exec "$LAB" "${LAB_ENV[@]}" /bin/sh -c 'echo $$ >"$1"; shift; exec "$@"' sh \
		"$LAB_WORK/proxy-$port.pid" "$AIRLOCK" proxy -p "$POL" --listen "127.0.0.1:$port" \
		--log "$LAB_WORK/egress-$port.jsonl" --dns-upstream "$LAB_DNS" "$@" 2>"$LAB_LOG/proxy-$port.out" &
	for _ in $(seq 100); do
		in_lab "$LAB_PYTHON" -c "import socket; socket.create_connection(('127.0.0.1', $port), timeout=1)" \
			2>/dev/null && break
		sleep 0.05
	done
	PXPID=$(cat "$LAB_WORK/proxy-$port.pid")
	[ -n "$PXPID" ] || fail "airlock proxy on $port did not start: $(cat "$LAB_LOG/proxy-$port.out")"
}

# slowread PORT MODE N: the JSON line tests/proxy/slowread.py prints.
slowread() {
	in_lab "$LAB_PYTHON" "$SOURCE_ROOT/tests/proxy/slowread.py" "$1" "$PXPID" "$2" "$3" "$BULK" \
		"$LAB_WORK/bulk.status" 30
}

# field JSON KEY
field() { /usr/bin/python3 -c 'import json, sys; print(json.loads(sys.argv[1])[sys.argv[2]])' "$1" "$2"; }

# Per connection and direction the proxy queues at most 256 KiB, and at
# most one read (4 KiB) more (docs/proxy.md). What the kernel holds on the
# way (four small socket buffers, each under 16 KiB with the sysctls above)
# comes on top: 256 + 4 + 64 KiB.
BYTES_MAX=$(((256 + 4 + 64) * 1024))
# The RSS the same connections add: the bytes, plus the connection's own
# structures and buffers' bookkeeping (a few KiB).
RSS_MAX_KIB=$((256 + 4 + 32))
N=32
FAILS=()
# Under AddressSanitizer, RSS counts redzones and the quarantine of freed
# memory: only the byte counts tell then.
RSS_TELLS=true
if LC_ALL=C grep -qa __asan_init "$AIRLOCK"; then
	RSS_TELLS=false
	echo "a sanitizer build: RSS not checked"
fi

start_proxy 3128
for mode in connect-down http-down http-up; do
	out=$(slowread 3128 "$mode" "$N") || fail "$mode: $out"
	echo "$mode: $out"
	[ "$(field "$out" open)" = "$N" ] || FAILS+=("$mode: connections were closed: $out")
	[ "$(field "$out" settled)" = True ] || FAILS+=("$mode: the transfer never settled: $out")
	if [ "$mode" = http-up ]; then bytes=$(field "$out" client_sent); else bytes=$(field "$out" server_sent); fi
	per=$((bytes / N))
	echo "$mode: $((per / 1024)) KiB per connection in flight (bound with the kernel's share: $((BYTES_MAX / 1024)) KiB)"
	[ "$per" -le "$BYTES_MAX" ] || FAILS+=("$mode: $((per / 1024)) KiB in flight per connection, over $((BYTES_MAX / 1024)) KiB")
	if [ "$mode" != connect-down ] && $RSS_TELLS; then
		# Splice keeps a tunnel's bytes in pipes (kernel memory), so RSS
		# tells only for the paths through the proxy's own buffers.
		rss=$((($(field "$out" rss_after_kib) - $(field "$out" rss_before_kib)) / N))
		echo "$mode: RSS +$rss KiB per connection (bound $RSS_MAX_KIB KiB)"
		[ "$rss" -le "$RSS_MAX_KIB" ] || FAILS+=("$mode: RSS grew $rss KiB per connection, over $RSS_MAX_KIB KiB")
	fi
done
kill -TERM "$PXPID"

# The global cap: 32 KiB per allowed connection (--max-conns), here 256 x
# 32 KiB = 8 MiB, far below what 128 slow readers would queue alone
# (128 x 256 KiB = 32 MiB). Beyond the cap every reader pauses; once the
# slow readers are gone, the proxy serves again.
CAP=$((256 * 32 * 1024))
N=128
start_proxy 3129 --max-conns 256
for mode in connect-down http-down; do
	out=$(slowread 3129 "$mode" "$N") || fail "cap, $mode: $out"
	echo "cap, $mode: $out"
	bytes=$(field "$out" server_sent)
	kernel=$((N * 64 * 1024))
	echo "cap, $mode: $((bytes / 1048576)) MiB in flight, of which the kernel's share is at most $((kernel / 1048576)) MiB (cap $((CAP / 1048576)) MiB)"
	[ "$bytes" -le $((CAP + kernel + 1048576)) ] ||
		FAILS+=("cap, $mode: $((bytes / 1048576)) MiB in flight, over the cap $((CAP / 1048576)) MiB + $((kernel / 1048576)) MiB")
	if [ "$mode" = http-down ] && $RSS_TELLS; then
		rss=$(($(field "$out" rss_after_kib) - $(field "$out" rss_before_kib)))
		# The cap, plus per connection its structures (a few KiB).
		lim=$((CAP / 1024 + N * 32))
		echo "cap, $mode: RSS +$((rss / 1024)) MiB (bound $((lim / 1024)) MiB)"
		[ "$rss" -le "$lim" ] || FAILS+=("cap, $mode: RSS grew $((rss / 1024)) MiB, over $((lim / 1024)) MiB")
	fi
	# Everything moves again once the queues are gone.
	sleep 0.5
	out=$(in_lab /bin/sh -c 'curl -sS --max-time 10 -x http://127.0.0.1:3129 "$1" 2>/dev/null |
		head -c 100000 | wc -c' sh "http://$BULK/" || true)
	[ "$out" = 100000 ] || FAILS+=("cap, $mode: a request after the slow readers left got $out bytes")
done
kill -TERM "$PXPID"
for f in "$LAB_LOG"/proxy-*.out; do
	! grep -q Sanitizer "$f" || fail "sanitizer report: $(head -n 20 "$f")"
done
[ ${#FAILS[@]} -eq 0 ] || fail "$(printf '\n  %s' "${FAILS[@]}")"
echo "ok"
