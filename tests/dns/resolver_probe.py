#!/usr/bin/env python3
"""Probes for tests/dns/test_resolver_e2e.sh, run inside `airlock run` (or
next to `airlock proxy`). Each step prints one line "LABEL RESULT":

    connect LABEL NAME         CONNECT NAME:80 through the explicit proxy
    get LABEL NAME             absolute-form GET http://NAME/ through it
    transparent LABEL NAME IP  GET / with Host NAME straight to IP:80 (IP "@":
                               the address `resolve NAME` gives)
    dns LABEL NAME             an A query to the sandbox's DNS listener
    resolve LABEL NAME         the first IPv4 address getaddrinfo gives

RESULT is the HTTP status and the Proxy-Status error token when the proxy
refused ("403 http_request_denied"), "200" for a tunnel or an origin's
answer, "rcode=N an=M" for dns, the address for resolve, or "error ...".
The proxy is $AIRLOCK_PROBE_PROXY (HOST:PORT), else 127.0.0.1:3128.
"""
import os
import random
import socket
import struct
import sys

PROXY = os.environ.get("AIRLOCK_PROBE_PROXY", "127.0.0.1:3128")


def status(sock):
    sock.settimeout(30)
    got = b""
    while b"\r\n\r\n" not in got:
        b = sock.recv(4096)
        if not b:
            break
        got += b
    head = got.split(b"\r\n\r\n")[0].decode("latin-1")
    lines = head.split("\r\n")
    if not lines or not lines[0].startswith("HTTP/"):
        return "error no-status %r" % got[:40]
    code = lines[0].split()[1]
    for line in lines[1:]:
        if line.lower().startswith("proxy-status:") and "error=" in line:
            return code + " " + line.split("error=")[1].split(";")[0].strip()
    return code


def via_proxy(req):
    host, port = PROXY.rsplit(":", 1)
    s = socket.create_connection((host, int(port)), timeout=30)
    s.sendall(req)
    try:
        return status(s)
    finally:
        s.close()


def connect(name):
    return via_proxy(b"CONNECT %s:80 HTTP/1.1\r\nHost: %s:80\r\n\r\n" % (name.encode(), name.encode()))


def get(name):
    return via_proxy(b"GET http://%s/ HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n" %
                     (name.encode(), name.encode()))


def transparent(name, ip):
    if ip == "@":  # the address the sandbox's own lookup gives
        ip = resolve(name)
    s = socket.create_connection((ip, 80), timeout=30)
    s.sendall(b"GET / HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n" % name.encode())
    try:
        return status(s)
    finally:
        s.close()


def dns(name):
    qid = random.randrange(65536)
    q = struct.pack("!HHHHHH", qid, 0x0100, 1, 0, 0, 0)
    for label in name.split("."):
        q += bytes([len(label)]) + label.encode()
    q += b"\0" + struct.pack("!HH", 1, 1)
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.settimeout(10)
    s.sendto(q, ("127.0.0.1", 53))
    while True:
        r = s.recv(4096)
        if struct.unpack("!H", r[:2])[0] == qid:
            break
    flags, _, an = struct.unpack("!HHH", r[2:8])
    if flags & 0x0200:  # truncated: ask again over TCP
        t = socket.create_connection(("127.0.0.1", 53), timeout=10)
        t.sendall(struct.pack("!H", len(q)) + q)
        n = struct.unpack("!H", t.recv(2, socket.MSG_WAITALL))[0]
        r = t.recv(n, socket.MSG_WAITALL)
        t.close()
        flags, _, an = struct.unpack("!HHH", r[2:8])
    return "rcode=%d an=%d" % (flags & 0xf, an)


def resolve(name):
    return socket.getaddrinfo(name, 80, socket.AF_INET, socket.SOCK_STREAM)[0][4][0]


steps = {"connect": connect, "get": get, "transparent": transparent, "dns": dns, "resolve": resolve}
args = sys.argv[1:]
i = 0
while i < len(args):
    op, label = args[i], args[i + 1]
    n = 2 if op == "transparent" else 1
    params = args[i + 2:i + 2 + n]
    i += 2 + n
    try:
        res = steps[op](*params)
    except (OSError, IndexError, struct.error) as e:
        res = "error %s" % e
    print("%s %s" % (label, res), flush=True)
