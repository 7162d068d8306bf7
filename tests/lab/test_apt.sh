#!/usr/bin/env bash
# apt inside airlock (issue 19): a local apt repository served as
# deb.debian.org by the lab's nginx, policies/debian.yaml, and
# `airlock run --root --ids range --overlay-keep D`: apt-get update and
# apt-get install -y of a test package work, the program runs in the same
# task, the host's /var/lib/dpkg and /usr do not change, and airlock diff D
# lists the package's files. Rootless (AIRLOCK_TEST_USER with an
# /etc/subuid range): the range is mapped, but the host's root-owned files
# stay unwritable (the kernel's rule, docs/run.md "Writable root"), which
# the test shows; and without a range the message names what is missing.
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/lib.sh"

need_prog dpkg-deb apt-ftparchive apt-get setpriv
lab_start
trap 'echo "test_apt.sh: exit at line $LINENO" >&2' ERR
ARCH=$(dpkg --print-architecture)

# --- the repository --------------------------------------------------------
pkg=$LAB_WORK/pkg/airlock-hello
mkdir -p "$pkg/DEBIAN" "$pkg/usr/bin" "$pkg/usr/share/doc/airlock-hello"
cat >"$pkg/DEBIAN/control" <<-CTL
	Package: airlock-hello
	Version: 1.0
	Architecture: all
	Maintainer: airlock tests <tests@example.org>
	Description: airlock's apt test package
CTL
printf '#!/bin/sh\necho hello from airlock-hello\n' >"$pkg/usr/bin/airlock-hello"
chmod 755 "$pkg/usr/bin/airlock-hello"
echo "test package" >"$pkg/usr/share/doc/airlock-hello/README"
repo=$LAB/www/deb.debian.org/debian
mkdir -p "$repo/pool/main" "$repo/dists/lab/main/binary-$ARCH"
dpkg-deb --root-owner-group -b "$pkg" "$repo/pool/main/airlock-hello_1.0_all.deb" >/dev/null
(cd "$repo" && apt-ftparchive packages pool >"dists/lab/main/binary-$ARCH/Packages" &&
	gzip -k "dists/lab/main/binary-$ARCH/Packages" &&
	apt-ftparchive -o APT::FTPArchive::Release::Suite=lab -o APT::FTPArchive::Release::Codename=lab \
		-o "APT::FTPArchive::Release::Architectures=$ARCH" \
		-o APT::FTPArchive::Release::Components=main release dists/lab >dists/lab/Release) ||
	fail "build the apt repository"
# Only the lab's source; unsigned (trusted=yes): the test is about the
# sandbox, not apt's signatures.
echo "deb [trusted=yes] http://deb.debian.org/debian lab main" >"$LAB_WORK/lab.list"
APT_OPTS="-o Dir::Etc::SourceList=$LAB_WORK/lab.list -o Dir::Etc::SourceParts=/nonexistent -o Acquire::Retries=0"
cat >"$LAB_WORK/apt.sh" <<-SH
	set -e
	apt-get $APT_OPTS -q update
	DEBIAN_FRONTEND=noninteractive apt-get $APT_OPTS -q install -y airlock-hello
	airlock-hello
SH

host_state() {
	find /var/lib/dpkg /usr -xdev -printf '%p %s %T@ %m %U %G\n' 2>/dev/null | sort | sha256sum
}
before=$(host_state)

# --- as root -----------------------------------------------------------------
keep=$LAB_WORK/layer
airlock_lab "$SOURCE_ROOT/policies/debian.yaml" --root --ids range --overlay-keep "$keep" -- \
	sh "$LAB_WORK/apt.sh" >"$LAB_WORK/apt.out" 2>&1 || {
	cat "$LAB_WORK/apt.out" >&2
	fail "apt-get update && apt-get install -y under --root --ids range --overlay-keep"
}
grep -q '^hello from airlock-hello$' "$LAB_WORK/apt.out" ||
	fail "the installed program did not run in the task: $(tail -n 5 "$LAB_WORK/apt.out")"
[ ! -e /usr/bin/airlock-hello ] || fail "the host has /usr/bin/airlock-hello"
expect_eq "host /var/lib/dpkg and /usr unchanged" "$before" "$(host_state)"
! grep -q "^Package: airlock-hello$" /var/lib/dpkg/status || fail "the host's dpkg status lists airlock-hello"
expect_logged "apt: deb.debian.org allowed" \
	'e.get("host") == "deb.debian.org" and e["verdict"] == "allow" and "debian.yaml:" in e.get("rule", "")'
# The log says which root the task had, for the review of its changes.
grep -F '"kind":"task-start"' "$LOGF" | head -n 1 | grep -qF "\"ids\":\"range\",\"overlay\":\"$(realpath "$keep")\"" ||
	fail "task-start does not name the range and the kept layer: $(grep -F task-start "$LOGF" | head -n 1)"
/usr/bin/python3 "$TESTS_DIR/lab/check_log.py" "$LOGF" || fail "the egress log does not match docs/log.md"
diff_out=$("$AIRLOCK" diff "$keep") || fail "airlock diff $keep failed"
for p in "A /usr/bin/airlock-hello" "A /usr/share/doc/airlock-hello/README" \
	"A /var/lib/dpkg/info/airlock-hello.list" "M /var/lib/dpkg/status"; do
	grep -qxF "$p" <<<"$diff_out" || fail "airlock diff lacks '$p': $(head -n 20 <<<"$diff_out")"
done
printf "%s\n" "$diff_out" >"$LAB_WORK/diff.out"
LC_ALL=C sort -t" " -k2 "$LAB_WORK/diff.out" | cmp -s - "$LAB_WORK/diff.out" ||
	fail "airlock diff is not sorted by path: $(LC_ALL=C sort -t" " -k2 "$LAB_WORK/diff.out" | diff - "$LAB_WORK/diff.out" | head -n 6)"

# --- rootless ------------------------------------------------------------------
if [ -n "${AIRLOCK_TEST_USER:-}" ] && id "$AIRLOCK_TEST_USER" >/dev/null 2>&1; then
	user=$AIRLOCK_TEST_USER
	mkdir -p "$LAB_WORK/bin"
	install -m 755 "$AIRLOCK" "$LAB_WORK/bin/airlock"
	cp "$SOURCE_ROOT/policies/debian.yaml" "$LAB_WORK/debian.yaml"
	AIRLOCK=$LAB_WORK/bin/airlock
	for f in /etc/subuid /etc/subgid; do cp -p "$f" "$LAB/$(basename "$f").saved"; done
	restore_subids() {
		for f in subuid subgid; do cp -p "$LAB/$f.saved" "/etc/$f"; done
	}
	trap 'restore_subids; lab_stop' EXIT
	for f in /etc/subuid /etc/subgid; do
		{ grep -v "^$user:" "$LAB/$(basename "$f").saved" || true; } >"$f"
	done
	# No range: the one-line reason names the file and the way out.
	err=$(airlock_lab_as "$user" "$LAB_WORK/debian.yaml" --root --ids range -- true 2>&1) &&
		fail "rootless --ids range without an /etc/subuid entry succeeded"
	grep -q "/etc/subuid has no entry for $user" <<<"$err" ||
		fail "rootless, no range: unclear message: $err"
	# The fallback: one id, apt's drop to _apt fails for lack of ids.
	out=$(airlock_lab_as "$user" "$LAB_WORK/debian.yaml" --root --overlay -- \
		sh -c 'cat /proc/self/uid_map; apt-get '"$APT_OPTS"' -q update' 2>&1) &&
		fail "rootless apt-get update with one id succeeded: $out"
	grep -Eqi "_apt|setgroups|seteuid|Operation not permitted" <<<"$out" ||
		fail "rootless, one id: apt's failure does not name the id switch: $out"
	# With a range.
	echo "$user:200000:65536" >>/etc/subuid
	echo "$user:200000:65536" >>/etc/subgid
	out=$(airlock_lab_as "$user" "$LAB_WORK/debian.yaml" --root --ids range --overlay -- sh -c '
		cat /proc/self/uid_map
		/usr/bin/python3 -c "import os; os.setgroups([]); os.setgid(65534); os.setuid(42); print(os.getuid())"
		touch /var/lib/dpkg/airlock-probe 2>&1 || true' 2>&1) ||
		fail "rootless --ids range --overlay run failed: $out"
	grep -Eq '^ +1 +200000 +65535$' <<<"$out" || fail "rootless: the range is not mapped: $out"
	grep -qx 42 <<<"$out" || fail "rootless: cannot switch to _apt (uid 42) in the range: $out"
	# The kernel's rule, not airlock's: an inode whose owner (host root)
	# is not mapped cannot be written, whatever the capabilities inside.
	grep -q "Permission denied" <<<"$out" ||
		fail "rootless: host root's /var/lib/dpkg became writable: $out"
	restore_subids
	trap 'lab_stop' EXIT
	expect_eq "host unchanged after the rootless runs" "$before" "$(host_state)"
fi
echo "apt: update and install inside --root --ids range --overlay-keep; host unchanged; diff lists the files"
