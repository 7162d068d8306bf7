#!/usr/bin/python3
"""Validate an egress log against schema v1 as docs/log.md documents it.

  check_log.py [--quiet] FILE...

Every line: valid UTF-8, at most 65,536 bytes, one JSON object without
duplicate keys, only documented fields, in the documented order, each of the
documented type, string caps respected. Per kind: the fields that must be
there are there and those that do not apply are not. Per task: one
task-start first, at most one task-end last, and the task-end totals equal
what the task's connection events add up to; and where the task's lines
carry seq and prev, its hash chain holds (docs/log.md, "The hash chain").

Prints one line per problem, "FILE:LINE: what", and exits 1 if there was
any; 0 and a one-line count otherwise. Independent of airlock's own reader
(elog/) on purpose: a second reading of the same document.
"""
import hashlib
import json
import re
import sys

MAX_LINE = 65536
TS_RE = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$")
RULE_RE = re.compile(r"^.+:\d+$")
HEX64_RE = re.compile(r"^[0-9a-f]{64}$")

CONN_KINDS = ("connect", "http", "tls", "tcp", "dns", "packet", "socks5")
VERDICTS = ("allow", "deny", "audit-deny")

# (field, type) in documented order. Types: s string, n non-negative int,
# a array of strings, o object.
COMMON = [("ts", "s"), ("task", "s"), ("kind", "s")]
CONN = [
    ("host", "s"), ("ip", "s"), ("port", "n"), ("verdict", "s"), ("rule", "s"),
    ("reason", "s"), ("bytes_up", "n"), ("bytes_down", "n"), ("duration_ms", "n"),
    ("sni", "s"), ("method", "s"), ("url", "s"), ("qtype", "s"), ("rcode", "s"),
    ("answers", "a"), ("proto", "s"), ("orig_dst", "s"), ("packets", "n"), ("count", "n"),
    ("detail", "s"), ("truncated", "a"),
]
# The hash chain's fields, last on every line (docs/log.md, "The hash chain").
CHAIN = [("seq", "n"), ("prev", "s")]
GENESIS = "0" * 64
CONN += CHAIN
# The log budget's one line (docs/log.md, "The log budget").
BUDGET = [("reason", "s"), ("log_budget", "n")] + CHAIN
START = [
    ("airlock", "s"), ("pid", "n"), ("policy", "s"), ("policy_sha256", "s"), ("mode", "s"),
    ("command", "a"), ("selftest", "s"), ("landlock", "n"), ("ids", "s"), ("overlay", "s"),
    ("truncated", "a"),
] + CHAIN
END = [
    ("exit_status", "n"), ("signal", "n"), ("duration_ms", "n"), ("totals", "o"),
    ("truncated", "a"),
] + CHAIN
TOTALS = ("connections", "allowed", "denied", "bytes_up", "bytes_down")
# In totals only when not 0: the events the log budget left without a line.
TOTALS_OPTIONAL = ("unlogged",)

# Byte caps per string field (docs/log.md, "Strings: escaping and caps").
CAPS = {
    "host": 255, "sni": 255, "url": 2048, "ip": 64, "orig_dst": 64, "rule": 512,
    "reason": 512, "detail": 512, "task": 128, "kind": 32, "verdict": 32, "method": 32, "qtype": 32,
    "rcode": 32, "proto": 32, "mode": 32, "policy": 255, "selftest": 255,
}
ANSWER_CAP, ANSWERS_MAX = 64, 32
COMMAND_WORD_CAP, COMMAND_CAP = 1024, 8192

# Fields that belong to one kind only.
ONLY_FOR = {"sni": ("tls",), "method": ("http", "connect"), "url": ("http", "connect", "socks5"),
            "qtype": ("dns",),
            "rcode": ("dns",), "answers": ("dns",), "proto": ("packet",), "packets": ("packet",),
            "orig_dst": ("tls", "tcp", "http")}
# Fields a kind must carry. docs/log.md leaves out any field that is
# unknown (an unparseable request has no host, method or url) except the
# counters; what a kind requires is only what defines it: a tls line is one
# whose ClientHello named a server.
REQUIRED = {"tls": ("sni",)}
# task-start: `airlock proxy` runs no sandbox, so it has no selftest, and a
# command only where there is one.
START_REQUIRED = ("airlock", "pid", "policy", "policy_sha256", "mode")


class Checker:
    def __init__(self):
        self.errors = 0
        self.lines = 0
        self.events = 0
        self.tasks = {}

    def err(self, where, msg):
        self.errors += 1
        print(f"{where}: {msg}")

    def check_type(self, where, name, value, t):
        if t == "s":
            if not isinstance(value, str):
                return self.err(where, f"{name} must be a string, is {type(value).__name__}")
            cap = CAPS.get(name)
            if cap is not None and len(value.encode()) > cap:
                self.err(where, f"{name} is {len(value.encode())} bytes, over its cap of {cap}")
        elif t == "n":
            # bool is an int in python; JSON true is not a number.
            if not isinstance(value, int) or isinstance(value, bool) or value < 0:
                self.err(where, f"{name} must be a non-negative integer, is {value!r}")
        elif t == "a":
            if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
                self.err(where, f"{name} must be an array of strings, is {value!r}")
        elif t == "o":
            if not isinstance(value, dict):
                self.err(where, f"{name} must be an object, is {value!r}")

    def check_fields(self, where, obj, schema):
        """Only documented fields, in the documented order, of the right type."""
        order = [f for f, _ in schema]
        types = dict(schema)
        last = -1
        for name, value in obj.items():
            if name not in types:
                self.err(where, f"undocumented field {name!r}")
                continue
            pos = order.index(name)
            if pos < last:
                self.err(where, f"field {name!r} out of the documented order")
            last = max(last, pos)
            self.check_type(where, name, value, types[name])
        trunc = obj.get("truncated")
        if isinstance(trunc, list):
            for f in trunc:
                if f not in types:
                    self.err(where, f"truncated names an unknown field {f!r}")

    def check_conn(self, where, kind, obj):
        self.check_fields(where, obj, COMMON + CONN)
        for f in ("verdict", "bytes_up", "bytes_down", "duration_ms"):
            if f not in obj:
                self.err(where, f"{kind} line without {f}")
        for f in REQUIRED.get(kind, ()):
            if f not in obj:
                self.err(where, f"{kind} line without {f}")
        for f, kinds in ONLY_FOR.items():
            if f in obj and kind not in kinds:
                self.err(where, f"{f} on a {kind} line")
        if kind == "dns" and "port" in obj:
            self.err(where, "port on a dns line")
        v = obj.get("verdict")
        if v is not None and v not in VERDICTS:
            self.err(where, f"verdict {v!r} is not one of {', '.join(VERDICTS)}")
        if v == "allow" and "rule" not in obj:
            self.err(where, "an allow without the rule that allowed it")
        if v in ("deny", "audit-deny") and "rule" not in obj and "reason" not in obj:
            self.err(where, "a denial with neither rule nor reason")
        rule = obj.get("rule")
        if isinstance(rule, str) and not RULE_RE.match(rule):
            self.err(where, f"rule {rule!r} is not file:line")
        port = obj.get("port")
        if isinstance(port, int) and not isinstance(port, bool) and port > 65535:
            self.err(where, f"port {port} out of range")
        ans = obj.get("answers")
        if isinstance(ans, list):
            if len(ans) > ANSWERS_MAX:
                self.err(where, f"{len(ans)} answers, over the cap of {ANSWERS_MAX}")
            for a in ans:
                if isinstance(a, str) and len(a.encode()) > ANSWER_CAP:
                    self.err(where, f"answer {a[:20]!r}... over its cap of {ANSWER_CAP}")

    def check_start(self, where, obj):
        self.check_fields(where, obj, COMMON + START)
        for f in START_REQUIRED:
            if f not in obj:
                self.err(where, f"task-start without {f}")
        if isinstance(obj.get("policy_sha256"), str) and not HEX64_RE.match(obj["policy_sha256"]):
            self.err(where, "policy_sha256 is not 64 lowercase hex digits")
        if obj.get("mode") not in (None, "enforce", "audit"):
            self.err(where, f"mode {obj['mode']!r} is not enforce or audit")
        cmd = obj.get("command")
        if isinstance(cmd, list):
            if any(isinstance(w, str) and len(w.encode()) > COMMAND_WORD_CAP for w in cmd):
                self.err(where, "a command word over its cap")
            if sum(len(w.encode()) for w in cmd if isinstance(w, str)) > COMMAND_CAP:
                self.err(where, "command over its total cap")

    def check_end(self, where, obj):
        self.check_fields(where, obj, COMMON + END)
        for f in ("exit_status", "signal", "duration_ms", "totals"):
            if f not in obj:
                self.err(where, f"task-end without {f}")
        totals = obj.get("totals")
        if isinstance(totals, dict):
            for k, v in totals.items():
                if k not in TOTALS + TOTALS_OPTIONAL:
                    self.err(where, f"undocumented totals field {k!r}")
                else:
                    self.check_type(where, f"totals.{k}", v, "n")
            for k in TOTALS:
                if k not in totals:
                    self.err(where, f"totals without {k}")

    def check_line(self, where, raw):
        self.lines += 1
        if len(raw) > MAX_LINE:
            return self.err(where, f"line of {len(raw)} bytes, over {MAX_LINE}")
        if not raw.endswith(b"\n"):
            return self.err(where, "last line is not terminated (cut?)")
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as e:
            return self.err(where, f"not UTF-8: {e}")

        def no_dups(pairs):
            keys = [k for k, _ in pairs]
            if len(keys) != len(set(keys)):
                raise ValueError(f"duplicate key in {keys}")
            return dict(pairs)

        try:
            obj = json.loads(text, object_pairs_hook=no_dups)
        except ValueError as e:
            return self.err(where, f"not JSON: {e}")
        if not isinstance(obj, dict):
            return self.err(where, "not a JSON object")
        keys = list(obj)
        if keys[:1] != ["ts"]:
            self.err(where, "ts is not the first field")
        ts = obj.get("ts")
        if not isinstance(ts, str) or not TS_RE.match(ts):
            self.err(where, f"ts {ts!r} is not RFC 3339 UTC with milliseconds")
        kind = obj.get("kind")
        if not isinstance(kind, str):
            return self.err(where, "no kind")
        task = obj.get("task")
        t = self.tasks.setdefault(task, {"start": 0, "end": 0, "after_end": 0,
                                         "counted": dict.fromkeys(TOTALS, 0), "totals": None,
                                         "first": where})
        self.check_chain(where, raw[:-1], kind, obj, t)
        if t["end"]:
            t["after_end"] += 1
            self.err(where, f"a {kind} line after the task's task-end")
        if kind == "task-start":
            self.check_start(where, obj)
            if t["start"] or self.events_of(t):
                self.err(where, "task-start is not the task's first line")
            t["start"] += 1
        elif kind == "task-end":
            self.check_end(where, obj)
            t["end"] += 1
            t["totals"] = (where, obj.get("totals"))
        elif kind == "log-budget":
            self.check_fields(where, obj, COMMON + BUDGET)
            for f in ("reason", "log_budget"):
                if f not in obj:
                    self.err(where, f"log-budget line without {f}")
        elif kind in CONN_KINDS:
            self.events += 1
            self.check_conn(where, kind, obj)
            c = t["counted"]
            # A line of counted repeats stands for its count of events.
            n = obj.get("count", 1)
            if not isinstance(n, int) or isinstance(n, bool) or n < 1:
                self.err(where, f"count {n!r} is not a positive integer")
                n = 1
            c["connections"] += n
            if obj.get("verdict") == "allow":
                c["allowed"] += n
            elif obj.get("verdict") in ("deny", "audit-deny"):
                c["denied"] += n
            for k in ("bytes_up", "bytes_down"):
                if isinstance(obj.get(k), int):
                    c[k] += obj[k]
        else:
            self.err(where, f"unknown kind {kind!r}")

    def check_chain(self, where, line, kind, obj, t):
        """seq: 0 at task-start, one more per line of the task; prev: the
        SHA-256 (hex) of the task's previous line, newline excluded, 64
        zeros at task-start. A log from before the chain has neither."""
        has = ("seq" in obj, "prev" in obj)
        if has == (False, False):
            if t.get("chain") is not None:
                self.err(where, "a line without seq and prev in a chained task")
            return
        if has != (True, True):
            return self.err(where, "seq without prev, or prev without seq")
        seq, prev = obj["seq"], obj["prev"]
        if kind == "task-start":
            want = (0, GENESIS)
        elif t.get("chain") is None:
            return self.err(where, "a chained line before the task's chained task-start")
        else:
            want = t["chain"]
        if (seq, prev) != want:
            self.err(where, f"seq {seq!r}, prev {str(prev)[:12]!r}...: the chain wants "
                            f"seq {want[0]}, prev {want[1][:12]!r}...")
        nxt = seq + 1 if isinstance(seq, int) and not isinstance(seq, bool) else want[0] + 1
        t["chain"] = (nxt, hashlib.sha256(line).hexdigest())

    @staticmethod
    def events_of(t):
        return t["counted"]["connections"]

    def finish(self, path):
        for task, t in self.tasks.items():
            if not t["start"]:
                self.err(f"{path}", f"task {task!r} has no task-start")
            if t["totals"] is None:
                continue
            where, totals = t["totals"]
            if not isinstance(totals, dict):
                continue
            unlogged = totals.get("unlogged", 0)
            if not isinstance(unlogged, int) or unlogged == 0:
                unlogged = 0
            for k in TOTALS:
                want = t["counted"][k]
                if k == "connections":
                    want += unlogged
                # Events without a line add to every total but are not
                # itemised: the lines then give a lower bound only.
                if totals.get(k) != want and not (unlogged and isinstance(totals.get(k), int)
                                                  and totals[k] >= want):
                    self.err(where, f"totals.{k} is {totals.get(k)!r}, the task's lines add up to "
                                    f"{want}")


def main():
    args = sys.argv[1:]
    quiet = False
    if args[:1] == ["--quiet"]:
        quiet = True
        args = args[1:]
    if not args:
        print("usage: check_log.py [--quiet] FILE...", file=sys.stderr)
        return 2
    total_errors = 0
    for path in args:
        c = Checker()
        try:
            with open(path, "rb") as f:
                data = f.read()
        except OSError as e:
            print(f"{path}: {e.strerror}")
            return 1
        if not data:
            c.err(path, "empty log")
        for n, raw in enumerate(data.splitlines(keepends=True), 1):
            c.check_line(f"{path}:{n}", raw)
        c.finish(path)
        total_errors += c.errors
        if not quiet:
            print(f"{path}: {c.lines} lines, {c.events} events, {len(c.tasks)} tasks, "
                  f"{c.errors} problems")
    return 1 if total_errors else 0


if __name__ == "__main__":
    sys.exit(main())
