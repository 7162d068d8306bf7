"""A client that, on one connection to airlock proxy, has a plain-HTTP
request answered (its upstream kept alive), then asks for a tunnel on the
same connection: an HTTP CONNECT, or SOCKS5 (refused: a connection that has
served HTTP speaks HTTP). Then it closes. argv: PROXY_PORT ORIGIN_PORT
ECHO_PORT MODE N. Prints one line per mode with what the tunnel request got."""
import socket
import struct
import sys

proxy, origin, echo, mode, n = (int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]),
                                sys.argv[4], int(sys.argv[5]))
got = None
for _ in range(n):
    s = socket.create_connection(("127.0.0.1", proxy), timeout=5)
    s.sendall(b"GET http://127.0.0.1:%d/ HTTP/1.1\r\nHost: 127.0.0.1:%d\r\n\r\n" % (origin, origin))
    d = b""
    while not d.endswith(b"hi"):
        chunk = s.recv(4096)
        if not chunk:
            break
        d += chunk
    try:
        if mode == "socks":
            s.sendall(b"\x05\x01\x00")
            s.sendall(b"\x05\x01\x00\x01" + socket.inet_aton("127.0.0.1") + struct.pack(">H", echo))
            r = s.recv(100)
        else:
            s.sendall(b"CONNECT 127.0.0.1:%d HTTP/1.1\r\nHost: 127.0.0.1:%d\r\n\r\n" % (echo, echo))
            r = s.recv(100)
    except OSError:
        r = b""
    got = r.split(b"\r\n")[0].decode("latin-1") if r else "closed"
    s.close()
print(f"{mode}: {got}")
