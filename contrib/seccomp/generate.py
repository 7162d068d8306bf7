#!/usr/bin/python3
"""airlock's seccomp profile for Docker, Podman and Kubernetes: the
container runtime's default profile (containers-common's seccomp.json)
plus exactly the syscalls airlock needs that it refuses to a container
without capabilities (NEEDED). Writes the profile to stdout.

    contrib/seccomp/generate.py [DEFAULT.json] > contrib/seccomp/airlock.json
"""
import json
import sys

DEFAULT = "/usr/share/containers/seccomp.json"

# Each with why airlock needs it. The default allows clone, clone3,
# unshare, the mount calls, pivot_root, setns, seccomp and landlock to
# everyone (containers-common 0.50, Debian 12); it allows sethostname only
# to a container with CAP_SYS_ADMIN, which an agent's container must not
# have: airlock sets the sandbox's hostname inside its own UTS namespace.
NEEDED = {
    "sethostname": "init names the sandbox's UTS namespace 'airlock' (sandbox/init.c)",
}


def generate(default):
    """default with the NEEDED syscalls taken out of every rule (the
    runtime refuses a profile with two rules for one syscall) and given
    one unconditional rule of their own, last."""
    profile = json.loads(json.dumps(default))
    rules = []
    for rule in profile["syscalls"]:
        rule["names"] = [n for n in rule["names"] if n not in NEEDED]
        if rule["names"]:
            rules.append(rule)
    profile["syscalls"] = rules
    profile["syscalls"].append({
        "names": sorted(NEEDED),
        "action": "SCMP_ACT_ALLOW",
        "args": [],
        "comment": "airlock: " + "; ".join(f"{n}: {why}" for n, why in sorted(NEEDED.items())),
        "includes": {},
        "excludes": {},
    })
    return profile


def main():
    path = sys.argv[1] if len(sys.argv) > 1 else DEFAULT
    with open(path, encoding="utf-8") as f:
        default = json.load(f)
    json.dump(generate(default), sys.stdout, indent="\t", sort_keys=False)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
