#!/usr/bin/env bash
# The serving process makes no upstream socket: `airlock proxy` under
# strace -f, in a network namespace made here (lo only, no route out),
# serves a CONNECT, an absolute-form GET and a CONNECT by name (from its
# hosts file) to a listener on 127.0.0.1 that a cidr rule allows. Every
# socket() and connect() towards the listener must be the broker's (a child
# of the serving process), and at least one must have been made.
. "$(dirname "$0")/../lib.sh"

if [ "${DIAL_E2E_INNER:-0}" != 1 ]; then
	need_root
	need_prog unshare strace python3
	export DIAL_E2E_INNER=1
	exec unshare --net -- "$BASH" "$0" "$@"
fi

scratch_dir
PIDS=()
cleanup() {
	local p
	# airlock itself first: strace, killed, would leave it running.
	p=$(awk '/execve\(/ { print $1; exit }' "$SCRATCH/trace" 2>/dev/null || true)
	[ -z "$p" ] || kill "$p" 2>/dev/null || true
	for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
	for p in "${PIDS[@]}"; do wait "$p" 2>/dev/null || true; done
	rm -rf "$SCRATCH"
}
trap cleanup EXIT

ip link set lo up
UP=18080
LP=18081

# The origin: answers every connection with one line, then closes (at most
# 30 s, bounded in connections too).
python3 - "$UP" <<'EOF' &
import socket, sys, time
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", int(sys.argv[1])))
s.listen(16)
s.settimeout(30)
for _ in range(16):
    try:
        c, _ = s.accept()
    except OSError:
        break
    c.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\nConnection: close\r\n\r\nok\n")
    c.close()
EOF
PIDS+=("$!")

python3 - "$UP" <<'EOF' || fail "the origin did not listen"
import socket, sys, time
deadline = time.time() + 10
while True:
    try:
        socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=1).close()
        break
    except OSError:
        if time.time() > deadline:
            sys.exit(1)
        time.sleep(0.05)
EOF

cat >"$SCRATCH/policy.yaml" <<EOF
version: 1
name: dial
allow:
  - cidr: 127.0.0.0/8
    ports: [$UP]
  - host: up.test
    ports: [$UP]
EOF
echo "127.0.0.1 up.test" >"$SCRATCH/hosts"

# LeakSanitizer cannot run under ptrace: an ASan build's leak check (the
# proxy makes one before it confines itself) would stop it.
ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0" \
	strace -f -qq -e trace=execve,socket,connect -o "$SCRATCH/trace" \
	"$AIRLOCK" proxy -p "$SCRATCH/policy.yaml" --listen "127.0.0.1:$LP" \
	--log "$SCRATCH/egress.jsonl" --hosts-file "$SCRATCH/hosts" \
	--dns-upstream 127.0.0.1:9 2>"$SCRATCH/stderr" &
PIDS+=("$!")

python3 - "$LP" "$UP" <<'EOF' || fail "the proxy did not serve: $(cat "$SCRATCH/stderr")"
import socket, sys, time
lp, up = int(sys.argv[1]), int(sys.argv[2])
deadline = time.time() + 20
while True:
    try:
        socket.create_connection(("127.0.0.1", lp), timeout=1).close()
        break
    except OSError:
        if time.time() > deadline:
            sys.exit("no listener")
        time.sleep(0.1)

def ask(req):
    s = socket.create_connection(("127.0.0.1", lp), timeout=10)
    s.sendall(req)
    got = b""
    while True:
        b = s.recv(4096)
        if not b:
            break
        got += b
    s.close()
    if b"ok\n" not in got:
        sys.exit("no answer through the proxy to %r: %r" % (req, got))

ask(b"CONNECT 127.0.0.1:%d HTTP/1.1\r\n\r\n" % up)
ask(b"GET http://127.0.0.1:%d/ HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nConnection: close\r\n\r\n" % (up, up))
ask(b"CONNECT up.test:%d HTTP/1.1\r\n\r\n" % up)
EOF

# The serving process: the pid that executed airlock.
MAIN=$(awk '/execve\(/ { print $1; exit }' "$SCRATCH/trace")
[ -n "$MAIN" ] || fail "no execve in the trace"
DIALS=$(grep -E "connect\(.*htons\($UP\)" "$SCRATCH/trace" || true)
[ -n "$DIALS" ] || fail "no connect to the origin in the trace: $(cat "$SCRATCH/trace")"
BY_MAIN=$(awk -v m="$MAIN" '$1 == m' <<<"$DIALS")
[ -z "$BY_MAIN" ] || fail "the serving process (pid $MAIN) dialled the origin itself: $BY_MAIN"
# The dials are the broker's: every pid that made one is not the serving one.
echo "dials to the origin, none by the serving process $MAIN:"
echo "$DIALS"
# And after serving began, the serving process made no TCP/UDP socket:
# its one AF_INET socket is the listener.
N_INET=$(awk -v m="$MAIN" '$1 == m && /socket\(AF_INET6?, SOCK_(STREAM|DGRAM)/' "$SCRATCH/trace" | wc -l)
[ "$N_INET" -le 1 ] || fail "the serving process made $N_INET inet sockets: $(awk -v m="$MAIN" '$1 == m && /socket\(AF_INET/' "$SCRATCH/trace")"
LINES=$(grep -c '"verdict":"allow"' "$SCRATCH/egress.jsonl" || true)
expect_eq "allowed lines in the log" 3 "$LINES"
echo "PASS"
