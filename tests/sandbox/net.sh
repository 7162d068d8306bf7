#!/usr/bin/env bash
# The sandbox's network end to end, without the lab: only documentation
# addresses, which lead nowhere even outside the sandbox. TCP to anywhere
# reaches airlock's transparent listener (denied under the "none" policy:
# reset or 403 at once, never a timeout); UDP to anything but port 53 fails
# at once and is logged as a packet; port 53 anywhere reaches airlock's DNS
# listener, which answers without forwarding a denied name.
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/common.sh"
need_prog setpriv python3 curl dig
sbx_setup

ms() { echo $(($(date +%s%N) / 1000000)); }

body() {
	local role=$1 out t0 t1 lf
	lf=$(logf "$role")
	rm -f "$lf"

	# TCP to a documentation address: captured and denied, quickly.
	t0=$(ms)
	out=$(al "$role" -- curl -sS --noproxy '*' -o /dev/null -w '%{http_code}' --max-time 10 \
		http://203.0.113.7/ 2>&1 || true)
	t1=$(ms)
	[ $((t1 - t0)) -lt 5000 ] || fail "$role: TCP to 203.0.113.7:80 took $((t1 - t0)) ms (timeout instead of a refusal)"
	expect_match "$role: TCP denied (403 or reset)" "^(403|000.*(reset|refused|Empty reply|closed).*)$|^403" "$out"
	grep -q '"ip":"203.0.113.7".*"verdict":"deny"\|"verdict":"deny".*"ip":"203.0.113.7"' "$lf" ||
		fail "$role: no deny line for 203.0.113.7 in the log: $(cat "$lf")"

	# The explicit proxy: CONNECT to a denied name is refused with 403.
	out=$(al "$role" -- curl -sS -o /dev/null -w '%{http_code}' --max-time 10 https://evil.test/ 2>&1 || true)
	expect_match "$role: CONNECT denied" "403" "$out"

	# UDP to port 9999: refused at once, logged as a packet.
	out=$(al "$role" -- python3 -c '
import socket, time
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
t = time.time()
try:
    s.sendto(b"x", ("203.0.113.7", 9999))
    s.settimeout(3)
    s.recv(10)
    print("answered")
except OSError as e:
    print("refused" if time.time() - t < 1 else "slow", e.errno)
')
	expect_match "$role: UDP refused at once" "^refused" "$out"
	grep -q '"kind":"packet".*9999.*"proto":"udp","packets":1,' "$lf" ||
		fail "$role: no packet event (packets 1) for UDP 9999 in the log"

	# Port 53 anywhere reaches airlock's DNS listener: an answer (NXDOMAIN
	# or REFUSED for a name the policy does not allow), not a timeout.
	out=$(al "$role" -- dig +time=3 +tries=1 @203.0.113.7 -p 53 evil.test A 2>&1 || true)
	expect_match "$role: DNS captured" "status: (NXDOMAIN|REFUSED)" "$out"
	out=$(al "$role" -- dig +tcp +time=3 +tries=1 @198.51.100.1 evil.test A 2>&1 || true)
	expect_match "$role: DNS over TCP captured" "status: (NXDOMAIN|REFUSED)" "$out"
	grep -q '"kind":"dns".*evil.test' "$lf" || fail "$role: no dns line for evil.test in the log"

	# IPv6 port 53 is redirected to [::1]:53, where airlock listens too
	# (UDP and TCP): answered, not refused.
	out=$(al "$role" -- dig +time=3 +tries=1 @2001:db8::53 evil6.test AAAA 2>&1 || true)
	expect_match "$role: DNS over IPv6 captured" "status: (NXDOMAIN|REFUSED)" "$out"
	out=$(al "$role" -- dig +tcp +time=3 +tries=1 @2001:db8::53 evil6tcp.test A 2>&1 || true)
	expect_match "$role: DNS over IPv6 TCP captured" "status: (NXDOMAIN|REFUSED)" "$out"
	out=$(al "$role" -- dig +time=3 +tries=1 @::1 evil6lo.test A 2>&1 || true)
	expect_match "$role: DNS on [::1]" "status: (NXDOMAIN|REFUSED)" "$out"
	grep -q '"kind":"dns".*evil6tcp.test' "$lf" || fail "$role: no dns line for evil6tcp.test in the log"
}

for role in $ROLES; do
	body "$role"
done
echo "ok: net ($ROLES)"
