#!/usr/bin/python3
"""contrib/seccomp/airlock.json: valid JSON in the runtime's format, what
generate.py makes of containers-common's default (when it is installed),
and different from that default in exactly the NEEDED syscalls: taken out
of every other rule, allowed unconditionally by one rule of their own."""
import json
import os
import sys

SRC = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(SRC, "contrib", "seccomp"))
import generate  # noqa: E402


def fail(msg):
    print(f"FAIL: {msg}", file=sys.stderr)
    sys.exit(1)


def unconditional(profile):
    names = set()
    for rule in profile["syscalls"]:
        if (rule["action"] == "SCMP_ACT_ALLOW" and not rule.get("args")
                and not (rule.get("includes") or {}) and not (rule.get("excludes") or {})):
            names |= set(rule["names"])
    return names


with open(os.path.join(SRC, "contrib", "seccomp", "airlock.json"), encoding="utf-8") as f:
    shipped = json.load(f)
for key in ("defaultAction", "syscalls", "archMap"):
    if key not in shipped:
        fail(f"airlock.json: no {key}")
for i, rule in enumerate(shipped["syscalls"]):
    if not rule.get("names") or not rule.get("action", "").startswith("SCMP_ACT_"):
        fail(f"airlock.json: syscalls[{i}]: no names or no SCMP_ACT_ action")

needed = set(generate.NEEDED)
ours = [r for r in shipped["syscalls"] if needed & set(r["names"])]
if len(ours) != 1 or set(ours[0]["names"]) != needed or ours[0]["action"] != "SCMP_ACT_ALLOW":
    fail(f"airlock.json: the NEEDED syscalls are not in one ALLOW rule of their own: {ours}")

if os.path.exists(generate.DEFAULT):
    with open(generate.DEFAULT, encoding="utf-8") as f:
        default = json.load(f)
    if generate.generate(default) != shipped:
        fail(f"airlock.json is not what generate.py makes of {generate.DEFAULT}: regenerate it")
    added = unconditional(shipped) - unconditional(default)
    if added != needed:
        fail(f"airlock.json allows {sorted(added)} beyond the default, not exactly {sorted(needed)}")
    if unconditional(default) - unconditional(shipped):
        fail("airlock.json takes away from the default's allowed calls")
    # Apart from our rule, every rule is the default's without the NEEDED names.
    rest = [r for r in shipped["syscalls"] if r is not ours[0]]
    expect = []
    for r in default["syscalls"]:
        r = dict(r, names=[n for n in r["names"] if n not in needed])
        if r["names"]:
            expect.append(r)
    if rest != expect:
        fail("airlock.json changes a rule of the default other than the NEEDED syscalls")
    print(f"ok: seccomp profile (default + {sorted(needed)})")
else:
    print(f"ok: seccomp profile (structure only: {generate.DEFAULT} not installed)")
