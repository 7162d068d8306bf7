#!/usr/bin/env bash
# --cache DIR (docs/run.md, Caches): DIR is bound read-write at
# /run/airlock/cache with each tool's variable pointing into it, what one
# run leaves there the next finds, and nothing of it is there without the
# flag. One run holds DIR at a time (a second is refused while the first
# runs) unless both say --cache-shared. DIR is refused, with a line naming
# it, when it is a symlink, not the caller's, world-writable, nested with
# the workdir, or holds the egress log (by any path the host's mounts give
# it); mounts below DIR are not carried in; its lock fd never reaches CMD.
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/common.sh"
need_prog setpriv
sbx_setup
M=/run/airlock/cache

expect_fail() { # WHAT REGEX ROLE ARGS...
	local what=$1 re=$2 role=$3 out rc=0
	shift 3
	out=$(al "$role" "$@" 2>&1) || rc=$?
	[ "$rc" = 125 ] || fail "$what: exit $rc, expected 125 (airlock refused): $out"
	expect_match "$what: the message" "$re" "$out"
}

for role in $ROLES; do
	base=$SCRATCH/caches-$role
	mkdir -p "$base"
	[ "$role" = user ] && chown "$AIRLOCK_TEST_USER:" "$base"
	C=$base/c
	uid=$(as "$role" id -u)

	# --- the mount and the variables; made when missing ---------------
	out=$(al "$role" --cache "$C" -- sh -c '
		for v in XDG_CACHE_HOME PIP_CACHE_DIR npm_config_cache CARGO_HOME GOMODCACHE GOCACHE GRADLE_USER_HOME; do
			eval "printf \"%s=%s\n\" $v \"\$$v\""
		done
		mkdir -p "$PIP_CACHE_DIR" && echo first >"$PIP_CACHE_DIR/marker"
		grep " /run/airlock/cache " /proc/self/mountinfo
		ls -l /proc/self/fd/') || fail "$role: a run with --cache $C"
	for kv in XDG_CACHE_HOME=$M/xdg PIP_CACHE_DIR=$M/pip npm_config_cache=$M/npm \
		CARGO_HOME=$M/cargo GOMODCACHE=$M/go/mod GOCACHE=$M/go/build GRADLE_USER_HOME=$M/gradle; do
		grep -qx "$kv" <<<"$out" || fail "$role: $kv not set: $out"
	done
	expect_match "$role: the cache is a nosuid, nodev mount" \
		' /run/airlock/cache [^ ]*nosuid,nodev' "$out"
	! grep -q -- "-> $C" <<<"$out" || fail "$role: CMD holds an fd of the cache (its lock): $out"
	[ -d "$C" ] || fail "$role: --cache did not make $C"
	expect_eq "$role: $C's owner" "$uid" "$(stat -c %u "$C")"
	expect_eq "$role: $C's mode" 700 "$(stat -c %a "$C")"
	expect_eq "$role: the file CMD wrote, on the host" first "$(cat "$C/pip/marker")"

	# --- kept: the next run finds it; --env still wins ------------------
	expect_eq "$role: the second run sees the first's file" first \
		"$(al "$role" --cache "$C" -- cat "$M/pip/marker")"
	expect_eq "$role: --env overrides a cache variable" /elsewhere \
		"$(al "$role" --cache "$C" --env PIP_CACHE_DIR=/elsewhere -- sh -c 'echo "$PIP_CACHE_DIR"')"

	# --- not there without the flag --------------------------------------
	out=$(al "$role" -- sh -c 'ls -d /run/airlock/cache 2>&1; echo "pip=${PIP_CACHE_DIR:-unset}"')
	expect_match "$role: no cache without --cache" 'No such file' "$out"
	expect_match "$role: no cache variable without --cache" '^pip=unset$' "$(tail -n 1 <<<"$out")"

	# --- one task at a time ----------------------------------------------
	lock_with() { # ARGS... : a run holding the cache until $C/release exists (30 s at most)
		rm -f "$C/held" "$C/release"
		al "$role" "$@" -- sh -c 'touch '"$M"'/held; i=0; while [ ! -e '"$M"'/release ] && [ $i -lt 300 ]; do sleep 0.1; i=$((i+1)); done' &
		HOLDER=$!
		local i
		for i in $(seq 300); do [ -e "$C/held" ] && return 0; sleep 0.1; done
		fail "$role: the holding run never started"
	}
	release() { as "$role" touch "$C/release"; wait "$HOLDER" || fail "$role: the holding run failed"; }

	lock_with --cache "$C"
	expect_fail "$role: a second run on a held cache" "--cache $C: in use by another run" \
		"$role" --cache "$C" -- true
	expect_fail "$role: a shared run on an exclusively held cache" "in use by another run" \
		"$role" --cache "$C" --cache-shared -- true
	release
	lock_with --cache "$C" --cache-shared
	al "$role" --cache "$C" --cache-shared -- true || fail "$role: two --cache-shared runs at once"
	expect_fail "$role: an exclusive run on a shared cache" "in use by another run" \
		"$role" --cache "$C" -- true
	release
	al "$role" --cache "$C" -- true || fail "$role: the lock outlived its run"

	# --- checks -------------------------------------------------------------
	as "$role" ln -sfn "$C" "$base/link"
	expect_fail "$role: a symlink" "--cache $base/link: not a directory" "$role" --cache "$base/link" -- true
	as "$role" mkdir -p "$base/open"
	as "$role" chmod 0777 "$base/open"
	expect_fail "$role: world-writable" "--cache $base/open: open to others \\(mode 0777\\)" \
		"$role" --cache "$base/open" -- true
	# Not only writable: a task may leave a setuid file there, and others
	# must not reach it.
	as "$role" chmod 0755 "$base/open"
	expect_fail "$role: others may enter" "--cache $base/open: open to others \\(mode 0755\\).*chmod 700" \
		"$role" --cache "$base/open" -- true
	mkdir -p "$base/theirs"
	if [ "$role" = user ]; then chown root: "$base/theirs"; else chown nobody: "$base/theirs"; fi
	expect_fail "$role: someone else's" "--cache $base/theirs: owned by uid" \
		"$role" --cache "$base/theirs" -- true
	as "$role" touch "$base/file"
	expect_fail "$role: a file" "--cache $base/file: not a directory" "$role" --cache "$base/file" -- true
	expect_fail "$role: inside the workdir" "one inside the other; keep the cache outside" \
		"$role" --cache "$(work "$role")/cache" -- true
	[ ! -e "$(work "$role")/cache" ] || fail "$role: a refused --cache left the directory it made"
	expect_fail "$role: holding the egress log" "--cache $C: it and the egress log" \
		"$role" --cache "$C" --log "$C/run.jsonl" -- true
	expect_fail "$role: --cache-shared alone" "--cache-shared without --cache" \
		"$role" --cache-shared -- true
done

# --- a bind mount does not hide the log from the check (root: mounts) ---
# The host shows one directory at two paths: DIR a bind mount of the log
# directory, or DIR holding a mount of it below. CMD must not reach the
# log through /run/airlock/cache either way.
if [ "$(id -u)" = 0 ]; then
	logs=$SCRATCH/alias-logs
	mkdir -p -m 0700 "$logs" "$SCRATCH/alias-c" "$SCRATCH/holder/sub"
	chmod 0700 "$SCRATCH/holder"
	mount --bind "$logs" "$SCRATCH/alias-c"
	rc=0
	out=$(cd "$(work self)" && "$SCRATCH/airlock" run -p "$SCRATCH/none.yaml" \
		--log "$logs/run.jsonl" --cache "$SCRATCH/alias-c" -- \
		sh -c 'echo forged >/run/airlock/cache/run.jsonl' 2>&1) || rc=$?
	umount "$SCRATCH/alias-c"
	[ "$rc" = 125 ] || fail "a cache that is a bind mount of the log directory: exit $rc: $out"
	expect_match "a bind-mounted alias of the log directory: the message" \
		"--cache $SCRATCH/alias-c: it and the egress log" "$out"
	mount --bind "$logs" "$SCRATCH/holder/sub"
	rc=0
	out=$(cd "$(work self)" && "$SCRATCH/airlock" run -p "$SCRATCH/none.yaml" \
		--log "$logs/run2.jsonl" --cache "$SCRATCH/holder" -- \
		sh -c 'echo forged >/run/airlock/cache/sub/run2.jsonl' 2>&1) || rc=$?
	umount "$SCRATCH/holder/sub"
	[ "$rc" = 125 ] || fail "a cache with a mount below it: exit $rc: $out"
	expect_match "a cache with a mount below it: the message" \
		"--cache $SCRATCH/holder: $SCRATCH/holder/sub is mounted inside it" "$out"
	! grep -q forged "$logs/run2.jsonl" || fail "CMD wrote the log through a mount below the cache: $out"
fi
echo "cache: mounted with its variables, kept across runs, absent by default, one run at a time unless shared, bad directories refused"
