#!/usr/bin/env python3
"""Load generators for the egress-log tests, run inside `airlock run` (or
against `airlock proxy`). Every loop is bounded in count and in time, and
every address is the sandbox's own listener or a documentation address the
sandbox's proxy refuses (nothing is ever dialled by the supervisor).

  flood.py dns [--count N] [--seconds S] [--server IP] NAME...
      N queries (type A) over UDP, round-robin over NAME..., a window of
      queries in flight; prints "dns sent=.. answered=.. rcodes=..".
  flood.py dns-distinct [--count N] [--seconds S] PREFIX
      N queries for distinct names PREFIX-<i>.evil.test.
  flood.py query NAME [--timeout T]
      one query; prints "rcode=NAME time_ms=.." or "rcode=timeout".
  flood.py connect IP PORT [--count N] [--seconds S]
      N TCP connections (transparent: the proxy refuses with a reset).
  flood.py proxy HOST:PORT [--via IP:PORT] [--count N] [--seconds S]
      N CONNECT requests through the explicit proxy; prints the statuses.
  flood.py proxy-distinct PREFIX [--via IP:PORT] [--count N] [--seconds S]
      N CONNECT requests for distinct names PREFIX-<i>.evil.test:443.
"""
import argparse
import collections
import os
import random
import select
import socket
import struct
import sys
import time

RCODES = {0: "NOERROR", 1: "FORMERR", 2: "SERVFAIL", 3: "NXDOMAIN", 4: "NOTIMP", 5: "REFUSED"}


def dns_query(qid, name):
    q = struct.pack(">HHHHHH", qid, 0x0100, 1, 0, 0, 0)
    for label in name.rstrip(".").split("."):
        q += bytes([len(label)]) + label.encode()
    return q + b"\x00" + struct.pack(">HH", 1, 1)


def dns_flood(names, count, seconds, server, window=64):
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.connect((server, 53))
    s.setblocking(False)
    deadline = time.monotonic() + seconds
    sent = answered = 0
    inflight = {}
    rcodes = collections.Counter()
    while (sent < count or inflight) and time.monotonic() < deadline:
        while sent < count and len(inflight) < window:
            qid = random.getrandbits(16)
            if qid in inflight:
                continue
            try:
                s.send(dns_query(qid, names[sent % len(names)]))
            except BlockingIOError:
                break
            inflight[qid] = time.monotonic()
            sent += 1
        r, _, _ = select.select([s], [], [], 0.2)
        if not r:
            # Lost datagrams (the listener's queue overran): forget the
            # oldest so the loop keeps going; they count as sent only.
            now = time.monotonic()
            for qid in [q for q, t in inflight.items() if now - t > 1.0]:
                del inflight[qid]
            continue
        while True:
            try:
                data = s.recv(4096)
            except BlockingIOError:
                break
            if len(data) < 4:
                continue
            qid = struct.unpack(">H", data[:2])[0]
            if inflight.pop(qid, None) is not None:
                answered += 1
                rcodes[RCODES.get(data[3] & 15, str(data[3] & 15))] += 1
    print("dns sent=%d answered=%d rcodes=%s" % (sent, answered, dict(rcodes)), flush=True)


def one_query(name, server, timeout):
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.settimeout(timeout)
    t0 = time.monotonic()
    qid = random.getrandbits(16)
    s.sendto(dns_query(qid, name), (server, 53))
    try:
        while True:
            data = s.recv(4096)
            if len(data) >= 4 and struct.unpack(">H", data[:2])[0] == qid:
                break
    except socket.timeout:
        print("rcode=timeout time_ms=%d" % ((time.monotonic() - t0) * 1000), flush=True)
        return
    print("rcode=%s time_ms=%d" % (RCODES.get(data[3] & 15, str(data[3] & 15)),
                                   (time.monotonic() - t0) * 1000), flush=True)


def connect_flood(ip, port, count, seconds):
    deadline = time.monotonic() + seconds
    outcomes = collections.Counter()
    n = 0
    while n < count and time.monotonic() < deadline:
        n += 1
        s = socket.socket(socket.AF_INET6 if ":" in ip else socket.AF_INET, socket.SOCK_STREAM)
        s.settimeout(2)
        try:
            s.connect((ip, port))
            # Bytes no protocol starts with: decided at once (a token
            # could still be the start of an HTTP method, and waits).
            s.sendall(b"\0" * 16)
            outcomes["eof" if s.recv(64) == b"" else "data"] += 1
        except ConnectionResetError:
            outcomes["reset"] += 1
        except socket.timeout:
            outcomes["timeout"] += 1
        except OSError as e:
            outcomes[type(e).__name__] += 1
        finally:
            s.close()
    print("connect tries=%d outcomes=%s" % (n, dict(outcomes)), flush=True)


def proxy_flood(targets, via, count, seconds):
    host, port = via.rsplit(":", 1)
    deadline = time.monotonic() + seconds
    statuses = collections.Counter()
    n = 0
    while n < count and time.monotonic() < deadline:
        target = targets(n)
        n += 1
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.settimeout(2)
        try:
            s.connect((host, int(port)))
            s.sendall(("CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n" % (target, target)).encode())
            head = s.recv(256).split(b"\r\n", 1)[0].split(b" ")
            statuses[head[1].decode() if len(head) > 1 else "eof"] += 1
        except socket.timeout:
            statuses["timeout"] += 1
        except OSError as e:
            statuses[type(e).__name__] += 1
        finally:
            s.close()
    print("proxy tries=%d statuses=%s" % (n, dict(statuses)), flush=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("mode")
    ap.add_argument("args", nargs="*")
    ap.add_argument("--count", type=int, default=1000)
    ap.add_argument("--seconds", type=float, default=20)
    ap.add_argument("--server", default="127.0.0.1")
    ap.add_argument("--via", default="127.0.0.1:3128")
    ap.add_argument("--timeout", type=float, default=3)
    a = ap.parse_intermixed_args()
    if a.mode == "dns":
        dns_flood(a.args, a.count, a.seconds, a.server)
    elif a.mode == "dns-distinct":
        tag = "%x" % random.getrandbits(24)
        dns_flood(["%s-%s-%d.evil.test" % (a.args[0], tag, i) for i in range(a.count)],
                  a.count, a.seconds, a.server, window=16)
    elif a.mode == "query":
        one_query(a.args[0], a.server, a.timeout)
    elif a.mode == "connect":
        connect_flood(a.args[0], int(a.args[1]), a.count, a.seconds)
    elif a.mode == "proxy":
        proxy_flood(lambda i: a.args[0], a.via, a.count, a.seconds)
    elif a.mode == "proxy-distinct":
        tag = "%x" % random.getrandbits(24)
        proxy_flood(lambda i: "%s-%s-%d.evil.test:443" % (a.args[0], tag, i), a.via, a.count,
                    a.seconds)
    else:
        sys.exit("flood.py: unknown mode " + a.mode)


if __name__ == "__main__":
    main()
