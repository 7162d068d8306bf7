#!/usr/bin/python3
"""An HTTP/1 origin for test_frames_e2e.sh, on the lab's shared address
(evil.test and secret.evil.test both resolve to it). It frames requests as
a server does (keep-alive, pipelining, Content-Length and chunked bodies)
and writes one line per request it read to the log named on the command
line: "host=H target=T", so the test can show which names reached it.
Upgrade: websocket is answered 101 and the connection then echoes
(except on /no-ws, answered 400 and kept alive); Upgrade: h2c is answered
101 too, as a server that speaks h2c would.

frames_origin.py PORT LOG"""
import socket
import sys
import threading

PORT, LOG = int(sys.argv[1]), sys.argv[2]
lock = threading.Lock()


def note(line):
    with lock, open(LOG, "a") as f:
        f.write(line + "\n")


class Conn:
    def __init__(self, s):
        self.s, self.buf = s, b""

    def fill(self):
        b = self.s.recv(65536)
        if not b:
            raise EOFError
        self.buf += b

    def line(self):
        while b"\r\n" not in self.buf:
            self.fill()
        line, _, self.buf = self.buf.partition(b"\r\n")
        return line

    def take(self, n):
        while len(self.buf) < n:
            self.fill()
        data, self.buf = self.buf[:n], self.buf[n:]
        return data


def reply(c, status, body, extra=""):
    c.s.sendall(f"HTTP/1.1 {status}\r\nX-Origin: frames\r\nContent-Length: {len(body)}\r\n"
                f"{extra}\r\n".encode() + body)


def serve(s):
    c = Conn(s)
    try:
        while True:
            line = c.line()
            if not line:
                continue  # an empty line between requests
            method, target, _ = line.decode("latin-1").split(" ", 2)
            fields = {}
            while True:
                h = c.line()
                if not h:
                    break
                k, _, v = h.decode("latin-1").partition(":")
                fields[k.strip().lower()] = v.strip()
            host = fields.get("host", "")
            note(f"host={host} target={target}")
            if fields.get("transfer-encoding", "").lower() == "chunked":
                while True:
                    size = int(c.line().split(b";")[0], 16)
                    if size == 0:
                        while c.line():
                            pass
                        break
                    c.take(size)
                    c.take(2)
            elif "content-length" in fields:
                c.take(int(fields["content-length"]))
            up = fields.get("upgrade", "").lower()
            if up == "websocket" and target != "/no-ws":
                c.s.sendall(b"HTTP/1.1 101 Switching Protocols\r\nX-Origin: frames\r\nUpgrade: websocket\r\n"
                            b"Connection: Upgrade\r\n\r\n" + b"")
                if c.buf:
                    c.s.sendall(c.buf)
                while True:
                    b = c.s.recv(65536)
                    if not b:
                        return
                    note(f"websocket bytes={len(b)}")
                    c.s.sendall(b)
            if up == "h2c":
                c.s.sendall(b"HTTP/1.1 101 Switching Protocols\r\nX-Origin: frames\r\nUpgrade: h2c\r\n"
                            b"Connection: Upgrade\r\n\r\n")
                note("h2c upgraded")
                return
            if up == "websocket":
                reply(c, "400 Bad Request", b"no websocket here\n")
                continue
            reply(c, "200 OK", f"origin saw {host} {target}\n".encode())
    except (EOFError, OSError, ValueError):
        pass
    finally:
        s.close()


srv = socket.socket(socket.AF_INET6, socket.SOCK_STREAM)
srv.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
srv.bind(("::", PORT))
srv.listen(64)
print("ready", flush=True)
while True:
    s, _ = srv.accept()
    s.settimeout(10)
    threading.Thread(target=serve, args=(s,), daemon=True).start()
