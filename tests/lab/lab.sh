#!/usr/bin/env bash
# The test lab: a fake internet in two network namespaces with no route out.
#
#   lab.sh up DIR          build and start a lab whose state lives in DIR
#   lab.sh down DIR        stop everything it started and remove DIR
#   lab.sh exec DIR CMD..  run CMD in the client namespace, with the lab's
#                          resolv.conf and hosts bind-mounted over /etc's
#   lab.sh inet DIR CMD..  run CMD in the inet namespace (debugging)
#   lab.sh status DIR      print the lab's variables (DIR/lab.env)
#
# Needs root. docs/lab.md describes the layout. Every instance is anonymous
# (namespaces held by a sleeping process, no names anywhere outside DIR), so
# any number of labs can run at once, and `down` leaves nothing behind: it
# kills every process inside the two namespaces (all of them were started
# here or by a test in the lab), which frees the namespaces themselves.
set -Eeuo pipefail

LAB_SRC=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# The lab's own scripts run under Debian's python, never a per-user one:
# the unprivileged test user and the sandbox must be able to run it too.
LAB_PYTHON=${LAB_PYTHON:-/usr/bin/python3}

# --- address plan (documentation ranges only; see docs/lab.md) ----------
CLIENT_V4=192.0.2.1
INET_V4=192.0.2.2
CLIENT_V6=2001:db8:ffff::1
INET_V6=2001:db8:ffff::2
DNS_V4=192.0.2.53
DNS_V6=2001:db8:53::53
PYPI_V4=198.51.100.10 PYPI_V6=2001:db8:1::10
FILES_V4=198.51.100.11 FILES_V6=2001:db8:1::11
NPM_V4=198.51.100.20
GITHUB_V4=198.51.100.30
CODELOAD_V4=198.51.100.31
CRATES_V4=198.51.100.40 # static.crates.io
DEB_V4=198.51.100.50 # deb.debian.org: a local apt repository (tests/lab/test_apt.sh)
EVIL_V4=203.0.113.66 EVIL_V6=2001:db8:66::66
METADATA_V4=169.254.169.254
# Nobody's until a test adds them (to the client's or inet's interfaces).
LATE_V4=203.0.113.71 LATE_V6=2001:db8:71::71
NEXT_V4=203.0.113.72 NEXT_V6=2001:db8:72::72
# Ports the raw canaries listen on at evil.test's addresses (nginx has 80
# and 443): ssh, smtp, dns, a "backdoor" and alternative https; and UDP.
CANARY_TCP_PORTS="22 25 53 4444 8443"
CANARY_UDP_PORTS="53 443 4444"

lab_die() {
	echo "lab: $*" >&2
	exit 1
}

# nsenter into a namespace held by a sleeper whose pid is in DIR/NAME.pid.
lab_ns_of() {
	local pid
	pid=$(cat "$1/$2.pid" 2>/dev/null) || lab_die "$1: no $2 namespace (is the lab up?)"
	[ -e "/proc/$pid/ns/net" ] || lab_die "$1: $2 namespace holder $pid is gone"
	echo "/proc/$pid/ns/net"
}

lab_in_ns() {
	local dir=$1 which=$2
	shift 2
	nsenter --net="$(lab_ns_of "$dir" "$which")" -- "$@"
}

# Start a long-lived program in a namespace, detached from our stdio so it
# never holds a test runner's pipe open; its pid goes to DIR/procs.
lab_spawn() {
	local dir=$1 which=$2 log=$3
	shift 3
	nsenter --net="$(lab_ns_of "$dir" "$which")" -- "$@" </dev/null >>"$log" 2>&1 &
	echo "$!" >>"$dir/procs"
	# Still reaped by this shell, but never reported as a killed job.
	disown "$!"
}

# A sleeping process in a fresh network namespace; waits until the unshare
# has happened so that /proc/PID/ns/net is the new namespace.
lab_make_ns() {
	local dir=$1 name=$2 pid self i
	unshare --net -- sleep infinity </dev/null >/dev/null 2>&1 &
	pid=$!
	disown "$pid"
	echo "$pid" >"$dir/$name.pid"
	self=$(readlink /proc/self/ns/net)
	for i in $(seq 200); do
		[ -e "/proc/$pid/ns/net" ] || lab_die "namespace holder for $name died"
		[ "$(readlink "/proc/$pid/ns/net")" != "$self" ] && return 0
		sleep 0.01
	done
	lab_die "namespace for $name never appeared"
}

lab_make_pki() {
	local dir=$1 pki=$1/pki san
	mkdir -p "$pki"
	san="DNS:pypi.org,DNS:files.pythonhosted.org,DNS:registry.npmjs.org"
	san="$san,DNS:github.com,DNS:codeload.github.com,DNS:evil.test,DNS:*.evil.test"
	san="$san,DNS:static.crates.io"
	san="$san,DNS:rebind-loopback.test,DNS:rebind-metadata.test,DNS:rebind-host.test"
	san="$san,IP:$EVIL_V4,IP:$PYPI_V4,IP:$METADATA_V4"
	openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes \
		-keyout "$pki/ca.key" -out "$pki/ca.crt" -days 2 -subj "/CN=airlock test lab CA" \
		-addext "basicConstraints=critical,CA:TRUE" \
		-addext "keyUsage=critical,keyCertSign,cRLSign" \
		-addext "subjectKeyIdentifier=hash" 2>/dev/null
	openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes \
		-keyout "$pki/server.key" -out "$pki/server.csr" -subj "/CN=airlock lab server" 2>/dev/null
	cat >"$pki/server.ext" <<-EOF
		basicConstraints=critical,CA:FALSE
		keyUsage=critical,digitalSignature,keyEncipherment
		extendedKeyUsage=serverAuth
		subjectKeyIdentifier=hash
		authorityKeyIdentifier=keyid
		subjectAltName=$san
	EOF
	openssl x509 -req -in "$pki/server.csr" -CA "$pki/ca.crt" -CAkey "$pki/ca.key" \
		-CAcreateserial -days 2 -extfile "$pki/server.ext" -out "$pki/server.crt" 2>/dev/null
	rm -f "$pki/server.csr" "$pki/ca.key" "$pki/ca.srl"
	# The CA must be readable by the unprivileged test user and in the
	# sandbox; the server key only by the servers (root).
	chmod 644 "$pki/ca.crt" "$pki/server.crt"
	chmod 600 "$pki/server.key"
}

lab_make_git() {
	local dir=$1 work=$1/tmp/repo-work bare=$1/git/org/repo.git
	mkdir -p "$work" "$(dirname "$bare")" "$dir/www/codeload.github.com/org/repo/tar.gz/refs/heads"
	local g=(git -c init.defaultBranch=main -c user.name=lab -c user.email=lab@example.com
		-c commit.gpgsign=false)
	# Inside the inet namespace: git must have no way to reach anything.
	lab_in_ns "$dir" inet "${g[@]}" init -q "$work"
	printf '# repo\nA repository served by the airlock test lab.\n' >"$work/README.md"
	printf 'print("hello from the lab")\n' >"$work/hello.py"
	lab_in_ns "$dir" inet "${g[@]}" -C "$work" add README.md hello.py
	lab_in_ns "$dir" inet "${g[@]}" -C "$work" commit -q -m "lab: first commit"
	lab_in_ns "$dir" inet "${g[@]}" clone -q --bare "$work" "$bare"
	lab_in_ns "$dir" inet "${g[@]}" -C "$work" archive --format=tar.gz --prefix=repo-main/ \
		-o "$dir/www/codeload.github.com/org/repo/tar.gz/refs/heads/main" HEAD
	rm -rf "$work"
	# crates.io's git index (labgen.py wrote its files), at the URL
	# Debian 12's cargo clones: no ".git" in it.
	local idx=$dir/tmp/crates-index
	lab_in_ns "$dir" inet "${g[@]}" init -q "$idx"
	lab_in_ns "$dir" inet "${g[@]}" -C "$idx" add -A
	lab_in_ns "$dir" inet "${g[@]}" -C "$idx" commit -q -m "lab: crates index"
	mkdir -p "$dir/git/rust-lang"
	lab_in_ns "$dir" inet "${g[@]}" clone -q --bare "$idx" "$dir/git/rust-lang/crates.io-index"
	rm -rf "$idx"
}

lab_write_dnsmasq_conf() {
	local dir=$1
	cat >"$dir/dnsmasq.conf" <<-EOF
		# The lab's authoritative-only resolver; nothing is forwarded.
		port=53
		listen-address=$DNS_V4
		listen-address=$DNS_V6
		bind-interfaces
		no-resolv
		no-hosts
		no-poll
		no-negcache
		log-queries=extra
		log-facility=$dir/log/dnsmasq.log
		pid-file=$dir/dnsmasq.pid
		user=root
		group=root
		local-ttl=60
		# Answer NXDOMAIN for anything else under the lab's zones.
		local=/org/
		local=/com/
		local=/test/
		host-record=pypi.org,$PYPI_V4,$PYPI_V6
		host-record=files.pythonhosted.org,$FILES_V4,$FILES_V6
		host-record=registry.npmjs.org,$NPM_V4
		host-record=github.com,$GITHUB_V4
		host-record=codeload.github.com,$CODELOAD_V4
		host-record=static.crates.io,$CRATES_V4
		host-record=deb.debian.org,$DEB_V4
		host-record=evil.test,$EVIL_V4,$EVIL_V6
		host-record=secret.evil.test,$EVIL_V4
		txt-record=secret.evil.test,"canary: this TXT answer must never reach a sandbox"
		# Rebinding targets: legitimate-looking names that answer with the
		# host's loopback, cloud metadata and the client's own address.
		host-record=rebind-loopback.test,127.0.0.1,::1
		host-record=rebind-metadata.test,$METADATA_V4
		host-record=rebind-host.test,$CLIENT_V4
		# Addresses a test gives the client namespace (the host) during a
		# run, and may move to inet later (tests/policy/e2e_host_guard.sh).
		host-record=late4.test,$LATE_V4
		host-record=late6.test,$LATE_V6
		host-record=next4.test,$NEXT_V4
		host-record=next6.test,$NEXT_V6
	EOF
}

lab_write_nginx_conf() {
	local dir=$1 n=$1/nginx
	mkdir -p "$n"
	# One server block per name, each on its own addresses, so a request
	# that reaches an address is logged by that address's server whatever
	# its Host or SNI says.
	lab_site() { # name root v4 [v6]
		local name=$1 v4=$3 v6=${4:-}
		echo "	server {"
		echo "		listen $v4:80;"
		echo "		listen $v4:443 ssl;"
		if [ -n "$v6" ]; then
			echo "		listen [$v6]:80;"
			echo "		listen [$v6]:443 ssl;"
		fi
		echo "		server_name $name;"
		echo "		root $2;"
		echo "		access_log $dir/log/$name.access.log lab;"
	}
	{
		cat <<-EOF
			worker_processes 1;
			user root root;
			pid $dir/nginx.pid;
			error_log $dir/log/nginx.error.log warn;
			events { worker_connections 512; }
			http {
				types {
					text/html html;
					application/json json;
					application/octet-stream whl tgz;
				}
				default_type application/octet-stream;
				client_body_temp_path $n/body;
				proxy_temp_path $n/proxy;
				fastcgi_temp_path $n/fastcgi;
				uwsgi_temp_path $n/uwsgi;
				scgi_temp_path $n/scgi;
				log_format lab '\$time_iso8601 \$remote_addr -> \$server_addr:\$server_port '
				               'host="\$host" sni="\$ssl_server_name" "\$request" \$status';
				access_log off;
				ssl_certificate $dir/pki/server.crt;
				ssl_certificate_key $dir/pki/server.key;
				ssl_protocols TLSv1.2 TLSv1.3;
		EOF
		lab_site pypi.org "$dir/www/pypi.org" "$PYPI_V4" "$PYPI_V6"
		cat <<-EOF
				# As PyPI: index pages fresh for 10 minutes, files for good,
				# so a client's cache (--cache) can answer a second run.
				location /simple/ { index index.html; add_header Cache-Control "max-age=600, public"; }
			}
		EOF
		lab_site files.pythonhosted.org "$dir/www/files.pythonhosted.org" "$FILES_V4" "$FILES_V6"
		echo '		add_header Cache-Control "max-age=365000000, immutable, public";'
		echo "	}"
		lab_site registry.npmjs.org "$dir/www/registry.npmjs.org" "$NPM_V4"
		cat <<-EOF
				# The packument lives at /NAME; the tarball at /NAME/-/FILE.tgz.
				# Cache lifetimes as registry.npmjs.org sends them.
				location / { default_type application/json; try_files \$uri \$uri/index.json =404;
					add_header Cache-Control "public, max-age=300"; }
				location ~ \.tgz$ { default_type application/octet-stream;
					add_header Cache-Control "public, immutable, max-age=31557600"; }
			}
		EOF
		lab_site github.com "$dir/www/github.com" "$GITHUB_V4"
		cat <<-EOF
				# git smart HTTP, read-only, through git-http-backend
				# (crates.io-index: the name cargo uses, without .git).
				location ~ ^/([^/]+/[^/]+\.git|rust-lang/crates\.io-index)(/.*)?$ {
					fastcgi_pass unix:$dir/fcgiwrap.sock;
					include /etc/nginx/fastcgi_params;
					fastcgi_param SCRIPT_FILENAME /usr/lib/git-core/git-http-backend;
					fastcgi_param GIT_PROJECT_ROOT $dir/git;
					fastcgi_param GIT_HTTP_EXPORT_ALL 1;
					fastcgi_param PATH_INFO \$uri;
					fastcgi_param REMOTE_USER \$remote_user;
				}
			}
		EOF
		lab_site codeload.github.com "$dir/www/codeload.github.com" "$CODELOAD_V4"
		echo "	}"
		lab_site static.crates.io "$dir/www/static.crates.io" "$CRATES_V4"
		echo '		add_header Cache-Control "max-age=31536000, immutable, public";'
		echo "	}"
		# An apt repository a test builds under www/deb.debian.org.
		lab_site deb.debian.org "$dir/www/deb.debian.org" "$DEB_V4"
		echo "	}"
		# Canaries: answer everything, log everything.
		lab_site evil.test "$dir/www/evil.test" "$EVIL_V4" "$EVIL_V6"
		cat <<-EOF
				# Real files where there are some (so a client that got
				# through would succeed, and the test could not miss it).
				location / { try_files \$uri @canary; }
				location @canary { return 200 "evil.test canary: this request was logged\n"; }
			}
		EOF
		lab_site metadata "$dir/www/evil.test" "$METADATA_V4"
		cat <<-EOF
				location / { return 200 "metadata canary: this request was logged\n"; }
			}
		EOF
		echo "}"
	} >"$dir/nginx.conf"
	unset -f lab_site
}

# Packet counters in inet for every canary address, whatever the protocol
# or port: the strongest "nothing got through" proof the lab offers.
lab_write_nft() {
	local dir=$1
	cat >"$dir/canary.nft" <<-EOF
		table inet lab {
			counter evil4 {}
			counter evil6 {}
			counter metadata {}
			chain input {
				type filter hook input priority 0; policy accept;
				ip daddr $EVIL_V4 counter name evil4
				ip6 daddr $EVIL_V6 counter name evil6
				ip daddr $METADATA_V4 counter name metadata
			}
		}
	EOF
}

lab_net_setup() {
	local dir=$1 ipid
	ipid=$(cat "$dir/inet.pid")
	local c=(lab_in_ns "$dir" client) i=(lab_in_ns "$dir" inet)
	"${c[@]}" ip link set lo up
	"${i[@]}" ip link set lo up
	"${c[@]}" ip link add lab0 type veth peer name lab1 netns "$ipid"
	"${c[@]}" ip addr add "$CLIENT_V4/24" dev lab0
	"${c[@]}" ip addr add "$CLIENT_V6/64" dev lab0 nodad
	"${c[@]}" ip link set lab0 up
	"${i[@]}" ip addr add "$INET_V4/24" dev lab1
	"${i[@]}" ip addr add "$INET_V6/64" dev lab1 nodad
	"${i[@]}" ip link set lab1 up
	# Servers live on inet's lo (this kernel may lack the dummy driver).
	local a
	for a in "$DNS_V4" "$PYPI_V4" "$FILES_V4" "$NPM_V4" "$GITHUB_V4" "$CODELOAD_V4" \
		"$CRATES_V4" "$DEB_V4" "$EVIL_V4" "$METADATA_V4"; do
		"${i[@]}" ip addr add "$a/32" dev lo
	done
	for a in "$DNS_V6" "$PYPI_V6" "$FILES_V6" "$EVIL_V6"; do
		"${i[@]}" ip addr add "$a/128" dev lo nodad
	done
	# The client reaches only the fake internet, through inet. No default
	# route anywhere: anything else is unreachable by construction.
	for a in "$DNS_V4/32" 198.51.100.0/24 203.0.113.0/24 "$METADATA_V4/32"; do
		"${c[@]}" ip route add "$a" via "$INET_V4"
	done
	"${c[@]}" ip -6 route add 2001:db8::/32 via "$INET_V6"
	# A hard check of the safety promise: neither namespace has a default
	# route, and the client has no interface besides lo and the veth.
	local ns
	for ns in client inet; do
		[ -z "$(lab_in_ns "$dir" $ns ip route show default)" ] || lab_die "$ns has a default route"
		[ -z "$(lab_in_ns "$dir" $ns ip -6 route show default)" ] || lab_die "$ns has a v6 default route"
	done
	[ "$(lab_in_ns "$dir" client ip -o link show | awk -F': ' '{print $2}' | sed 's/@.*//' | sort | tr '\n' ' ')" = "lab0 lo " ] ||
		lab_die "client namespace has unexpected interfaces"
}

lab_write_env() {
	local dir=$1
	cat >"$dir/lab.env" <<-EOF
		LAB_DIR=$dir
		LAB_SRC=$LAB_SRC
		LAB_PYTHON=$LAB_PYTHON
		LAB_CLIENT_NS=/proc/$(cat "$dir/client.pid")/ns/net
		LAB_INET_NS=/proc/$(cat "$dir/inet.pid")/ns/net
		LAB_CA=$dir/work/ca.crt
		LAB_DNS=$DNS_V4
		LAB_DNS6=$DNS_V6
		LAB_CLIENT_V4=$CLIENT_V4
		LAB_CLIENT_V6=$CLIENT_V6
		LAB_PYPI_V4=$PYPI_V4
		LAB_PYPI_V6=$PYPI_V6
		LAB_FILES_V4=$FILES_V4
		LAB_NPM_V4=$NPM_V4
		LAB_GITHUB_V4=$GITHUB_V4
		LAB_EVIL_V4=$EVIL_V4
		LAB_EVIL_V6=$EVIL_V6
		LAB_METADATA_V4=$METADATA_V4
		LAB_LATE_V4=$LATE_V4
		LAB_LATE_V6=$LATE_V6
		LAB_NEXT_V4=$NEXT_V4
		LAB_NEXT_V6=$NEXT_V6
		LAB_LOG=$dir/log
		LAB_WORK=$dir/work
	EOF
}

lab_wait_ready() {
	local dir=$1 deadline=$((SECONDS + 20))
	# Generous: a loaded CI machine runs several labs and builds at once.
	while [ "$SECONDS" -lt "$deadline" ]; do
		if [ -s "$dir/nginx.pid" ] && [ -S "$dir/fcgiwrap.sock" ] &&
			[ -s "$dir/log/canary.ready" ] && [ -s "$dir/log/canary-client.ready" ] &&
			lab_in_ns "$dir" client dig +time=1 +tries=1 +short "@$DNS_V4" pypi.org 2>/dev/null |
			grep -qx "$PYPI_V4"; then
			return 0
		fi
		sleep 0.02
	done
	local f
	for f in "$dir"/log/*.log "$dir"/log/*.out; do
		[ -s "$f" ] && { echo "--- $f"; tail -n 20 "$f"; } >&2
	done
	lab_die "servers did not come up within 20 s"
}

lab_up() {
	local dir=$1
	[ "$(id -u)" -eq 0 ] || lab_die "needs root (creates network namespaces)"
	local p
	for p in unshare nsenter ip dnsmasq nginx fcgiwrap openssl git dig nft; do
		command -v "$p" >/dev/null 2>&1 || lab_die "$p is not installed (scripts/setup.sh installs it)"
	done
	[ -x "$LAB_PYTHON" ] || lab_die "$LAB_PYTHON is not installed"
	[ -x /usr/lib/git-core/git-http-backend ] || lab_die "git-http-backend is not installed"
	mkdir -p "$dir"
	dir=$(cd "$dir" && pwd)
	[ -z "$(ls -A "$dir")" ] || lab_die "$dir is not empty"
	# Readable by the unprivileged test user and inside the sandbox.
	chmod 755 "$dir"
	mkdir -p "$dir/log" "$dir/tmp" "$dir/www" "$dir/work"
	: >"$dir/procs"
	lab_make_ns "$dir" client
	lab_make_ns "$dir" inet
	lab_net_setup "$dir"
	lab_make_pki "$dir"
	# airlock's sandbox shows the host read-only but hides /tmp, /var/tmp
	# and the home directories: of the lab, it sees only the work tree (the
	# workdir of every run). Clients inside must find the CA there.
	install -m 644 "$dir/pki/ca.crt" "$dir/work/ca.crt"
	"$LAB_PYTHON" "$LAB_SRC/labgen.py" "$dir"
	lab_make_git "$dir"
	lab_write_dnsmasq_conf "$dir"
	lab_write_nginx_conf "$dir"
	lab_write_nft "$dir"
	lab_in_ns "$dir" inet nft -f "$dir/canary.nft"
	lab_write_env "$dir"
	# Logs the tests read must exist even when nothing was logged.
	touch "$dir/log/dnsmasq.log" "$dir/log/canary.log"
	lab_spawn "$dir" inet "$dir/log/dnsmasq.out" dnsmasq --keep-in-foreground --conf-file="$dir/dnsmasq.conf"
	lab_spawn "$dir" inet "$dir/log/fcgiwrap.out" fcgiwrap -s "unix:$dir/fcgiwrap.sock"
	lab_spawn "$dir" inet "$dir/log/nginx.out" nginx -p "$dir/nginx" -c "$dir/nginx.conf" -e "$dir/log/nginx.error.log" -g 'daemon off;'
	local canary=("$LAB_PYTHON" "$LAB_SRC/canary.py" --log "$dir/log/canary.log" --ready "$dir/log/canary.ready")
	for p in $CANARY_TCP_PORTS; do canary+=(--tcp "$EVIL_V4:$p" --tcp "[$EVIL_V6]:$p"); done
	for p in $CANARY_UDP_PORTS; do canary+=(--udp "$EVIL_V4:$p" --udp "[$EVIL_V6]:$p"); done
	canary+=(--udp "$METADATA_V4:53" --tcp "$METADATA_V4:8080")
	lab_spawn "$dir" inet "$dir/log/canary.out" "${canary[@]}"
	# The host's own services, as the supervisor would see them: anything
	# that reaches these came from a proxy that connected to its own host.
	lab_spawn "$dir" client "$dir/log/canary-client.out" "$LAB_PYTHON" "$LAB_SRC/canary.py" \
		--log "$dir/log/canary.log" --ready "$dir/log/canary-client.ready" \
		--tcp 127.0.0.1:80 --tcp "[::1]:80" --tcp "$CLIENT_V4:80" --tcp "$CLIENT_V4:8080" \
		--udp 127.0.0.1:5353
	lab_wait_ready "$dir"
	echo "lab: up in $dir (client ns $(cat "$dir/client.pid"), inet ns $(cat "$dir/inet.pid"))"
}

# Every pid whose network namespace is the one held by DIR/NAME.pid.
lab_pids_in_ns() {
	local holder p
	holder=$(cat "$1/$2.pid" 2>/dev/null) || return 0
	[ -e "/proc/$holder/ns/net" ] || return 0
	for p in /proc/[0-9]*; do
		p=${p#/proc/}
		[ "$p" = "$holder" ] && continue
		# -ef compares the namespaces' device and inode, without a fork.
		[ "/proc/$p/ns/net" -ef "/proc/$holder/ns/net" ] 2>/dev/null && lab_alive "$p" && echo "$p"
	done
	return 0
}

# True while pid $1 runs (a zombie has finished: where pid 1 does not reap
# promptly, an orphan's zombie lingers, and waiting for it would hang).
lab_alive() {
	local stat
	{ read -r stat <"/proc/$1/stat"; } 2>/dev/null || return 1
	stat=${stat##*) }
	[ "${stat%% *}" != Z ]
}

# Signal every pid in $2..., then wait up to 2 s for all of them to end.
lab_stop_pids() {
	local sig=$1 p i any
	shift
	for p in "$@"; do kill -s "$sig" "$p" 2>/dev/null || true; done
	for i in $(seq 100); do
		any=0
		for p in "$@"; do
			if lab_alive "$p"; then any=1; break; fi
		done
		[ $any = 0 ] && return 0
		sleep 0.02
	done
	return 0
}

lab_down() {
	local dir=$1 p
	[ -d "$dir" ] || return 0
	dir=$(cd "$dir" && pwd)
	# Refuse to remove something that is not a lab.
	[ -e "$dir/client.pid" ] || [ -e "$dir/procs" ] || [ -z "$(ls -A "$dir")" ] ||
		lab_die "$dir does not look like a lab directory; not removing it"
	# The servers first, politely, so they reap their own children; then
	# anything still inside either namespace (a test's stray process).
	# shellcheck disable=SC2046 # pid lists, split on purpose
	lab_stop_pids TERM $(cat "$dir/procs" 2>/dev/null || true)
	# shellcheck disable=SC2046
	lab_stop_pids KILL $(lab_pids_in_ns "$dir" client) $(lab_pids_in_ns "$dir" inet)
	# The holders last: with nothing else inside, the namespaces go with them.
	# shellcheck disable=SC2046
	lab_stop_pids KILL $(cat "$dir/client.pid" "$dir/inet.pid" 2>/dev/null || true)
	rm -rf "$dir"
}

# Run CMD in the client namespace inside a private mount namespace where
# /etc/resolv.conf and /etc/hosts are the lab's. The mounts vanish with the
# last process of that namespace.
lab_exec() {
	local dir=$1
	shift
	dir=$(cd "$dir" && pwd)
	[ $# -gt 0 ] || lab_die "exec: no command"
	nsenter --net="$(lab_ns_of "$dir" client)" -- unshare --mount --propagation private -- \
		/bin/sh -c 'mount --bind "$1/resolv.conf" /etc/resolv.conf && mount --bind "$1/hosts" /etc/hosts && shift && exec "$@"' \
		lab-exec "$dir" "$@"
}

lab_main() {
	local cmd=${1:-}
	[ $# -ge 2 ] || lab_die "usage: lab.sh up|down|exec|inet|status DIR [CMD...]"
	shift
	case $cmd in
	up)
		# On any failure, leave nothing half-built behind.
		LAB_UP_DIR=$1
		trap 'if [ $? != 0 ]; then echo "lab: set-up failed, tearing down" >&2; lab_down "$LAB_UP_DIR"; fi' EXIT
		lab_up "$1"
		;;
	down) lab_down "$1" ;;
	exec) lab_exec "$@" ;;
	inet) local d=$1; shift; lab_in_ns "$(cd "$d" && pwd)" inet "$@" ;;
	status) cat "$1/lab.env" ;;
	*) lab_die "unknown command '$cmd'; usage: lab.sh up|down|exec|inet|status DIR [CMD...]" ;;
	esac
}

# Executed: the command line above. Sourced (the tests do): only the
# functions, so the servers are children of the caller's shell, which reaps
# them (an orphan's zombie could outlive the lab where pid 1 does not reap).
if [ "${BASH_SOURCE[0]}" = "$0" ]; then
	lab_main "$@"
fi
