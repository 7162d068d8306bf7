# shellcheck shell=bash
# Helpers for the lab's end-to-end tests. Source after tests/lib.sh:
#   . "$(dirname "$0")/../lib.sh"; . "$(dirname "$0")/lib.sh"
#   lab_start                  # a fresh lab, torn down when the test exits
#   in_lab CMD...              # CMD in the client namespace, clean env
#   in_lab_as USER CMD...      # the same, as an unprivileged user
#   airlock_lab POLICY ARGS.. -- CMD...   # airlock run inside the lab
# and assertions over what the lab's servers saw.

LAB_SH="$TESTS_DIR/lab/lab.sh"
# Sourced, so the lab's servers are this shell's children (reaped by it).
# shellcheck source=tests/lab/lab.sh
. "$LAB_SH"

lab_need() {
	need_root
	need_prog unshare nsenter ip dnsmasq nginx fcgiwrap openssl git dig nft curl
	[ -x /usr/bin/python3 ] || skip "/usr/bin/python3 is not installed (scripts/setup.sh installs it)"
	[ -x /usr/lib/git-core/git-http-backend ] || skip "git-http-backend is not installed (package git)"
	# veth is the one kernel feature the lab needs beyond namespaces.
	unshare --net -- ip link add name lab0 type veth peer name lab1 2>/dev/null ||
		skip "cannot create a veth pair in a network namespace (kernel without CONFIG_VETH?)"
}

# Start a lab in a fresh directory under /var/tmp (the sandbox shows the host
# read-only, and its /tmp is private, so the lab must not live in /tmp).
lab_start() {
	lab_need
	LAB=$(mktemp -d "${AIRLOCK_LAB_BASE:-/var/tmp}/airlock-lab.XXXXXX")
	trap 'lab_stop' EXIT
	trap 'exit 130' INT TERM
	lab_up "$LAB" >/dev/null
	# shellcheck disable=SC1091
	. "$LAB/lab.env"
	# HOME outside the work tree: airlock hides home directories behind an
	# empty tmpfs (writable, gone after the run), which is all pip and npm
	# need; the lab's own clients (no airlock) get a real one.
	mkdir -p "$LAB/home"
	LOGF=$LAB_WORK/egress.jsonl
	case $AIRLOCK in */*) AIRLOCK=$(realpath "$AIRLOCK") ;; esac
	lab_client_env
}

lab_stop() {
	local rc=$?
	if [ "$rc" -ne 0 ] && [ "$rc" -ne 77 ] && [ -n "${LAB:-}" ] && [ -d "$LAB" ]; then
		lab_dump >&2 || true
	fi
	[ -n "${LAB:-}" ] && lab_down "$LAB" || true
	return "$rc"
}

# On failure, what the servers and airlock saw: the test log shows it.
lab_dump() {
	local f
	echo "---- lab state at failure ($LAB)"
	for f in "$LAB_LOG"/*.log "$LAB_LOG"/*.out "${LOGF:-/nonexistent}"; do
		[ -s "$f" ] || continue
		echo "---- $f"
		tail -n 30 "$f"
	done
}

# The clients' environment: nothing from the caller's (which may point pip,
# git and npm at other CAs, mirrors or config files), everything pointing at
# the lab's CA and registries.
lab_client_env() {
	LAB_ENV=(env -i
		PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
		HOME="$LAB/home" LANG=C.UTF-8 TERM=dumb
		SSL_CERT_FILE="$LAB_CA" REQUESTS_CA_BUNDLE="$LAB_CA" CURL_CA_BUNDLE="$LAB_CA"
		GIT_SSL_CAINFO="$LAB_CA" NODE_EXTRA_CA_CERTS="$LAB_CA"
		PIP_CERT="$LAB_CA" PIP_CONFIG_FILE=/dev/null PIP_INDEX_URL=https://pypi.org/simple
		PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_CACHE_DIR=1 PIP_ROOT_USER_ACTION=ignore
		PIP_DEFAULT_TIMEOUT=10 PIP_RETRIES=0 PIP_NO_INPUT=1
		npm_config_cafile="$LAB_CA" npm_config_registry=https://registry.npmjs.org/
		npm_config_userconfig="$LAB/home/.npmrc" npm_config_globalconfig=/dev/null
		npm_config_cache="$LAB/home/.npm" npm_config_update_notifier=false
		npm_config_audit=false npm_config_fund=false npm_config_fetch_retries=0
		npm_config_fetch_timeout=10000 npm_config_loglevel=warn
		GIT_CONFIG_NOSYSTEM=1 GIT_CONFIG_GLOBAL=/dev/null GIT_TERMINAL_PROMPT=0
		# Where a build not installed finds its presets (tests/meson.build).
		${AIRLOCK_POLICY_DIR:+"AIRLOCK_POLICY_DIR=$AIRLOCK_POLICY_DIR"}
		# A sanitizer build of airlock keeps the options CI gives it.
		${ASAN_OPTIONS:+"ASAN_OPTIONS=$ASAN_OPTIONS"}
		${UBSAN_OPTIONS:+"UBSAN_OPTIONS=$UBSAN_OPTIONS"}
		${LSAN_OPTIONS:+"LSAN_OPTIONS=$LSAN_OPTIONS"})
}

in_lab() {
	"$LAB_SH" exec "$LAB" "${LAB_ENV[@]}" "$@"
}

# As USER (for rootless airlock): the lab's work tree becomes theirs.
in_lab_as() {
	local user=$1
	shift
	chown -R "$user:" "$LAB_WORK"
	"$LAB_SH" exec "$LAB" setpriv --reuid="$user" --regid="$(id -g "$user")" --init-groups \
		--reset-env -- "${LAB_ENV[@]}" "$@"
}

# airlock run inside the lab: the lab's resolver as upstream, the egress log
# in $LOGF, the work tree as the working directory.
airlock_lab() {
	local policy=$1
	shift
	# The run happens in $LAB_WORK: a relative path given here must not
	# change meaning (a bare name is a preset, looked up by airlock).
	[ -e "$policy" ] && policy=$(realpath "$policy")
	(cd "$LAB_WORK" && in_lab "$AIRLOCK" run -p "$policy" --dns-upstream "$LAB_DNS" --log "$LOGF" "$@")
}

# A copy of a test's helper script in the lab's workdir, for CMD to run:
# the sandbox has /tmp of its own, and the source tree may lie there (a CI
# clone). Prints the copy's path.
lab_script() {
	local dst=$LAB_WORK/$(basename "$1")
	cp "$1" "$dst"
	chmod 644 "$dst"
	echo "$dst"
}

airlock_lab_as() {
	local user=$1 policy=$2
	shift 2
	[ -e "$policy" ] && policy=$(realpath "$policy")
	(cd "$LAB_WORK" && in_lab_as "$user" "$AIRLOCK" run -p "$policy" --dns-upstream "$LAB_DNS" --log "$LOGF" "$@")
}

# --- what the lab saw ---------------------------------------------------

# Packets that reached the evil.test and metadata addresses, any protocol.
canary_packets() {
	"$LAB_SH" inet "$LAB" nft list counters table inet lab |
		awk '/packets/ { for (i = 1; i <= NF; i++) if ($i == "packets") n += $(i + 1) } END { print n + 0 }'
}

# Fails when any canary (nginx on evil.test and metadata, the raw TCP/UDP
# listeners, the client's own loopback services) saw anything.
expect_canaries_silent() {
	local what=$1 f n
	for f in "$LAB_LOG/evil.test.access.log" "$LAB_LOG/metadata.access.log" "$LAB_LOG/canary.log"; do
		[ ! -s "$f" ] || fail "$what: a canary was reached: $(head -n 3 "$f")"
	done
	n=$(canary_packets)
	[ "$n" = 0 ] || fail "$what: $n packets reached evil.test/metadata addresses"
}

# Fails when the lab's dnsmasq was asked about a name matching REGEX.
expect_dns_never_saw() {
	local what=$1 re=$2
	if grep -Ei "query\[[A-Z0-9]+\] [^ ]*($re)" "$LAB_LOG/dnsmasq.log" >/dev/null; then
		fail "$what: the lab's resolver was asked: $(grep -Ei "query\[[A-Z0-9]+\] [^ ]*($re)" "$LAB_LOG/dnsmasq.log" | head -n 3)"
	fi
}

expect_dns_saw() {
	local what=$1 re=$2
	grep -Eqi "query\[[A-Z0-9]+\] [^ ]*($re)" "$LAB_LOG/dnsmasq.log" ||
		fail "$what: the lab's resolver was never asked for /$re/"
}

# Events of the egress log matching a python expression over `e` (the
# parsed line), e.g. log_count 'e.get("host") == "evil.test"'. A line of
# counted repeats stands for its "count" of events (docs/log.md).
log_count() {
	/usr/bin/python3 - "$LOGF" "$1" <<-'EOF'
		import json, re, sys
		n = 0
		try:
		    lines = open(sys.argv[1]).read().splitlines()
		except FileNotFoundError:
		    lines = []
		for line in lines:
		    e = json.loads(line)
		    if eval("(" + sys.argv[2] + "\n)", {"re": re}, {"e": e}):
		        n += e.get("count", 1)
		print(n)
	EOF
}

expect_logged() {
	local what=$1 expr=$2 n
	# A line of a running proxy is written when its connection ends, by
	# the logger (elog/logger.h): it may land just after the client is
	# done. Up to 5 s for it.
	for _ in $(seq 50); do
		n=$(log_count "$expr")
		[ "$n" -gt 0 ] && break
		sleep 0.1
	done
	[ "$n" -gt 0 ] || fail "$what: no egress log line where $expr; log: $(cat "$LOGF" 2>/dev/null | tail -n 20)"
}

# expect_logged_n N WHAT EXPR: at least N events match.
expect_logged_n() {
	local want=$1 what=$2 expr=$3 n
	for _ in $(seq 50); do
		n=$(log_count "$expr")
		[ "$n" -ge "$want" ] && break
		sleep 0.1
	done
	[ "$n" -ge "$want" ] || fail "$what: $n egress log lines where $expr, expected at least $want"
}
