#!/usr/bin/env bash
# A catch-all cidr rule does not switch the address guard off, for real in
# the lab: under `cidr: 0.0.0.0/0` a transparent GET to the lab's cloud
# metadata canary (169.254.169.254, inside the lab's isolated namespace) and
# a name resolving there are refused and logged, while public addresses
# still go through; `policy check` warns about the rule. A rule naming the
# metadata address (169.254.169.254/32) opens it.
. "$(dirname "$0")/../lib.sh"
. "$TESTS_DIR/lab/lib.sh"
lab_start

WIDE=$LAB_WORK/wide.yaml
cat >"$WIDE" <<-'YAML'
	version: 1
	name: wide-cidr
	allow:
	  - cidr: 0.0.0.0/0
	    ports: [80, 443]
	  - host: pypi.org
	  - host: rebind-metadata.test
	    ports: [80]
YAML

out=$("$AIRLOCK" policy check "$WIDE" 2>&1) || fail "policy check failed: $out"
expect_match "policy check warns about 0.0.0.0/0" \
	'cidr 0.0.0.0/0 does not open loopback/private/link-local.* ranges; write those ranges explicitly if you mean them' "$out"

cat >"$LAB_WORK/inside.sh" <<-'SH'
	unset HTTP_PROXY HTTPS_PROXY ALL_PROXY http_proxy https_proxy all_proxy
	c() { curl -sS --max-time 5 "$@"; }
	c https://pypi.org/simple/labpkg/ | grep -q labpkg-1.0 && echo "name-allowed"
	echo "public-literal $(c -o /dev/null -w '%{http_code}' http://198.51.100.10/simple/labpkg/ 2>/dev/null)"
	echo "metadata $(c -o /dev/null -w '%{http_code}' http://169.254.169.254/ 2>/dev/null)"
	c -f http://rebind-metadata.test/ >/dev/null 2>&1 || echo "rebind-refused"
	true
SH
res=$(airlock_lab "$WIDE" -- sh "$LAB_WORK/inside.sh" 2>"$LAB_WORK/wide.err") ||
	fail "run under the wide policy failed: $(cat "$LAB_WORK/wide.err")"
# The metadata address lies in a guarded block no allow cidr rule lies in:
# refused at the SYN (docs/run.md), curl gets connection refused (code 000).
for m in name-allowed "public-literal 200" "metadata 000" rebind-refused; do
	grep -qx "$m" <<<"$res" || fail "under cidr 0.0.0.0/0: no '$m' in: $res; $(cat "$LAB_WORK/wide.err")"
done
expect_canaries_silent "under cidr 0.0.0.0/0"
expect_logged "metadata literal refused by the guard" \
	'e.get("ip") == "169.254.169.254" and e.get("verdict") == "deny" and e.get("reason") == "address-guard"'
expect_logged "metadata answer removed from DNS" \
	'e.get("kind") == "dns" and e.get("host") == "rebind-metadata.test" and "169.254.169.254" in (e.get("detail") or "")'

# A rule that names the metadata address opens it (the canary answers).
NARROW=$LAB_WORK/narrow.yaml
cat >"$NARROW" <<-'YAML'
	version: 1
	name: metadata-explicit
	allow:
	  - cidr: 169.254.169.254/32
	    ports: [80]
YAML
res=$(airlock_lab "$NARROW" -- sh -c 'unset http_proxy HTTP_PROXY; curl -sS --max-time 5 http://169.254.169.254/' \
	2>"$LAB_WORK/narrow.err") || fail "under 169.254.169.254/32: $(cat "$LAB_WORK/narrow.err")"
expect_match "169.254.169.254/32 opens the metadata address" 'metadata canary' "$res"
echo "cidr guard: ok"
