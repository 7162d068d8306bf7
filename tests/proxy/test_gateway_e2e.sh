#!/usr/bin/env bash
# `airlock proxy` as a gateway in the test lab: --transparent serves
# connections nftables redirects to it (SO_ORIGINAL_DST, TLS SNI, HTTP
# Host, name-less TCP learned from DNS), decided as inside `airlock run`;
# --dns answers allowed names only, over UDP and TCP, through the broker;
# --listen takes a name (localhost: every address). Everything in the
# lab's client namespace, no route out; the client runs as another user,
# whose connections alone are redirected (the proxy's own dials are not).
. "$(dirname "$0")/../lib.sh"
. "$TESTS_DIR/lab/lib.sh"
expect_re() {
	grep -Eq -- "$2" <<<"$3" || fail "$1: '$3' does not match /$2/"
}
need_prog dig
TUSER=${AIRLOCK_TEST_USER:-}
[ -n "$TUSER" ] && id "$TUSER" >/dev/null 2>&1 || skip "AIRLOCK_TEST_USER is not set to an existing user"
lab_start

POL=$LAB_WORK/gateway.yaml
cat >"$POL" <<-'YAML'
	version: 1
	name: gateway-e2e
	allow:
	  - host: pypi.org
	    ports: [80, 443, 7]
YAML

# Option names in errors, before anything starts.
out=$("$AIRLOCK" proxy -p "$POL" --transparent 127.0.0.1 2>&1) && fail "--transparent without a port accepted"
expect_re "--transparent named in its error" "^airlock proxy: --transparent '127.0.0.1': expected ADDR:PORT" "$out"
out=$("$AIRLOCK" proxy -p "$POL" --listen 127.0.0.1:3128 --dns nosuch.invalid:53 2>&1) && fail "--dns with a name that does not resolve accepted"
expect_re "--dns named in its error" "^airlock proxy: --dns 'nosuch.invalid:53': cannot resolve" "$out"
out=$("$AIRLOCK" proxy -p "$POL" --dns 127.0.0.1:1053 2>&1) && fail "--dns alone accepted"
expect_re "a listener is required" "--listen ADDR:PORT or --transparent ADDR:PORT are required" "$out"

"$LAB_SH" inet "$LAB" "$LAB_PYTHON" "$SOURCE_ROOT/tests/proxy/echo.py" "$LAB_PYPI_V4" 7 \
	>"$LAB_LOG/echo.out" 2>&1 &
for _ in $(seq 100); do grep -q ready "$LAB_LOG/echo.out" 2>/dev/null && break; sleep 0.05; done

"$LAB_SH" exec "$LAB" "${LAB_ENV[@]}" /bin/sh -c 'echo $$ >"$1"; shift; exec "$@"' sh \
	"$LAB_WORK/proxy.pid" "$AIRLOCK" proxy -p "$POL" --listen localhost:3128 \
	--transparent localhost:3130 --dns 127.0.0.1:1053 --log "$LOGF" \
	--dns-upstream "$LAB_DNS" 2>"$LAB_LOG/proxy.out" &
for _ in $(seq 100); do
	grep -q "listening on" "$LAB_LOG/proxy.out" 2>/dev/null && break
	sleep 0.05
done
grep -q "listening on" "$LAB_LOG/proxy.out" || fail "airlock proxy did not start: $(cat "$LAB_LOG/proxy.out")"

# Only the client user's TCP is redirected to the transparent listener.
uid=$(id -u "$TUSER")
in_lab nft -f - <<-NFT || fail "cannot add the redirect table"
	table inet gwtest {
		chain out {
			type nat hook output priority -100;
			meta skuid $uid tcp dport { 80, 443, 7, 4444 } redirect to :3130
			meta skuid $uid udp dport 53 redirect to :1053
		}
	}
NFT

cat >"$LAB_WORK/client.sh" <<-SH
	unset HTTP_PROXY HTTPS_PROXY ALL_PROXY http_proxy https_proxy all_proxy
	c() { curl -sS --max-time 5 "\$@"; }
	# Name-less TCP before the DNS listener answered for that address: refused.
	python3 -c 'import socket
	try:
	    s = socket.create_connection(("$LAB_PYPI_V4", 7), timeout=5); s.sendall(b"x"); s.settimeout(6)
	    print("tcp-unlearned-FAILED" if s.recv(100) else "tcp-unlearned-refused")
	except OSError:
	    print("tcp-unlearned-refused")'
	c --resolve pypi.org:443:$LAB_PYPI_V4 https://pypi.org/simple/labpkg/ | grep -q labpkg-1.0 && echo tls-allowed
	c -g --resolve "pypi.org:443:[$LAB_PYPI_V6]" https://pypi.org/simple/labpkg/ | grep -q labpkg-1.0 && echo tls6-allowed
	c --resolve pypi.org:443:203.0.113.66 https://pypi.org/ 2>&1 | grep -qi "alert access denied" && echo sni-spoof-refused
	c --resolve pypi.org:80:$LAB_PYPI_V4 http://pypi.org/simple/labpkg/ | grep -q labpkg-1.0 && echo http-allowed
	[ "\$(c -o /dev/null -w '%{http_code}' --resolve pypi.org:80:203.0.113.66 http://pypi.org/)" = 403 ] && echo host-spoof-refused
	c -x http://localhost:3128 https://pypi.org/simple/labpkg/ | grep -q labpkg-1.0 && echo explicit-allowed
	c -x "http://[::1]:3128" https://pypi.org/simple/labpkg/ | grep -q labpkg-1.0 && echo explicit6-allowed
	dig +short +time=3 +tries=1 @127.0.0.1 -p 1053 pypi.org A | grep -qx "$LAB_PYPI_V4" && echo dns-udp-allowed
	dig +short +tcp +time=3 +tries=1 @127.0.0.1 -p 1053 pypi.org AAAA | grep -qx "$LAB_PYPI_V6" && echo dns-tcp-allowed
	dig +short +time=3 +tries=1 @203.0.113.53 pypi.org A | grep -qx "$LAB_PYPI_V4" && echo dns-redirected
	dig +time=3 +tries=1 @127.0.0.1 -p 1053 evil.test A | grep -q "status: NXDOMAIN" && echo dns-denied
	python3 - <<-'PY'
		import socket
		# No name: the address the DNS listener gave for an allowed name.
		s = socket.create_connection(("$LAB_PYPI_V4", 7), timeout=5)
		s.sendall(b"hello\n")
		print("tcp-learned" if s.recv(100) == b"hello\n" else "tcp-learned-FAILED")
		s.close()
		try:
		    s = socket.create_connection(("203.0.113.66", 4444), timeout=5)
		    s.sendall(b"x")
		    print("tcp-unknown-FAILED" if s.recv(100) else "tcp-unknown-refused")
		except OSError:
		    print("tcp-unknown-refused")
	PY
SH
out=$(in_lab_as "$TUSER" sh "$LAB_WORK/client.sh" 2>&1) || true
for m in tcp-unlearned-refused tls-allowed tls6-allowed sni-spoof-refused http-allowed host-spoof-refused explicit-allowed \
	explicit6-allowed dns-udp-allowed dns-tcp-allowed dns-redirected dns-denied tcp-learned tcp-unknown-refused; do
	grep -qx -- "$m" <<<"$out" || fail "gateway: '$m' missing; output: $out"
done

# SOCKS5 on the explicit listener (first byte 5), decided as CONNECT.
cp "$SOURCE_ROOT/tests/proxy/socks_client.py" "$LAB_WORK/socks_client.py"
out=$(in_lab "$LAB_PYTHON" "$LAB_WORK/socks_client.py" 127.0.0.1 3128 "$LAB_PYPI_V4" 2>&1) || true
for m in socks-name-allowed socks-name-denied socks-addr-denied socks-bind-refused socks-udp-refused \
	socks-userpass socks-no-method socks-silent-closed; do
	grep -qx -- "$m" <<<"$out" || fail "socks5: '$m' missing; output: $out"
done
expect_logged "socks5 allowed" 'e.get("kind") == "socks5" and e.get("host") == "pypi.org" and e.get("port") == 7 and e.get("verdict") == "allow" and e.get("url") == "pypi.org:7" and e.get("bytes_up") == 6'
expect_logged "socks5 denied" 'e.get("kind") == "socks5" and e.get("host") == "evil.test" and e.get("verdict") == "deny" and e.get("reason") == "no-rule"'
expect_logged "socks5 address denied" 'e.get("kind") == "socks5" and e.get("host") == "198.51.100.10" and e.get("verdict") == "deny"'
expect_logged "socks5 BIND refused" 'e.get("kind") == "socks5" and "BIND is not supported" in e.get("detail", "")'
expect_logged "socks5 silent client logged" 'e.get("kind") == "socks5" and e.get("reason") == "head-timeout"'
grep -q s3cret-pw "$LOGF" && fail "a SOCKS5 password is in the log"

# GET /healthz on the explicit listener, exact path, not logged; --check.
out=$(in_lab curl -sS --max-time 5 -w ' %{http_code}' http://127.0.0.1:3128/healthz) || fail "GET /healthz"
expect_eq "/healthz answers 200 ok" "ok
 200" "$out"
out=$(in_lab curl -sS --max-time 5 -o /dev/null -w '%{http_code}' "http://[::1]:3128/healthz/") || true
expect_eq "/healthz/ is not /healthz" 400 "$out"
in_lab "$AIRLOCK" proxy --check localhost:3128 || fail "--check of a serving proxy exits $?"
err=$(in_lab "$AIRLOCK" proxy --check 127.0.0.1:3131 2>&1) && fail "--check of a closed port exits 0"
expect_re "--check says why" "^airlock proxy: --check '127.0.0.1:3131': no answer from /healthz" "$err"
# The transparent listener is not the explicit one: no health check there.
in_lab "$AIRLOCK" proxy --check 127.0.0.1:3130 2>/dev/null && fail "--check of the transparent listener exits 0"

# SIGHUP: no reload yet; the proxy says so and serves on (the default
# action would end it without task-end).
kill -HUP "$(cat "$LAB_WORK/proxy.pid")"
sleep 0.3
kill -0 "$(cat "$LAB_WORK/proxy.pid")" || fail "SIGHUP ended the proxy"
out=$(in_lab curl -sS --max-time 5 http://127.0.0.1:3128/healthz) || fail "GET /healthz after SIGHUP"
expect_eq "serving after SIGHUP" ok "$out"
kill -TERM "$(cat "$LAB_WORK/proxy.pid")"
for _ in $(seq 100); do grep -q '"task-end"' "$LOGF" 2>/dev/null && break; sleep 0.05; done

expect_logged "transparent tls allowed" 'e.get("kind") == "tls" and e.get("sni") == "pypi.org" and e.get("verdict") == "allow" and e.get("ip") == "198.51.100.10"'
expect_logged "transparent tls over IPv6" 'e.get("kind") == "tls" and e.get("sni") == "pypi.org" and e.get("verdict") == "allow" and e.get("ip") == "2001:db8:1::10"'
expect_logged "SNI spoof refused" 'e.get("kind") == "tls" and e.get("sni") == "pypi.org" and e.get("ip") == "203.0.113.66" and e.get("verdict") == "deny"'
expect_logged "Host spoof refused" 'e.get("kind") == "http" and e.get("host") == "pypi.org" and e.get("ip") == "203.0.113.66" and e.get("verdict") == "deny"'
expect_logged "explicit CONNECT" 'e.get("kind") == "connect" and e.get("host") == "pypi.org" and e.get("verdict") == "allow"'
expect_logged "DNS allowed" 'e.get("kind") == "dns" and e.get("host") == "pypi.org" and e.get("verdict") == "allow"'
expect_logged "DNS denied" 'e.get("kind") == "dns" and e.get("host") == "evil.test" and e.get("verdict") == "deny"'
expect_logged "learned tcp" 'e.get("kind") == "tcp" and e.get("host") == "pypi.org" and e.get("port") == 7 and e.get("verdict") == "allow"'
expect_logged "name-less tcp before DNS refused" 'e.get("kind") == "tcp" and e.get("ip") == "198.51.100.10" and e.get("port") == 7 and e.get("verdict") == "deny"'
expect_logged "unknown tcp refused" 'e.get("kind") == "tcp" and e.get("ip") == "203.0.113.66" and e.get("port") == 4444 and e.get("verdict") == "deny"'
expect_logged "task-start names every listener" 'e.get("kind") == "task-start" and e.get("command") == ["airlock", "proxy", "--listen", "localhost:3128", "--transparent", "localhost:3130", "--dns", "127.0.0.1:1053"]'
[ "$(log_count 'e.get("url") == "/healthz" and e.get("port") != 3130')" = 0 ] || fail "/healthz on the explicit listener was logged"
expect_logged "GET /healthz to the transparent listener is a request like any" 'e.get("url") == "/healthz" and e.get("port") == 3130 and e.get("verdict") == "deny"'
expect_logged "/healthz/ refused and logged" 'e.get("kind") == "http" and e.get("url") == "/healthz/" and e.get("verdict") == "deny"'
expect_logged "task-end" 'e.get("kind") == "task-end" and e.get("exit_status") == 0'
# The client's address on every line of a connection (many clients share
# a gateway): an IPv4 client as ip:port, an IPv6 one as [ip]:port.
[ "$(log_count 'e.get("kind") in ("connect", "http", "tls", "tcp", "socks5") and not re.fullmatch(r"(\d+\.\d+\.\d+\.\d+|\[[0-9a-f:]+\]):\d+", e.get("client", ""))')" = 0 ] ||
	fail "a connection's line without the client's ip:port"
expect_logged "an explicit IPv6 client" 'e.get("kind") == "connect" and e.get("client", "").startswith("[::1]:")'
expect_logged "an explicit IPv4 client" 'e.get("kind") == "socks5" and e.get("client", "").startswith("127.0.0.1:")'
expect_canaries_silent "gateway"
/usr/bin/python3 "$TESTS_DIR/lab/check_log.py" "$LOGF" || fail "the egress log does not match docs/log.md"
echo "ok"
