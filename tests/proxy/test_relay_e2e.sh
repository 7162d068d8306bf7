#!/usr/bin/env bash
# Relay faithfully (docs/proxy.md, "Relay"), through `airlock proxy` in the
# test lab (tests/lab) towards tests/proxy/relay_origin.py:
#  - slow clients: 1,000 absolute-form downloads whose client reads more
#    slowly than the origin sends (a small receive buffer), sizes around the
#    proxy's high-water mark and beyond, kept-alive and closed either way,
#    close-delimited too: every body arrives whole, none stalls;
#  - an upstream reset reaches the client as a reset (curl exit 56), on
#    the forward path without a length and with one, and in a CONNECT
#    tunnel; the log says the upstream reset;
#    the same for transparent tunnels inside `airlock run`;
#  - the early 503 (connection limit) reaches a client whose request is
#    already there whole, with its Content-Length, and ends with a FIN.
# RELAY_N overrides the number of downloads (default 1000).
. "$(dirname "$0")/../lib.sh"
. "$TESTS_DIR/lab/lib.sh"
lab_start

# A small send buffer for the proxy's sockets: what the client has not read
# waits in the proxy's own output, past its high-water mark, instead of in
# the kernel.
"$LAB_SH" exec "$LAB" sysctl -q -w net.ipv4.tcp_wmem="4096 16384 16384"

T=$LAB_PYPI_V4:8089
POL=$LAB_WORK/relay.yaml
cat >"$POL" <<-YAML
	version: 1
	name: relay-e2e
	allow:
	  - cidr: $LAB_PYPI_V4/32
	    ports: [8089]
YAML

"$LAB_SH" inet "$LAB" "$LAB_PYTHON" "$SOURCE_ROOT/tests/proxy/relay_origin.py" "$LAB_PYPI_V4" 8089 \
	>"$LAB_LOG/relay_origin.out" 2>&1 &
for _ in $(seq 100); do grep -q ready "$LAB_LOG/relay_origin.out" 2>/dev/null && break; sleep 0.05; done
grep -q ready "$LAB_LOG/relay_origin.out" || fail "relay_origin.py did not start: $(cat "$LAB_LOG/relay_origin.out")"

PORT=3128
LOGF=$LAB_WORK/egress.jsonl
"$LAB_SH" exec "$LAB" "${LAB_ENV[@]}" /bin/sh -c 'echo $$ >"$1"; shift; exec "$@"' sh \
	"$LAB_WORK/proxy.pid" "$AIRLOCK" proxy -p "$POL" --listen "127.0.0.1:$PORT" \
	--log "$LOGF" --dns-upstream "$LAB_DNS" 2>"$LAB_LOG/proxy.out" &
for _ in $(seq 100); do
	in_lab "$LAB_PYTHON" -c "import socket; socket.create_connection(('127.0.0.1', $PORT), timeout=1)" \
		2>/dev/null && break
	sleep 0.05
done
PXPID=$(cat "$LAB_WORK/proxy.pid")
[ -n "$PXPID" ] || fail "airlock proxy did not start: $(cat "$LAB_LOG/proxy.out")"
FAILS=()

# --- slow clients ---
N=${RELAY_N:-1000}
out=$(in_lab "$LAB_PYTHON" "$SOURCE_ROOT/tests/proxy/relay_client.py" "$PORT" "$T" "$N" 15 240) ||
	FAILS+=("slow clients: not all $N downloads done in time: $out")
echo "slow clients: $out"
lost=$(/usr/bin/python3 -c 'import json, sys; print(json.loads(sys.argv[1])["lost"])' "$out" 2>/dev/null || echo "?")
[ "$lost" = 0 ] || FAILS+=("slow clients: $lost of $N downloads lost bytes or stalled: $out")

# --- an upstream reset is a reset ---
# curl_rc ARGS...: curl's exit status through the proxy, its error on stderr.
curl_rc() {
	local rc=0
	in_lab curl -sS --max-time 20 -o /dev/null -x "http://127.0.0.1:$PORT" "$@" \
		2>"$LAB_WORK/curl.err" || rc=$?
	echo "$rc"
}
for path in /rst/300000 /rst/10 /rstlen/300000; do
	for how in forward tunnel; do
		args=("http://$T$path")
		[ "$how" = tunnel ] && args=(-p "${args[@]}")
		rc=$(curl_rc "${args[@]}")
		echo "reset, $how $path: curl exit $rc: $(cat "$LAB_WORK/curl.err")"
		[ "$rc" = 56 ] || FAILS+=("reset, $how $path: curl exit $rc, not 56 (a reset): $(cat "$LAB_WORK/curl.err")")
	done
done
# A clean close-delimited end is still a clean end.
rc=$(curl_rc "http://$T/eof/300000")
[ "$rc" = 0 ] || FAILS+=("clean close-delimited end: curl exit $rc: $(cat "$LAB_WORK/curl.err")")
rc=$(curl_rc -p "http://$T/eof/300000")
[ "$rc" = 0 ] || FAILS+=("clean end in a tunnel: curl exit $rc: $(cat "$LAB_WORK/curl.err")")
sleep 0.3
n=$(grep -c '"reason":"upstream-reset"' "$LOGF" || true)
echo "log lines naming the upstream reset: $n"
[ "$n" -ge 6 ] || FAILS+=("the log names the upstream reset on $n of 6 lines: $(grep -i reset "$LOGF" | head -n 3)")

kill -TERM "$PXPID"

# --- a refusal arrives whole ---
# The early 503 (no connection object yet: here the connection limit) to
# clients whose request is already there: read whole, then a clean end.
"$LAB_SH" exec "$LAB" "${LAB_ENV[@]}" /bin/sh -c 'echo $$ >"$1"; shift; exec "$@"' sh \
	"$LAB_WORK/busy.pid" "$AIRLOCK" proxy -p "$POL" --listen "127.0.0.1:3129" --max-conns 1 \
	--log "$LAB_WORK/busy.jsonl" --dns-upstream "$LAB_DNS" 2>"$LAB_LOG/busy.out" &
for _ in $(seq 100); do
	[ -s "$LAB_WORK/busy.pid" ] && grep -q listening "$LAB_LOG/busy.out" 2>/dev/null && break
	sleep 0.05
done
BUSYPID=$(cat "$LAB_WORK/busy.pid")
out=$(in_lab "$LAB_PYTHON" "$SOURCE_ROOT/tests/proxy/busy_client.py" 3129 50) ||
	FAILS+=("the early 503 was not read whole: $out")
echo "early 503: $out"
# 50 refusals at the limit: each has its log line; stderr says it once.
n=$(grep -c "connections open (the limit)" "$LAB_LOG/busy.out" || true)
[ "$n" = 1 ] || FAILS+=("at the connection limit stderr said so $n times for 50 refusals, not once")
kill -TERM "$BUSYPID" "$PXPID" 2>/dev/null || true
sleep 0.2

# --- a reset stays a reset in a transparent tunnel (airlock run) ---
# The sandbox's curl goes straight to the address (no proxy variables), so
# the transparent listener takes it, decides it by Host and relays it.
LOGF=$LAB_WORK/run.jsonl
cat >"$LAB_WORK/inside.sh" <<-EOF
	for p in /rst/300000 /rst/10 /rstlen/300000 /eof/300000; do
		rc=0
		curl -sS --noproxy '*' --max-time 20 -o /dev/null "http://$T\$p" 2>/tmp/err || rc=\$?
		echo "transparent \$p: curl exit \$rc: \$(cat /tmp/err)"
	done
EOF
out=$(airlock_lab "$POL" -- sh "$LAB_WORK/inside.sh" 2>&1) || true
echo "$out" | grep transparent || FAILS+=("transparent: the run failed: $out")
for p in /rst/300000 /rst/10 /rstlen/300000; do
	echo "$out" | grep -q "^transparent $p: curl exit 56:" ||
		FAILS+=("transparent $p: not a reset: $(echo "$out" | grep "transparent $p:")")
done
echo "$out" | grep -q "^transparent /eof/300000: curl exit 0:" ||
	FAILS+=("transparent: a clean end is not clean: $(echo "$out" | grep "transparent /eof")")
n=$(grep -c '"reason":"upstream-reset"' "$LOGF" || true)
[ "$n" -ge 3 ] || FAILS+=("transparent: the log names the upstream reset on $n of 3 lines")

! grep -q Sanitizer "$LAB_LOG/busy.out" || fail "sanitizer report: $(head -n 20 "$LAB_LOG/busy.out")"
! grep -q Sanitizer "$LAB_LOG/proxy.out" || fail "sanitizer report: $(head -n 20 "$LAB_LOG/proxy.out")"
[ ${#FAILS[@]} -eq 0 ] || fail "$(printf '\n  %s' "${FAILS[@]}")"
echo "ok"
