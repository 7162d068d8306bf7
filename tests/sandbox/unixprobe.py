# Run inside the sandbox by tests/sandbox/unix.sh: try each unix socket
# operation given as OP:PATH and print "OP PATH RESULT" per line, RESULT
# being "ok" or the errno name. A stream or seqpacket "ok" means connect()
# succeeded; a datagram "ok" that the datagram was
# accepted by the kernel for the socket at PATH.
#   stream:P  seqpacket:P  dgram-connect:P  sendto:P  sendmsg:P  sendmmsg:P
#   own:P     bind a stream, a datagram and a seqpacket socket at P (and
#             P.d, P.q), then reach each of them as above (P relative or not)
#   pair      socketpair: a byte there and back, with an fd passed along
#   abstract  bind an abstract stream socket and connect to it
import errno
import os
import socket
import sys


def result(fn):
    try:
        fn()
        return "ok"
    except OSError as e:
        return errno.errorcode.get(e.errno, str(e.errno))


def stream(path, kind=socket.SOCK_STREAM):
    s = socket.socket(socket.AF_UNIX, kind)
    s.settimeout(5)
    try:
        s.connect(path)
    finally:
        s.close()


def dgram(path, how):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    try:
        if how == "dgram-connect":
            s.connect(path)
            s.send(b"x")
        elif how == "sendto":
            s.sendto(b"x", path)
        elif how == "sendmsg":
            s.sendmsg([b"x"], [], 0, path)
        else:
            raise ValueError(how)
    finally:
        s.close()


def sendmmsg(path):
    # Python has no sendmmsg: call libc's with two messages.
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)

    class sockaddr_un(ctypes.Structure):
        _fields_ = [("family", ctypes.c_ushort), ("path", ctypes.c_char * 108)]

    class iovec(ctypes.Structure):
        _fields_ = [("base", ctypes.c_void_p), ("len", ctypes.c_size_t)]

    class msghdr(ctypes.Structure):
        _fields_ = [("name", ctypes.c_void_p), ("namelen", ctypes.c_uint),
                    ("iov", ctypes.POINTER(iovec)), ("iovlen", ctypes.c_size_t),
                    ("control", ctypes.c_void_p), ("controllen", ctypes.c_size_t),
                    ("flags", ctypes.c_int)]

    class mmsghdr(ctypes.Structure):
        _fields_ = [("hdr", msghdr), ("len", ctypes.c_uint)]

    s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    try:
        addr = sockaddr_un(socket.AF_UNIX, path.encode())
        data = ctypes.create_string_buffer(b"x")
        iov = iovec(ctypes.cast(data, ctypes.c_void_p), 1)
        msgs = (mmsghdr * 2)()
        for m in msgs:
            m.hdr.name = ctypes.cast(ctypes.pointer(addr), ctypes.c_void_p)
            m.hdr.namelen = ctypes.sizeof(addr)
            m.hdr.iov = ctypes.pointer(iov)
            m.hdr.iovlen = 1
        n = libc.sendmmsg(s.fileno(), msgs, 2, 0)
        if n < 0:
            e = ctypes.get_errno()
            raise OSError(e, os.strerror(e))
        if n != 2 or msgs[0].len != 1 or msgs[1].len != 1:
            raise OSError(errno.EIO, "sendmmsg sent %d (%d, %d)" % (n, msgs[0].len, msgs[1].len))
    finally:
        s.close()


def own(path):
    out = []
    for suffix, kind in (("", socket.SOCK_STREAM), (".q", socket.SOCK_SEQPACKET)):
        srv = socket.socket(socket.AF_UNIX, kind)
        srv.bind(path + suffix)
        srv.listen(4)
        r = result(lambda: stream(path + suffix, kind))
        out.append(("own-stream" if kind == socket.SOCK_STREAM else "own-seqpacket", r))
        srv.close()
    srv = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    srv.bind(path + ".d")
    for how in ("sendto", "sendmsg", "dgram-connect"):
        r = result(lambda: dgram(path + ".d", how))
        if r == "ok":
            srv.settimeout(5)
            r = "ok" if srv.recv(8) == b"x" else "lost"
        out.append(("own-" + how, r))
    r = result(lambda: sendmmsg(path + ".d"))
    if r == "ok":
        srv.settimeout(5)
        r = "ok" if srv.recv(8) + srv.recv(8) == b"xx" else "lost"
    out.append(("own-sendmmsg", r))
    srv.close()
    return out


def pair():
    a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    r, w = os.pipe()
    a.sendmsg([b"p"], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, r.to_bytes(4, sys.byteorder))])
    msg, anc, _, _ = b.recvmsg(8, socket.CMSG_SPACE(4))
    fd = int.from_bytes(anc[0][2][:4], sys.byteorder)
    os.write(w, b"q")
    if msg != b"p" or os.read(fd, 1) != b"q":
        raise OSError(errno.EIO, "socketpair: bad data")


def abstract():
    name = b"\0airlock-test-%d" % os.getpid()
    srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    srv.bind(name)
    srv.listen(1)
    stream(name)


for arg in sys.argv[1:]:
    op, _, path = arg.partition(":")
    if op == "own":
        for name, r in own(path):
            print(name, path, r)
        continue
    if op in ("stream", "seqpacket"):
        kind = socket.SOCK_STREAM if op == "stream" else socket.SOCK_SEQPACKET
        r = result(lambda: stream(path, kind))
    elif op == "sendmmsg":
        r = result(lambda: sendmmsg(path))
    elif op == "pair":
        r = result(pair)
    elif op == "abstract":
        r = result(abstract)
    else:
        r = result(lambda: dgram(path, op))
    print(op, path, r) if path else print(op, r)
    sys.stdout.flush()
