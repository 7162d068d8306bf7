#!/usr/bin/env bash
# Every line of preset-expectations.txt ("PRESET allow|deny HOST[:PORT]")
# through `airlock policy test`: the first word of the output must be the
# expected verdict, and the exit status must agree (0 allow, 1 deny).
. "$(dirname "$0")/../lib.sh"

file=${1:?usage: preset_expectations.sh FILE}
[ -r "$file" ] || fail "cannot read $file"
n=0 bad=0
while read -r preset want dest extra; do
	case "$preset" in '' | '#'*) continue ;; esac
	if [ -z "$dest" ] || [ -n "$extra" ] || { [ "$want" != allow ] && [ "$want" != deny ]; }; then
		fail "$file: malformed line: $preset $want $dest $extra"
	fi
	st=0
	out=$("$AIRLOCK" policy test "$preset" "$dest" 2>&1) || st=$?
	got=${out%% *}
	if [ "$got" != "$want" ] || { [ "$want" = allow ] && [ "$st" != 0 ]; } ||
		{ [ "$want" = deny ] && [ "$st" != 1 ]; }; then
		echo "FAIL: $preset $dest: expected $want, got: $out (exit $st)" >&2
		bad=$((bad + 1))
	fi
	n=$((n + 1))
done <"$file"
[ "$n" -gt 0 ] || fail "$file has no checks"
[ "$bad" -eq 0 ] || fail "$bad of $n preset expectations failed"
echo "$n preset expectations hold"
