#!/usr/bin/python3
"""Clients that never keep up, for the proxy's queue bounds.

slowread.py PROXY_PORT PROXY_PID MODE N TARGET STATUS MAX_S

N connections to the explicit proxy on 127.0.0.1:PROXY_PORT, all at once,
each with a small receive and send buffer, towards TARGET (ADDR:PORT of
tests/proxy/bulk.py, whose STATUS file counts what it sent):
  connect-down  CONNECT TARGET, then GET inside the tunnel; never read
  http-down     GET http://TARGET/ (absolute-form); never read
  http-up       POST http://TARGET/ with a 1 GiB body, sent as fast as
                the proxy takes it, to a destination that never reads
Once nothing has moved for 1.5 s (or MAX_S passed) it prints one JSON
object and closes everything:
  {"n": N, "open": connections still open, "server_sent": bytes bulk.py
   sent during the run, "client_sent": bytes these clients sent,
   "rss_before_kib": ..., "rss_after_kib": ... (the proxy's VmRSS)}
Exits 1 when a connection failed before the measurement."""
import json
import resource
import selectors
import socket
import sys
import time

BUF = 4096  # the kernel doubles it


def rss_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise SystemExit("no VmRSS")


def server_sent(status):
    for _ in range(50):
        try:
            with open(status) as f:
                return json.load(f)["sent"]
        except (OSError, ValueError):
            time.sleep(0.02)
    raise SystemExit("cannot read " + status)


def main():
    port, pid, mode, n, target, status, max_s = (int(sys.argv[1]), int(sys.argv[2]), sys.argv[3],
                                                 int(sys.argv[4]), sys.argv[5], sys.argv[6],
                                                 float(sys.argv[7]))
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    rss0 = rss_kib(pid)
    sent0 = server_sent(status)
    socks = []
    sel = selectors.DefaultSelector()
    for _ in range(n):
        s = socket.socket()
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, BUF)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, BUF)
        s.connect(("127.0.0.1", port))
        if mode == "connect-down":
            s.sendall(f"CONNECT {target} HTTP/1.1\r\nHost: {target}\r\n\r\n".encode())
            head = b""
            while not head.endswith(b"\r\n\r\n"):
                b = s.recv(1)
                if not b:
                    raise SystemExit("CONNECT: closed")
                head += b
            if not head.startswith(b"HTTP/1.1 200"):
                raise SystemExit("CONNECT: " + head.decode(errors="replace"))
            s.sendall(b"GET / HTTP/1.1\r\nHost: bulk\r\n\r\n")
        elif mode == "http-down":
            s.sendall(f"GET http://{target}/ HTTP/1.1\r\nHost: {target}\r\n\r\n".encode())
        elif mode == "http-up":
            s.sendall(f"POST http://{target}/ HTTP/1.1\r\nHost: {target}\r\n"
                      "Content-Length: 1073741824\r\n\r\n".encode())
            s.setblocking(False)
            sel.register(s, selectors.EVENT_WRITE)
        else:
            raise SystemExit("unknown mode " + mode)
        socks.append(s)
    client_sent = 0
    chunk = bytes(65536)
    start = last_move = time.monotonic()
    last_seen = server_sent(status)
    while time.monotonic() - last_move < 1.5 and time.monotonic() - start < max_s:
        moved = False
        if mode == "http-up":
            for key, _ in sel.select(timeout=0.1):
                try:
                    k = key.fileobj.send(chunk)
                except BlockingIOError:
                    continue
                except OSError as e:
                    raise SystemExit(f"upload failed: {e}")
                client_sent += k
                moved = moved or k > 0
        else:
            time.sleep(0.1)
            now = server_sent(status)
            moved = now != last_seen
            last_seen = now
        if moved:
            last_move = time.monotonic()
    still_open = 0
    for s in socks:
        try:
            s.setblocking(False)
            still_open += s.recv(1, socket.MSG_PEEK) != b""
        except BlockingIOError:
            still_open += 1
        except OSError:
            pass
    out = {"n": n, "open": still_open, "server_sent": server_sent(status) - sent0,
           "client_sent": client_sent, "rss_before_kib": rss0, "rss_after_kib": rss_kib(pid),
           "settled": time.monotonic() - last_move >= 1.5}
    for s in socks:
        s.close()
    print(json.dumps(out))


main()
