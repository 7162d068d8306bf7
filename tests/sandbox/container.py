#!/usr/bin/python3
"""A container as Docker makes one, enough to run airlock in it.

    container.py [--seccomp docker|unconfined|PROFILE.json] [--unmasked]
                 --user NAME -- CMD...

Run as root. In a mount namespace of its own it masks /proc as Docker's
default maskedPaths and readonlyPaths do (the masks made before the switch
of user, so to a user namespace made inside they are locked, as in a real
container), drops to NAME with no capability at all (bounding set emptied),
applies a seccomp profile and execs CMD:

  docker      Docker's default profile as it applies to a container
              without CAP_SYS_ADMIN, for the calls that decide whether a
              sandbox can be made: namespaces in clone and unshare, clone3
              (ENOSYS), setns, the mount calls, pivot_root, sethostname,
              keyctl, bpf... (everything else allowed).
  PROFILE     an OCI seccomp profile (what `docker run --security-opt
              seccomp=PROFILE` and Kubernetes' Localhost type load),
              evaluated as runc does for a process without capabilities.
  unconfined  no filter.

--unmasked is `--security-opt systempaths=unconfined`: /proc as the host's.
"""
import argparse
import ctypes
import errno
import json
import os
import platform
import pwd
import sys

import seccomp

libc = ctypes.CDLL(None, use_errno=True)
CLONE_NEWNS = 0x00020000
MS_REC, MS_PRIVATE, MS_BIND, MS_REMOUNT, MS_RDONLY = 0x4000, 0x40000, 0x1000, 0x20, 0x1
PR_CAPBSET_DROP = 24

# Docker's defaults (moby oci/defaults.go): maskedPaths get /dev/null (a
# file) or an empty read-only tmpfs (a directory); readonlyPaths are bound
# read-only over themselves.
MASKED = ["/proc/asound", "/proc/acpi", "/proc/kcore", "/proc/keys",
          "/proc/latency_stats", "/proc/timer_list", "/proc/timer_stats",
          "/proc/sched_debug", "/proc/scsi", "/sys/firmware",
          "/sys/devices/virtual/powercap"]
READONLY = ["/proc/bus", "/proc/fs", "/proc/irq", "/proc/sys", "/proc/sysrq-trigger"]

# clone's namespace flags: CLONE_NEWNS, NEWCGROUP, NEWUTS, NEWIPC, NEWUSER,
# NEWPID, NEWNET (Docker allows clone only with all of them clear).
NS_FLAGS = [0x00020000, 0x02000000, 0x04000000, 0x08000000, 0x10000000,
            0x20000000, 0x40000000]
# Refused to a container without CAP_SYS_ADMIN (or not in the profile's
# allow list at all) by Docker's default profile.
DOCKER_EPERM = ["bpf", "fanotify_init", "fsconfig", "fsmount", "fsopen", "fspick",
                "lookup_dcookie", "mount", "mount_setattr", "move_mount", "open_tree",
                "perf_event_open", "quotactl", "quotactl_fd", "setdomainname",
                "sethostname", "setns", "syslog", "umount2", "unshare", "pivot_root",
                "keyctl", "add_key", "request_key", "chroot", "kcmp", "pidfd_getfd",
                "reboot", "init_module", "finit_module", "delete_module", "acct",
                "kexec_load", "kexec_file_load", "open_by_handle_at", "userfaultfd"]


def die(msg):
    print(f"container.py: {msg}", file=sys.stderr)
    sys.exit(125)


def mount(src, target, fstype, flags, data=None):
    if libc.mount(src.encode() if src else None, target.encode(),
                  fstype.encode() if fstype else None, ctypes.c_ulong(flags),
                  data.encode() if data else None) != 0:
        e = ctypes.get_errno()
        raise OSError(e, f"mount {target}: {os.strerror(e)}")


def mask_proc():
    for p in MASKED:
        if not os.path.exists(p):
            continue
        if os.path.isdir(p):
            mount("tmpfs", p, "tmpfs", MS_RDONLY)
        else:
            mount("/dev/null", p, None, MS_BIND)
    for p in READONLY:
        if not os.path.exists(p):
            continue
        mount(p, p, None, MS_BIND | MS_REC)
        mount(None, p, None, MS_BIND | MS_REMOUNT | MS_RDONLY)


def docker_filter():
    f = seccomp.SyscallFilter(seccomp.ALLOW)
    for bit in NS_FLAGS:
        f.add_rule(seccomp.ERRNO(errno.EPERM), "clone",
                   seccomp.Arg(0, seccomp.MASKED_EQ, bit, bit))
    f.add_rule(seccomp.ERRNO(errno.ENOSYS), "clone3")
    for name in DOCKER_EPERM:
        try:
            f.add_rule(seccomp.ERRNO(errno.EPERM), name)
        except (RuntimeError, ValueError, OSError):
            pass  # not a call of this architecture
    return f


OPS = {"SCMP_CMP_EQ": seccomp.EQ, "SCMP_CMP_NE": seccomp.NE, "SCMP_CMP_LT": seccomp.LT,
       "SCMP_CMP_LE": seccomp.LE, "SCMP_CMP_GT": seccomp.GT, "SCMP_CMP_GE": seccomp.GE,
       "SCMP_CMP_MASKED_EQ": seccomp.MASKED_EQ}
ARCH = {"x86_64": "amd64", "aarch64": "arm64"}.get(platform.machine(), platform.machine())


def action(name, ret, default_ret):
    if name == "SCMP_ACT_ALLOW":
        return seccomp.ALLOW
    if name == "SCMP_ACT_ERRNO":
        return seccomp.ERRNO(ret if ret is not None else default_ret)
    if name == "SCMP_ACT_KILL" or name == "SCMP_ACT_KILL_THREAD":
        return seccomp.KILL
    if name == "SCMP_ACT_KILL_PROCESS":
        return seccomp.KILL_PROCESS
    if name == "SCMP_ACT_LOG":
        return seccomp.LOG
    die(f"profile: action {name} is not supported")


def profile_filter(path):
    """The rules of an OCI profile that apply to a process of this
    architecture without capabilities, as runc loads them."""
    with open(path) as fh:
        prof = json.load(fh)
    dret = prof.get("defaultErrnoRet", errno.EPERM)
    dact = action(prof["defaultAction"], dret, dret)
    f = seccomp.SyscallFilter(dact)
    for rule in prof.get("syscalls", []):
        inc, exc = rule.get("includes") or {}, rule.get("excludes") or {}
        if inc.get("caps"):
            continue  # we have none
        if inc.get("arches") and ARCH not in inc["arches"]:
            continue
        if ARCH in (exc.get("arches") or []):
            continue
        act = action(rule["action"], rule.get("errnoRet"), dret)
        args = rule.get("args") or []
        cmps = [seccomp.Arg(a["index"], OPS[a["op"]], a["value"], a.get("valueTwo", 0))
                for a in args]
        # Several comparisons of one argument are alternatives (runc
        # makes one rule each); of different arguments, all must hold.
        if len({a["index"] for a in args}) < len(args):
            groups = [[c] for c in cmps]
        else:
            groups = [cmps]
        for name in rule["names"]:
            for g in groups:
                try:
                    f.add_rule(act, name, *g)
                except (RuntimeError, ValueError, OSError) as e:
                    # Not a call of this architecture, or the default's
                    # action: runc skips those too.
                    if getattr(e, "errno", None) not in (None, errno.EACCES, errno.EINVAL,
                                                         errno.EDOM, errno.EFAULT):
                        die(f"profile: {name}: {e}")
    return f


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--seccomp", default="docker")
    ap.add_argument("--unmasked", action="store_true")
    ap.add_argument("--user", required=True)
    ap.add_argument("cmd", nargs=argparse.REMAINDER)
    o = ap.parse_args()
    cmd = o.cmd[1:] if o.cmd[:1] == ["--"] else o.cmd
    if not cmd:
        die("no command")
    if os.geteuid() != 0:
        die("needs root")
    pw = pwd.getpwnam(o.user)

    if o.seccomp == "unconfined":
        filt = None
    elif o.seccomp == "docker":
        filt = docker_filter()
    else:
        filt = profile_filter(o.seccomp)

    if libc.unshare(CLONE_NEWNS) != 0:
        die(f"unshare: {os.strerror(ctypes.get_errno())}")
    mount(None, "/", None, MS_REC | MS_PRIVATE)
    if not o.unmasked:
        mask_proc()
    # No capability left, in any set, and none to be regained.
    for cap in range(0, 64):
        if libc.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) != 0 and ctypes.get_errno() != errno.EINVAL:
            die(f"drop capability {cap}: {os.strerror(ctypes.get_errno())}")
    os.setgroups([])
    os.setresgid(pw.pw_gid, pw.pw_gid, pw.pw_gid)
    os.setresuid(pw.pw_uid, pw.pw_uid, pw.pw_uid)
    os.environ["HOME"] = pw.pw_dir
    os.environ["USER"] = pw.pw_name
    if filt is not None:
        filt.load()  # sets no_new_privs, which an unprivileged load needs
    os.execvp(cmd[0], cmd)


if __name__ == "__main__":
    main()
