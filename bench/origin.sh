# The fake internet both proxy benchmarks use (bench_proxy.sh, bench_cpu.sh),
# set up inside the private network and mount namespace the caller made:
# sourced, with S (a scratch directory), ORIGIN (the name), ORIGIN_IP and
# the PIDS array set. Nothing here reaches outside the namespace.

# The namespace's DNS: dnsmasq on 127.0.0.1:53 answering the origin's name,
# TTL 300 s as a real name has; authoritative for bench.test (so AAAA is an
# empty answer, as from a real server); any other name is refused, never
# forwarded (--no-resolv and no --server). /etc/resolv.conf names it, so
# libc resolves there too. Sets DNS_PID.
origin_dns() {
	printf 'nameserver 127.0.0.1\n' >"$S/resolv.conf"
	mount --bind "$S/resolv.conf" /etc/resolv.conf
	dnsmasq --keep-in-foreground --no-resolv --no-hosts --user=root --group=root \
		--pid-file="$S/dnsmasq.pid" --listen-address=127.0.0.1 --bind-interfaces --port=53 \
		--host-record="$ORIGIN,$ORIGIN_IP" --local=/bench.test/ --local-ttl=300 \
		--cache-size=10000 --dns-forward-max=1000 2>"$S/dnsmasq.err" &
	DNS_PID=$!
	PIDS+=($DNS_PID)
}

# nginx on ORIGIN_IP: port 18080 plain HTTP, 18443 TLS with a throwaway
# ECDSA P-256 certificate for the name ($S/origin.pem, which the clients
# trust), `/` answering "ok\n". $1: more http-level directives, $2: more
# server-level ones (either may be empty).
origin_nginx() {
	openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 1 \
		-subj "/CN=$ORIGIN" -addext "subjectAltName=DNS:$ORIGIN" \
		-keyout "$S/origin.key" -out "$S/origin.pem" 2>"$S/openssl.err"
	mkdir -p "$S/nginx"
	cat >"$S/nginx.conf" <<-CONF
		worker_processes 1;
		user root root;
		daemon off;
		pid $S/nginx.pid;
		error_log $S/nginx-error.log warn;
		worker_rlimit_nofile 100000;
		events { worker_connections 60000; }
		http {
			access_log off;
			$1
			client_body_temp_path $S/nginx/body;
			proxy_temp_path $S/nginx/proxy;
			fastcgi_temp_path $S/nginx/fastcgi;
			uwsgi_temp_path $S/nginx/uwsgi;
			scgi_temp_path $S/nginx/scgi;
			ssl_certificate $S/origin.pem;
			ssl_certificate_key $S/origin.key;
			ssl_session_cache off;
			ssl_session_tickets off;
			server {
				listen $ORIGIN_IP:18080 backlog=4096;
				listen $ORIGIN_IP:18443 ssl backlog=4096;
				server_name $ORIGIN;
				location = / { return 200 "ok\n"; }
				$2
			}
		}
	CONF
	nginx -c "$S/nginx.conf" &
	PIDS+=($!)
}

# Wait (up to 20 s) until something listens on ADDR PORT.
wait_port() {
	local i
	for i in $(seq 400); do
		(exec 3<>"/dev/tcp/$1/$2") 2>/dev/null && return 0
		sleep 0.05
	done
	echo "nothing listens on $1 port $2" >&2
	return 1
}
