#!/usr/bin/python3
"""A canary listener for the lab: logs every TCP connection and UDP datagram
that reaches it, one line each, to --log. Nothing legitimate ever talks to a
canary, so a test proves "nothing got out" by finding the log empty.

  canary.py --log FILE --ready FILE [--tcp ADDR:PORT]... [--udp ADDR:PORT]...

ADDR may be an IPv6 literal in brackets. --ready is written once every
socket is bound, so the lab can wait for it.
"""
import argparse
import os
import selectors
import signal
import socket
import sys
import time

MAX_OPEN = 64      # concurrent TCP peers kept open to read a first chunk
READ_BYTES = 200   # enough to see a request line or a query name


def parse(spec):
    host, _, port = spec.rpartition(":")
    host = host.strip("[]")
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    return family, host, int(port)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--log", required=True)
    ap.add_argument("--ready", required=True)
    ap.add_argument("--tcp", action="append", default=[])
    ap.add_argument("--udp", action="append", default=[])
    args = ap.parse_args()

    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    log = os.open(args.log, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o644)

    def hit(proto, local, peer, data):
        # One write per line so concurrent canaries never interleave.
        line = "%s canary %s %s <- %s %r\n" % (
            time.strftime("%Y-%m-%dT%H:%M:%S"), proto, local, peer, data[:READ_BYTES])
        os.write(log, line.encode())

    sel = selectors.DefaultSelector()
    for spec in args.tcp:
        family, host, port = parse(spec)
        s = socket.socket(family, socket.SOCK_STREAM)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind((host, port))
        s.listen(16)
        s.setblocking(False)
        sel.register(s, selectors.EVENT_READ, ("listen", spec))
    for spec in args.udp:
        family, host, port = parse(spec)
        s = socket.socket(family, socket.SOCK_DGRAM)
        s.bind((host, port))
        s.setblocking(False)
        sel.register(s, selectors.EVENT_READ, ("udp", spec))
    with open(args.ready, "w") as f:
        f.write("%d\n" % os.getpid())

    open_conns = {}
    while True:
        for key, _ in sel.select(timeout=1.0):
            kind, spec = key.data
            sock = key.fileobj
            if kind == "listen":
                try:
                    conn, peer = sock.accept()
                except OSError:
                    continue
                hit("tcp-accept", spec, peer[0] + ":" + str(peer[1]), b"")
                if len(open_conns) >= MAX_OPEN:
                    conn.close()
                    continue
                conn.setblocking(False)
                open_conns[conn] = (spec, peer, time.monotonic())
                sel.register(conn, selectors.EVENT_READ, ("conn", spec))
            elif kind == "udp":
                try:
                    data, peer = sock.recvfrom(2048)
                except OSError:
                    continue
                hit("udp", spec, peer[0] + ":" + str(peer[1]), data)
            else:
                try:
                    data = sock.recv(READ_BYTES)
                except OSError:
                    data = b""
                _, peer, _ = open_conns.pop(sock)
                if data:
                    hit("tcp-data", spec, peer[0] + ":" + str(peer[1]), data)
                sel.unregister(sock)
                sock.close()
        # Peers that never send are dropped after a few seconds.
        now = time.monotonic()
        for conn, (_, _, t0) in list(open_conns.items()):
            if now - t0 > 5:
                del open_conns[conn]
                sel.unregister(conn)
                conn.close()


if __name__ == "__main__":
    main()
