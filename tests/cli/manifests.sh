#!/usr/bin/env bash
# deploy/kubernetes/*.yaml: valid YAML, Kubernetes objects with their
# required fields, and the security settings docs/deploy.md promises: the
# agent drops ALL capabilities, cannot gain any and is not root; only the
# pod-init container adds one (NET_ADMIN); the proxy runs as the uid
# pod-init exempts, on the ports pod-init redirects to, with an
# `airlock proxy --check` liveness probe; the pod-per-task pod is
# user-namespaced with airlock's seccomp profile and an unmasked /proc.
# Every option the manifests give airlock is one it has.
. "$(dirname "$0")/../lib.sh"
PY=/usr/bin/python3
"$PY" -c 'import yaml' 2>/dev/null || skip "python3-yaml is not installed"
DIR=$SOURCE_ROOT/deploy/kubernetes
"$PY" - "$DIR" "$AIRLOCK" <<'PYEOF' || fail "manifests"
import os, subprocess, sys, yaml
d, airlock = sys.argv[1], sys.argv[2]
errors = []
def check(cond, what):
    if not cond:
        errors.append(what)

def pod_spec(obj):
    if obj["kind"] == "Pod":
        return obj["spec"]
    if obj["kind"] in ("Job", "Deployment", "StatefulSet", "DaemonSet"):
        return obj["spec"]["template"]["spec"]
    return None

def options(cmd):
    """airlock's options in a command line, for the subcommand's --help."""
    return [a for a in cmd if a.startswith("--") and a != "--"]

helps = {}
def known(sub, opt):
    if sub not in helps:
        helps[sub] = subprocess.run([airlock, sub, "--help"], capture_output=True,
                                    text=True).stdout
    return opt in helps[sub]

pods = {}
for name in sorted(os.listdir(d)):
    if not name.endswith(".yaml"):
        continue
    with open(os.path.join(d, name)) as fh:
        docs = [x for x in yaml.safe_load_all(fh) if x is not None]
    for obj in docs:
        for f in ("apiVersion", "kind", "metadata"):
            check(f in obj, f"{name}: an object without {f}")
        check("name" in obj.get("metadata", {}), f"{name}: {obj.get('kind')} without a name")
        spec = pod_spec(obj)
        if spec is None:
            continue
        pods[name] = spec
        for c in spec.get("initContainers", []) + spec["containers"]:
            for f in ("name", "image", "command"):
                check(f in c, f"{name}: a container without {f}")
            cmd = c.get("command", [])
            if cmd[:1] == ["airlock"]:
                for o in options(cmd[2:cmd.index("--")] if "--" in cmd else cmd[2:]):
                    check(known(cmd[1], o), f"{name}: {c['name']}: airlock {cmd[1]} has no {o}")
            sc = c.get("securityContext", {})
            caps = sc.get("capabilities", {})
            check(caps.get("drop") == ["ALL"], f"{name}: {c['name']} does not drop ALL capabilities")
            check(sc.get("allowPrivilegeEscalation") is False,
                  f"{name}: {c['name']}: allowPrivilegeEscalation is not false")
            if cmd[:2] == ["airlock", "pod-init"]:
                check(caps.get("add") == ["NET_ADMIN"], f"{name}: pod-init adds {caps.get('add')}, not NET_ADMIN alone")
            else:
                check(not caps.get("add"), f"{name}: {c['name']} adds capabilities {caps.get('add')}")
                check(sc.get("runAsNonRoot") is True or spec.get("securityContext", {}).get("runAsNonRoot") is True,
                      f"{name}: {c['name']} may run as root")
        for c in spec["containers"]:
            check(c["securityContext"].get("runAsNonRoot") is True or
                  spec.get("securityContext", {}).get("runAsNonRoot") is True,
                  f"{name}: agent {c['name']} is not runAsNonRoot")

check(set(pods) == {"pod-per-task.yaml", "sidecar.yaml"}, f"pod specs in {sorted(pods)}")

# Pod per task: airlock run in a user-namespaced pod.
t = pods.get("pod-per-task.yaml", {})
check(t.get("hostUsers") is False, "pod-per-task: hostUsers is not false")
sp = t.get("securityContext", {}).get("seccompProfile", {})
check(sp.get("type") == "Localhost" and sp.get("localhostProfile", "").endswith("airlock.json"),
      f"pod-per-task: seccompProfile is {sp}, not Localhost airlock.json")
for c in t.get("containers", []):
    check(c["command"][:2] == ["airlock", "run"], "pod-per-task: the agent is not run by airlock run")
    check(c["securityContext"].get("procMount") == "Unmasked", "pod-per-task: procMount is not Unmasked")

# Pod mode: pod-init's uid and ports are the proxy's.
s = pods.get("sidecar.yaml", {})
inits = {c["name"]: c for c in s.get("initContainers", [])}
pi = [c for c in inits.values() if c["command"][:2] == ["airlock", "pod-init"]]
px = [c for c in inits.values() if c["command"][:2] == ["airlock", "proxy"]]
check(len(pi) == 1 and len(px) == 1, "sidecar: one pod-init and one proxy init container")
if pi and px:
    a, p = pi[0]["command"], px[0]["command"]
    check(list(inits).index(pi[0]["name"]) < list(inits).index(px[0]["name"]), "sidecar: the proxy starts before pod-init")
    arg = lambda cmd, o: cmd[cmd.index(o) + 1] if o in cmd else None
    uid = int(arg(a, "--proxy-uid"))
    check(uid != 0 and uid != 1337, f"sidecar: --proxy-uid {uid}")
    check(px[0]["securityContext"].get("runAsUser") == uid, "sidecar: the proxy does not run as the exempt uid")
    check(arg(p, "--transparent").endswith(":" + arg(a, "--transparent-port")), "sidecar: transparent ports differ")
    check(arg(p, "--dns").endswith(":" + arg(a, "--dns-port")), "sidecar: dns ports differ")
    check(px[0].get("restartPolicy") == "Always", "sidecar: the proxy is not a native sidecar")
    probe = px[0].get("livenessProbe", {}).get("exec", {}).get("command", [])
    check(probe[:3] == ["airlock", "proxy", "--check"] and probe[3].endswith(arg(p, "--listen").split(":")[-1]),
          f"sidecar: liveness probe {probe}")
    for c in s["containers"]:
        check(c["securityContext"].get("runAsUser") not in (None, 0, uid),
              f"sidecar: agent {c['name']} may run as the exempt uid or root")
if errors:
    print("\n".join(errors), file=sys.stderr)
    sys.exit(1)
print(f"{len(pods)} pod specs checked")
PYEOF
echo "ok: manifests"
