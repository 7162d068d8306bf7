#!/usr/bin/env bash
# The filesystem view: host read-only, workdir and --rw writable, --ro,
# --tmpfs, --hide, private /tmp and /run, minimal /dev, generated /etc files,
# the egress log invisible, and nothing mounted on the host afterwards.
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/common.sh"
need_prog setpriv python3
sbx_setup

body() {
	local role=$1 w out
	w=$(work "$role")

	# Outside the rw paths nothing is writable; the workdir is.
	out=$(al "$role" -- sh -c 'touch /usr/airlock-probe 2>&1; touch /etc/airlock-probe 2>&1' || true)
	expect_match "$role: / read-only" "Read-only file system" "$out"
	[ -e /usr/airlock-probe ] && fail "$role: wrote /usr/airlock-probe on the host"
	al "$role" -- sh -c 'echo data > in-workdir' || fail "$role: workdir not writable"
	expect_eq "$role: workdir write reaches the host" "data" "$(cat "$w/in-workdir")"

	# --workdir, --rw, --ro (inside rw), --tmpfs, --hide (dir and file).
	as "$role" mkdir -p "$w/proj/ro" "$w/proj/secret" "$w/other"
	as "$role" sh -c "echo s > '$w/proj/secret/key'; echo f > '$w/proj/file'; echo o > '$w/other/x'"
	out=$(al "$role" --workdir "$w/proj" --ro "$w/proj/ro" --hide "$w/proj/secret" \
		--hide "$w/proj/file" --tmpfs "$w/proj/scratch" -- sh -c '
		pwd
		touch ro/x 2>/dev/null && echo ro-writable
		ls -A secret | wc -l
		cat file | wc -c
		touch secret/x 2>/dev/null && echo hide-writable
		touch scratch/x && echo tmpfs-ok
		(echo w > "'"$w"'/other/x") 2>/dev/null && echo other-writable
		true')
	expect_eq "$role: --workdir/--ro/--hide/--tmpfs" "$w/proj
0
0
tmpfs-ok" "$out"
	[ -e "$w/proj/scratch/x" ] && fail "$role: --tmpfs write reached the host"
	expect_eq "$role: hidden file intact" "f" "$(cat "$w/proj/file")"
	al "$role" --rw "$w/other" --workdir "$w/proj" -- sh -c "echo new > '$w/other/x'" ||
		fail "$role: --rw path not writable"
	expect_eq "$role: --rw write" "new" "$(cat "$w/other/x")"
	expect_eq "$role: --rw missing path" 125 "$(status_of al "$role" --rw /nonexistent-airlock -- true 2>/dev/null)"
	expect_eq "$role: workdir /" 125 "$(status_of al "$role" --workdir / -- true 2>/dev/null)"
	# A mount option on / itself is refused in one line that names it.
	local opt err
	for opt in --rw --ro --tmpfs --hide; do
		err=$(al "$role" "$opt" / -- true 2>&1 >/dev/null) && fail "$role: $opt / was accepted"
		[ "$(printf '%s\n' "$err" | wc -l)" = 1 ] || fail "$role: $opt /: more than one line: $err"
		expect_match "$role: $opt / refused" "^airlock: $opt /: " "$err"
	done
	# A set-up failure inside the sandbox is said once: init's reason,
	# with no second line about the broken channel to it.
	err=$(al "$role" --tmpfs /proc/airlock-no-such-dir -- true 2>&1 >/dev/null) &&
		fail "$role: --tmpfs on a missing /proc path was accepted"
	[ "$(printf '%s\n' "$err" | wc -l)" = 1 ] ||
		fail "$role: a set-up failure printed more than its reason: $err"
	expect_match "$role: the set-up failure's reason" "mount point /proc/airlock-no-such-dir" "$err"

	# Private /tmp and /run: empty, writable, gone afterwards.
	as "$role" touch "/tmp/airlock-host-$role" 2>/dev/null || true
	out=$(al "$role" -- sh -c "ls -A /tmp | grep -v '^work-\|^log-\|^airlock-test' ; ls -A /run; touch /tmp/t /run/user/\$(id -u)/t 2>/dev/null || touch /tmp/t; echo ok")
	expect_eq "$role: private /tmp and /run" "$( [ "$(as "$role" id -u)" = 0 ] && echo ok || printf 'user\nok')" "$out"
	rm -f "/tmp/airlock-host-$role"

	# The sandbox's own places share one tmpfs but not their files: a file
	# in each shows up in no other. Their modes hold when airlock runs
	# under umask 077, and /dev itself is read-only while /dev/shm is
	# writable.
	out=$(umask 077; al "$role" -- sh -c 'for d in /tmp /var/tmp /dev/shm /home /root; do touch "$d/mark$(echo $d | tr / -)"; done
		for d in /tmp /var/tmp /dev/shm /home /root /run; do echo "$d:" $(ls -A $d | grep mark); done | tr "\n" " "
		stat -c %a /tmp /var/tmp /dev/shm /run | tr "\n" " "
		touch /dev/x 2>&1 | grep -c "Read-only"')
	expect_eq "$role: own places apart" "/tmp: mark-tmp /var/tmp: mark-var-tmp /dev/shm: mark-dev-shm /home: mark-home /root: mark-root /run: 1777 1777 1777 755 1" "$out"

	# /dev: the harmless nodes, a private devpts, nothing else.
	out=$(al "$role" -- sh -c 'ls /dev | tr "\n" " "')
	expect_eq "$role: /dev" "fd full null ptmx pts random shm stderr stdin stdout tty urandom zero " "$out"
	expect_eq "$role: /dev/null works" "0" "$(al "$role" -- sh -c 'echo x > /dev/null; head -c 4 /dev/zero | tr -d "\0" | wc -c')"
	al "$role" -- sh -c 'ls /dev/sda /dev/vda /dev/mem 2>/dev/null' && fail "$role: host disks visible"
	expect_eq "$role: new pty inside" "/dev/pts/0" "$(al "$role" -- python3 -c 'import os, pty; m, s = pty.openpty(); print(os.ttyname(s))')"

	# /proc: the sandbox's own, its machine-wide knobs read-only.
	expect_match "$role: /proc/sys read-only" "^[^ ]+ [^ ]+ [^ ]+ /sys /proc/sys ro," "$(al "$role" -- grep ' /proc/sys ' /proc/self/mountinfo)"
	# Masked means it reads as empty: /dev/null over it, which must not be
	# a nodev one (that gives EACCES instead).
	expect_eq "$role: /proc/keys masked" "0 read" "$(al "$role" -- sh -c 'echo "$(cat /proc/keys | wc -c) $(cat /proc/keys >/dev/null && echo read)"')"

	# Generated /etc files.
	expect_match "$role: resolv.conf" "^nameserver 127\.0\.0\.1$" "$(al "$role" -- grep nameserver /etc/resolv.conf)"
	expect_match "$role: hosts" "127\.0\.0\.1.*localhost" "$(al "$role" -- cat /etc/hosts)"

	# The egress log is not visible inside, even in an --rw path.
	out=$(al "$role" --rw "$SCRATCH/log-$role" -- sh -c "cat '$(logf "$role")' | wc -c; echo airlock-tamper >> '$(logf "$role")' 2>/dev/null; true")
	expect_eq "$role: egress log hidden" "0" "$out"
	grep -q '"kind":"task-start"' "$(logf "$role")" || fail "$role: log lost its lines"
	if grep -q '^airlock-tamper' "$(logf "$role")"; then
		fail "$role: the sandbox wrote into its egress log"
	fi
}

m0=$(wc -l </proc/self/mountinfo)
for role in $ROLES; do
	body "$role"
done
m1=$(wc -l </proc/self/mountinfo)
expect_eq "host mount table unchanged" "$m0" "$m1"
echo "ok: fs ($ROLES)"
