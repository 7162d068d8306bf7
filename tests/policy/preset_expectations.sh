#!/usr/bin/env bash
# Every line of preset-expectations.txt ("PRESET allow|deny HOST[:PORT]")
# through `airlock policy test`: the first word of each output line must be
# the expected verdict, and the exit status must agree (0 when all of a
# preset's destinations are allowed, else 1). One run per preset with all
# of its destinations, in file order.
. "$(dirname "$0")/../lib.sh"

file=${1:?usage: preset_expectations.sh FILE}
[ -r "$file" ] || fail "cannot read $file"

declare -A dests wants
order=()
n=0
while read -r preset want dest extra; do
	case "$preset" in '' | '#'*) continue ;; esac
	if [ -z "$dest" ] || [ -n "$extra" ] || { [ "$want" != allow ] && [ "$want" != deny ]; }; then
		fail "$file: malformed line: $preset $want $dest $extra"
	fi
	[ -n "${dests[$preset]+x}" ] || order+=("$preset")
	dests[$preset]+="$dest "
	wants[$preset]+="$want "
	n=$((n + 1))
done <"$file"
[ "$n" -gt 0 ] || fail "$file has no checks"

bad=0
for preset in "${order[@]}"; do
	read -r -a d <<<"${dests[$preset]}"
	read -r -a w <<<"${wants[$preset]}"
	st=0
	out=$("$AIRLOCK" policy test "$preset" "${d[@]}" 2>&1) || st=$?
	mapfile -t lines <<<"$out"
	want_st=0
	for i in "${!d[@]}"; do
		[ "${w[$i]}" = allow ] || want_st=1
		got=${lines[$i]%% *}
		if [ "$got" != "${w[$i]}" ]; then
			echo "FAIL: $preset ${d[$i]}: expected ${w[$i]}, got: ${lines[$i]:-nothing}" >&2
			bad=$((bad + 1))
		fi
	done
	[ "${#lines[@]}" -eq "${#d[@]}" ] || { echo "FAIL: $preset: ${#lines[@]} lines for ${#d[@]} destinations:" >&2; echo "$out" >&2; bad=$((bad + 1)); }
	[ "$st" -eq "$want_st" ] || { echo "FAIL: $preset: exit $st, expected $want_st" >&2; bad=$((bad + 1)); }
done
[ "$bad" -eq 0 ] || fail "$bad preset expectations failed (of $n)"
echo "$n preset expectations hold (${#order[@]} presets)"
