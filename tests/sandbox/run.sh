#!/usr/bin/env bash
# airlock run end to end: identity and namespaces inside, the network view,
# /proc, hostname, environment, exit statuses, signals and --timeout.
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/common.sh"
need_prog setpriv ip python3
sbx_setup

body() {
	local role=$1 out uid gid rc t0 t1

	uid=$(as "$role" id -u)
	gid=$(as "$role" id -g)

	# CMD runs as the caller's uid/gid, or uid 0 with --root.
	expect_eq "$role: uid inside" "$uid:$gid" "$(al "$role" -- sh -c 'echo $(id -u):$(id -g)')"
	expect_eq "$role: --root" "0:0" "$(al "$role" --root -- sh -c 'echo $(id -u):$(id -g)')"

	# Only lo, with the egress addresses; no other interface.
	out=$(al "$role" -- ip -o link show)
	expect_eq "$role: interfaces" "lo" "$(printf '%s\n' "$out" | awk -F': ' '{print $2}' | tr -d '\n')"
	expect_match "$role: egress address" "198\.18\.0\.1" "$(al "$role" -- ip -o addr show dev lo)"

	# /proc is the sandbox's: pid 1 is init, CMD is pid 2, nothing else.
	expect_eq "$role: pids" "1 2" "$(al "$role" -- sh -c 'cd /proc && echo [0-9]*')"
	expect_eq "$role: own pid" "2" "$(al "$role" -- sh -c 'echo $$')"
	expect_eq "$role: hostname" "airlock" "$(al "$role" -- cat /proc/sys/kernel/hostname)"

	# The marks: AIRLOCK_TASK is this run's task in the log; an outer
	# value is replaced; AIRLOCK_POLICY is -p's.
	out=$(AIRLOCK_TASK=outer al "$role" -- sh -c 'echo "$AIRLOCK_TASK $AIRLOCK_POLICY"')
	expect_eq "$role: AIRLOCK_TASK is the log's task, AIRLOCK_POLICY -p's" \
		"$(tail -n 1 "$(logf "$role")" | python3 -c 'import json,sys; print(json.load(sys.stdin)["task"])') $SCRATCH/none.yaml" "$out"

	# Environment: the proxy variables, the caller's others, --env, --clearenv.
	out=$(AIRLOCK_T1=v1 al "$role" --env NEWV=x -- env)
	expect_match "$role: HTTP_PROXY" "^HTTP_PROXY=http://127\.0\.0\.1:3128$" "$(grep '^HTTP_PROXY=' <<<"$out")"
	expect_match "$role: https_proxy" "^https_proxy=http://127\.0\.0\.1:3128$" "$(grep '^https_proxy=' <<<"$out")"
	expect_match "$role: NO_PROXY" "^NO_PROXY=localhost,127\.0\.0\.1,::1$" "$(grep '^NO_PROXY=' <<<"$out")"
	expect_eq "$role: caller's variable" "AIRLOCK_T1=v1" "$(grep '^AIRLOCK_T1=' <<<"$out")"
	expect_eq "$role: --env" "NEWV=x" "$(grep '^NEWV=' <<<"$out")"
	out=$(AIRLOCK_T1=v1 AIRLOCK_T2=v2 al "$role" --clearenv --env AIRLOCK_T2 -- env)
	grep -q '^AIRLOCK_T1=' <<<"$out" && fail "$role: --clearenv kept AIRLOCK_T1"
	expect_eq "$role: --clearenv --env NAME" "AIRLOCK_T2=v2" "$(grep '^AIRLOCK_T2=' <<<"$out")"

	# Exit statuses.
	expect_eq "$role: exit code" 3 "$(status_of al "$role" -- sh -c 'exit 3')"
	expect_eq "$role: killed by signal" 143 "$(status_of al "$role" -- sh -c 'kill -TERM $$')"
	expect_eq "$role: not found" 127 "$(status_of al "$role" -- /nonexistent/cmd 2>/dev/null)"
	expect_eq "$role: not executable" 126 "$(status_of al "$role" -- /etc/passwd 2>/dev/null)"
	expect_eq "$role: bad policy" 125 "$(status_of al "$role" -p /nonexistent.yaml -- true 2>/dev/null)"
	# An invalid policy is found after the clone, while init sets up: init
	# is killed quietly, and the two lines that say why are all there is.
	# (init used to report the supervisor's vanishing as an error of its
	# own, in up to a third of the runs, depending on timing: hence fifty.)
	printf 'version: 1\nname: [broken\n' >"$(work "$role")/broken.yaml"
	for _ in $(seq 50); do
		out=$(al "$role" -p "$(work "$role")/broken.yaml" -- true 2>&1 || true)
		expect_eq "$role: invalid policy, lines on stderr" 2 "$(grep -c '^airlock: ' <<<"$out")"
	done
	expect_match "$role: invalid policy, the reason" "invalid YAML" "$out"
	expect_eq "$role: bad flag" 125 "$(status_of al "$role" --bogus -- true 2>/dev/null)"
	out=$(al "$role" -- /nonexistent/cmd 2>&1 || true)
	expect_match "$role: error names the command" "^airlock: cannot run '/nonexistent/cmd'" "$out"
	# CMD starts through posix_spawn; what execvp did must still hold: a
	# script without "#!" runs under /bin/sh, PATH is CMD's own, and CMD
	# starts with no signal ignored or blocked (the supervisor ignores
	# SIGPIPE, init blocks five).
	printf 'echo no-shebang-ran\n' >"$(work "$role")/noshebang"
	chmod 755 "$(work "$role")/noshebang"
	[ "$role" != user ] || chown "$AIRLOCK_TEST_USER:" "$(work "$role")/noshebang"
	expect_eq "$role: script without #!" "no-shebang-ran" "$(al "$role" -- ./noshebang)"
	# ... with 50,000 arguments, which execvp copies onto CMD's start-up
	# stack for /bin/sh (that stack is shared with init until the exec).
	expect_eq "$role: script without #!, 50,000 arguments" "no-shebang-ran" \
		"$(al "$role" -- ./noshebang $(seq 50000))"
	mkdir -p "$(work "$role")/bin"
	printf '#!/bin/sh\necho from-cmd-path\n' >"$(work "$role")/bin/airlock-t-cmd"
	chmod 755 "$(work "$role")/bin/airlock-t-cmd"
	[ "$role" != user ] || chown -R "$AIRLOCK_TEST_USER:" "$(work "$role")/bin"
	expect_eq "$role: PATH of CMD" "from-cmd-path" \
		"$(al "$role" --env PATH="$(work "$role")/bin:/usr/bin:/bin" -- airlock-t-cmd)"
	expect_eq "$role: signals ignored and blocked" "0000000000000000 0000000000000000" \
		"$(al "$role" -- sh -c 'exec awk '"'"'/^SigIgn|^SigBlk/ {printf "%s%s", s, $2; s=" "}'"'"' /proc/self/status')"
	# Set-up pins the supervisor and init to different CPUs; CMD gets the
	# caller's CPUs back: all of them, or what taskset left (one CPU: no
	# split; two of three or more: a split inside the caller's set).
	cpus=$(awk '/^Cpus_allowed_list/ {print $2}' /proc/self/status)
	expect_eq "$role: CMD's CPUs" "$cpus" \
		"$(al "$role" -- awk '/^Cpus_allowed_list/ {print $2}' /proc/self/status)"
	mapfile -t mine < <(python3 -c 'import os; print(*sorted(os.sched_getaffinity(0)), sep="\n")')
	expect_eq "$role: CMD's CPUs under taskset" "${mine[0]}" \
		"$(taskset -p -c "${mine[0]}" "$BASHPID" >/dev/null &&
			al "$role" -- awk '/^Cpus_allowed_list/ {print $2}' /proc/self/status)"
	if [ "${#mine[@]}" -ge 3 ]; then
		expect_eq "$role: CMD's CPUs under taskset, two" "${mine[0]},${mine[2]}" \
			"$(taskset -p -c "${mine[0]},${mine[2]}" "$BASHPID" >/dev/null &&
				al "$role" -- awk '/^Cpus_allowed_list/ {print $2}' /proc/self/status)"
	fi

	# airlock inside airlock: the seccomp filter refuses the nested user
	# namespace (clone3 gets ENOSYS, the clone fallback EPERM), and the
	# error names the seccomp filter (sandbox/diagnose.c, diagnose.sh).
	cp "$SCRATCH/airlock" "$SCRATCH/none.yaml" "$(work "$role")/"
	rc=0
	out=$(al "$role" -- ./airlock run -p ./none.yaml --log /tmp/nested.jsonl -- true 2>&1) || rc=$?
	expect_eq "$role: nested airlock" 125 "$rc"
	expect_match "$role: clone advice" "^airlock: cannot create the sandbox's namespaces: clone: Operation not permitted; a seccomp filter is applied \(Seccomp: 2 in /proc/self/status\)" "$out"
	rm -f "$(work "$role")/airlock" "$(work "$role")/none.yaml"

	# The egress log is never CMD's stdout or stderr: CMD could forge
	# lines. Refused before anything runs, whatever name the file has.
	rc=0
	out=$(cd "$(work "$role")" && as "$role" "$SCRATCH/airlock" run -p "$SCRATCH/none.yaml" \
		--log - -- echo forged 2>&1) || rc=$?
	expect_eq "$role: --log - refused" 125 "$rc"
	expect_match "$role: --log - reason" "^airlock: --log -: CMD shares stdout" "$out"
	# The redirections run as the role (inside sh -c), so the role can
	# open its own pipe and file again by name.
	for alias in /dev/stdout /dev/fd/1 /dev/stderr; do
		out=$(cd "$(work "$role")" && as "$role" sh -c \
			'"$1" run -p "$2" --log "$3" -- echo forged 2>&1 | cat' \
			sh "$SCRATCH/airlock" "$SCRATCH/none.yaml" "$alias")
		expect_match "$role: --log $alias refused" "is CMD's std(out|err): CMD could forge" "$out"
		grep -q forged <<<"$out" && fail "$role: --log $alias: CMD ran"
	done
	# The same file by its own name, stdout redirected to it.
	local same="$SCRATCH/log-$role/same.jsonl"
	rc=0
	(cd "$(work "$role")" && as "$role" sh -c '"$1" run -p "$2" --log "$3" -- echo forged >>"$3" 2>/dev/null' \
		sh "$SCRATCH/airlock" "$SCRATCH/none.yaml" "$same") || rc=$?
	expect_eq "$role: log = stdout's file refused" 125 "$rc"
	grep -q forged "$same" && fail "$role: CMD ran with the log as its stdout"
	# A pipe on another fd is fine, and /dev/null as both is harmless.
	out=$(cd "$(work "$role")" && as "$role" sh -c \
		'"$1" run -p "$2" --log /dev/fd/3 -- echo cmd-out 3>&1 >/dev/null | cat' \
		sh "$SCRATCH/airlock" "$SCRATCH/none.yaml")
	expect_match "$role: --log /dev/fd/3" '"kind":"task-end"' "$out"
	grep -q '^cmd-out$' <<<"$out" && fail "$role: --log /dev/fd/3: CMD's output in the log pipe"
	rc=0
	al "$role" --log /dev/null -- true >/dev/null || rc=$?
	expect_eq "$role: --log /dev/null with stdout /dev/null" 0 "$rc"

	# --timeout kills the whole sandbox: 124, promptly.
	t0=$(date +%s%N)
	expect_eq "$role: timeout" 124 "$(status_of al "$role" --timeout 1 -- sleep 30 2>/dev/null)"
	t1=$(date +%s%N)
	[ $(((t1 - t0) / 1000000)) -lt 5000 ] || fail "$role: --timeout 1 took $(((t1 - t0) / 1000000)) ms"

	# A signal sent to airlock reaches CMD (which may handle it).
	(al "$role" -- sh -c 'trap "exit 9" TERM; while :; do sleep 0.1; done') &
	local bg=$!
	sleep 0.5
	# The oldest match is the supervisor (init is its clone, same command line).
	local apid
	apid=$(pgrep -o -f "$SCRATCH/airlock run .*exit 9" || true)
	[ -n "$apid" ] || fail "$role: cannot find the airlock process"
	kill -TERM "$apid"
	rc=0
	wait $bg || rc=$?
	expect_eq "$role: SIGTERM forwarded, CMD's handler's status" 9 "$rc"

	# task-start carries the self-test result; task-end the exit status.
	al "$role" -- sh -c 'exit 4' || true
	expect_match "$role: task-start selftest" '"kind":"task-start".*"selftest":"pass"' "$(grep task-start "$(logf "$role")" | tail -1)"
	expect_match "$role: task-end status" '"kind":"task-end".*"exit_status":4' "$(grep task-end "$(logf "$role")" | tail -1)"
}

for role in $ROLES; do
	body "$role"
done
echo "ok: run ($ROLES)"
