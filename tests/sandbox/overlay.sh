#!/usr/bin/env bash
# --overlay, --overlay-keep and airlock diff (docs/run.md "Writable root"),
# with --ids range: CMD as root changes /usr, /etc and /opt inside; the
# host's stay as they were; the kept layer lists what changed, sorted
# (added, modified, a whiteout's deletion, an opaque directory), a name
# with a newline escaped so that it cannot forge a line. Without
# --overlay the same writes fail (the control). Rootless: the range is
# mapped, the host root's files stay unwritable (the kernel's rule), and
# what CMD made in the workdir under another id is removable as the docs
# say (airlock run --ids range --root -- rm -rf).
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/common.sh"
need_prog setpriv
sbx_setup
trap 'rm -rf "$SCRATCH"' EXIT

host_state() {
	find /usr/local /etc /opt -xdev -printf '%p %s %T@ %m %U %G\n' 2>/dev/null | sort | sha256sum
}

for role in $ROLES; do
	before=$(host_state)
	# The control: the host's view is read-only without --overlay.
	rc=$(status_of al "$role" -- sh -c 'touch /usr/local/ovl-probe' 2>/dev/null)
	[ "$rc" != 0 ] || fail "$role: /usr/local writable without --overlay"

	if [ "$role" = self ]; then
		keep=$SCRATCH/layer-$role
		al "$role" --ids range --root --overlay-keep "$keep" -- sh -c '
			set -e
			echo probe >/usr/local/ovl-probe
			rm /etc/motd
			rm -rf /etc/apt/apt.conf.d
			mkdir /etc/apt/apt.conf.d
			echo x >/etc/apt/apt.conf.d/99probe
			mkdir -p /opt/ovl-new
			echo y >/opt/ovl-new/f
			chown 42:65534 /opt/ovl-new/f
			[ "$(stat -c %u:%g /opt/ovl-new/f)" = 42:65534 ]
			echo tmp >/etc/ovl-tmp && rm /etc/ovl-tmp
			: >"/opt/ovl-new/n
D forged"
		' || fail "$role: writes under --overlay-keep failed"
		[ -e /etc/motd ] && [ ! -e /usr/local/ovl-probe ] && [ ! -e /opt/ovl-new ] &&
			[ -d /etc/apt/apt.conf.d ] || fail "$role: the host's root changed"
		expect_eq "$role: host unchanged" "$before" "$(host_state)"
		got=$("$SCRATCH/airlock" diff "$keep" | grep -Ev '^M /(var|usr/local$)' || true)
		want=$(printf '%s\n' "R /etc/apt/apt.conf.d" "A /etc/apt/apt.conf.d/99probe" \
			"D /etc/motd" "A /opt/ovl-new" "A /opt/ovl-new/f" 'A /opt/ovl-new/n\012D forged' \
			"A /usr/local/ovl-probe")
		expect_eq "$role: airlock diff" "$want" "$got"
		# The same with a tmpfs upper: nothing left anywhere.
		al "$role" --ids range --root --overlay -- sh -c 'echo t >/usr/local/ovl-probe && rm /etc/motd' ||
			fail "$role: writes under --overlay failed"
		expect_eq "$role: host unchanged (tmpfs)" "$before" "$(host_state)"
		# A layer kept inside the workdir is out of CMD's reach there.
		al "$role" --root --ids range --overlay-keep inwork -- sh -c '
			echo t >/opt/ovl-t
			[ -z "$(ls -A inwork)" ] && ! touch inwork/x 2>/dev/null' ||
			fail "$role: the kept layer is reachable through the workdir"
		expect_eq "$role: layer in the workdir" "A /opt/ovl-t" "$("$SCRATCH/airlock" diff "$(work "$role")/inwork")"
		# A kept layer is never reused.
		err=$(al "$role" --overlay-keep "$keep" -- true 2>&1) && fail "$role: a used layer was reused"
		grep -q "not empty" <<<"$err" || fail "$role: unclear reuse message: $err"
		# A warning names a task-made path escaped as the listing does: a
		# newline or a terminal escape in it reaches the reader as \ooo.
		deep=$SCRATCH/deep-layer
		al "$role" --root --ids range --overlay-keep "$deep" -- sh -c '
			d=/opt/"$(printf "\033[2Jx\nA /etc/forged")"; mkdir -p "$d"; cd "$d"
			i=0; while [ $i -lt 300 ]; do mkdir a; cd a; i=$((i+1)); done' ||
			fail "$role: the deep layer's run failed"
		err=$("$SCRATCH/airlock" diff "$deep" 2>&1 >/dev/null) || true
		expect_match "$role: diff warns about the deep path" 'deeper than' "$err"
		! grep -q $'\033' <<<"$err" || fail "$role: a raw escape sequence in diff's warning: $err"
		! grep -q '^A /etc/forged' <<<"$err" || fail "$role: a forged line in diff's warning: $err"
		# The layer may hold what CMD made setuid: a directory others may
		# enter (made by someone else beforehand, or left open) is refused.
		mkdir -m 0777 "$SCRATCH/open-layer" && chown nobody: "$SCRATCH/open-layer"
		err=$(al "$role" --overlay-keep "$SCRATCH/open-layer" -- sh -c 'cp /bin/sh /usr/bin/ovl-sh; chmod 4755 /usr/bin/ovl-sh' 2>&1) &&
			fail "$role: a layer directory made by someone else was used"
		expect_match "$role: someone else's layer directory" "--overlay-keep $SCRATCH/open-layer: not yours" "$err"
		[ ! -e "$SCRATCH/open-layer/upper" ] || fail "$role: a refused layer directory was written"
		mkdir -m 0755 "$SCRATCH/wide-layer"
		err=$(al "$role" --overlay-keep "$SCRATCH/wide-layer" -- true 2>&1) &&
			fail "$role: a layer directory others may enter was used"
		expect_match "$role: an open layer directory" "--overlay-keep $SCRATCH/wide-layer: open to others \\(mode 0755\\)" "$err"
		continue
	fi

	# Rootless, with a range (the test's entry if the user has none).
	if ! grep -q "^$AIRLOCK_TEST_USER:" /etc/subuid || ! grep -q "^$AIRLOCK_TEST_USER:" /etc/subgid; then
		cp -p /etc/subuid "$SCRATCH/subuid.saved"
		cp -p /etc/subgid "$SCRATCH/subgid.saved"
		trap 'cp -p "$SCRATCH/subuid.saved" /etc/subuid; cp -p "$SCRATCH/subgid.saved" /etc/subgid; rm -rf "$SCRATCH"' EXIT
		echo "$AIRLOCK_TEST_USER:300000:65536" >>/etc/subuid
		echo "$AIRLOCK_TEST_USER:300000:65536" >>/etc/subgid
	fi
	out=$(al "$role" --ids range --root --overlay -- sh -c '
		touch /usr/local/ovl-probe 2>&1 || true
		mkdir d && chown 42:42 d && echo f >d/f && chown 42:42 d/f && chmod 755 d' 2>&1) ||
		fail "$role: rootless --ids range --overlay run failed: $out"
	grep -q "Permission denied" <<<"$out" || fail "$role: host root's /usr/local became writable: $out"
	w=$(work "$role")
	[ "$(stat -c %u "$w/d")" != "$(id -u "$AIRLOCK_TEST_USER")" ] ||
		fail "$role: d is the caller's: the range is not in use"
	rc=$(status_of as "$role" rm -rf "$w/d" 2>/dev/null)
	[ "$rc" != 0 ] || fail "$role: the caller removed another id's directory: the control is void"
	al "$role" --ids range --root -- rm -rf d || fail "$role: airlock's cleanup of d failed"
	[ ! -e "$w/d" ] || fail "$role: d is still there after the cleanup"
	# A kept layer rootless: another id's directory in it is read and
	# removed through the map, as docs/run.md says.
	keep=$w/layer
	al "$role" --ids range --root --overlay-keep "$keep" -- sh -c '
		set -e; mkdir /opt/ovl-x; echo a >/opt/ovl-x/f; chown -R 42:42 /opt/ovl-x; chmod 700 /opt/ovl-x' ||
		fail "$role: rootless --overlay-keep run failed"
	rc=0
	as "$role" "$SCRATCH/airlock" diff "$keep" >/dev/null 2>&1 || rc=$?
	[ "$rc" = 1 ] || fail "$role: diff of an unreadable layer exited $rc"
	got=$(al "$role" -q --ids range --root --ro "$SCRATCH/airlock" --ro "$keep" -- "$SCRATCH/airlock" diff "$keep") ||
		fail "$role: diff through the map failed"
	expect_eq "$role: diff through the map" "$(printf '%s\n' "A /opt/ovl-x" "A /opt/ovl-x/f")" "$got"
	al "$role" --ids range --root --rw "$keep" -- rm -rf "$keep/upper" "$keep/work" ||
		fail "$role: removing the layer through the map failed"
	as "$role" rmdir "$keep" || fail "$role: the layer is not empty after the cleanup"
	expect_eq "$role: host unchanged" "$before" "$(host_state)"
done
echo "overlay: host unchanged, diff lists the changes, ids range usable as $ROLES"
