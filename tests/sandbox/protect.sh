#!/usr/bin/env bash
# What airlock reads at start (the policy and its includes, the preset
# directory, its own executable) and writes during the run (the egress
# log) is out of CMD's reach wherever it lies, also in the workdir, a
# subdirectory of it, an --rw path or a workdir that is $HOME: CMD can
# neither write, rename, replace (rename over) nor unlink it, nor rename a
# directory above it away and plant a forgery at the path the reviewer or
# the next run opens. A log that cannot be protected refuses the run. A
# default build never reads presets from its source tree.
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/common.sh"
need_prog setpriv python3 sha256sum
sbx_setup
EXTRA=()
trap 'rm -rf "$SCRATCH" "${EXTRA[@]}"' EXIT

# The attacker: each ARG is OP:PATH; prints "OP PATH: ok" or the errno's
# name. write appends, rename moves PATH aside, replace renames a forged
# file over PATH, unlink removes it (rmdir for a directory), create makes a
# new file, plant writes a forged log line at PATH (making its directory).
TAMPER='
import errno, os, sys
FORGED = "{\"kind\":\"task-start\",\"task\":\"forged\"}\n"
def replace(p):
    tmp = os.path.join(os.getcwd(), ".airlock-forge")
    with open(tmp, "w") as f:
        f.write(FORGED)
    try:
        os.rename(tmp, p)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
def plant(p):
    os.makedirs(os.path.dirname(p), exist_ok=True)
    with open(p, "w") as f:
        f.write(FORGED)
def create(p):
    with open(p, "x") as f:
        f.write(FORGED)
def write(p):
    with open(p, "a") as f:
        f.write(FORGED)
def unlink(p):
    (os.rmdir if os.path.isdir(p) and not os.path.islink(p) else os.unlink)(p)
def symlink(p):
    os.unlink(p)
    os.symlink("/airlock-forged", p)
ops = {"write": write, "rename": lambda p: os.rename(p, p + ".moved"), "replace": replace,
       "unlink": unlink, "create": create, "plant": plant, "symlink": symlink}
for a in sys.argv[1:]:
    op, p = a.split(":", 1)
    try:
        ops[op](p)
        print("%s %s: ok" % (op, p))
    except OSError as e:
        print("%s %s: %s" % (op, p, errno.errorcode.get(e.errno, e.errno)))
'

# tamper ROLE DIR AIRLOCK-ARGS... -- OPS...: run the attacker in DIR under
# airlock; its report goes to $SCRATCH/out, airlock's status is returned.
tamper() {
	local role=$1 dir=$2 rc=0
	shift 2
	local args=()
	while [ "$1" != -- ]; do
		args+=("$1")
		shift
	done
	shift
	(cd "$dir" && as "$role" env -u XDG_STATE_HOME ${TAMPER_HOME:+HOME="$TAMPER_HOME"} \
		"$SCRATCH/airlock" run "${args[@]}" -- python3 -c "$TAMPER" "$@") \
		>"$SCRATCH/out" 2>"$SCRATCH/err" || rc=$?
	return $rc
}

# No operation on a protected path succeeded (writes to a hidden log go to
# /dev/null: allowed with ok_write, the log itself is checked afterwards).
expect_refused() {
	local what=$1 ok_write=${2:-} bad
	bad=$(grep ': ok$' "$SCRATCH/out" | { [ -n "$ok_write" ] && grep -v '^write \|^plant ' || cat; } || true)
	[ -z "$bad" ] || fail "$what: CMD succeeded at: $(echo $bad) (all: $(cat "$SCRATCH/out" "$SCRATCH/err"))"
}

# The log at PATH is the real one: this task's task-start and task-end,
# nothing forged.
expect_real_log() {
	local what=$1 path=$2
	[ -f "$path" ] || fail "$what: no log at $path (CMD moved it away)"
	if grep -qF '"task":"forged"' "$path"; then
		fail "$what: forged line in $path: $(grep -F '"task":"forged"' "$path")"
	fi
	expect_eq "$what: task-start in $path" 1 "$(grep -c '"kind":"task-start"' "$path")"
	expect_eq "$what: task-end in $path" 1 "$(grep -c '"kind":"task-end"' "$path")"
}

own() { [ "$1" != user ] || chown -R "$AIRLOCK_TEST_USER:" "${@:2}"; }

# 1. The policy and an include in the workdir and a subdirectory of it.
sec_policy() {
	local role=$1 w sums
	w=$(work "$role")/pol
	mkdir -p "$w/inc"
	printf 'version: 1\nname: proj\ninclude: [inc/extra.yaml]\n' >"$w/airlock.yaml"
	printf 'version: 1\nallow:\n  - host: example.test\n' >"$w/inc/extra.yaml"
	own "$role" "$w"
	sums=$(cd "$w" && sha256sum airlock.yaml inc/extra.yaml)
	tamper "$role" "$w" -p ./airlock.yaml --log "$(logf "$role")" -- \
		write:airlock.yaml rename:airlock.yaml replace:airlock.yaml unlink:airlock.yaml \
		write:inc/extra.yaml rename:inc/extra.yaml replace:inc/extra.yaml \
		unlink:inc/extra.yaml rename:inc plant:inc/extra.yaml ||
		fail "$role: policy in the workdir: airlock failed: $(cat "$SCRATCH/err")"
	expect_refused "$role: policy and include in the workdir"
	expect_eq "$role: policy files unchanged" "$sums" "$(cd "$w" && sha256sum airlock.yaml inc/extra.yaml)"
	[ -z "$(find "$w" -name '*.moved')" ] || fail "$role: something was moved: $(find "$w" -name '*.moved')"

	# ... a symlink to the policy, in the workdir: CMD must not repoint it.
	ln -s airlock.yaml "$w/link.yaml"
	own "$role" "$w"
	tamper "$role" "$w" -p ./link.yaml --log "$(logf "$role")" -- \
		symlink:link.yaml rename:link.yaml replace:link.yaml ||
		fail "$role: policy through a symlink: airlock failed: $(cat "$SCRATCH/err")"
	expect_refused "$role: symlink to the policy"
	expect_eq "$role: symlink intact" airlock.yaml "$(readlink "$w/link.yaml")"
}

# 2. The log in the workdir, in a subdirectory of it, and in an --rw path.
sec_log() {
	local role=$1 w log d above vt
	w=$(work "$role")/logs
	mkdir -p "$w/a/b" "$(work "$role")/rw/x"
	own "$role" "$w" "$(work "$role")/rw"
	for log in "$w/egress.jsonl" "$w/a/b/egress.jsonl" "$(work "$role")/rw/x/egress.jsonl"; do
		rm -f "$log"
		# Every directory above the log, up to the workdir or the --rw
		# path and those too (mount points already), deepest first.
		above=()
		d=$(dirname "$log")
		while [ "$d" != "$(work "$role")" ]; do
			above+=(rename:"$d")
			d=$(dirname "$d")
		done
		tamper "$role" "$w" -p "$SCRATCH/none.yaml" --rw "$(work "$role")/rw" --log "$log" -- \
			write:"$log" rename:"$log" replace:"$log" unlink:"$log" "${above[@]}" plant:"$log" ||
			fail "$role: log $log: airlock failed: $(cat "$SCRATCH/err")"
		expect_refused "$role: log $log" ok_write
		expect_real_log "$role: log $log" "$log"
	done
	[ -z "$(find "$(work "$role")" -name '*.moved')" ] ||
		fail "$role: something was moved: $(find "$(work "$role")" -name '*.moved')"

	# ... through a symlink in the workdir.
	mkdir -p "$w/real"
	ln -sfn real "$w/link"
	own "$role" "$w"
	log=$w/link/egress.jsonl
	tamper "$role" "$w" -p "$SCRATCH/none.yaml" --log "$log" -- \
		symlink:"$w/link" rename:"$w/link" rename:"$w/real" plant:"$log" ||
		fail "$role: log through a symlink: airlock failed: $(cat "$SCRATCH/err")"
	expect_refused "$role: log through a symlink" ok_write
	expect_real_log "$role: log through a symlink" "$log"

	# ... through a symlink in a place CMD cannot see (/var/tmp is the
	# sandbox's own) that leads back into the workdir.
	vt=$(as "$role" mktemp -d /var/tmp/airlock-protect.XXXXXX)
	EXTRA+=("$vt")
	as "$role" ln -s "$w/real/via-var-tmp.jsonl" "$vt/log.jsonl"
	log=$w/real/via-var-tmp.jsonl
	tamper "$role" "$w" -p "$SCRATCH/none.yaml" --log "$vt/log.jsonl" -- \
		write:"$log" rename:"$log" replace:"$log" unlink:"$log" rename:"$w/real" plant:"$log" ||
		fail "$role: log through a symlink in /var/tmp: airlock failed: $(cat "$SCRATCH/err")"
	expect_refused "$role: log through a symlink in /var/tmp" ok_write
	expect_real_log "$role: log through a symlink in /var/tmp" "$log"
}

# 3. The default log with the workdir at $HOME (a scratch home), with the
# home hidden and shared: ~/.local and ~/.local/state stay where they are,
# the log directory is out of sight, and ~/.local/lib is writable.
sec_home() {
	local role=$1 h log share
	for share in "" --share-home; do
		h=$(work "$role")/home$share
		mkdir -p "$h/.local/state/airlock" "$h/.local/lib"
		own "$role" "$h"
		TAMPER_HOME=$h tamper "$role" "$h" -v -p "$SCRATCH/none.yaml" $share -- \
			rename:"$h/.local" rename:"$h/.local/state" rename:"$h/.local/state/airlock" \
			create:"$h/.local/state/airlock/forged.jsonl" \
			plant:"$h/.local/state/airlock/forged.jsonl" \
			plant:"$h/.local/lib/python3/site-packages/mod.py" ||
			fail "$role: workdir \$HOME$share: airlock failed: $(cat "$SCRATCH/err")"
		log=$(sed -n 's/.*task [0-9a-f]*, egress log \(.*\)$/\1/p' "$SCRATCH/err")
		expect_eq "$role: \$HOME$share: the log's path" "$h/.local/state/airlock" "$(dirname "$log")"
		expect_eq "$role: \$HOME$share: pip-style write" \
			"plant $h/.local/lib/python3/site-packages/mod.py: ok" \
			"$(grep '/lib/python3' "$SCRATCH/out")"
		grep -v '/lib/python3' "$SCRATCH/out" >"$SCRATCH/out2"
		mv "$SCRATCH/out2" "$SCRATCH/out"
		expect_refused "$role: workdir \$HOME$share"
		expect_real_log "$role: workdir \$HOME$share" "$log"
		expect_eq "$role: \$HOME$share: the log directory" "$(basename "$log")" \
			"$(ls -A "$h/.local/state/airlock")"
		[ -f "$h/.local/lib/python3/site-packages/mod.py" ] ||
			fail "$role: \$HOME$share: the write to ~/.local/lib did not reach the home"
	done
}

# 4. The preset directory (AIRLOCK_POLICY_DIR) in the workdir, and a copy of
# airlock itself there.
sec_presetdir() {
	local role=$1 w sums
	w=$(work "$role")/presets
	mkdir -p "$w/p" "$w/bin"
	cp "$SCRATCH/none.yaml" "$w/p/none.yaml"
	cp "$SCRATCH/airlock" "$w/bin/airlock"
	own "$role" "$w"
	sums=$(cd "$w" && sha256sum p/none.yaml bin/airlock)
	(cd "$w" && as "$role" env AIRLOCK_POLICY_DIR="$w/p" "$w/bin/airlock" run -p none \
		--log "$(logf "$role")" -- python3 -c "$TAMPER" write:p/none.yaml rename:p/none.yaml \
		replace:p/none.yaml unlink:p/none.yaml create:p/pypi.yaml rename:p \
		write:bin/airlock rename:bin/airlock replace:bin/airlock rename:bin) \
		>"$SCRATCH/out" 2>"$SCRATCH/err" || fail "$role: presets in the workdir: $(cat "$SCRATCH/err")"
	expect_refused "$role: preset directory and executable in the workdir"
	expect_eq "$role: presets and executable unchanged" "$sums" "$(cd "$w" && sha256sum p/none.yaml bin/airlock)"
	[ ! -e "$w/p/pypi.yaml" ] || fail "$role: CMD planted a preset"
}

# 5. A log CMD could reach anyway refuses the run, with one line of advice.
sec_refuse() {
	local role=$1 w rc
	w=$(work "$role")/refuse
	mkdir -p "$w"
	echo '' >"$w/log.jsonl"
	ln -f "$w/log.jsonl" "$w/alias.jsonl"
	own "$role" "$w"
	rc=0
	(cd "$w" && as "$role" "$SCRATCH/airlock" run -p "$SCRATCH/none.yaml" --log "$w/log.jsonl" \
		-- true) 2>"$SCRATCH/err" || rc=$?
	expect_eq "$role: hard-linked log refused" 125 "$rc"
	expect_match "$role: hard-linked log, the reason" "^airlock: .*log\.jsonl.* 2 names" "$(cat "$SCRATCH/err")"
	expect_eq "$role: hard-linked log, one line" 1 "$(wc -l <"$SCRATCH/err")"
	# A read-only policy of the caller's with a second name in the workdir:
	# CMD, its owner, could chmod it and write it through that name.
	mkdir -p "$w/pol"
	printf 'version: 1\nname: ro\n' >"$w/pol/ro.yaml"
	own "$role" "$w"
	chmod 444 "$w/pol/ro.yaml"
	ln -f "$w/pol/ro.yaml" "$w/ro-alias.yaml"
	rc=0
	(cd "$w" && as "$role" "$SCRATCH/airlock" run -p "$w/pol/ro.yaml" --log "$(logf "$role")" \
		-- true) 2>"$SCRATCH/err" || rc=$?
	expect_eq "$role: hard-linked read-only policy refused" 125 "$rc"
	expect_match "$role: hard-linked policy, the reason" "ro\.yaml.* 2 names" "$(cat "$SCRATCH/err")"
	# The default log directory is the workdir.
	mkdir -p "$w/state/airlock"
	own "$role" "$w"
	rc=0
	(cd "$w/state/airlock" && as "$role" env XDG_STATE_HOME="$w/state" "$SCRATCH/airlock" run \
		-p "$SCRATCH/none.yaml" -- true) 2>"$SCRATCH/err" || rc=$?
	expect_eq "$role: log directory = workdir refused" 125 "$rc"
	expect_match "$role: log directory = workdir, the reason" "^airlock: .*workdir" "$(cat "$SCRATCH/err")"
	expect_eq "$role: log directory = workdir, one line" 1 "$(wc -l <"$SCRATCH/err")"
	[ -z "$(ls -A "$w/state/airlock")" ] || fail "$role: a refused run left a log behind"
}

# 6. A bind mount on the host shows the log's directory inside the workdir
# too (root only: the test makes the mount in a mount namespace of its
# own): CMD must not write the log, or plant one, through that path.
sec_alias() {
	local role=$1 w data log pre=()
	[ "$(id -u)" -eq 0 ] || return 0
	w=$(work "$role")/alias
	data=$(work "$role")/data
	mkdir -p "$w/view" "$data/logs"
	own "$role" "$w" "$data"
	log=$data/logs/egress.jsonl
	rm -f "$log"
	[ "$role" != user ] || pre=(setpriv --reuid="$AIRLOCK_TEST_USER" --regid="$AIRLOCK_TEST_USER" --init-groups)
	unshare -m --propagation private sh -c 'mount --bind "$1" "$2" && shift 2 && exec "$@"' \
		sh "$data" "$w/view" "${pre[@]}" sh -c 'cd "$1" && shift && exec "$@"' sh "$w" \
		"$SCRATCH/airlock" run -p "$SCRATCH/none.yaml" --log "$log" -- python3 -c "$TAMPER" \
		write:"$w/view/logs/egress.jsonl" rename:"$w/view/logs/egress.jsonl" \
		replace:"$w/view/logs/egress.jsonl" rename:"$w/view/logs" \
		plant:"$w/view/logs/egress.jsonl" >"$SCRATCH/out" 2>"$SCRATCH/err" ||
		fail "$role: log behind a bind mount: airlock failed: $(cat "$SCRATCH/err")"
	expect_refused "$role: log behind a bind mount" ok_write
	expect_real_log "$role: log behind a bind mount" "$log"
}

# A build's presets: the installed directory (and AIRLOCK_POLICY_DIR), never
# its source tree unless built with -Dsource_presets=true. Shown for real
# where we may make a mount namespace (root): a checkout holds a forged
# none.yaml in its policies/, which is mounted where the build looks for
# its source tree (and over every other directory the build names but the
# installed one), and the workdir is that checkout: `-p none` must not
# read the forgery.
sec_presets() {
	local role=$1 dirs ck rc pre=()
	dirs=$(as "$role" env -u AIRLOCK_POLICY_DIR "$SCRATCH/airlock" policy check airlock-no-such-preset 2>&1 |
		sed -n 's/.*(looked in \(.*\)); for a file.*/\1/p' || true)
	if [ "${AIRLOCK_SOURCE_PRESETS:-false}" = true ]; then
		expect_eq "$role: preset lookup (test build)" "$SOURCE_ROOT/policies, $AIRLOCK_INSTALLED_PRESETS" "$dirs"
		return
	fi
	if [ "$(id -u)" -eq 0 ]; then
		ck=$(work "$role")/checkout
		mkdir -p "$ck/policies"
		printf 'version: 1\nname: forged\nallow:\n  - host: forged.test\n' >"$ck/policies/none.yaml"
		own "$role" "$ck"
		[ "$role" != user ] || pre=(setpriv --reuid="$AIRLOCK_TEST_USER" --regid="$AIRLOCK_TEST_USER" --init-groups)
		rc=0
		# In its own mount namespace: sh mounts, then execs the rest.
		unshare -m --propagation private sh -c '
			ck=$1; shift
			while [ "$1" != -- ]; do [ -d "$1" ] && mount --bind "$ck/policies" "$1"; shift; done
			shift; cd "$ck" && exec "$@"
			' sh "$ck" "$SOURCE_ROOT/policies" \
			$(sed 's/, /\n/g' <<<"$dirs" | grep -vxF "$AIRLOCK_INSTALLED_PRESETS") \
			-- "${pre[@]}" env -u AIRLOCK_POLICY_DIR "$SCRATCH/airlock" run -p none \
			--log "$(logf "$role")" -- true 2>"$SCRATCH/err" || rc=$?
		if grep -qs '"policy":"forged"' "$(logf "$role")"; then
			fail "$role: -p none read the checkout's forged preset (status $rc)"
		fi
	fi
	expect_eq "$role: preset lookup" "$AIRLOCK_INSTALLED_PRESETS" "$dirs"
}

# PROTECT_SECTIONS: some of them only (to show each failing on an old build).
for role in $ROLES; do
	for sec in ${PROTECT_SECTIONS:-policy log home presetdir refuse alias presets}; do
		"sec_$sec" "$role"
	done
done
echo "ok: protect ($ROLES)"
