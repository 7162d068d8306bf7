#!/usr/bin/env python3
"""fakedns: a scriptable upstream DNS server for the resolver's e2e tests.

    fakedns.py ZONE.json ADDR PORT QUERYLOG

ZONE maps a name to how it is answered:
    {"name.test": {"a": ["203.0.113.66"], "aaaa": [], "ttl": 300,
                   "cname": "other.test",   # answer with this CNAME first
                   "delay_ms": 1500,        # every answer this late
                   "drop": true,            # never answer
                   "rotate": true}}         # one A per query, in turn
A name not in ZONE (nor a CNAME target in it) is NXDOMAIN. Over UDP an
answer longer than 512 bytes is sent truncated (TC, no records), as from a
server that ignores EDNS, so the client must retry over TCP. Every query
is appended to QUERYLOG as "proto qname qtype" (the tests count them).
Stops on SIGTERM; bounded: it exits by itself after 600 s.
"""
import json
import signal
import socket
import struct
import sys
import threading
import time

zone = json.load(open(sys.argv[1]))
addr, port, qlog = sys.argv[2], int(sys.argv[3]), sys.argv[4]
lock = threading.Lock()
turn = {}


def log(proto, name, qtype):
    with lock, open(qlog, "a") as f:
        f.write("%s %s %d\n" % (proto, name, qtype))


def parse_q(msg):
    qid, flags, qd = struct.unpack("!HHH", msg[:6])
    i, labels = 12, []
    while msg[i]:
        n = msg[i]
        labels.append(msg[i + 1:i + 1 + n].decode("ascii", "replace").lower())
        i += 1 + n
    qtype, qclass = struct.unpack("!HH", msg[i + 1:i + 5])
    return qid, flags, ".".join(labels), qtype, msg[12:i + 5]


def enc_name(name):
    out = b""
    for label in name.split("."):
        if label:
            out += bytes([len(label)]) + label.encode()
    return out + b"\0"


def rr(name, rtype, ttl, data):
    return enc_name(name) + struct.pack("!HHIH", rtype, 1, ttl, len(data)) + data


def answer(msg, proto):
    qid, flags, name, qtype, question = parse_q(msg)
    log(proto, name, qtype)
    z = zone.get(name)
    if z is None:
        return z, struct.pack("!HHHHHH", qid, 0x8183, 1, 0, 0, 0) + question
    if z.get("drop"):
        return z, None
    ttl = z.get("ttl", 300)
    ans, cur = [], name
    if "cname" in z:
        ans.append(rr(name, 5, ttl, enc_name(z["cname"])))
        cur = z["cname"]
        z = zone.get(cur, {})
    if qtype == 1:
        ips = list(z.get("a", []))
        if z.get("rotate") and ips:
            with lock:
                k = turn.get((cur, qtype), 0)
                turn[(cur, qtype)] = k + 1
            ips = [ips[k % len(ips)]]
        ans += [rr(cur, 1, ttl, socket.inet_pton(socket.AF_INET, ip)) for ip in ips]
    elif qtype == 28:
        ans += [rr(cur, 28, ttl, socket.inet_pton(socket.AF_INET6, ip)) for ip in z.get("aaaa", [])]
    out = struct.pack("!HHHHHH", qid, 0x8180, 1, len(ans), 0, 0) + question + b"".join(ans)
    if proto == "udp" and len(out) > 512:
        out = struct.pack("!HHHHHH", qid, 0x8380, 1, 0, 0, 0) + question
    return zone.get(name), out


def later(z, fn):
    d = (z or {}).get("delay_ms", 0) / 1000.0
    if d:
        threading.Timer(d, fn).start()
    else:
        fn()


def serve_udp(s):
    while True:
        msg, peer = s.recvfrom(4096)
        try:
            z, out = answer(msg, "udp")
        except (IndexError, struct.error):
            continue
        if out is not None:
            later(z, lambda out=out, peer=peer: s.sendto(out, peer))


def serve_tcp_conn(c):
    try:
        c.settimeout(10)
        while True:
            hdr = c.recv(2, socket.MSG_WAITALL)
            if len(hdr) < 2:
                return
            msg = c.recv(struct.unpack("!H", hdr)[0], socket.MSG_WAITALL)
            z, out = answer(msg, "tcp")
            if out is not None:
                later(z, lambda out=out: c.sendall(struct.pack("!H", len(out)) + out))
    except (OSError, IndexError, struct.error):
        pass


def serve_tcp(s):
    while True:
        c, _ = s.accept()
        threading.Thread(target=serve_tcp_conn, args=(c,), daemon=True).start()


fam = socket.AF_INET6 if ":" in addr else socket.AF_INET
u = socket.socket(fam, socket.SOCK_DGRAM)
u.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
u.bind((addr, port))
t = socket.socket(fam, socket.SOCK_STREAM)
t.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
t.bind((addr, port))
t.listen(64)
signal.signal(signal.SIGTERM, lambda *a: sys.exit(0))
threading.Thread(target=serve_udp, args=(u,), daemon=True).start()
threading.Thread(target=serve_tcp, args=(t,), daemon=True).start()
print("ready", flush=True)
time.sleep(600)
