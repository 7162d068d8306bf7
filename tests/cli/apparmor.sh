#!/usr/bin/env bash
# The AppArmor profile meson makes from contrib/apparmor/airlock.in
# (build/contrib/airlock): apparmor_parser -Q -K parses it. The profile is
# for Ubuntu 23.10+ (AppArmor 4: `abi <abi/4.0>` and the `userns` rule);
# Debian 12's parser (3.0.8) knows neither, so there the test parses the
# profile without exactly those two lines, checks that they are the only
# lines it does not know, and that the parser does refuse a broken rule
# (so a pass means something). With a parser of AppArmor 4 the whole
# profile is parsed.
. "$(dirname "$0")/../lib.sh"
PROFILE=${1:?usage: apparmor.sh BUILD_DIR}/contrib/airlock
command -v apparmor_parser >/dev/null 2>&1 || PATH=$PATH:/usr/sbin:/sbin
need_prog apparmor_parser
[ -f "$PROFILE" ] || fail "$PROFILE was not made"
scratch_dir
parse() { apparmor_parser -Q -K "$1" 2>"$SCRATCH/err"; }

grep -q '^profile airlock /.*/bin/airlock flags=(unconfined) {$' "$PROFILE" ||
	fail "the profile does not name the installed binary: $(grep '^profile' "$PROFILE")"
expect_eq "one userns rule" 1 "$(grep -cx '  userns,' "$PROFILE")"
grep -q '@BINDIR@' "$PROFILE" && fail "@BINDIR@ left in the profile"

ver=$(apparmor_parser --version | sed -n 's/^AppArmor parser version \([0-9]*\).*/\1/p')
if [ "${ver:-0}" -ge 4 ]; then
	parse "$PROFILE" || fail "apparmor_parser $ver refuses the profile: $(cat "$SCRATCH/err")"
	echo "ok: apparmor profile (parser $ver, whole profile)"
	exit 0
fi
# AppArmor 3: without the abi line and the userns rule, and only those.
grep -v -e '^abi <abi/4.0>,$' -e '^  userns,$' "$PROFILE" >"$SCRATCH/v3"
expect_eq "exactly two lines left out" 2 $(($(wc -l <"$PROFILE") - $(wc -l <"$SCRATCH/v3")))
parse "$SCRATCH/v3" || fail "apparmor_parser $ver refuses the profile: $(cat "$SCRATCH/err")"
sed 's/^  userns,$/  usernsx,/' "$PROFILE" | grep -v '^abi' >"$SCRATCH/broken"
parse "$SCRATCH/broken" && fail "apparmor_parser accepted a broken rule: the test proves nothing"
echo "ok: apparmor profile (parser $ver: all but 'abi <abi/4.0>' and 'userns,', which need AppArmor 4)"
