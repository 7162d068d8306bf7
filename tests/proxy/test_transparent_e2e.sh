#!/usr/bin/env bash
# The transparent listener through `airlock run` in the test lab: clients
# that ignore the proxy variables are redirected by nftables, and the proxy
# decides on SNI / Host / the original destination (DESIGN.md, decisions
# 1-4): allowed names work, SNI and Host spoofing (a name pointed at another
# address) are refused, name-less TCP is allowed only to addresses learned
# from DNS for an allowed name, everything else is reset and logged.
. "$(dirname "$0")/../lib.sh"
. "$TESTS_DIR/lab/lib.sh"
# lib.sh's expect_match pipes into grep -q, which under pipefail can fail
# when grep exits before printf has written a long reply; a here-string
# cannot.
expect_re() {
	grep -Eq -- "$2" <<<"$3" || fail "$1: '$3' does not match /$2/"
}
lab_start

POL=$LAB_WORK/transparent.yaml
cat >"$POL" <<-'YAML'
	version: 1
	name: transparent-e2e
	allow:
	  - host: pypi.org
	    ports: [80, 443, 7]
	  - host: evil.test
	    ports: [8443]
	deny:
	  - cidr: 203.0.113.0/24
	    ports: [8443]
	  - cidr: 2001:db8:66::/48
	    ports: [8443]
YAML

"$LAB_SH" inet "$LAB" "$LAB_PYTHON" "$SOURCE_ROOT/tests/proxy/echo.py" "$LAB_PYPI_V4" 7 \
	>"$LAB_LOG/echo.out" 2>&1 &
for _ in $(seq 100); do grep -q ready "$LAB_LOG/echo.out" 2>/dev/null && break; sleep 0.05; done

# Everything inside one sandbox; each step prints a marker the test checks.
cat >"$LAB_WORK/inside.sh" <<-'SH'
	unset HTTP_PROXY HTTPS_PROXY ALL_PROXY http_proxy https_proxy all_proxy
	c() { curl -sS --max-time 5 "$@"; }
	c -4 https://pypi.org/simple/labpkg/ | grep -q labpkg-1.0 && echo "tls-allowed"
	c -6 https://pypi.org/simple/labpkg/ | grep -q labpkg-1.0 && echo "tls6-allowed"
	c --resolve pypi.org:443:203.0.113.66 https://pypi.org/ 2>&1 | grep -qi "alert access denied" && echo "sni-spoof-refused"
	c http://pypi.org/simple/labpkg/ | grep -q labpkg-1.0 && echo "http-allowed"
	[ "$(c -o /dev/null -w '%{http_code}' --resolve pypi.org:80:203.0.113.66 http://pypi.org/)" = 403 ] && echo "host-spoof-refused"
	c --resolve evil.test:443:203.0.113.66 https://evil.test/ 2>&1 | grep -qi "alert access denied" && echo "sni-denied"
	# evil.test is allowed on 8443, but every address it resolves to is in
	# a deny cidr rule: refused before any dial, explicit and transparent
	# (the canaries on 8443 stay silent).
	[ "$(c -o /dev/null -w '%{http_connect}' -x http://127.0.0.1:3128 -p https://evil.test:8443/ 2>/dev/null)" = 403 ] && echo "connect-cidr-denied"
	c https://evil.test:8443/ 2>&1 | grep -qi "alert access denied" && echo "sni-cidr-denied"
	python3 - <<-'PY'
		import socket, time
		# No name, an address learned from DNS for an allowed name and port.
		s = socket.create_connection(("pypi.org", 7), timeout=5)
		s.sendall(b"hello\n")
		print("tcp-learned" if s.recv(100) == b"hello\n" else "tcp-learned-FAILED")
		s.close()
		# The same, the client silent first (as for server-speaks-first).
		s = socket.create_connection(("pypi.org", 7), timeout=5)
		time.sleep(0.6)
		s.sendall(b"late\n")
		print("tcp-silent" if s.recv(100) == b"late\n" else "tcp-silent-FAILED")
		s.close()
		# No name, an address nobody allowed: reset.
		try:
		    s = socket.create_connection(("203.0.113.66", 4444), timeout=5)
		    s.sendall(b"x")
		    print("tcp-unknown-FAILED" if s.recv(100) else "tcp-unknown-refused")
		except OSError:
		    print("tcp-unknown-refused")
		# No name, to an address a cidr rule denies, after DNS taught the
		# proxy that address is evil.test (allowed on that port): the
		# deny wins (the log checks the reason; the canary stays silent).
		try:
		    got = {a[4][0] for a in socket.getaddrinfo("evil.test", 8443, socket.AF_INET, socket.SOCK_STREAM)}
		except OSError:
		    got = set()
		print("evil-resolved" if "203.0.113.66" in got else "evil-resolved-FAILED")
		try:
		    s = socket.create_connection(("203.0.113.66", 8443), timeout=3)
		    s.sendall(b"x")
		    s.settimeout(3)
		    s.recv(100)
		    s.close()
		except OSError:
		    pass
		print("tcp-cidr-deny-done")
	PY
SH
out=$(airlock_lab "$POL" -- sh "$LAB_WORK/inside.sh" 2>&1) || true
! grep -q Sanitizer <<<"$out" || fail "sanitizer report: $out"
for m in tls-allowed tls6-allowed sni-spoof-refused http-allowed host-spoof-refused sni-denied \
	connect-cidr-denied sni-cidr-denied tcp-learned tcp-silent tcp-unknown-refused evil-resolved tcp-cidr-deny-done; do
	grep -qx -- "$m" <<<"$out" || fail "transparent: '$m' missing; output: $out"
done

expect_logged "tls allowed" 'e.get("kind") == "tls" and e.get("sni") == "pypi.org" and e.get("verdict") == "allow" and e.get("ip") == "198.51.100.10"'
expect_logged "tls over IPv6 (IP6T_SO_ORIGINAL_DST)" 'e.get("kind") == "tls" and e.get("sni") == "pypi.org" and e.get("verdict") == "allow" and e.get("ip") == "2001:db8:1::10"'
expect_logged "SNI spoof logged with both" 'e.get("kind") == "tls" and e.get("sni") == "pypi.org" and e.get("ip") == "203.0.113.66" and e.get("verdict") == "deny" and "does not resolve to the original destination" in e.get("detail", "")'
expect_logged "Host spoof logged" 'e.get("kind") == "http" and e.get("host") == "pypi.org" and e.get("ip") == "203.0.113.66" and e.get("verdict") == "deny"'
expect_logged "denied SNI logged" 'e.get("kind") == "tls" and e.get("sni") == "evil.test" and e.get("verdict") == "deny"'
expect_logged "CONNECT to an allowed name inside a deny cidr" 'e.get("kind") == "connect" and e.get("host") == "evil.test" and e.get("port") == 8443 and e.get("ip") in ("203.0.113.66", "2001:db8:66::66") and e.get("verdict") == "deny" and "is denied by a cidr rule" in e.get("detail", "") and e.get("rule", "").endswith((":9", ":11"))'
expect_logged "SNI of an allowed name inside a deny cidr" 'e.get("kind") == "tls" and e.get("sni") == "evil.test" and e.get("port") == 8443 and e.get("verdict") == "deny" and "is denied by a cidr rule" in e.get("detail", "")'
expect_logged "learned tcp logged" 'e.get("kind") == "tcp" and e.get("host") == "pypi.org" and e.get("port") == 7 and e.get("verdict") == "allow"'
expect_logged "unknown tcp logged" 'e.get("kind") == "tcp" and e.get("ip") == "203.0.113.66" and e.get("port") == 4444 and e.get("verdict") == "deny"'
expect_logged "cidr deny beats the DNS cache" 'e.get("kind") == "tcp" and e.get("ip") == "203.0.113.66" and e.get("port") == 8443 and e.get("verdict") == "deny" and e.get("reason") == "denied-by-rule" and "host" not in e'
expect_canaries_silent "transparent"
/usr/bin/python3 "$TESTS_DIR/lab/check_log.py" "$LOGF" || fail "the egress log does not match docs/log.md"
echo "ok"
