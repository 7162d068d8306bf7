#!/usr/bin/python3
"""Probes for test_frames_e2e.sh, run inside `airlock run` in the test lab:
every HTTP/1 request on a connection, not only the first, must carry the
name the connection was decided for (issue 15, item 1).

evil.test and secret.evil.test share one lab address (203.0.113.66), where
frames_origin.py listens on port 8082. The policy allows evil.test and
denies secret.evil.test, so each probe presents the denied name on a
connection already decided, rightly, for the allowed one: on the same
address, behind a request that was let through. Each prints one line,
"NAME VERDICT DETAIL":

  passed   the origin answered the last request (its X-Origin header)
  refused  the proxy's own answer (Proxy-Status), a reset or a close

frames.py [transparent|tunnel|late|tls|tls-cidr|audit|budget-before|budget-after]"""
import socket
import sys
import time

import names  # the TLS probes (names.py, copied next to this file)

SHARED = "203.0.113.66"
WEB = (SHARED, 8082)
PROXY = ("127.0.0.1", 3128)
OK, BAD = "evil.test", "secret.evil.test"


def req(method, target, host, fields=(), body=b""):
    head = f"{method} {target} HTTP/1.1\r\n"
    if host is not None:
        head += f"Host: {host}\r\n"
    head += "".join(f"{k}: {v}\r\n" for k, v in fields)
    return head.encode() + b"\r\n" + body


def chunked(*chunks):
    return b"".join(f"{len(c):x}\r\n".encode() + c + b"\r\n" for c in chunks) + b"0\r\n\r\n"


class Session:
    """One client connection: direct (transparent), or a CONNECT tunnel
    through the explicit proxy."""

    def __init__(self, tunnel=None, delay=0.0):
        self.buf, self.err = b"", ""
        self.s = socket.create_connection(PROXY if tunnel else WEB, timeout=5)
        if tunnel:
            self.s.sendall(f"CONNECT {tunnel} HTTP/1.1\r\nHost: {tunnel}\r\n\r\n".encode())
            head = self.head()
            if not head or not head.startswith(b"HTTP/1.1 200"):
                raise OSError(f"CONNECT refused: {head!r}")
        time.sleep(delay)

    def fill(self):
        try:
            b = self.s.recv(65536)
        except OSError as e:
            self.err = type(e).__name__
            return False
        if not b:
            self.err = self.err or "closed"
            return False
        self.buf += b
        return True

    def head(self):
        while b"\r\n\r\n" not in self.buf:
            if not self.fill():
                return None
        head, _, self.buf = self.buf.partition(b"\r\n\r\n")
        return head

    def response(self):
        """(head, body) of the next response, or None if none came."""
        head = self.head()
        if head is None:
            return None
        n = 0
        for line in head.split(b"\r\n")[1:]:
            k, _, v = line.partition(b":")
            if k.strip().lower() == b"content-length":
                n = int(v)
        while len(self.buf) < n:
            if not self.fill():
                return None
        body, self.buf = self.buf[:n], self.buf[n:]
        return head, body

    def send(self, data):
        try:
            self.s.sendall(data)
        except OSError as e:
            self.err = type(e).__name__

    def close(self):
        self.s.close()


def verdict(name, r, err, want=None):
    """passed: the origin answered (and, with want, said it); else refused."""
    line = r[0].split(b"\r\n")[0].decode("latin-1") if r is not None else ""
    if r is not None and b"X-Origin: frames" in r[0] and (want is None or want in r[1]):
        print(f"{name} passed {line} {r[1].strip().decode('latin-1')}")
    elif r is not None:
        print(f"{name} refused {line}")
    else:
        print(f"{name} refused {err or 'nothing'}")


def keepalive(name, first, second, tunnel=None, delay=0.0, want=None):
    """first, answered by the origin; then second on the same connection."""
    try:
        s = Session(tunnel, delay)
    except OSError as e:
        print(f"{name} error {e}")
        return
    s.send(first)
    r = s.response()
    if r is None or b"X-Origin: frames" not in r[0]:
        print(f"{name} error first request not answered by the origin: {r and r[0][:40]!r} {s.err}")
        s.close()
        return
    s.send(second)
    verdict(name, s.response(), s.err, want)
    s.close()


def pipelined(name, data, count, tunnel=None, want=None):
    """count requests in one write: passed if the origin answered all."""
    try:
        s = Session(tunnel)
    except OSError as e:
        print(f"{name} error {e}")
        return
    s.send(data)
    r = None
    for _ in range(count):
        r = s.response()
        if r is None or b"X-Origin: frames" not in r[0]:
            break
    verdict(name, r, s.err, want)
    s.close()


def websocket(name):
    """An upgrade the origin accepts: the frames after it go unframed."""
    s = Session()
    s.send(req("GET", "/ws", OK, [("Connection", "Upgrade"), ("Upgrade", "websocket"),
                                  ("Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ=="),
                                  ("Sec-WebSocket-Version", "13")]))
    head = s.head()
    if head is None or not head.startswith(b"HTTP/1.1 101"):
        print(f"{name} refused {head[:30] if head else s.err}")
        return
    frame = b"\x81\x85\x01\x02\x03\x04" + bytes(a ^ b for a, b in zip(b"hello", b"\x01\x02\x03\x04\x01"))
    s.send(frame)
    while len(s.buf) < len(frame) and s.fill():
        pass
    print(f"{name} {'passed echoed' if s.buf[:len(frame)] == frame else 'refused ' + (s.err or repr(s.buf[:20]))}")
    s.close()


def transparent():
    socket.getaddrinfo(OK, 80, socket.AF_INET, socket.SOCK_STREAM)  # evil.test learned
    get = lambda host, target="/": req("GET", target, host)
    fake = get(BAD)
    # Controls: the allowed name, again and again, goes through.
    keepalive("control-keepalive", get(OK), get(OK, "/2"), want=b"evil.test /2")
    pipelined("control-pipelined", get(OK) + get(OK, "/2") + get(OK, "/3"), 3, want=b"/3")
    keepalive("control-chunked-fake-head",
              req("POST", "/up", OK, [("Transfer-Encoding", "chunked")], chunked(fake[:9], fake[9:])),
              get(OK, "/after"), want=b"/after")
    keepalive("control-length-fake-head",
              req("POST", "/up", OK, [("Content-Length", str(len(fake)))], fake),
              get(OK, "/after"), want=b"/after")
    websocket("control-websocket")
    # The denied name, after an allowed request on the same connection.
    keepalive("keepalive-host", get(OK), get(BAD))
    keepalive("keepalive-host-case-dot", get(OK), get("Secret.Evil.Test."))
    pipelined("pipelined-host", get(OK) + get(BAD), 2)
    keepalive("keepalive-absolute", get(OK), req("GET", "http://secret.evil.test/", BAD))
    keepalive("keepalive-absolute-nohost", get(OK), req("GET", "http://secret.evil.test/", None))
    keepalive("keepalive-nohost", get(OK), b"GET / HTTP/1.0\r\n\r\n")
    keepalive("chunked-then-host",
              req("POST", "/up", OK, [("Transfer-Encoding", "chunked")], chunked(b"abc", b"defg")),
              get(BAD))
    keepalive("length-then-host",
              req("POST", "/up", OK, [("Content-Length", "5")], b"hello"), get(BAD))
    keepalive("websocket-declined-then-host",
              req("GET", "/no-ws", OK, [("Connection", "Upgrade"), ("Upgrade", "websocket")]),
              get(BAD))
    keepalive("h2c-second", get(OK), req("GET", "/", OK, [("Connection", "Upgrade, HTTP2-Settings"),
                                                          ("Upgrade", "h2c"),
                                                          ("HTTP2-Settings", "AAMAAABkAAQCAAAAAAIAAAAA")]))
    keepalive("second-both-lengths", get(OK),
              req("POST", "/", OK, [("Content-Length", "3"), ("Transfer-Encoding", "chunked")], b"0\r\n\r\n"))


def tunnel():
    t = f"{OK}:8082"
    get = lambda host, target="/": req("GET", target, host)
    keepalive("control-tunnel-keepalive", get(OK), get(OK, "/2"), tunnel=t, want=b"/2")
    keepalive("tunnel-keepalive-host", get(OK), get(BAD), tunnel=t)
    pipelined("tunnel-pipelined-host", get(OK) + get(BAD), 2, tunnel=t)
    keepalive("tunnel-keepalive-absolute", get(OK), req("GET", "http://secret.evil.test/", BAD),
              tunnel=t)
    keepalive("tunnel-h2c-second", get(OK), req("GET", "/", OK, [("Connection", "Upgrade"),
                                                                 ("Upgrade", "h2c")]), tunnel=t)


def late():
    # Silent past the sniff window: decided on the address DNS taught
    # (evil.test); every request that follows must name it.
    socket.getaddrinfo(OK, 80, socket.AF_INET, socket.SOCK_STREAM)
    get = lambda host, target="/": req("GET", target, host)
    keepalive("control-late-keepalive", get(OK), get(OK, "/2"), delay=0.6, want=b"/2")
    keepalive("late-keepalive-host", get(OK), get(BAD), delay=0.6)


def tls():
    # A ClientHello without SNI (decided on the DNS-learned name), then
    # the second hello a HelloRetryRequest asks for, naming the denied
    # name: decided as if it had come first (item 2).
    socket.getaddrinfo(OK, 443, socket.AF_INET, socket.SOCK_STREAM)
    names.hrr_probe("control-hrr-unnamed", [], [OK])
    names.hrr_probe("hrr-unnamed-then-name", [], [BAD])
    names.hrr_probe("control-tunnel-hrr-unnamed", [], [OK], tunnel=f"{OK}:443")
    names.hrr_probe("tunnel-hrr-unnamed-then-name", [], [BAD], tunnel=f"{OK}:443")


def tls_cidr():
    # The same, on an address a cidr rule allows (no DNS asked): the
    # second hello's name is decided by the policy as if it came first.
    names.hrr_probe("control-cidr-hrr-unnamed", [], [OK])
    names.hrr_probe("cidr-hrr-unnamed-then-denied", [], [BAD])
    names.hrr_probe("cidr-hrr-unnamed-then-unlisted", [], ["other.test"])


def steps(name, *reqs, delay=0.0):
    """Requests one after the other on one connection: each answer's
    verdict, "name passed|refused ..." for the last one."""
    try:
        s = Session(delay=delay)
    except OSError as e:
        print(f"{name} error {e}")
        return
    r = None
    for i, data in enumerate(reqs):
        s.send(data)
        r = s.response()
        if i < len(reqs) - 1 and (r is None or b"X-Origin: frames" not in r[0]):
            print(f"{name} error request {i + 1} not answered by the origin: "
                  f"{r and r[0][:40]!r} {s.err}")
            s.close()
            return
    verdict(name, r, s.err)
    s.close()


def audit():
    # Audit mode: a request that cannot be framed goes on, and so does
    # everything after it, unframed; the line must say so, first refusal
    # on the connection or not.
    socket.getaddrinfo(OK, 80, socket.AF_INET, socket.SOCK_STREAM)
    get = lambda host, target="/": req("GET", target, host)
    both = req("POST", "/both", OK, [("Content-Length", "3"), ("Transfer-Encoding", "chunked")],
               b"0\r\n\r\n")
    steps("audit-unframed-first", get(OK), both)
    steps("audit-unframed-after-host", get(OK), get(BAD), both)


def budget(when):
    # An address a cidr rule allows, silent past the sniff window (so
    # decided on it, no name), then a Host the policy allows: a new
    # destination, which a spent log budget refuses. The address itself
    # was admitted before the budget ran out.
    get = lambda host, target: req("GET", target, host)
    if when == "before":
        steps("budget-before-address", get(SHARED, "/budget-before"), delay=0.6)
    else:
        steps("budget-after-address", get(SHARED, "/budget-after-address"), delay=0.6)
        steps("budget-after-name", get(OK, "/budget-after-name"), delay=0.6)


if __name__ == "__main__":
    {"transparent": transparent, "tunnel": tunnel, "late": late, "tls": tls,
     "tls-cidr": tls_cidr, "audit": audit, "budget-before": lambda: budget("before"),
     "budget-after": lambda: budget("after")}[sys.argv[1]]()
