#!/usr/bin/env bash
# The names a connection's bytes present, through `airlock run` in the test
# lab (issue 15, items 2-4): evil.test and secret.evil.test share one lab
# address, 203.0.113.66; the policy allows evil.test and denies
# secret.evil.test, so each probe is a denied name on an allowed address,
# the case a shared CDN address makes real. The probes (tests/proxy/names.py)
# present secret.evil.test where servers read a name but a narrower sniffer
# would not: after leading empty lines, behind an uncommon method, in an
# absolute-form target, as a ClientHello's second server_name, behind ECH,
# after an h2c upgrade, and smuggled as a body whose Content-Length the
# Connection header names. Every one must be refused and logged with a
# reason, and nginx on the shared address must never have seen the denied
# name. Controls show the allowed name on the same paths still works.
. "$(dirname "$0")/../lib.sh"
. "$TESTS_DIR/lab/lib.sh"
lab_start

POL=$LAB_WORK/names.yaml
cat >"$POL" <<-'YAML'
	version: 1
	name: names-e2e
	allow:
	  - host: evil.test
	    ports: [80, 443, 8081]
	deny:
	  - host: secret.evil.test
YAML
# The same, with ECH allowed on the rule (a separate run: a binary that
# does not know the key refuses the whole file).
POL_ECH=$LAB_WORK/names-ech.yaml
sed 's/^    ports: \[80, 443, 8081\]$/&\n    ech: allow/' "$POL" >"$POL_ECH"
grep -q 'ech: allow' "$POL_ECH" || fail "could not write $POL_ECH"

# An origin on the shared address whose response names its own
# Content-Length in Connection (the response side of item 4).
cat >"$LAB_WORK/origin-conn.py" <<-'PY'
	import socket
	s = socket.socket(socket.AF_INET6, socket.SOCK_STREAM)
	s.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
	s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
	s.bind(("::", 8081))
	s.listen(16)
	print("ready", flush=True)
	for _ in range(100):
	    c, _ = s.accept()
	    c.settimeout(5)
	    got = b""
	    try:
	        while b"\r\n\r\n" not in got:
	            b = c.recv(4096)
	            if not b:
	                break
	            got += b
	        c.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 6\r\nConnection: Content-Length\r\n\r\nhello\n")
	    except OSError:
	        pass
	    c.close()
PY
"$LAB_SH" inet "$LAB" "$LAB_PYTHON" "$LAB_WORK/origin-conn.py" >"$LAB_LOG/origin-conn.out" 2>&1 &
for _ in $(seq 100); do grep -q ready "$LAB_LOG/origin-conn.out" 2>/dev/null && break; sleep 0.05; done

PROBE=$(lab_script "$SOURCE_ROOT/tests/proxy/names.py")
cat >"$LAB_WORK/inside.sh" <<-SH
	unset HTTP_PROXY HTTPS_PROXY ALL_PROXY http_proxy https_proxy all_proxy
	python3 "$PROBE" transparent
	python3 "$PROBE" explicit
SH
out=$(airlock_lab "$POL" -- sh "$LAB_WORK/inside.sh" 2>&1) || true
printf '%s\n' "$out" | grep -E '^[a-z0-9-]+ (passed|refused)' || true
! grep -q Sanitizer <<<"$out" || fail "sanitizer report: $out"

expect_probe() { # NAME passed|refused
	grep -Eq -- "^$1 $2( |\$)" <<<"$out" || fail "$1: expected '$2'; got: $(grep -E "^$1 " <<<"$out" || echo nothing)"
}
for p in control-http control-tls control-crlf control-method control-websocket control-late-tls \
	control-late-http control-hrr; do
	expect_probe "$p" passed
done
for p in crlf bare-lf method-dash method-long absolute-mismatch absolute-nohost sni-two-names ech \
	upgrade-h2c connection-cl late-tls late-http hrr-second-name explicit-connection-cl \
	explicit-connection-host \
	explicit-response-connection-cl; do
	expect_probe "$p" refused
done

# Each refusal is one deny line whose reason says what was seen.
shared='e.get("ip") in ("203.0.113.66", "2001:db8:66::66")'
expect_logged "leading CRLF read as a request: its Host denied by rule" \
	"$shared and e.get(\"kind\") == \"http\" and e.get(\"host\") == \"secret.evil.test\" and e.get(\"verdict\") == \"deny\" and e.get(\"rule\", \"\").endswith(\":7\")"
expect_logged "odd method read as a request" \
	"e.get(\"method\") == \"M-SEARCH\" and e.get(\"host\") == \"secret.evil.test\" and e.get(\"verdict\") == \"deny\""
expect_logged "long method read as a request" \
	"e.get(\"method\", \"\").startswith(\"PROPFIND\") and e.get(\"host\") == \"secret.evil.test\" and e.get(\"verdict\") == \"deny\""
expect_logged "bare LF refused as malformed" \
	"$shared and e.get(\"kind\") == \"http\" and e.get(\"verdict\") == \"deny\" and \"bare LF\" in e.get(\"detail\", \"\")"
expect_logged "absolute target disagreeing with Host" \
	"$shared and e.get(\"verdict\") == \"deny\" and \"secret.evil.test\" in e.get(\"detail\", \"\") and \"evil.test\" in e.get(\"detail\", \"\") and \"Host\" in e.get(\"detail\", \"\")"
expect_logged "absolute target checked like Host" \
	"$shared and e.get(\"kind\") == \"http\" and e.get(\"host\") == \"secret.evil.test\" and e.get(\"url\") == \"http://secret.evil.test/\" and e.get(\"verdict\") == \"deny\""
expect_logged "two server names" \
	"$shared and e.get(\"port\") == 443 and e.get(\"verdict\") == \"deny\" and \"server_name\" in e.get(\"detail\", \"\") and \"secret.evil.test\" in e.get(\"detail\", \"\")"
expect_logged "ECH refused" \
	"$shared and e.get(\"sni\") == \"evil.test\" and e.get(\"verdict\") == \"deny\" and \"encrypted_client_hello\" in e.get(\"detail\", \"\")"
expect_logged "h2c refused" \
	"$shared and e.get(\"kind\") == \"http\" and e.get(\"verdict\") == \"deny\" and \"h2c\" in e.get(\"detail\", \"\")"
expect_logged "Connection: Content-Length refused (transparent)" \
	"$shared and e.get(\"method\") == \"POST\" and e.get(\"verdict\") == \"deny\" and \"Content-Length\" in e.get(\"detail\", \"\")"
expect_logged "late ClientHello on a DNS-learned connection, naming another name" \
	"e.get(\"ip\") == \"203.0.113.66\" and e.get(\"verdict\") == \"deny\" and \"decided for evil.test carries a ClientHello for secret.evil.test\" in e.get(\"detail\", \"\")"
expect_logged "late request on a DNS-learned connection, naming another host" \
	"e.get(\"ip\") == \"203.0.113.66\" and e.get(\"verdict\") == \"deny\" and \"decided for evil.test carries a request for Host secret.evil.test\" in e.get(\"detail\", \"\")"
expect_logged "second ClientHello (after HelloRetryRequest) naming another server" \
	"$shared and e.get(\"sni\") == \"evil.test\" and e.get(\"verdict\") == \"deny\" and \"second ClientHello for secret.evil.test\" in e.get(\"detail\", \"\")"
expect_logged "Connection: Content-Length refused (explicit)" \
	"e.get(\"method\") == \"POST\" and e.get(\"url\") == \"http://evil.test/\" and e.get(\"verdict\") == \"deny\" and \"Content-Length\" in e.get(\"detail\", \"\")"
expect_logged "Connection: Host refused (explicit)" \
	"e.get(\"url\") == \"http://evil.test/\" and e.get(\"verdict\") == \"deny\" and \"Host\" in e.get(\"detail\", \"\") and \"Connection\" in e.get(\"detail\", \"\")"
expect_logged "response Connection: Content-Length refused" \
	"e.get(\"port\") == 8081 and e.get(\"verdict\") == \"allow\" and \"Content-Length\" in e.get(\"detail\", \"\") and \"response\" in e.get(\"detail\", \"\")"

# Inside an allowed CONNECT tunnel (item 1): the first ClientHello or
# request head must name the CONNECT target, however late or split it
# comes; anything else stays an opaque tunnel. The address itself is
# allowed by a cidr rule here, so a CONNECT to it is allowed too, and the
# name the bytes then carry must be that address.
POL_TUN=$LAB_WORK/names-tunnel.yaml
cat >"$POL_TUN" <<-'YAML'
	version: 1
	name: names-tunnel-e2e
	allow:
	  - host: evil.test
	    ports: [80, 443]
	  - cidr: 203.0.113.66/32
	    ports: [443]
	deny:
	  - host: secret.evil.test
YAML
out=$(airlock_lab "$POL_TUN" -- sh -c "python3 $PROBE tunnel; python3 $PROBE late-cidr" 2>&1) || true
printf '%s\n' "$out" | grep -E '^[a-z0-9-]+ (passed|refused)' || true
! grep -q Sanitizer <<<"$out" || fail "sanitizer report: $out"
for p in control-tunnel-tls control-tunnel-tls-case control-tunnel-tls-late control-tunnel-http \
	control-tunnel-opaque control-late-cidr control-tunnel-hrr; do
	expect_probe "$p" passed
done
for p in tunnel-sni tunnel-sni-late tunnel-sni-split tunnel-sni-address tunnel-host \
	tunnel-host-late tunnel-absolute late-cidr-denied late-cidr-unlisted tunnel-hrr-second-name; do
	expect_probe "$p" refused
done
expect_logged "tunnel ClientHello naming another server" \
	"e.get(\"kind\") == \"connect\" and e.get(\"host\") == \"evil.test\" and e.get(\"port\") == 443 and e.get(\"verdict\") == \"deny\" and \"secret.evil.test\" in e.get(\"detail\", \"\") and \"ClientHello\" in e.get(\"detail\", \"\")"
expect_logged "tunnel request naming another host" \
	"e.get(\"kind\") == \"connect\" and e.get(\"host\") == \"evil.test\" and e.get(\"port\") == 80 and e.get(\"verdict\") == \"deny\" and \"secret.evil.test\" in e.get(\"detail\", \"\") and \"Host\" in e.get(\"detail\", \"\")"
expect_logged "tunnel to an address, ClientHello naming a server" \
	"e.get(\"kind\") == \"connect\" and e.get(\"host\") == \"203.0.113.66\" and e.get(\"verdict\") == \"deny\" and \"secret.evil.test\" in e.get(\"detail\", \"\")"
expect_logged "late ClientHello on a cidr-allowed connection, decided on its name" \
	"e.get(\"kind\") == \"tcp\" and e.get(\"ip\") == \"203.0.113.66\" and e.get(\"verdict\") == \"deny\" and \"secret.evil.test: denied by rule\" in e.get(\"detail\", \"\")"
/usr/bin/python3 "$TESTS_DIR/lab/check_log.py" "$LOGF" || fail "the egress log does not match docs/log.md"

# With `ech: allow` on the rule the same ECH hello goes through; two names
# stay refused.
out=$(airlock_lab "$POL_ECH" -- python3 "$PROBE" ech-allowed 2>&1) || true
printf '%s\n' "$out" | grep -E '^[a-z0-9-]+ (passed|refused)' || true
expect_probe ech-opted-in passed
expect_probe ech-two-names refused
expect_logged "ECH let through by the rule" \
	"$shared and e.get(\"sni\") == \"evil.test\" and e.get(\"verdict\") == \"allow\" and e.get(\"rule\", \"\").endswith(\"names-ech.yaml:4\")"

# The origin never saw the denied name, as Host, absolute target or SNI.
if grep -E 'host="secret\.evil\.test"|sni="secret\.evil\.test"' "$LAB_LOG/evil.test.access.log"; then
	fail "nginx on the shared address served the denied name (lines above)"
fi
grep -q 'host="evil.test"' "$LAB_LOG/evil.test.access.log" ||
	fail "nginx on the shared address saw no request for the allowed name; the controls proved nothing"
/usr/bin/python3 "$TESTS_DIR/lab/check_log.py" "$LOGF" || fail "the egress log does not match docs/log.md"
echo "ok"
