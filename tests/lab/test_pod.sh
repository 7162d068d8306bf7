#!/usr/bin/env bash
# Pod mode, with the lab's client namespace standing in for the pod's:
# `airlock pod-init` (root, as an init container with NET_ADMIN) programs
# the ruleset, `airlock proxy --transparent --dns` runs as the exempt uid
# (AIRLOCK_TEST_USER), and the agent runs as nobody with no capability at
# all. Proxy-unaware (redirected) and proxy-aware (HTTP_PROXY) clients are
# decided and logged as in `airlock run`; the proxy's uid is the only
# exemption (root is not exempt); raw ICMPv6 and UDP are refused; a
# redirected flow fails closed when the proxy is gone.
. "$(dirname "$0")/../lib.sh"
. "$TESTS_DIR/lab/lib.sh"
need_prog setpriv
PUSER=${AIRLOCK_TEST_USER:-}
[ -n "$PUSER" ] && id "$PUSER" >/dev/null 2>&1 || skip "AIRLOCK_TEST_USER is not set to an existing user"
lab_start
PUID=$(id -u "$PUSER")
AGENT=nobody

POL=$LAB/pod.yaml
cat >"$POL" <<-'YAML'
	version: 1
	name: pod-e2e
	allow:
	  - host: pypi.org
	    ports: [443]
YAML
chmod 644 "$POL"
PLOGD=$LAB/proxylog
mkdir -p "$PLOGD"
chown "$PUSER:" "$PLOGD"
PLOG=$PLOGD/egress.jsonl
LOGF=$PLOG # for expect_logged
cp "$AIRLOCK" "$LAB/airlock"
chmod 755 "$LAB/airlock"
AL=$LAB/airlock

# as UID CMD...: in the pod, as that user, with no capability in any set.
as() {
	local u=$1
	shift
	"$LAB_SH" exec "$LAB" setpriv --reuid="$u" --regid="$(id -g "$u")" --clear-groups \
		--inh-caps=-all --bounding-set=-all --no-new-privs --reset-env -- "${LAB_ENV[@]}" "$@"
}

# Before pod-init: raw ICMPv6 from root reaches the lab (the control for
# the refusal below).
PING=$(lab_script "$TESTS_DIR/lab/raw_ping.py")
out=$(in_lab "$LAB_PYTHON" "$PING" "$LAB_PYPI_V6") || fail "control: raw ICMPv6 echo before pod-init: $out"
out=$(in_lab "$LAB_PYTHON" "$PING" "$LAB_PYPI_V4") || fail "control: raw ICMP echo before pod-init: $out"

# A listener of the agent's, and someone outside the pod connecting to it
# (which would let data out in the replies): works before pod-init.
cat >"$LAB/listen.py" <<-'PY'
	import socket, time
	s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
	s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
	s.bind(("0.0.0.0", 18080)); s.listen(8); s.settimeout(1)
	end = time.time() + 90
	while time.time() < end:
	    try:
	        c, _ = s.accept()
	    except OSError:
	        continue
	    c.sendall(b"secret\n"); c.close()
PY
chmod 644 "$LAB/listen.py"
as "$AGENT" "$LAB_PYTHON" "$LAB/listen.py" &
LISTENER=$!
inbound() {
	"$LAB_SH" inet "$LAB" "$LAB_PYTHON" -c 'import socket, sys
try:
    s = socket.create_connection((sys.argv[1], 18080), timeout=3); s.settimeout(3)
    print("inbound-open" if s.recv(10) else "inbound-closed")
except OSError:
    print("inbound-refused")' "$LAB_CLIENT_V4"
}
for _ in $(seq 30); do [ "$(inbound)" = inbound-open ] && break; sleep 0.1; done
expect_eq "control: inbound before pod-init" inbound-open "$(inbound)"

# Bad options: one line, exit 2, nothing programmed.
rc=0
err=$(in_lab "$AL" pod-init --proxy-uid 0 2>&1) || rc=$?
expect_eq "--proxy-uid 0: exit" 2 "$rc"
expect_match "--proxy-uid 0 refused" "^airlock: pod-init: --proxy-uid 0: that would exempt every root process" "$err"
in_lab nft list table inet airlock >/dev/null 2>&1 && fail "a refused pod-init left a table"

out=$(in_lab "$AL" pod-init --proxy-uid "$PUID") || fail "pod-init: $out"
expect_eq "pod-init says what it did" "airlock pod-init: ruleset in place: TCP to port 3129, DNS to port 3153, uid $PUID exempt" "$out"
rc=0
in_lab "$AL" pod-init --proxy-uid "$PUID" 2>/dev/null || rc=$?
expect_eq "a second pod-init fails" 1 "$rc"

"$LAB_SH" exec "$LAB" setpriv --reuid="$PUSER" --regid="$(id -g "$PUSER")" --clear-groups \
	--reset-env -- "${LAB_ENV[@]}" /bin/sh -c 'echo $$ >"$1"; shift; exec "$@"' sh "$PLOGD/proxy.pid" \
	"$AL" proxy -p "$POL" --listen localhost:3128 --transparent localhost:3129 \
	--dns localhost:3153 --dns-upstream "$LAB_DNS" --log "$PLOG" 2>"$LAB_LOG/proxy.out" &
for _ in $(seq 100); do
	grep -q "listening on" "$LAB_LOG/proxy.out" 2>/dev/null && break
	sleep 0.05
done
grep -q "listening on" "$LAB_LOG/proxy.out" || fail "airlock proxy did not start: $(cat "$LAB_LOG/proxy.out")"
in_lab "$AL" proxy --check 127.0.0.1:3128 || fail "the proxy is not healthy"
expect_eq "inbound to the agent's listener after pod-init" inbound-refused "$(inbound)"
kill "$LISTENER" 2>/dev/null || true

cat >"$LAB/agent.sh" <<-SH
	c() { curl -sS --max-time 5 "\$@"; }
	grep -q '^CapEff:[[:space:]]*0*$' /proc/self/status && echo no-caps
	# Proxy-unaware: redirected to the transparent listener.
	c --resolve pypi.org:443:$LAB_PYPI_V4 https://pypi.org/simple/labpkg/ | grep -q labpkg-1.0 && echo tls-allowed
	c -g --resolve "pypi.org:443:[$LAB_PYPI_V6]" https://pypi.org/simple/labpkg/ | grep -q labpkg-1.0 && echo tls6-allowed
	c --resolve evil.test:443:$LAB_EVIL_V4 https://evil.test/ >/dev/null 2>&1 || echo tls-denied
	[ "\$(c -o /dev/null -w '%{http_code}' --resolve pypi.org:80:$LAB_PYPI_V4 http://pypi.org/simple/labpkg/)" = 403 ] && echo http-port-denied
	# Proxy-aware: the explicit listener.
	HTTPS_PROXY=http://127.0.0.1:3128 c https://pypi.org/simple/labpkg/ | grep -q labpkg-1.0 && echo explicit-allowed
	[ "\$(HTTPS_PROXY=http://127.0.0.1:3128 c -o /dev/null -w '%{http_code}' https://evil.test/ 2>/dev/null)" != 200 ] && echo explicit-denied
	# DNS to any server is the proxy's DNS listener.
	dig +short +time=3 +tries=1 @$LAB_DNS pypi.org A | grep -qx "$LAB_PYPI_V4" && echo dns-allowed
	dig +time=3 +tries=1 @$LAB_DNS evil.test A | grep -q "status: NXDOMAIN" && echo dns-denied
	dig +short +time=3 +tries=1 @203.0.113.53 pypi.org A | grep -qx "$LAB_PYPI_V4" && echo dns-redirected
	python3 - <<-'PY'
		import socket
		# UDP elsewhere: refused. The same socket first had a redirected
		# DNS flow: its NAT binding is for that flow alone.
		s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
		s.settimeout(3)
		q = bytes.fromhex("abcd010000010000000000000470797069036f72670000010001")
		s.sendto(q, ("$LAB_DNS", 53))
		try:
		    s.recvfrom(512)
		    print("udp-dns-redirected")
		except OSError:
		    pass
		try:
		    s.sendto(b"x", ("$LAB_PYPI_V4", 9999))
		    s.recvfrom(10)
		    print("udp-FAILED")
		except OSError:
		    print("udp-refused")
	PY
SH
chmod 644 "$LAB/agent.sh"
out=$(as "$AGENT" sh "$LAB/agent.sh" 2>&1) || true
for m in no-caps tls-allowed tls6-allowed tls-denied http-port-denied explicit-allowed explicit-denied \
	dns-allowed dns-denied dns-redirected udp-dns-redirected udp-refused; do
	grep -qx -- "$m" <<<"$out" || fail "agent: '$m' missing; output: $out"
done

# Root is not exempt: its connection is the proxy's to decide too, and its
# raw ICMPv6 echo is refused (neighbour discovery still works: the TCP
# over IPv6 above needed it).
code=$(in_lab curl -sS --max-time 5 -o /dev/null -w '%{http_code}' --resolve "pypi.org:80:$LAB_PYPI_V4" http://pypi.org/simple/labpkg/) || true
expect_eq "root is redirected and denied" 403 "$code"
out=$(in_lab "$LAB_PYTHON" "$PING" "$LAB_PYPI_V6") && fail "raw ICMPv6 echo from root was not refused: $out"
out=$(in_lab "$LAB_PYTHON" "$PING" "$LAB_PYPI_V4") && fail "raw ICMP echo from root was not refused: $out"
# The proxy's uid is: it reaches port 80 directly (nginx answers, not
# the proxy's 403).
code=$(as "$PUSER" curl -sS --max-time 5 -o /dev/null -w '%{http_code}' --resolve "pypi.org:80:$LAB_PYPI_V4" http://pypi.org/simple/labpkg/) || true
expect_eq "the proxy's uid is exempt" 200 "$code"

# Fail closed: with the proxy gone, a redirected connection fails rather
# than going out directly.
kill -TERM "$(cat "$PLOGD/proxy.pid")"
for _ in $(seq 100); do grep -q '"task-end"' "$PLOG" 2>/dev/null && break; sleep 0.05; done
out=$(as "$AGENT" curl -sS --max-time 5 --resolve "pypi.org:443:$LAB_PYPI_V4" https://pypi.org/simple/labpkg/ 2>&1) &&
	fail "with the proxy gone the agent got through: $out"

expect_logged "transparent tls allowed" 'e.get("kind") == "tls" and e.get("sni") == "pypi.org" and e.get("verdict") == "allow" and e.get("ip") == "198.51.100.10"'
expect_logged "transparent tls over IPv6" 'e.get("kind") == "tls" and e.get("sni") == "pypi.org" and e.get("verdict") == "allow" and e.get("ip") == "2001:db8:1::10"'
expect_logged "transparent tls denied" 'e.get("kind") == "tls" and e.get("sni") == "evil.test" and e.get("verdict") == "deny"'
expect_logged "port 80 denied" 'e.get("kind") == "http" and e.get("host") == "pypi.org" and e.get("port") == 80 and e.get("verdict") == "deny" and e.get("reason") == "no-rule"'
expect_logged "explicit CONNECT allowed" 'e.get("kind") == "connect" and e.get("host") == "pypi.org" and e.get("verdict") == "allow"'
expect_logged "explicit CONNECT denied" 'e.get("kind") == "connect" and e.get("host") == "evil.test" and e.get("verdict") == "deny"'
expect_logged "DNS allowed" 'e.get("kind") == "dns" and e.get("host") == "pypi.org" and e.get("verdict") == "allow"'
expect_logged "DNS denied" 'e.get("kind") == "dns" and e.get("host") == "evil.test" and e.get("verdict") == "deny"'
expect_logged "task-end" 'e.get("kind") == "task-end"'
expect_canaries_silent "pod"
/usr/bin/python3 "$TESTS_DIR/lab/check_log.py" "$PLOG" || fail "the egress log does not match docs/log.md"
echo "ok: pod"
