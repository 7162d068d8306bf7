#!/usr/bin/python3
"""Write airlock's seccomp profile for Docker, Podman and Kubernetes.

    gen-profile.py [--base PROFILE.json] [--check FILE] [OUT.json]

The profile is the container runtime's default (Debian's
golang-github-containers-common, /usr/share/containers/seccomp.json, the
one Podman and CRI-O load) plus exactly the calls airlock's sandbox set-up
makes that the default refuses to a container without capabilities
(NEEDED below): one rule is added allowing them, and they are taken out of
the rules that would refuse them or allow them only with some arguments.
Nothing else changes. --check FILE exits 1 when FILE is not what would be
written (tests/cli/seccomp_profile.sh).
"""
import argparse
import copy
import hashlib
import json
import sys

BASE = "/usr/share/containers/seccomp.json"

# What airlock calls to make a sandbox (sandbox/sandbox.c, init.c,
# mounts.c, privs.c, seccomp.c, unixgate.c): the namespaces (clone with
# CLONE_NEW*, clone3, unshare), the filesystem view (the new mount API,
# pivot_root, umount2), the sandbox's host name, its own seccomp filter
# with a notification listener, and the unix socket gate's look into
# the caller (pidfd_getfd, process_vm_readv).
NEEDED = [
    "capset", "clone", "clone3", "fsconfig", "fsmount", "fsopen", "mount",
    "mount_setattr", "move_mount", "open_tree", "pidfd_getfd", "pidfd_open",
    "pidfd_send_signal", "pivot_root", "prctl", "process_vm_readv", "seccomp",
    "sethostname", "umount2", "unshare",
]
COMMENT = "airlock: the sandbox's set-up (contrib/seccomp/README.md)"
ARCH = "amd64"


def applies(rule):
    """Does the rule apply to a process without capabilities on ARCH?"""
    inc, exc = rule.get("includes") or {}, rule.get("excludes") or {}
    if inc.get("caps"):
        return False
    if inc.get("arches") and ARCH not in inc["arches"]:
        return False
    return ARCH not in (exc.get("arches") or [])


def allowed(profile):
    """The calls a process without capabilities may make with any
    arguments."""
    out = set()
    for rule in profile["syscalls"]:
        if applies(rule) and rule["action"] == "SCMP_ACT_ALLOW" and not rule.get("args"):
            out.update(rule["names"])
    return out


def generate(base):
    prof = copy.deepcopy(base)
    have = allowed(base)
    add = sorted(n for n in NEEDED if n not in have)
    if not add:
        return prof, add
    rules = []
    for rule in prof["syscalls"]:
        if applies(rule):
            rule["names"] = [n for n in rule["names"] if n not in add]
            if not rule["names"]:
                continue
        rules.append(rule)
    rules.append({"names": add, "action": "SCMP_ACT_ALLOW", "comment": COMMENT})
    prof["syscalls"] = rules
    return prof, add


def render(prof):
    return json.dumps(prof, indent="\t") + "\n"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--base", default=BASE)
    ap.add_argument("--check")
    ap.add_argument("out", nargs="?")
    o = ap.parse_args()
    with open(o.base, "rb") as fh:
        raw = fh.read()
    prof, add = generate(json.loads(raw))
    text = render(prof)
    print(f"gen-profile: base {o.base} sha256 {hashlib.sha256(raw).hexdigest()}; "
          f"added {' '.join(add) or 'nothing'}", file=sys.stderr)
    if o.check:
        with open(o.check) as fh:
            if fh.read() != text:
                print(f"gen-profile: {o.check} is not what {o.base} gives", file=sys.stderr)
                sys.exit(1)
        return
    if o.out:
        with open(o.out, "w") as fh:
            fh.write(text)
    else:
        sys.stdout.write(text)


if __name__ == "__main__":
    main()
