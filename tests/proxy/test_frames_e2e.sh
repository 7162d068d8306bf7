#!/usr/bin/env bash
# Every HTTP/1 request on a connection is bound to the name the connection
# was decided for, not only the first (issue 15, item 1), through `airlock
# run` in the test lab. evil.test and secret.evil.test share one lab
# address, 203.0.113.66, where tests/proxy/frames_origin.py serves port 8082
# and logs the Host of every request it reads; the policy allows evil.test
# and denies secret.evil.test. Each probe (tests/proxy/frames.py) first
# makes an allowed request, then presents the denied name on the same
# connection: kept alive, pipelined in one write, after a Content-Length
# or chunked body, in absolute form, without Host, after a declined
# WebSocket upgrade, inside a CONNECT tunnel, after a silent start; an h2c
# upgrade and an ambiguous body are refused too, and after a ClientHello
# without SNI the HelloRetryRequest's second hello is decided (item 2).
# Every one must be refused with a deny line naming both names, and the
# origin must never have read the denied name. Controls show the allowed
# name goes on working: keep-alive, pipelining, bodies that hold a fake
# head (a body, not a request), an accepted WebSocket upgrade.
. "$(dirname "$0")/../lib.sh"
. "$TESTS_DIR/lab/lib.sh"
lab_start

POL=$LAB_WORK/frames.yaml
cat >"$POL" <<-'YAML'
	version: 1
	name: frames-e2e
	allow:
	  - host: evil.test
	    ports: [443, 8082]
	deny:
	  - host: secret.evil.test
YAML

ORIGIN_LOG=$LAB_LOG/frames-origin.log
: >"$ORIGIN_LOG"
"$LAB_SH" inet "$LAB" "$LAB_PYTHON" "$SOURCE_ROOT/tests/proxy/frames_origin.py" 8082 "$ORIGIN_LOG" \
	>"$LAB_LOG/frames-origin.out" 2>&1 &
for _ in $(seq 100); do grep -q ready "$LAB_LOG/frames-origin.out" 2>/dev/null && break; sleep 0.05; done
grep -q ready "$LAB_LOG/frames-origin.out" || fail "the origin did not start: $(cat "$LAB_LOG/frames-origin.out")"

lab_script "$SOURCE_ROOT/tests/proxy/names.py" >/dev/null
PROBE=$(lab_script "$SOURCE_ROOT/tests/proxy/frames.py")
cat >"$LAB_WORK/inside.sh" <<-SH
	unset HTTP_PROXY HTTPS_PROXY ALL_PROXY http_proxy https_proxy all_proxy
	for what in transparent tunnel late tls; do python3 "$PROBE" \$what; done
SH
out=$(airlock_lab "$POL" -- sh "$LAB_WORK/inside.sh" 2>&1) || true
printf '%s\n' "$out" | grep -E '^[a-z0-9-]+ (passed|refused|error)' || true
! grep -q Sanitizer <<<"$out" || fail "sanitizer report: $out"

bad=0
expect_probe() { # NAME passed|refused
	if ! grep -Eq -- "^$1 $2( |\$)" <<<"$out"; then
		echo "FAIL: $1: expected '$2'; got: $(grep -E "^$1 " <<<"$out" || echo nothing)" >&2
		bad=1
	fi
}
for p in control-keepalive control-pipelined control-chunked-fake-head control-length-fake-head \
	control-websocket control-tunnel-keepalive control-late-keepalive control-hrr-unnamed \
	control-tunnel-hrr-unnamed; do
	expect_probe "$p" passed
done
for p in keepalive-host keepalive-host-case-dot pipelined-host keepalive-absolute \
	keepalive-absolute-nohost keepalive-nohost chunked-then-host length-then-host \
	websocket-declined-then-host h2c-second second-both-lengths tunnel-keepalive-host \
	tunnel-pipelined-host tunnel-keepalive-absolute tunnel-h2c-second late-keepalive-host \
	hrr-unnamed-then-name tunnel-hrr-unnamed-then-name; do
	expect_probe "$p" refused
done
[ "$bad" = 0 ] || fail "probes above"

# Each refusal is a deny line whose reason names the decided name and the
# one the request carried.
both='"evil.test" in e.get("detail", "") and "secret.evil.test" in e.get("detail", "")'
expect_logged "a kept-alive request for another Host (transparent)" \
	"e.get(\"ip\") == \"203.0.113.66\" and e.get(\"port\") == 8082 and e.get(\"kind\") == \"http\" and e.get(\"verdict\") == \"deny\" and e.get(\"reason\") == \"name-changed\" and \"decided for evil.test carries a request for Host secret.evil.test\" in e.get(\"detail\", \"\")"
expect_logged "a request for another Host in a CONNECT tunnel" \
	"e.get(\"kind\") == \"connect\" and e.get(\"port\") == 8082 and e.get(\"verdict\") == \"deny\" and e.get(\"reason\") == \"name-changed\" and \"tunnel to evil.test carries a request for Host secret.evil.test\" in e.get(\"detail\", \"\")"
expect_logged "a request without Host on a bound connection" \
	"e.get(\"port\") == 8082 and e.get(\"verdict\") == \"deny\" and \"no Host\" in e.get(\"detail\", \"\")"
expect_logged "h2c on a later request" \
	"e.get(\"port\") == 8082 and e.get(\"verdict\") == \"deny\" and \"request 2\" in e.get(\"detail\", \"\") and \"h2c\" in e.get(\"detail\", \"\")"
expect_logged "Content-Length and Transfer-Encoding on a later request" \
	"e.get(\"port\") == 8082 and e.get(\"verdict\") == \"deny\" and \"request 2\" in e.get(\"detail\", \"\")"
expect_logged "a second ClientHello naming a server after one without" \
	"e.get(\"port\") == 443 and e.get(\"verdict\") == \"deny\" and $both and \"ClientHello\" in e.get(\"detail\", \"\")"
/usr/bin/python3 "$TESTS_DIR/lab/check_log.py" "$LOGF" || fail "the egress log does not match docs/log.md"

# After a ClientHello without SNI on an address a cidr rule allows, the
# second hello's name is decided by the policy (a deny, or no rule).
POL_CIDR=$LAB_WORK/frames-cidr.yaml
cat >"$POL_CIDR" <<-'YAML'
	version: 1
	name: frames-cidr-e2e
	allow:
	  - host: evil.test
	    ports: [443]
	  - cidr: 203.0.113.66/32
	    ports: [443]
	deny:
	  - host: secret.evil.test
YAML
out=$(airlock_lab "$POL_CIDR" -- python3 "$PROBE" tls-cidr 2>&1) || true
printf '%s\n' "$out" | grep -E '^[a-z0-9-]+ (passed|refused|error)' || true
! grep -q Sanitizer <<<"$out" || fail "sanitizer report: $out"
expect_probe control-cidr-hrr-unnamed passed
expect_probe cidr-hrr-unnamed-then-denied refused
expect_probe cidr-hrr-unnamed-then-unlisted refused
[ "$bad" = 0 ] || fail "probes above"
expect_logged "a second ClientHello after one without, on a cidr-allowed address: denied by rule" \
	"e.get(\"kind\") == \"tcp\" and e.get(\"port\") == 443 and e.get(\"verdict\") == \"deny\" and \"ClientHello for secret.evil.test: denied by rule\" in e.get(\"detail\", \"\")"

# The origin read the allowed name, and never the denied one.
if grep -Ei 'host=secret\.evil\.test|target=http://secret|h2c upgraded' "$ORIGIN_LOG"; then
	fail "the origin on the shared address read the denied name or upgraded to h2c (lines above)"
fi
grep -q 'host=evil.test target=/after' "$ORIGIN_LOG" ||
	fail "the origin saw no request after a body; the controls proved nothing"
grep -q 'websocket bytes=' "$ORIGIN_LOG" || fail "the WebSocket control sent nothing through"
if grep -E 'sni="secret\.evil\.test"' "$LAB_LOG/evil.test.access.log"; then
	fail "nginx on the shared address served the denied name (lines above)"
fi
echo "ok"
