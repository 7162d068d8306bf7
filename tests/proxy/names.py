#!/usr/bin/python3
"""Probes for test_names_e2e.sh, run inside `airlock run` in the test lab.

evil.test and secret.evil.test share one lab address (203.0.113.66). The
policy allows the first and denies the second, so every probe here is a
denied name presented on a connection to an allowed address: the case a
shared CDN address makes real. Each probe prints one line, "NAME VERDICT
DETAIL", where VERDICT is what the client saw:

  refused  the proxy's own refusal (an HTTP status it wrote, or the TLS
           access_denied alert), or a reset
  passed   bytes came back from the origin (the request went through)

names.py [transparent|explicit|tunnel|ech-allowed]"""
import os
import re
import socket
import struct
import sys
import time

SHARED = "203.0.113.66"  # evil.test and secret.evil.test
PROXY = ("127.0.0.1", 3128)
ALERT_ACCESS_DENIED = b"\x15\x03\x03\x00\x02\x02\x31"


def exchange(addr, data, done=lambda got: False, timeout=5, delay=0.0):
    """Send data (after delay seconds of silence), read until the peer
    closes or done(bytes so far) holds; (bytes, error text)."""
    try:
        s = socket.create_connection(addr, timeout=timeout)
    except OSError as e:
        return b"", f"connect: {e}"
    got, err = b"", ""
    try:
        time.sleep(delay)
        s.sendall(data)
        while len(got) < 65536 and not done(got):
            b = s.recv(65536)
            if not b:
                break
            got += b
    except OSError as e:
        err = type(e).__name__
    s.close()
    return got, err


def http_complete(got):
    """One whole response: its head and, if it has one, its Content-Length
    body (keep-alive peers do not close after it)."""
    head, sep, body = got.partition(b"\r\n\r\n")
    m = re.search(rb"(?im)^content-length: *([0-9]+)\r?$", head)
    return sep != b"" and m is not None and len(body) >= int(m.group(1))


def http_probe(name, addr, data, refusals=("400", "403"), delay=0.0):
    """An HTTP request: refused if the status line is one the proxy writes
    with its Proxy-Status header, passed if anything else answered."""
    got, err = exchange(addr, data, http_complete, delay=delay)
    line = got.split(b"\r\n", 1)[0].decode("latin-1")
    status = line.split(" ")[1] if line.count(" ") >= 1 else "-"
    ours = b"Proxy-Status: airlock" in got
    if (ours and status in refusals) or (not got and err):
        print(f"{name} refused {status if got else err}")
    else:
        print(f"{name} passed {line or err or 'nothing'}")


def ext(kind, body):
    return struct.pack("!HH", kind, len(body)) + body


def client_hello(names, ech=False, share=True):
    """A TLS 1.3 ClientHello an OpenSSL server answers (x25519, one suite),
    with a server_name list of names and, if ech, an encrypted_client_hello
    extension shaped as an outer ECHClientHello (RFC 9849 5)."""
    exts = b""
    if names:
        entries = b"".join(b"\x00" + struct.pack("!H", len(n)) + n.encode() for n in names)
        exts += ext(0x0000, struct.pack("!H", len(entries)) + entries)
    exts += ext(0x002B, b"\x02\x03\x04")  # supported_versions: TLS 1.3
    exts += ext(0x000A, b"\x00\x02\x00\x1d")  # supported_groups: x25519
    exts += ext(0x000D, b"\x00\x04\x04\x03\x08\x04")  # signature_algorithms
    # key_share: without one the server must ask again (HelloRetryRequest)
    ks = b"\x00\x1d" + struct.pack("!H", 32) + os.urandom(32) if share else b""
    exts += ext(0x0033, struct.pack("!H", len(ks)) + ks)
    if ech:
        enc, payload = os.urandom(32), os.urandom(208)
        exts += ext(0xFE0D, b"\x00" + b"\x00\x01\x00\x01" + b"\x42" +
                    struct.pack("!H", len(enc)) + enc + struct.pack("!H", len(payload)) + payload)
    body = (b"\x03\x03" + os.urandom(32) + b"\x20" + os.urandom(32) + b"\x00\x02\x13\x01" +
            b"\x01\x00" + struct.pack("!H", len(exts)) + exts)
    hs = b"\x01" + struct.pack("!I", len(body))[1:] + body
    return b"\x16\x03\x01" + struct.pack("!H", len(hs)) + hs


def tls_probe(name, names, ech=False, delay=0.0):
    # The first record tells: our alert, or the server's answer.
    got, err = exchange((SHARED, 443), client_hello(names, ech), lambda got: len(got) >= 7,
                        delay=delay)
    if got.startswith(ALERT_ACCESS_DENIED) or (not got and err):
        print(f"{name} refused {'access_denied' if got else err}")
    else:
        print(f"{name} passed {got[:6].hex() or err or 'nothing'}")


def hrr_probe(name, first, second, tunnel=None):
    """A ClientHello without a key share, so the server answers with a
    HelloRetryRequest, then a second ClientHello naming second; directly
    (transparent) or inside a CONNECT tunnel to the target tunnel."""
    try:
        s = socket.create_connection(PROXY if tunnel else (SHARED, 443), timeout=5)
    except OSError as e:
        print(f"{name} refused connect: {e}")
        return
    got, err = b"", ""
    try:
        if tunnel:
            s.sendall(f"CONNECT {tunnel} HTTP/1.1\r\nHost: {tunnel}\r\n\r\n".encode())
            while b"\r\n\r\n" not in got:
                b = s.recv(4096)
                if not b:
                    break
                got += b
            if not got.startswith(b"HTTP/1.1 200"):
                print(f"{name} error CONNECT refused: {got[:40]!r}")
                return
            got = b""
        s.sendall(client_hello(first, share=False))
        while len(got) < 5 or len(got) < 5 + struct.unpack("!H", got[3:5])[0]:
            b = s.recv(65536)
            if not b:
                break
            got += b
        if not got.startswith(b"\x16\x03\x03"):
            print(f"{name} error no HelloRetryRequest: {got[:8].hex()}")
            return
        got = b""
        s.sendall(client_hello(second))
        while len(got) < 7:
            b = s.recv(65536)
            if not b:
                break
            got += b
    except OSError as e:
        err = type(e).__name__
    s.close()
    if got.startswith(ALERT_ACCESS_DENIED) or (not got and err):
        print(f"{name} refused {'access_denied' if got else err}")
    else:
        print(f"{name} passed {got[:6].hex() or err or 'nothing'}")


def req(method, target, headers, body=b""):
    head = f"{method} {target} HTTP/1.1\r\n" + "".join(f"{k}: {v}\r\n" for k, v in headers)
    return head.encode() + b"\r\n" + body


def transparent():
    # The sandbox's DNS answers evil.test, so its address is learned: a
    # connection that shows no name is let through as evil.test.
    socket.getaddrinfo("evil.test", 80, socket.AF_INET, socket.SOCK_STREAM)
    web = (SHARED, 80)
    close = ("Connection", "close")
    ok, bad = ("Host", "evil.test"), ("Host", "secret.evil.test")

    # Controls: the allowed name on the shared address goes through.
    http_probe("control-http", web, req("GET", "/", [ok, close]))
    tls_probe("control-tls", ["evil.test"])
    http_probe("control-crlf", web, b"\r\n" + req("GET", "/", [ok, close]))
    http_probe("control-method", web, req("M-SEARCH", "/", [ok, close]))
    http_probe("control-websocket", web, req("GET", "/", [ok, ("Connection", "Upgrade"),
                                                          ("Upgrade", "websocket"), close]))
    # 1. What servers accept as a request, the sniffer must read too.
    http_probe("crlf", web, b"\r\n" + req("GET", "/", [bad, close]))
    http_probe("bare-lf", web, b"\n" + req("GET", "/", [bad, close]))
    http_probe("method-dash", web, req("M-SEARCH", "/", [bad, close]))
    http_probe("method-long", web, req("PROPFINDPROPFINDPROPFIND", "/", [bad, close]))
    http_probe("absolute-mismatch", web, req("GET", "http://secret.evil.test/", [ok, close]))
    http_probe("absolute-nohost", web, req("GET", "http://secret.evil.test/", [("Host", "evil.test"), close]))
    # 2. A ClientHello that names two servers, or hides the name (ECH).
    tls_probe("sni-two-names", ["evil.test", "secret.evil.test"])
    tls_probe("ech", ["evil.test"], ech=True)
    # ... and an upgrade away from HTTP/1 on a name-checked connection.
    http_probe("upgrade-h2c", web, req("GET", "/", [ok, ("Connection", "Upgrade, HTTP2-Settings"),
                                                    ("Upgrade", "h2c"),
                                                    ("HTTP2-Settings", "AAMAAABkAAQCAAAAAAIAAAAA"),
                                                    close]))
    # 3. A framing header named in Connection: an intermediary that drops
    # it reads the body as a second request, never decided.
    smuggled = req("GET", "/", [bad, close])
    http_probe("connection-cl", web, req("POST", "/", [ok, ("Content-Length", str(len(smuggled))),
                                                       ("Connection", "Content-Length")], smuggled))
    # 4. Silent past the sniff window (300 ms), so decided on the address
    # DNS taught (evil.test): what comes later must name evil.test.
    tls_probe("control-late-tls", ["evil.test"], delay=0.6)
    http_probe("control-late-http", web, req("GET", "/", [ok, close]), delay=0.6)
    tls_probe("late-tls", ["secret.evil.test"], delay=0.6)
    # 5. Every ClientHello: a HelloRetryRequest's second one too.
    hrr_probe("control-hrr", ["evil.test"], ["evil.test"])
    hrr_probe("hrr-second-name", ["evil.test"], ["secret.evil.test"])
    http_probe("late-http", web, req("GET", "/", [bad, close]), delay=0.6)


def explicit():
    smuggled = req("GET", "/", [("Host", "secret.evil.test"), ("Connection", "close")])
    http_probe("explicit-connection-cl", PROXY,
               req("POST", "http://evil.test/", [("Host", "evil.test"),
                                                 ("Content-Length", str(len(smuggled))),
                                                 ("Connection", "Content-Length")], smuggled))
    http_probe("explicit-connection-host", PROXY,
               req("GET", "http://evil.test/", [("Host", "evil.test"), ("Connection", "Host")]))
    # The response side: the origin on 8081 names its own Content-Length
    # in Connection (see test_names_e2e.sh).
    http_probe("explicit-response-connection-cl", PROXY,
               req("GET", "http://evil.test:8081/", [("Connection", "close")]), refusals=("502",))


def tunnel_exchange(target, pieces, done, timeout=5):
    """CONNECT target through the explicit proxy, then send pieces, a list
    of (delay in seconds, bytes); (what came after the 200, error text)."""
    try:
        s = socket.create_connection(PROXY, timeout=timeout)
    except OSError as e:
        return b"", f"connect: {e}"
    got, err = b"", ""
    try:
        s.sendall(f"CONNECT {target} HTTP/1.1\r\nHost: {target}\r\n\r\n".encode())
        while b"\r\n\r\n" not in got:
            b = s.recv(4096)
            if not b:
                return got, "closed before the CONNECT reply"
            got += b
        head, _, got = got.partition(b"\r\n\r\n")
        if not head.startswith(b"HTTP/1.1 200"):
            return head, "CONNECT refused"
        for delay, data in pieces:
            time.sleep(delay)
            s.sendall(data)
        while len(got) < 65536 and not done(got):
            b = s.recv(65536)
            if not b:
                break
            got += b
    except OSError as e:
        err = type(e).__name__
    s.close()
    return got, err


def tunnel_tls_probe(name, target, names, delay=0.0, split=None):
    """A ClientHello inside a CONNECT tunnel: refused if our alert (or a
    reset) came back, passed if the server answered."""
    hello = client_hello(names)
    cut = split if split is not None else len(hello)
    pieces = [(delay, hello[:cut])] + ([(0.5, hello[cut:])] if cut < len(hello) else [])
    got, err = tunnel_exchange(target, pieces, lambda got: len(got) >= 7)
    if got.startswith(ALERT_ACCESS_DENIED) or (not got and err):
        print(f"{name} refused {'access_denied' if got else err}")
    else:
        print(f"{name} passed {got[:6].hex() or err or 'nothing'}")


def tunnel_http_probe(name, target, data, delay=0.0):
    """An HTTP/1 request inside a CONNECT tunnel: refused if the answer is
    the proxy's own (Proxy-Status) or a reset, passed if the origin's."""
    got, err = tunnel_exchange(target, [(delay, data)], http_complete)
    line = got.split(b"\r\n", 1)[0].decode("latin-1")
    if b"Proxy-Status: airlock" in got or (not got and err):
        print(f"{name} refused {line or err}")
    else:
        print(f"{name} passed {line or err or 'nothing'}")


def tunnel():
    """Item 1 of issue 15: the first bytes inside an allowed CONNECT
    tunnel must name the CONNECT target."""
    close = ("Connection", "close")
    # Controls: the target's own name, in any case and with a trailing
    # dot, and bytes that are neither TLS nor HTTP, go through.
    tunnel_tls_probe("control-tunnel-tls", "evil.test:443", ["evil.test"])
    tunnel_tls_probe("control-tunnel-tls-case", "evil.test:443", ["EVIL.Test."])
    tunnel_tls_probe("control-tunnel-tls-late", "evil.test:443", ["evil.test"], delay=1.0)
    tunnel_http_probe("control-tunnel-http", "evil.test:80",
                      req("GET", "/", [("Host", "Evil.Test."), close]))
    tunnel_http_probe("control-tunnel-opaque", "evil.test:80", b"\x00\x01not a head\r\n\r\n")
    # The denied name on the allowed address, through the allowed tunnel.
    tunnel_tls_probe("tunnel-sni", "evil.test:443", ["secret.evil.test"])
    tunnel_tls_probe("tunnel-sni-late", "evil.test:443", ["secret.evil.test"], delay=1.0)
    tunnel_tls_probe("tunnel-sni-split", "evil.test:443", ["secret.evil.test"], split=60)
    tunnel_tls_probe("tunnel-sni-address", "203.0.113.66:443", ["secret.evil.test"])
    # The second hello a HelloRetryRequest asks for, inside the tunnel.
    hrr_probe("control-tunnel-hrr", ["evil.test"], ["evil.test"], tunnel="evil.test:443")
    hrr_probe("tunnel-hrr-second-name", ["evil.test"], ["secret.evil.test"],
              tunnel="evil.test:443")
    tunnel_http_probe("tunnel-host", "evil.test:80",
                      req("GET", "/", [("Host", "secret.evil.test"), close]))
    tunnel_http_probe("tunnel-host-late", "evil.test:80",
                      req("GET", "/", [("Host", "secret.evil.test"), close]), delay=1.0)
    tunnel_http_probe("tunnel-absolute", "evil.test:80",
                      req("GET", "http://secret.evil.test/", [("Host", "evil.test"), close]))


def late_cidr():
    """A silent connection a cidr rule let through (no DNS asked): a name
    that comes later is decided as if it had come first."""
    tls_probe("control-late-cidr", ["evil.test"], delay=0.6)
    tls_probe("late-cidr-denied", ["secret.evil.test"], delay=0.6)
    tls_probe("late-cidr-unlisted", ["other.test"], delay=0.6)


def ech_allowed():
    socket.getaddrinfo("evil.test", 443, socket.AF_INET, socket.SOCK_STREAM)
    tls_probe("ech-opted-in", ["evil.test"], ech=True)
    tls_probe("ech-two-names", ["evil.test", "secret.evil.test"], ech=True)


if __name__ == "__main__":  # frames.py imports the TLS probes
    {"transparent": transparent, "explicit": explicit, "tunnel": tunnel, "late-cidr": late_cidr,
     "ech-allowed": ech_allowed}[sys.argv[1]]()
