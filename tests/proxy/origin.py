#!/usr/bin/python3
"""An HTTP/1.1 origin for the proxy's end-to-end tests: origin.py ADDR PORT.
POST reads the whole body (Content-Length or chunked) and answers with its
length and sha256, so a test can tell that a body went through unchanged.
Keep-alive. Writes "ready" to stdout once listening."""
import hashlib
import http.server
import sys


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def body(self):
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            data = b""
            while True:
                size = int(self.rfile.readline().split(b";")[0], 16)
                if size == 0:
                    while self.rfile.readline() not in (b"\r\n", b""):
                        pass
                    return data
                data += self.rfile.read(size)
                self.rfile.readline()
        return self.rfile.read(int(self.headers.get("Content-Length", "0")))

    def reply(self, text):
        out = text.encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(out)))
        self.end_headers()
        self.wfile.write(out)

    def do_POST(self):
        data = self.body()
        self.reply(f"{len(data)} {hashlib.sha256(data).hexdigest()}\n")

    def do_GET(self):
        hop = [h for h in ("Connection", "X-Secret", "Upgrade", "Proxy-Connection",
                           "Proxy-Authorization", "Keep-Alive", "TE") if h in self.headers]
        self.reply(f"path {self.path} host {self.headers.get('Host')} hop {','.join(hop) or '-'} "
                   f"via {self.headers.get('Via')}\n")


server = http.server.ThreadingHTTPServer((sys.argv[1], int(sys.argv[2])), Handler)
print("ready", flush=True)
server.serve_forever()
