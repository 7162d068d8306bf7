/* hostaddr_parse gets rtnetlink datagrams (kernel bytes, but bounded and
 * fuzzed like any parser). Whatever arrives: no crash, no read outside
 * the buffer, every message handed on well-formed; and the messages,
 * applied to a small guard_hosts set as the watch applies them, keep the
 * set within its bound and its answers consistent. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <netinet/in.h>

#include "nft/hostaddr.h"
#include "policy/guard.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define FUZZ_BOUND 8

static void
apply(const struct hostaddr_msg *m, void *arg)
{
	struct guard_hosts *h = arg;
	struct sockaddr_storage ss;

	if (m->kind != HOSTADDR_NEW && m->kind != HOSTADDR_DEL && m->kind != HOSTADDR_DONE &&
	    m->kind != HOSTADDR_ERROR)
		abort();
	if (m->kind == HOSTADDR_ERROR && (m->error < 0 || m->error > 4095))
		abort();
	if (m->kind != HOSTADDR_NEW && m->kind != HOSTADDR_DEL)
		return;
	if (m->addr.family != AF_INET && m->addr.family != AF_INET6)
		abort();
	memset(&ss, 0, sizeof(ss));
	if (m->addr.family == AF_INET) {
		struct sockaddr_in *sin = (struct sockaddr_in *)&ss;

		sin->sin_family = AF_INET;
		memcpy(&sin->sin_addr, m->addr.addr, 4);
	} else {
		struct sockaddr_in6 *sin6 = (struct sockaddr_in6 *)&ss;

		sin6->sin6_family = AF_INET6;
		memcpy(&sin6->sin6_addr, m->addr.addr, 16);
	}
	if (m->kind == HOSTADDR_NEW) {
		int r = guard_hosts_add(h, &m->addr);

		/* Added while the set could answer: it answers OWN for a
		 * public address (a non-public one is not kept). */
		if (r == 0 && guard_hosts_state(h) == GUARD_HOSTS_KNOWN &&
		    guard_classify((struct sockaddr *)&ss) == GUARD_PUBLIC &&
		    guard_hosts_lookup(h, (struct sockaddr *)&ss) != GUARD_HOST_OWN)
			abort();
		if (r < 0 && guard_hosts_state(h) != GUARD_HOSTS_FULL)
			abort();
	} else {
		guard_hosts_del(h, &m->addr);
	}
	if (guard_hosts_count(h) > FUZZ_BOUND)
		abort();
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	/* A copy of exactly size bytes, so ASan sees any over-read, in
	 * malloc's alignment, as a recv buffer would be. */
	uint8_t *buf = malloc(size > 0 ? size : 1);
	struct guard_hosts *h = guard_hosts_new(FUZZ_BOUND);
	int n;

	if (buf == NULL || h == NULL) {
		free(buf);
		guard_hosts_free(h);
		return 0;
	}
	guard_hosts_set_state(h, GUARD_HOSTS_KNOWN);
	memcpy(buf, data, size);
	n = hostaddr_parse(buf, size, apply, h);
	/* Every message is at least a header (16 bytes). */
	if (n < -1 || (n > 0 && (size_t)n > size / 16))
		abort();
	guard_hosts_free(h);
	free(buf);
	return 0;
}
