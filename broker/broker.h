/* The broker (DESIGN.md, "Confinement"): a child process that holds the
 * compiled policy and the resolver (dns/resolver.h: its cache, CNAME
 * policy and hosts file live here), and the only one of the serving
 * processes that may create and connect sockets. The worker asks it,
 * over a SOCK_SEQPACKET socketpair (broker/msg.h), to connect NAME:PORT or
 * ADDR:PORT; the broker decides again from the policy (it never trusts the
 * worker's verdict), resolves, applies the deny cidr rules and the address
 * guard to every address, connects with the proxy's timeout, and passes
 * the connected socket back (SCM_RIGHTS). It also answers the DNS
 * listener's questions (RESOLVE), decided again the same way, and keeps
 * the record of what it told the sandbox, by which it checks a
 * transparent connection's original destination. It runs confined: no_new_privs,
 * Landlock with no filesystem access, a seccomp allowlist (ENOSYS for the
 * rest, other ABIs killed). broker/client.h is the worker's side. */
#ifndef AIRLOCK_BROKER_BROKER_H
#define AIRLOCK_BROKER_BROKER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/types.h>

#include "dns/resolver.h"

struct policy;
struct tlsca;

/* The proxy's upstream connect timeout (proxy/conn.h,
 * PROXY_DEFAULT_CONNECT_MS): also the deadline for resolving. */
#define BROKER_DEFAULT_CONNECT_MS 10000
/* Requests one worker may have in flight; more are refused (E_BUSY). */
#define BROKER_DEFAULT_INFLIGHT 256
#define BROKER_MAX_INFLIGHT     4096

struct broker_cfg {
	const struct policy *policy; /* borrowed; the child keeps its copy */
	/* The task CA (tls/ca.h) for MINT, made before the broker is forked
	 * (the child keeps its copy). Whoever made it frees it before it
	 * forks a process that must not hold the CA's key (the worker).
	 * NULL when no rule inspects: every MINT is refused. Borrowed. */
	struct tlsca *ca;
	/* The resolver's (dns/resolver.h): nameservers, TTL cap, timeout,
	 * hosts file (read before confinement). Its policy is the one above. */
	struct resolver_config dns;
	uint32_t connect_timeout_ms; /* 0 = BROKER_DEFAULT_CONNECT_MS */
	unsigned max_inflight;       /* 0 = BROKER_DEFAULT_INFLIGHT */
};

/* Fork the broker. The child keeps only its end of a fresh socketpair and
 * stderr (every other inherited descriptor is closed), builds its loop,
 * resolver and host-address watch, confines itself and serves until the
 * worker's end closes; it never returns. Returns the worker's end (owned
 * by the caller, CLOEXEC, nonblocking) with the child's pid in *pid, or
 * -1 with a one-line reason in err. It does not wait for the child: until
 * the child has closed what it inherited (before it serves: its first
 * reply comes after), a descriptor the caller closes may still be open
 * there. A child that cannot confine itself
 * exits (status 1) with the step named on stderr: the worker's first
 * request then fails (fail closed). */
int broker_spawn(const struct broker_cfg *cfg, pid_t *pid, char *err, size_t errlen);

/* broker_spawn in two steps, for a caller that needs the worker's end
 * before the broker may run (cli/cmd_run.c forks it after CMD's go, off
 * the start-up path): broker_socket returns the worker's end (owned,
 * CLOEXEC, nonblocking) and the child's in *child (owned, CLOEXEC), or -1
 * with a reason; broker_start forks the broker on child (always taken:
 * closed in the caller), 0 or -1 with a reason. Requests sent meanwhile
 * wait in the socket for the broker, which reads none before it is
 * confined. */
int broker_socket(int *child, char *err, size_t errlen);
int broker_start(const struct broker_cfg *cfg, int child, pid_t *pid, char *err, size_t errlen);

/* End the broker spawned as pid (0: none) once its socket is closed (no
 * request is left for it): SIGKILL, not waited for. broker_reap waits
 * for it; called as late as the caller can, the kernel has ended it by
 * then (the last lines of the log are written in between). */
void broker_stop(pid_t pid);
void broker_reap(pid_t pid);

/* The child's body, for broker_spawn and tests: serve fd (owned) with cfg
 * and return the exit status when the worker's end closes (0), or 1 after
 * a set-up failure, logged. confine false is for in-process use only. */
int broker_serve(const struct broker_cfg *cfg, int fd, bool confine);

#endif
