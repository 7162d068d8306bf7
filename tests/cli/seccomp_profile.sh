#!/usr/bin/env bash
# contrib/seccomp/airlock.json: valid, a complete OCI profile, and the
# runtime default it is made from plus exactly gen-profile.py's NEEDED
# calls that the default refused: nothing else allowed, nothing refused
# that the default allowed. Regenerated from the installed default, it
# is the committed file (when the default is the one it was made from).
. "$(dirname "$0")/../lib.sh"
PY=/usr/bin/python3
GEN=$SOURCE_ROOT/contrib/seccomp/gen-profile.py
PROF=$SOURCE_ROOT/contrib/seccomp/airlock.json
BASE=/usr/share/containers/seccomp.json
[ -f "$BASE" ] || skip "$BASE is missing (golang-github-containers-common: scripts/setup.sh)"
scratch_dir

out=$("$PY" - "$PROF" "$BASE" "$GEN" <<'PYEOF'
import importlib.util, json, sys
prof_path, base_path, gen_path = sys.argv[1:4]
spec = importlib.util.spec_from_file_location("gen", gen_path)
gen = importlib.util.module_from_spec(spec)
spec.loader.exec_module(gen)
prof = json.load(open(prof_path))
base = json.load(open(base_path))
# A complete profile: it replaces the runtime's default outright.
assert prof["defaultAction"] == "SCMP_ACT_ERRNO", prof["defaultAction"]
assert isinstance(prof["syscalls"], list) and prof["syscalls"]
for r in prof["syscalls"]:
    assert r["names"] and all(isinstance(n, str) for n in r["names"]), r
    assert r["action"] in ("SCMP_ACT_ALLOW", "SCMP_ACT_ERRNO", "SCMP_ACT_KILL",
                           "SCMP_ACT_KILL_PROCESS", "SCMP_ACT_LOG"), r
added = gen.allowed(prof) - gen.allowed(base)
lost = gen.allowed(base) - gen.allowed(prof)
assert not lost, f"no longer allowed: {sorted(lost)}"
assert added <= set(gen.NEEDED), f"allowed beyond NEEDED: {sorted(added - set(gen.NEEDED))}"
assert set(gen.NEEDED) <= gen.allowed(prof), \
    f"NEEDED but not allowed: {sorted(set(gen.NEEDED) - gen.allowed(prof))}"
# Only the one airlock rule is new; every other rule is the base's, less
# the names that rule now allows.
mine = [r for r in prof["syscalls"] if r.get("comment") == gen.COMMENT]
assert len(mine) == 1 and set(mine[0]["names"]) == added, mine
rest = [r for r in prof["syscalls"] if r.get("comment") != gen.COMMENT]
def strip(rs):
    out = []
    for r in rs:
        r = dict(r, names=[n for n in r["names"] if n not in added])
        if r["names"]:
            out.append(r)
    return out
assert strip(rest) == strip(base["syscalls"]), "rules other than airlock's changed"
print("added " + " ".join(sorted(added)))
PYEOF
) || fail "profile: $out"
expect_match "the calls added" '^added [a-z_0-9 ]+$' "$out"
echo "seccomp profile: $out"

# The generator refuses a stale file and reproduces the committed one.
sha=$(sha256sum "$BASE" | cut -d' ' -f1)
made=$(grep -o 'sha256 [0-9a-f]*' "$SOURCE_ROOT/contrib/seccomp/README.md" | head -1 | cut -d' ' -f2)
if [ "$sha" = "$made" ]; then
	"$PY" "$GEN" --check "$PROF" 2>/dev/null || fail "airlock.json is not what gen-profile.py makes of $BASE"
else
	echo "note: $BASE (sha256 $sha) is not the default airlock.json was made from ($made)"
fi
printf '{}' >"$SCRATCH/stale.json"
rc=0
"$PY" "$GEN" --check "$SCRATCH/stale.json" 2>/dev/null || rc=$?
expect_eq "a stale profile is refused" 1 "$rc"
echo "ok: seccomp profile"
