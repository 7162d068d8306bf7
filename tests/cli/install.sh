#!/usr/bin/env bash
# `meson install` into a scratch DESTDIR, then: every man page is there,
# renders without a warning and is found by man(1) under the prefix; each
# page and the bash completion name every option the matching --help names;
# the bash completion completes commands, options and preset names; the zsh
# one parses; LICENSE and SECURITY.md are installed.
#   install.sh BUILD_DIR
. "$(dirname "$0")/../lib.sh"

build=${1:?usage: install.sh BUILD_DIR}
need_prog meson groff man
dest=$(mktemp -d)
trap 'rm -rf "$dest"' EXIT

meson install -C "$build" --no-rebuild --quiet --destdir "$dest" >/dev/null ||
	fail "meson install --destdir $dest"
prefix=$(meson introspect "$build" --buildoptions |
	python3 -c 'import json,sys; print(next(o["value"] for o in json.load(sys.stdin) if o["name"] == "prefix"))')
datadir=$(meson introspect "$build" --buildoptions |
	python3 -c 'import json,sys; print(next(o["value"] for o in json.load(sys.stdin) if o["name"] == "datadir"))')
[[ $datadir = /* ]] || datadir=$prefix/$datadir
root=$dest$datadir

# --- man pages ---------------------------------------------------------------
for page in man1/airlock.1 man1/airlock-run.1 man5/airlock-policy.5 man5/airlock-log.5; do
	f=$root/man/$page
	[ -f "$f" ] || fail "not installed: $datadir/man/$page"
	warn=$(groff -man -Tutf8 -ww -z "$f" 2>&1) || fail "groff failed on $page: $warn"
	[ -z "$warn" ] || fail "groff warns on $page: $warn"
done
for name in airlock airlock-run airlock-policy airlock-log; do
	found=$(MANPATH=$root/man man -w "$name" 2>/dev/null) ||
		fail "man -w $name does not find the installed page under $datadir/man"
	case $found in "$root"/man/*) ;; *) fail "man -w $name found $found, not the installed one" ;; esac
	text=$(MANPATH=$root/man MANWIDTH=80 man -P cat "$name" 2>/dev/null)
	[ -n "$text" ] || fail "man $name renders nothing"
done
echo "ok   four man pages installed, warning-free, found by man"

# The long options a --help text names.
opts_of() {
	"$AIRLOCK" "$@" --help | grep -oE '(^|[ ,[])--[a-z][a-z-]+' | grep -oE -- '--[a-z-]+' | sort -u
}
# Every option of `airlock run --help` is in airlock-run(1) (roff writes
# each '-' as '\-').
man_run=$(sed 's/\\-/-/g' "$root/man/man1/airlock-run.1")
for o in $(opts_of run); do
	grep -qF -- "$o" <<<"$man_run" || fail "airlock-run(1) does not describe $o"
done
man_log=$(sed 's/\\-/-/g' "$root/man/man5/airlock-log.5")
for sub in show summary suggest replay verify prune; do
	for o in $(opts_of log "$sub" | grep -vx -- --help); do
		grep -qF -- "$o" <<<"$man_log" || fail "airlock-log(5) does not name log $sub $o"
	done
done
echo "ok   the man pages name every option of run and log"

# --- bash completion -----------------------------------------------------------
bashc=$root/bash-completion/completions/airlock
[ -f "$bashc" ] || fail "not installed: bash completion"
grep -q '@POLICY_DIR@' "$bashc" && fail "bash completion still says @POLICY_DIR@"
grep -qF "$datadir/airlock/policies" "$bashc" || fail "bash completion does not name $datadir/airlock/policies"
# complete WORDS...: what _airlock offers for the last word.
complete_words() {
	bash -c '. "$1"; shift; COMP_WORDS=("$@"); COMP_CWORD=$(($# - 1)); _airlock; printf "%s\n" "${COMPREPLY[@]}"' \
		_ "$bashc" "$@"
}
expect_has() { # WHAT WANT WORDS...
	local what=$1 want=$2
	shift 2
	local offered
	offered=$(complete_words "$@")
	# A here-string, not a pipe: grep -q stopping early must not trip pipefail.
	grep -qx -- "$want" <<<"$offered" || fail "completing '$*' ($what) does not offer $want"
}
expect_has "a command" run airlock r
expect_has "a log command" verify airlock log ve
expect_has "a run option" --share-home airlock run --sh
expect_has "a preset" pypi airlock run -p py
expect_has "a proxy option" --hosts-file airlock proxy --hosts
for cmd in run proxy selftest pod-init; do
	for o in $(opts_of "$cmd"); do
		expect_has "$cmd's options" "$o" airlock "$cmd" "$o"
	done
done
for sub in show summary suggest replay verify prune; do
	for o in $(opts_of log "$sub"); do
		expect_has "log $sub's options" "$o" airlock log "$sub" "$o"
	done
done
echo "ok   bash completion: commands, every option of run, proxy, selftest, pod-init and log, presets"

# --- zsh completion ---------------------------------------------------------------
zshc=$root/zsh/site-functions/_airlock
[ -f "$zshc" ] || fail "not installed: zsh completion"
grep -q '@POLICY_DIR@' "$zshc" && fail "zsh completion still says @POLICY_DIR@"
if command -v zsh >/dev/null; then
	zsh -n "$zshc" || fail "zsh -n $zshc"
	for o in $(opts_of run); do
		grep -qF -- "$o" "$zshc" || fail "zsh completion lacks run $o"
	done
	echo "ok   zsh completion parses and names every run option"
elif [ "${AIRLOCK_MUST_WORK:-0}" = 1 ]; then
	fail "zsh is not installed (scripts/setup.sh installs it)"
else
	echo "SKIP zsh completion syntax: no zsh"
fi

# --- project files ---------------------------------------------------------------
for f in LICENSE SECURITY.md; do
	[ -s "$root/doc/airlock/$f" ] || fail "not installed: $datadir/doc/airlock/$f"
done
grep -q "MIT License" "$root/doc/airlock/LICENSE" || fail "LICENSE is not the MIT text meson.build declares"
echo "ok   LICENSE and SECURITY.md installed"
echo "install: all passed"
