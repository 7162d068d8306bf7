# Shared set-up for the sandbox's end-to-end tests. Source it after
# tests/lib.sh. Every test body runs once per role: "self" (whoever runs the
# suite: root in CI) and, when root and AIRLOCK_TEST_USER names an account,
# "user" (that account, rootless through the user namespace).
#   sbx_setup             scratch dir with a copy of airlock readable by all
#   as ROLE CMD...        CMD as ROLE (HOME set to the role's home)
#   al ROLE ARGS...       airlock run -p none --log LOG(ROLE) ARGS..., in WORK(ROLE)
#   work ROLE / logf ROLE the role's working directory / egress log

sbx_setup() {
	scratch_dir
	# The build tree may be unreadable to the test user.
	cp "$AIRLOCK" "$SCRATCH/airlock"
	chmod 755 "$SCRATCH/airlock"
	printf 'version: 1\nname: none\ndescription: allows nothing\n' >"$SCRATCH/none.yaml"
	chmod 644 "$SCRATCH/none.yaml"
	ROLES="self"
	if [ -n "${AIRLOCK_TEST_USER:-}" ] && [ "$(id -u)" -eq 0 ]; then
		id "$AIRLOCK_TEST_USER" >/dev/null 2>&1 ||
			fail "AIRLOCK_TEST_USER=$AIRLOCK_TEST_USER does not exist"
		ROLES="self user"
	fi
	local r
	for r in self user; do
		mkdir -p "$SCRATCH/work-$r" "$SCRATCH/log-$r"
		if [ "$r" = user ] && [ -n "${AIRLOCK_TEST_USER:-}" ] && [ "$(id -u)" -eq 0 ]; then
			chown "$AIRLOCK_TEST_USER:" "$SCRATCH/work-$r" "$SCRATCH/log-$r"
		fi
	done
}

work() { echo "$SCRATCH/work-$1"; }
logf() { echo "$SCRATCH/log-$1/egress.jsonl"; }

as() {
	local role=$1
	shift
	if [ "$role" = user ]; then
		local home
		home=$(getent passwd "$AIRLOCK_TEST_USER" | cut -d: -f6)
		setpriv --reuid="$AIRLOCK_TEST_USER" --regid="$AIRLOCK_TEST_USER" --init-groups \
			env HOME="$home" USER="$AIRLOCK_TEST_USER" "$@"
	else
		"$@"
	fi
}

al() {
	local role=$1
	shift
	# AL_WRAP: a program airlock runs under (leaks.sh's subreaper).
	(cd "$(work "$role")" && as "$role" ${AL_WRAP:+"$AL_WRAP"} "$SCRATCH/airlock" run \
		-p "$SCRATCH/none.yaml" --log "$(logf "$role")" "$@")
}

# Exit status of a command without tripping set -e.
status_of() {
	local rc=0
	"$@" || rc=$?
	echo "$rc"
}
