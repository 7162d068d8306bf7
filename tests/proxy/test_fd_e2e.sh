#!/usr/bin/env bash
# File descriptors in `airlock run` (docs/run.md, docs/proxy.md Limits), in
# the test lab (tests/lab):
#  1. Under a caller's soft limit of 1,024 the supervisor raises its own to
#     the hard limit: 8,000 CONNECT tunnels are open at once, none refused.
#  2. With a hard limit it cannot raise, descriptors run out: tunnels
#     beyond them wait or are refused as a resource limit (503), never as
#     the destination's fault (502); established tunnels keep working when
#     no splice pipe can be had (the userspace copy takes over); and the
#     DNS listener still answers over TCP (the descriptor reserve).
. "$(dirname "$0")/../lib.sh"
. "$TESTS_DIR/lab/lib.sh"
expect_re() {
	grep -Eq -- "$2" <<<"$3" || fail "$1: '$3' does not match /$2/"
}
lab_start

hard=$(ulimit -H -n)
[ "$hard" = unlimited ] || [ "$hard" -ge 18000 ] ||
	skip "the hard RLIMIT_NOFILE is $hard; 8,000 tunnels need 16,000 descriptors in the proxy"

POL=$LAB_WORK/fd.yaml
cat >"$POL" <<-'YAML'
	version: 1
	name: fd-e2e
	allow:
	  - host: pypi.org
	    ports: [7]
YAML

"$LAB_SH" inet "$LAB" "$LAB_PYTHON" "$SOURCE_ROOT/tests/proxy/echo.py" "$LAB_PYPI_V4" 7 \
	>"$LAB_LOG/echo.out" 2>&1 &
for _ in $(seq 100); do grep -q ready "$LAB_LOG/echo.out" 2>/dev/null && break; sleep 0.05; done
grep -q ready "$LAB_LOG/echo.out" || fail "echo.py did not start: $(cat "$LAB_LOG/echo.out")"

FAILS=()

# --- 1. 8,000 tunnels under a soft limit of 1,024 ---
rm -f "$LOGF"
out=$( (ulimit -S -n 1024 && airlock_lab "$POL" -- "$LAB_PYTHON" \
	"$(lab_script "$SOURCE_ROOT/tests/proxy/tunnels.py")" 127.0.0.1 3128 pypi.org:7 8000 150) \
	2>"$LAB_LOG/run1.err") ||
	true
echo "8000 tunnels: $out"
[ "$out" = "ok 8000" ] || FAILS+=("8,000 tunnels under ulimit -S -n 1024: $out")
n=$(log_count 'e.get("kind") == "connect" and e.get("port") == 7 and e.get("verdict") == "allow" and "reason" not in e')
n502=$(log_count 'e.get("kind") == "connect" and ("unroutable" in e.get("detail", "") or "Too many open files" in e.get("detail", ""))')
echo "8000 tunnels: $n clean log lines, $n502 lines blaming the destination for descriptors"
[ "$n502" = 0 ] || FAILS+=("8,000 tunnels: $n502 log lines blame the destination")
! grep -q Sanitizer "$LAB_LOG/run1.err" || fail "sanitizer report: $(head -n 20 "$LAB_LOG/run1.err")"

# --- 2. a hard limit of 512: the proxy runs out of descriptors ---
# Small TCP buffers towards the echo server, so that the bytes of the echo
# round below wait in the proxy rather than in the kernel's socket buffers.
for ns in exec inet; do
	"$LAB_SH" "$ns" "$LAB" sysctl -q -w net.ipv4.tcp_rmem="4096 8192 8192" \
		net.ipv4.tcp_wmem="4096 8192 8192" net.ipv4.tcp_moderate_rcvbuf=0
done
rm -f "$LOGF"
out=$( (ulimit -n 512 && airlock_lab "$POL" -- "$LAB_PYTHON" \
	"$(lab_script "$SOURCE_ROOT/tests/proxy/fdhold.py")" 3128 pypi.org:7 260 200 8 262144 -- \
	dig +tcp +time=5 +tries=1 +short @127.0.0.1 pypi.org A) 2>"$LAB_LOG/run2.err") || true
echo "starved: $out"
field() { /usr/bin/python3 -c 'import json, sys; print(json.dumps(json.loads(sys.argv[1])[sys.argv[2]]))' "$1" "$2"; }
[ -n "$out" ] || fail "fdhold.py printed nothing: $(tail -n 20 "$LAB_LOG/run2.err")"
outcomes=$(field "$out" outcomes)
ok=$(/usr/bin/python3 -c 'import json, sys; print(json.loads(sys.argv[1]).get("ok", 0))' "$outcomes")
[ "$ok" -ge 100 ] || FAILS+=("starved: only $ok tunnels worked: $outcomes")
# Every other outcome is a wait or a 503 naming the resource limit.
bad=$(/usr/bin/python3 -c '
import json, sys
o = json.loads(sys.argv[1])
print(" ".join(f"[{k}]x{v}" for k, v in o.items()
               if k not in ("ok", "no reply") and not (k.startswith("HTTP/1.1 503") and "resource" in k)))' "$outcomes")
[ -z "$bad" ] || FAILS+=("starved: refusals that do not name the resource limit: $bad")
[ "$(field "$out" cmd_rc)" = 0 ] && grep -q "$LAB_PYPI_V4" <<<"$(field "$out" cmd_out)" ||
	FAILS+=("starved: DNS over TCP did not answer: $(field "$out" cmd_out)")
[ "$(field "$out" echoed)" = "$ok" ] ||
	FAILS+=("starved: established tunnels failed under the limit: $(field "$out" echo_failed)")
n502=$(log_count 'e.get("kind") == "connect" and ("unroutable" in e.get("detail", "") or "Too many open files" in e.get("detail", ""))')
[ "$n502" = 0 ] || FAILS+=("starved: $n502 log lines blame the destination for descriptors")
nkilled=$(log_count 'e.get("kind") == "connect" and "file descriptors" in e.get("detail", "") and e.get("bytes_down", 0) > 0')
[ "$nkilled" = 0 ] || FAILS+=("starved: $nkilled established tunnels were closed for want of descriptors")
nres=$(log_count 'e.get("kind") == "connect" and e.get("detail", "").startswith("resource limit")')
echo "starved: $nres log lines say resource limit"
! grep -q Sanitizer "$LAB_LOG/run2.err" || fail "sanitizer report: $(head -n 20 "$LAB_LOG/run2.err")"

[ ${#FAILS[@]} -eq 0 ] || fail "$(printf '\n  %s' "${FAILS[@]}")"
echo "ok"
