#!/usr/bin/python3
"""Runs a command as a container runtime would with a seccomp profile in
the Docker/Podman format and no capabilities: as an unprivileged user,
with no_new_privs, under the profile's rules for a container holding no
capability (rules that include a capability are left out, rules that
exclude one are kept), as libseccomp compiles them for runc and crun.
Not modelled: masked /proc paths, AppArmor.

    container.py PROFILE.json UID GID -- CMD...
"""
import json
import os
import sys

import seccomp

OPS = {
    "SCMP_CMP_NE": seccomp.NE, "SCMP_CMP_LT": seccomp.LT, "SCMP_CMP_LE": seccomp.LE,
    "SCMP_CMP_EQ": seccomp.EQ, "SCMP_CMP_GE": seccomp.GE, "SCMP_CMP_GT": seccomp.GT,
    "SCMP_CMP_MASKED_EQ": seccomp.MASKED_EQ,
}


def action(name, errno_ret, default_errno):
    if name == "SCMP_ACT_ALLOW":
        return seccomp.ALLOW
    if name == "SCMP_ACT_ERRNO":
        return seccomp.ERRNO(errno_ret if errno_ret is not None else default_errno)
    if name == "SCMP_ACT_KILL" or name == "SCMP_ACT_KILL_THREAD":
        return seccomp.KILL
    if name == "SCMP_ACT_TRAP":
        return seccomp.TRAP
    if name == "SCMP_ACT_LOG":
        return seccomp.LOG
    raise SystemExit(f"container.py: unsupported action {name}")


def applies(rule):
    inc = rule.get("includes") or {}
    exc = rule.get("excludes") or {}
    if inc.get("caps"):
        return False  # the container holds no capability
    if inc.get("arches") and not {"amd64", "x86_64"} & set(inc["arches"]):
        return False
    if exc.get("arches") and {"amd64", "x86_64"} & set(exc["arches"]):
        return False
    return True


def build(profile):
    default_errno = profile.get("defaultErrnoRet", 1)
    f = seccomp.SyscallFilter(action(profile["defaultAction"], None, default_errno))
    for rule in profile["syscalls"]:
        if not applies(rule):
            continue
        act = action(rule["action"], rule.get("errnoRet"), default_errno)
        args = [seccomp.Arg(a["index"], OPS[a["op"]], a["value"], a.get("valueTwo", 0))
                for a in rule.get("args") or []]
        for name in rule["names"]:
            try:
                f.add_rule(act, name, *args)
            except RuntimeError as e:
                print(f"container.py: rule for {name}: {e}", file=sys.stderr)
            except OSError as e:
                raise SystemExit(f"container.py: rule for {name}: {e}")
    return f


def main():
    if len(sys.argv) < 6 or sys.argv[4] != "--":
        raise SystemExit("usage: container.py PROFILE.json UID GID -- CMD...")
    with open(sys.argv[1], encoding="utf-8") as fh:
        profile = json.load(fh)
    uid, gid = int(sys.argv[2]), int(sys.argv[3])
    f = build(profile)
    os.setgroups([])
    os.setgid(gid)
    os.setuid(uid)
    f.load()  # sets no_new_privs first
    os.execvp(sys.argv[5], sys.argv[5:])


if __name__ == "__main__":
    main()
