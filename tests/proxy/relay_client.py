#!/usr/bin/python3
"""Slow clients for the relay tests: downloads that must arrive whole.

relay_client.py PROXY_PORT TARGET N SEED MAX_S

N absolute-form downloads through the explicit proxy on 127.0.0.1:PROXY_PORT
from tests/proxy/relay_origin.py at TARGET (ADDR:PORT), four connections at a
time. Each client socket has a small receive buffer and reads slowly, so the
proxy's output to it runs past its high-water mark while the origin sends
as fast as it can. Sizes are drawn (seeded) from around the proxy's mark and
beyond; the modes alternate: kept-alive connections with several requests,
Connection: close from the client, Connection: close from the origin, and
close-delimited bodies. Every body is compared with the origin's pattern.
A response stalled for 20 s counts as a loss. Prints one JSON object:
  {"n": downloads done, "lost": how many were short, wrong or stalled,
   "seconds": ..., "first": the first few failures}
and exits 1 when MAX_S passed before all N were done."""
import json
import random
import socket
import sys
import threading
import time

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, sys.path[0])
from relay_origin import pattern  # noqa: E402

RCVBUF = 4096  # the kernel doubles it
HW = 256 * 1024  # CONN_HIGH_WATER
STALL_S = 20


class Stats:
    def __init__(self):
        self.lock = threading.Lock()
        self.done = 0
        self.lost = 0
        self.first = []

    def record(self, ok, what):
        with self.lock:
            self.done += 1
            if not ok:
                self.lost += 1
                if len(self.first) < 5:
                    self.first.append(what)


def read_head(s, buf):
    while b"\r\n\r\n" not in buf:
        b = s.recv(4096)
        if not b:
            raise EOFError("closed before the response head")
        buf += b
    head, rest = buf.split(b"\r\n\r\n", 1)
    return head.decode("latin-1"), rest


def download(s, buf, path, target, client_close):
    """One exchange on s; returns (body, leftover bytes, whether the
    connection is still usable)."""
    req = f"GET http://{target}{path} HTTP/1.1\r\nHost: {target}\r\n"
    if client_close:
        req += "Connection: close\r\n"
    s.sendall((req + "\r\n").encode())
    head, body = read_head(s, buf)
    length = None
    close = client_close
    for line in head.split("\r\n")[1:]:
        k, _, v = line.partition(":")
        if k.strip().lower() == "content-length":
            length = int(v)
        if k.strip().lower() == "connection" and "close" in v.lower():
            close = True
    while length is None or len(body) < length:
        b = s.recv(16384)
        if not b:
            if length is None:
                return body, b"", False
            raise EOFError(f"closed after {len(body)} of {length} bytes")
        body += b
        time.sleep(0.0005)  # slower than the origin
    return body[:length], body[length:], not close


def worker(port, target, jobs, stats, deadline):
    while time.monotonic() < deadline:
        try:
            mode, sizes = jobs.pop()
        except IndexError:
            return
        s = socket.socket()
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, RCVBUF)
        s.settimeout(STALL_S)
        s.connect(("127.0.0.1", port))
        buf = b""
        for i, n in enumerate(sizes):
            last = i == len(sizes) - 1
            path = {"keep": f"/len/{n}", "client-close": f"/len/{n}",
                    "origin-close": f"/len/{n}/close", "eof": f"/eof/{n}"}[mode]
            what = f"{mode} {path}"
            try:
                body, buf, usable = download(s, buf, path, target,
                                             mode == "client-close" or (mode == "keep" and last))
                ok = body == pattern(n)
                if not ok:
                    what += f": {len(body)} of {n} bytes, or other bytes"
            except (OSError, EOFError) as e:
                ok, usable = False, False
                what += f": {e}"
            stats.record(ok, what)
            if not usable:
                break
        s.close()


def main():
    port, target, n, seed, max_s = (int(sys.argv[1]), sys.argv[2], int(sys.argv[3]),
                                    int(sys.argv[4]), float(sys.argv[5]))
    rnd = random.Random(seed)
    edges = [0, 1, HW - 1, HW, HW + 1, 2 * HW, 2 * HW + 4096]
    jobs, planned, k = [], 0, 0
    while planned < n:
        mode = ("keep", "client-close", "origin-close", "eof")[k % 4]
        count = min(rnd.randint(2, 5) if mode == "keep" else 1, n - planned)
        sizes = [rnd.choice(edges) if rnd.random() < 0.2 else rnd.randint(HW // 2, 6 * HW)
                 for _ in range(count)]
        jobs.append((mode, sizes))
        planned += count
        k += 1
    jobs.reverse()
    stats = Stats()
    start = time.monotonic()
    threads = [threading.Thread(target=worker, args=(port, target, jobs, stats, start + max_s))
               for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    print(json.dumps({"n": stats.done, "lost": stats.lost,
                      "seconds": round(time.monotonic() - start, 1), "first": stats.first}))
    sys.exit(0 if stats.done == n else 1)


main()
