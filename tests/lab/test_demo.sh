#!/usr/bin/env bash
# ./demo keeps working: it runs to the end, pip installs, every one of the
# compromised build step's attempts fails, nothing reaches the attacker,
# and the log review lists the denials.
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/lib.sh"
lab_need
out=$(NO_COLOR=1 "$SOURCE_ROOT/demo" 2>&1) || fail "./demo failed: $(printf '%s\n' "$out" | tail -n 30)"
expect_match "pip install" "installed: labpkg 1\.0" "$out"
if grep -q 'GOT THROUGH' <<<"$out"; then
	fail "an exfiltration attempt got through: $(grep 'GOT THROUGH' <<<"$out")"
fi
[ "$(grep -c 'steal.py: .* failed:' <<<"$out")" -ge 6 ] || fail "not every attempt ran and failed"
expect_match "the allowed request" "steal.py: pypi.org, the one allowed place +ok \(allowed\)" "$out"
expect_match "canaries" "Nothing reached the attacker" "$out"
expect_match "log review" "deny +connect +evil\.test:443" "$out"
echo "demo: runs end to end, nothing got out"
