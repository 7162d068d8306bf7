#!/usr/bin/python3
"""An origin for the relay tests: relay_origin.py ADDR PORT.

Reads request heads on a kept-alive connection and answers by path:
  /len/N[/close]  200, Content-Length N, the body pattern(N); with /close
                  it says Connection: close and closes after the body
  /eof/N          200 without a length: N bytes, then a clean close (FIN)
  /rst/N          200 without a length: N bytes, then a reset (RST)
  /rstlen/N       200, Content-Length 2N: N bytes, then a reset
  /silent         reads the request and never answers (until the client
                  goes)
Bodies are sent as fast as the kernel takes them. pattern(N) is N bytes of
a repeating counter, so a client can tell a lost or shifted byte.
Writes "ready" to stdout once listening; serves until killed."""
import socket
import struct
import sys
import threading

BLOCK = b"".join(struct.pack(">I", i) for i in range(65536 // 4))


def pattern(n):
    """The first n bytes of the body of any size (the same for every n)."""
    return (BLOCK * (n // len(BLOCK) + 1))[:n]


def reset(s):
    s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    s.close()


def serve(s):
    buf = b""
    try:
        while True:
            while b"\r\n\r\n" not in buf:
                b = s.recv(65536)
                if not b:
                    s.close()
                    return
                buf += b
            head, buf = buf.split(b"\r\n\r\n", 1)
            parts = head.split(b"\r\n")[0].split(b" ")[1].decode().split("/")
            what = parts[1]
            if what == "silent":
                while s.recv(65536):
                    pass
                s.close()
                return
            n = int(parts[2])
            body = pattern(n)
            if what == "len":
                close = len(parts) > 3 and parts[3] == "close"
                s.sendall(f"HTTP/1.1 200 OK\r\nContent-Length: {n}\r\n"
                          f"{'Connection: close' + chr(13) + chr(10) if close else ''}\r\n"
                          .encode() + body)
                if close:
                    s.close()
                    return
            elif what == "eof":
                s.sendall(b"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n" + body)
                s.close()
                return
            elif what in ("rst", "rstlen"):
                length = f"Content-Length: {2 * n}\r\n" if what == "rstlen" else ""
                s.sendall(f"HTTP/1.1 200 OK\r\n{length}\r\n".encode() + body)
                reset(s)
                return
            else:
                s.sendall(b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n")
    except OSError:
        s.close()


def main():
    addr, port = sys.argv[1], int(sys.argv[2])
    ls = socket.socket(socket.AF_INET6 if ":" in addr else socket.AF_INET)
    ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    ls.bind((addr, port))
    ls.listen(1024)
    print("ready", flush=True)
    while True:
        c, _ = ls.accept()
        threading.Thread(target=serve, args=(c,), daemon=True).start()


if __name__ == "__main__":
    main()
