#!/usr/bin/env python3
"""Facts about an egress log, for the shell tests.

  logcheck.py stat FILE          "lines=N bytes=N"
  logcheck.py parse FILE         exit 1 (and say where) unless every line,
                                 the last included, is a whole JSON object
  logcheck.py lines FILE EXPR    lines where EXPR (python over `e`) holds
  logcheck.py events FILE EXPR   events those lines stand for: a line's
                                 `count` when it has one, else 1
  logcheck.py total FILE KEY     task-end's totals[KEY] (the last task-end)
"""
import json
import sys


def records(path):
    with open(path, "rb") as f:
        data = f.read()
    for n, raw in enumerate(data.split(b"\n")[:-1] if data.endswith(b"\n") else data.split(b"\n"), 1):
        yield n, raw


def main():
    mode, path = sys.argv[1], sys.argv[2]
    if mode == "stat":
        with open(path, "rb") as f:
            data = f.read()
        print("lines=%d bytes=%d" % (data.count(b"\n"), len(data)))
        return 0
    if mode == "parse":
        with open(path, "rb") as f:
            data = f.read()
        if data and not data.endswith(b"\n"):
            print("%s: the last line is cut: %r" % (path, data[-80:]))
            return 1
        for n, raw in records(path):
            try:
                e = json.loads(raw.decode("utf-8"))
                if not isinstance(e, dict) or "kind" not in e:
                    raise ValueError("not an event object")
            except ValueError as err:
                print("%s:%d: %s: %r" % (path, n, err, raw[:160]))
                return 1
        return 0
    if mode in ("lines", "events"):
        expr = compile("(" + sys.argv[3] + "\n)", "expr", "eval")
        total = 0
        for _, raw in records(path):
            e = json.loads(raw)
            if eval(expr, {}, {"e": e}):
                total += e.get("count", 1) if mode == "events" else 1
        print(total)
        return 0
    if mode == "total":
        value = None
        for _, raw in records(path):
            e = json.loads(raw)
            if e.get("kind") == "task-end":
                value = e["totals"].get(sys.argv[3], 0)
        print("none" if value is None else value)
        return 0
    print("logcheck.py: unknown mode", mode, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
