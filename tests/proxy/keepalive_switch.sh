#!/usr/bin/env bash
# A connection whose plain-HTTP request left its upstream kept alive, then
# asks for a tunnel (HTTP CONNECT or SOCKS5) on the same connection: the
# kept upstream is closed when the new destination is dialled, never left
# open in the proxy (it was: one leaked socket per attempt, and once the
# origin closed them, their callbacks ran on freed connections), and SOCKS5
# is not spoken on a connection that has served HTTP. Loopback only.
. "$(dirname "$0")/../lib.sh"
need_prog ss
scratch_dir
PY=/usr/bin/python3
D=$(dirname "$0")
cat >"$SCRATCH/origin.py" <<'PYEOF'
import socket, sys, threading
def handle(c):
    try:
        while True:
            d = c.recv(65536)
            if not d:
                break
            c.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nhi" if b"GET" in d else d)
    except OSError:
        pass
    c.close()
def serve(s):
    while True:
        c, _ = s.accept()
        threading.Thread(target=handle, args=(c,), daemon=True).start()
socks = []
for _ in range(2):
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    s.listen(64)
    socks.append(s)
print(socks[0].getsockname()[1], socks[1].getsockname()[1], flush=True)
threading.Thread(target=serve, args=(socks[1],), daemon=True).start()
serve(socks[0])
PYEOF
"$PY" "$SCRATCH/origin.py" >"$SCRATCH/ports" &
origin_pid=$!
trap 'kill "$origin_pid" 2>/dev/null || true; [ -z "${px_pid:-}" ] || kill "$px_pid" 2>/dev/null || true; rm -rf "$SCRATCH"' EXIT
for _ in $(seq 50); do [ -s "$SCRATCH/ports" ] && break; sleep 0.1; done
read -r op ep <"$SCRATCH/ports"
cat >"$SCRATCH/pol.yaml" <<PEOF
version: 1
name: keepalive-switch
allow:
  - cidr: 127.0.0.1/32
    ports: [$op, $ep]
PEOF
pp=$(("$op" % 20000 + 30000))
"$AIRLOCK" proxy -p "$SCRATCH/pol.yaml" --listen "127.0.0.1:$pp" --log "$SCRATCH/log.jsonl" 2>"$SCRATCH/err" &
px_pid=$!
for _ in $(seq 50); do ss -ltn "sport = :$pp" | grep -q LISTEN && break; sleep 0.1; done

out=$("$PY" "$D/keepalive_switch.py" "$pp" "$op" "$ep" connect 5)
expect_eq "CONNECT after a kept-alive request" "connect: HTTP/1.1 200 Connection established" "$out"
sleep 0.5
# The proxy holds no upstream to the origin once every client has gone.
n=$(ss -Htn state established "dport = :$op" | wc -l)
expect_eq "upstreams to the origin still open in the proxy after CONNECT" 0 "$n"
out=$("$PY" "$D/keepalive_switch.py" "$pp" "$op" "$ep" socks 5)
expect_match "SOCKS5 after a kept-alive request is not SOCKS5" '^socks: (HTTP/1.1 400|closed)' "$out"
sleep 0.5
n=$(ss -Htn state established "dport = :$op" | wc -l)
expect_eq "upstreams to the origin still open in the proxy after SOCKS5" 0 "$n"
# The origin going away closes whatever the proxy kept: it must live on.
kill "$origin_pid"
wait "$origin_pid" 2>/dev/null || true
sleep 0.5
kill -0 "$px_pid" 2>/dev/null || fail "the proxy died: $(cat "$SCRATCH/err")"
code=$(curl -sS -o /dev/null -w '%{http_code}' --max-time 5 "http://127.0.0.1:$pp/healthz") || true
expect_eq "the proxy still serves" 200 "$code"
kill -TERM "$px_pid"
wait "$px_pid" 2>/dev/null || true
grep -q '"task-end"' "$SCRATCH/log.jsonl" || fail "no task-end"
echo "ok"
