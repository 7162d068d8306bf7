#!/usr/bin/python3
"""A source and a sink for the proxy's queue tests: bulk.py ADDR PORT STATUS.

Reads one HTTP/1.1 request head per connection, then:
  GET  any path  -> 200 with a 1 GiB Content-Length, zeros sent as fast as
                    the kernel takes them;
  POST any path  -> reads nothing more, ever (a destination that stalls).
Every accepted socket has a small send and receive buffer, so that what
the kernel holds between here and the proxy is small and known.

Every 100 ms STATUS is replaced (write, then rename) by one JSON object:
{"conns": N, "sent": BYTES}, BYTES counting only what send(2) accepted.
Writes "ready" to stdout once listening; serves until killed."""
import json
import os
import resource
import selectors
import socket
import sys
import time

BUF = 4096  # the kernel doubles it
ZEROS = bytes(65536)


def main():
    addr, port, status = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    ls = socket.socket(socket.AF_INET6 if ":" in addr else socket.AF_INET)
    ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    ls.bind((addr, port))
    ls.listen(4096)
    ls.setblocking(False)
    sel = selectors.DefaultSelector()
    sel.register(ls, selectors.EVENT_READ, None)
    conns = {}  # socket -> {"head": bytes, "mode": None|"get"|"stall"}
    sent = 0
    last = 0.0
    print("ready", flush=True)
    while True:
        for key, ev in sel.select(timeout=0.1):
            s = key.fileobj
            if s is ls:
                try:
                    c, _ = ls.accept()
                except BlockingIOError:
                    continue
                c.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, BUF)
                c.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, BUF)
                c.setblocking(False)
                conns[c] = {"head": b"", "mode": None}
                sel.register(c, selectors.EVENT_READ, None)
                continue
            st = conns[s]
            try:
                if st["mode"] is None:
                    d = s.recv(65536)
                    if not d:
                        raise ConnectionError
                    st["head"] += d
                    if b"\r\n\r\n" not in st["head"]:
                        continue
                    if st["head"].startswith(b"GET "):
                        st["mode"] = "get"
                        s.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 1073741824\r\n\r\n")
                        sel.modify(s, selectors.EVENT_WRITE, None)
                    else:
                        st["mode"] = "stall"
                        sel.unregister(s)  # never read again
                elif st["mode"] == "get":
                    sent += s.send(ZEROS)
            except (BlockingIOError, InterruptedError):
                pass
            except OSError:
                sel.unregister(s)
                s.close()
                del conns[s]
        now = time.monotonic()
        if now - last >= 0.1:
            last = now
            tmp = status + ".tmp"
            with open(tmp, "w") as f:
                json.dump({"conns": len(conns), "sent": sent}, f)
            os.replace(tmp, status)


main()
