#!/usr/bin/env bash
# Restricting installs: real pip, npm and git inside airlock, each under its
# shipped preset, against the lab's fake registries. The legitimate install
# works; a package whose metadata sends the client to evil.test fails, the
# egress log and the -v line say why, and evil.test never sees a byte.
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/lib.sh"
need_prog npm
lab_start
P=$SOURCE_ROOT/policies

# --- pip, policies/pypi.yaml ---------------------------------------------
airlock_lab "$P/pypi.yaml" -- python3 -m pip install -q --target "$LAB_WORK/site" labpkg ||
	fail "pip install labpkg under the pypi preset"
expect_eq "labpkg imports" "hello from labpkg" \
	"$(PYTHONPATH="$LAB_WORK/site" /usr/bin/python3 -c 'import labpkg; print(labpkg.hello())')"
expect_logged "pip: pypi.org allowed" \
	'e.get("host") == "pypi.org" and e["verdict"] == "allow" and "pypi.yaml:" in e.get("rule", "")'
expect_logged "pip: files.pythonhosted.org allowed" \
	'e.get("host") == "files.pythonhosted.org" and e["verdict"] == "allow"'

err=$LAB_WORK/pip-evil.err
if airlock_lab "$P/pypi.yaml" -v -- python3 -m pip install --target "$LAB_WORK/site-evil" evilpkg \
	>"$LAB_WORK/pip-evil.out" 2>"$err"; then
	fail "pip install evilpkg succeeded: its wheel is on evil.test"
fi
[ ! -e "$LAB_WORK/site-evil/evilpkg" ] || fail "evilpkg was installed"
expect_logged "pip: evil.test denied" 'e.get("host") == "evil.test" and e["verdict"] == "deny"'
# What the user sees: airlock's -v line names the denied destination and
# why; pip's own error shows the proxy refused the tunnel.
grep -Eqi 'deny .*evil\.test:443.*(no match|no rule|not allowed|allowlist|policy)' "$err" ||
	fail "no -v deny line for evil.test:443 on stderr: $(tail -n 5 "$err")"
# ...said once: the log's human line, not also the proxy's own.
! grep -Eq '^airlock: conn [0-9]+: deny' "$err" ||
	fail "-v says each denial twice: $(grep -E 'evil\.test:443' "$err" | head -n 4)"
grep -Eqi '403|forbidden|tunnel connection failed' "$err" "$LAB_WORK/pip-evil.out" ||
	fail "pip's error does not show the proxy's refusal: $(tail -n 5 "$err")"

# --- npm, policies/npm.yaml ----------------------------------------------
mkdir -p "$LAB_WORK/npmproj"
airlock_lab "$P/npm.yaml" -- npm install --no-save --prefix "$LAB_WORK/npmproj" labnpm ||
	fail "npm install labnpm under the npm preset"
expect_eq "labnpm runs" "hello from labnpm" \
	"$(node -e 'console.log(require(process.argv[1])())' "$LAB_WORK/npmproj/node_modules/labnpm")"
expect_logged "npm: registry.npmjs.org allowed" \
	'e.get("host") == "registry.npmjs.org" and e["verdict"] == "allow" and "npm.yaml:" in e.get("rule", "")'
if airlock_lab "$P/npm.yaml" -- npm install --no-save --prefix "$LAB_WORK/npmproj" evilnpm \
	>"$LAB_WORK/npm-evil.out" 2>&1; then
	fail "npm install evilnpm succeeded: its tarball is on evil.test"
fi
[ ! -e "$LAB_WORK/npmproj/node_modules/evilnpm" ] || fail "evilnpm was installed"
[ "$(log_count 'e.get("host") == "evil.test" and e["verdict"] == "deny"')" -ge 2 ] ||
	fail "npm: the evil.test tarball fetch is not logged as denied"

# --- git, policies/github.yaml -------------------------------------------
airlock_lab "$P/github.yaml" -- git clone -q https://github.com/org/repo.git "$LAB_WORK/repo" ||
	fail "git clone under the github preset"
[ -f "$LAB_WORK/repo/hello.py" ] || fail "git clone: hello.py missing"
airlock_lab "$P/github.yaml" -- curl -sSf -o "$LAB_WORK/repo.tgz" \
	https://codeload.github.com/org/repo/tar.gz/refs/heads/main || fail "codeload under the github preset"
expect_logged "git: github.com allowed" \
	'e.get("host") == "github.com" and e["verdict"] == "allow" and "github.yaml:" in e.get("rule", "")'
# The github preset is not a pypi preset.
if airlock_lab "$P/github.yaml" -- curl -sSf https://pypi.org/simple/ >/dev/null 2>&1; then
	fail "pypi.org reachable under the github preset"
fi

expect_canaries_silent "installs"
expect_dns_never_saw "installs" 'evil'
/usr/bin/python3 "$TESTS_DIR/lab/check_log.py" "$LOGF" || fail "the egress log does not match docs/log.md"
echo "installs: pip, npm, git work under their presets; evil.test refused and logged"
