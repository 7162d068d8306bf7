/* The host-address watch (nft/hostaddr.h) against the real kernel, in a
 * network namespace this program creates (a user namespace too when not
 * root): changes are followed; a flood of changes against a tiny receive
 * buffer overruns it (ENOBUFS) and the watch reads the list again and ends
 * equal to the kernel's; the same address twice (two prefix lengths)
 * stays the host's until the last goes; over the set's bound every lookup
 * is UNKNOWN until an address goes and a fresh read fits; a dump whose
 * every reply is lost (as an overrun can lose the kernel's error or end)
 * is noticed by its silence and asked again, at start and in the loop.
 *
 * Addresses are added only inside the new namespace, and only on its lo.
 *
 *   hostaddr_e2e     exit 0, 1, or 77 (cannot create the namespace here) */
#include <errno.h>
#include <sched.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <arpa/inet.h>
#include <linux/if_addr.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <netinet/in.h>

#include <event2/event.h>
#include <libmnl/libmnl.h>

#include "common/util.h"
#include "nft/hostaddr.h"
#include "nft/nft.h"
#include "policy/guard.h"

#define SKIP    77
#define WAIT_MS 5000
#define LO      1u
/* The flood: enough changes to overrun the tiny buffer many times. */
#define FLOOD_V4 250
#define FLOOD_V6 300

static int failures;

/* cond is evaluated once: it may change the namespace. */
#define CHECK(cond, ...)                                                                           \
	do {                                                                                       \
		bool ok_ = (cond);                                                                 \
		printf(ok_ ? "ok   " : "FAIL ");                                                   \
		failures += !ok_;                                                                  \
		printf(__VA_ARGS__);                                                               \
		printf("\n");                                                                      \
	} while (0)

static int
cannot_run(const char *why)
{
	const char *must = getenv("AIRLOCK_MUST_WORK");

	fprintf(stderr, "hostaddr_e2e: cannot run: %s: %s\n", why, strerror(errno));
	return must != NULL && strcmp(must, "1") == 0 ? 1 : SKIP;
}

/* --- changing the namespace's addresses (test side, libmnl) ------------- */

static struct mnl_socket *ctl;
static uint32_t ctl_seq = 1;

static int
ipaddr(uint16_t type, const char *text, uint8_t plen)
{
	uint64_t buf[512 / sizeof(uint64_t)], rbuf[4096 / sizeof(uint64_t)];
	struct nlmsghdr *nlh = mnl_nlmsg_put_header(buf);
	struct ifaddrmsg *ifa;
	uint8_t bin[16];
	int family = strchr(text, ':') != NULL ? AF_INET6 : AF_INET;
	size_t alen = family == AF_INET ? 4 : 16;
	uint32_t seq = ctl_seq++;
	ssize_t n;

	if (inet_pton(family, text, bin) != 1)
		return -1;
	nlh->nlmsg_type = type;
	nlh->nlmsg_flags = NLM_F_REQUEST | NLM_F_ACK | (type == RTM_NEWADDR ? NLM_F_CREATE : 0);
	nlh->nlmsg_seq = seq;
	ifa = mnl_nlmsg_put_extra_header(nlh, sizeof(*ifa));
	ifa->ifa_family = (uint8_t)family;
	ifa->ifa_prefixlen = plen;
	ifa->ifa_flags = family == AF_INET6 ? IFA_F_NODAD : 0;
	ifa->ifa_index = LO;
	mnl_attr_put(nlh, IFA_LOCAL, alen, bin);
	mnl_attr_put(nlh, IFA_ADDRESS, alen, bin);
	if (mnl_socket_sendto(ctl, nlh, nlh->nlmsg_len) < 0)
		return -1;
	n = mnl_socket_recvfrom(ctl, rbuf, sizeof(rbuf));
	if (n < 0)
		return -1;
	return mnl_cb_run(rbuf, (size_t)n, seq, mnl_socket_get_portid(ctl), NULL, NULL) < 0 ? -1
	                                                                                    : 0;
}

static void
flood_text(int i, char *out, size_t outlen)
{
	if (i < FLOOD_V4)
		snprintf(out, outlen, "198.51.100.%d", i + 1);
	else
		snprintf(out, outlen, "2001:db8:6::%x", i - FLOOD_V4 + 1);
}

/* --- reading the set --------------------------------------------------------- */

static enum guard_host
look(const struct guard_hosts *h, const char *text)
{
	struct sockaddr_storage ss;

	memset(&ss, 0, sizeof(ss));
	if (inet_pton(AF_INET, text, &((struct sockaddr_in *)&ss)->sin_addr) == 1)
		ss.ss_family = AF_INET;
	else if (inet_pton(AF_INET6, text, &((struct sockaddr_in6 *)&ss)->sin6_addr) == 1)
		ss.ss_family = AF_INET6;
	return guard_hosts_lookup(h, (struct sockaddr *)&ss);
}

/* Run the loop until text reads want in h (or WAIT_MS passes). */
static bool
pump_until(struct event_base *base, const struct guard_hosts *h, const char *text,
           enum guard_host want)
{
	uint64_t end = now_ms() + WAIT_MS;

	while (now_ms() < end) {
		event_base_loop(base, EVLOOP_NONBLOCK);
		if (look(h, text) == want)
			return true;
		usleep(1000);
	}
	return false;
}

static void
pump_for(struct event_base *base, unsigned ms)
{
	uint64_t end = now_ms() + ms;

	while (now_ms() < end) {
		event_base_loop(base, EVLOOP_NONBLOCK);
		usleep(1000);
	}
}

/* Run the loop until the set is KNOWN and no change is pending. */
static bool
pump_known(struct event_base *base, const struct guard_hosts *h)
{
	uint64_t end = now_ms() + WAIT_MS;
	int quiet = 0;

	while (now_ms() < end) {
		event_base_loop(base, EVLOOP_NONBLOCK);
		quiet = guard_hosts_state(h) == GUARD_HOSTS_KNOWN ? quiet + 1 : 0;
		if (quiet >= 20)
			return true;
		usleep(1000);
	}
	return false;
}

static int
enter_netns(void)
{
	struct stat before, after;

	if (stat("/proc/self/ns/net", &before) != 0)
		return cannot_run("stat /proc/self/ns/net");
	if (unshare(CLONE_NEWNET) != 0 && unshare(CLONE_NEWUSER | CLONE_NEWNET) != 0)
		return cannot_run("unshare(CLONE_NEWNET), also with CLONE_NEWUSER");
	/* Never touch an address of a namespace this program did not make. */
	if (stat("/proc/self/ns/net", &after) != 0 || after.st_ino == before.st_ino) {
		fprintf(stderr, "hostaddr_e2e: still in the caller's network namespace\n");
		exit(1);
	}
	return 0;
}

int
main(void)
{
	struct event_base *base;
	struct guard_hosts *h, *small;
	struct hostaddr_watch *w, *ws;
	struct hostaddr_watch_opts tiny = {.rcvbuf = 1024};
	struct hostaddr_watch_opts lose_first = {.lose_dumps = 1u << 0};
	struct hostaddr_watch_opts lose_second = {.lose_dumps = 1u << 1};
	struct guard_hosts *h3;
	struct hostaddr_watch *w3;
	char err[256], text[64];
	unsigned before;
	bool all;
	int r;

	setvbuf(stdout, NULL, _IOLBF, 0);
	if ((r = enter_netns()) != 0)
		return r;
	if (nft_net_setup(err, sizeof(err)) != 0) {
		fprintf(stderr, "hostaddr_e2e: %s\n", err);
		return 1;
	}
	ctl = mnl_socket_open(NETLINK_ROUTE);
	if (ctl == NULL || mnl_socket_bind(ctl, 0, MNL_SOCKET_AUTOPID) < 0) {
		perror("hostaddr_e2e: control socket");
		return 1;
	}
	base = event_base_new();
	h = guard_hosts_new(0);
	if (base == NULL || h == NULL)
		return 1;

	/* Subscribed and dumped before returning: a namespace whose only
	 * addresses are loopback and the egress sources (not public). */
	w = hostaddr_watch_new_opts(base, h, &tiny, err, sizeof(err));
	CHECK(w != NULL, "watch started%s%s", w == NULL ? ": " : "", w == NULL ? err : "");
	if (w == NULL)
		return 1;
	CHECK(guard_hosts_state(h) == GUARD_HOSTS_KNOWN && guard_hosts_count(h) == 0,
	      "first dump read before returning: KNOWN, no public address (state %d, %zu)",
	      guard_hosts_state(h), guard_hosts_count(h));

	/* The first dump's replies are all lost: the watch must not wait for
	 * them until its start-up bound, but ask again. */
	h3 = guard_hosts_new(0);
	w3 = h3 != NULL ? hostaddr_watch_new_opts(base, h3, &lose_first, err, sizeof(err)) : NULL;
	CHECK(w3 != NULL && guard_hosts_state(h3) == GUARD_HOSTS_KNOWN &&
	              hostaddr_watch_rereads(w3) >= 1,
	      "a first dump whose replies are lost is asked again: KNOWN at start%s%s",
	      w3 == NULL ? ": " : "", w3 == NULL ? err : "");
	hostaddr_watch_free(w3);
	guard_hosts_free(h3);

	/* Changes are followed. */
	CHECK(ipaddr(RTM_NEWADDR, "203.0.113.5", 24) == 0, "added 203.0.113.5/24");
	CHECK(pump_until(base, h, "203.0.113.5", GUARD_HOST_OWN), "203.0.113.5 is the host's");
	CHECK(ipaddr(RTM_NEWADDR, "2001:db8:5::5", 64) == 0, "added 2001:db8:5::5/64");
	CHECK(pump_until(base, h, "2001:db8:5::5", GUARD_HOST_OWN), "2001:db8:5::5 is the host's");
	CHECK(look(h, "203.0.113.6") == GUARD_HOST_OTHER, "its neighbour is not");

	/* A flood while the loop does not read: the tiny buffer overruns. */
	before = hostaddr_watch_rereads(w);
	for (int i = 0; i < FLOOD_V4 + FLOOD_V6; i++) {
		flood_text(i, text, sizeof(text));
		if (ipaddr(RTM_NEWADDR, text, i < FLOOD_V4 ? 32 : 128) != 0) {
			CHECK(0, "adding %s: %s", text, strerror(errno));
			return 1;
		}
	}
	CHECK(pump_known(base, h), "the set is KNOWN again after the flood");
	CHECK(hostaddr_watch_rereads(w) > before, "the overrun made it read the list again (%u)",
	      hostaddr_watch_rereads(w) - before);
	all = true;
	for (int i = 0; i < FLOOD_V4 + FLOOD_V6; i++) {
		flood_text(i, text, sizeof(text));
		all = all && look(h, text) == GUARD_HOST_OWN;
	}
	CHECK(all && guard_hosts_count(h) == 2 + FLOOD_V4 + FLOOD_V6,
	      "every flooded address is the host's (%zu entries)", guard_hosts_count(h));

	/* A flood of deletions: nothing stale remains. */
	before = hostaddr_watch_rereads(w);
	for (int i = 0; i < FLOOD_V4 + FLOOD_V6; i++) {
		flood_text(i, text, sizeof(text));
		if (ipaddr(RTM_DELADDR, text, i < FLOOD_V4 ? 32 : 128) != 0) {
			CHECK(0, "deleting %s: %s", text, strerror(errno));
			return 1;
		}
	}
	CHECK(pump_known(base, h), "KNOWN again after the deletions");
	all = true;
	for (int i = 0; i < FLOOD_V4 + FLOOD_V6; i++) {
		flood_text(i, text, sizeof(text));
		all = all && look(h, text) == GUARD_HOST_OTHER;
	}
	CHECK(all && guard_hosts_count(h) == 2,
	      "no deleted address is the host's (%zu entries, "
	      "%u re-reads)",
	      guard_hosts_count(h), hostaddr_watch_rereads(w) - before);
	CHECK(look(h, "203.0.113.5") == GUARD_HOST_OWN, "203.0.113.5 still is");

	/* The same address twice (two prefix lengths): the host's until the
	 * last one goes. */
	CHECK(ipaddr(RTM_NEWADDR, "203.0.113.9", 32) == 0 &&
	              ipaddr(RTM_NEWADDR, "203.0.113.9", 24) == 0,
	      "added 203.0.113.9/32 and /24");
	CHECK(pump_until(base, h, "203.0.113.9", GUARD_HOST_OWN), "203.0.113.9 is the host's");
	CHECK(ipaddr(RTM_DELADDR, "203.0.113.9", 32) == 0, "deleted 203.0.113.9/32");
	/* Give the deletion time to arrive, then it must still be OWN. */
	pump_for(base, 300);
	CHECK(look(h, "203.0.113.9") == GUARD_HOST_OWN, "203.0.113.9/24 keeps it the host's");
	CHECK(ipaddr(RTM_DELADDR, "203.0.113.9", 24) == 0, "deleted 203.0.113.9/24");
	CHECK(pump_until(base, h, "203.0.113.9", GUARD_HOST_OTHER), "now it is not");

	/* A set bounded at 3 entries: over it, every lookup is UNKNOWN;
	 * when an address goes, a fresh read that fits makes it KNOWN. */
	small = guard_hosts_new(3);
	/* Its second dump (the read again below) loses every reply. */
	ws = small != NULL ? hostaddr_watch_new_opts(base, small, &lose_second, err, sizeof(err))
	                   : NULL;
	CHECK(ws != NULL && guard_hosts_state(small) == GUARD_HOSTS_KNOWN,
	      "a second watch, bound 3, starts KNOWN with 2 entries");
	if (ws == NULL)
		return 1;
	/* /32 each: a /24 would make .11 a secondary of .10, and the kernel
	 * deletes secondaries with their primary. */
	CHECK(ipaddr(RTM_NEWADDR, "192.0.2.10", 32) == 0 &&
	              ipaddr(RTM_NEWADDR, "192.0.2.11", 32) == 0,
	      "added 192.0.2.10 and .11: 4 entries");
	CHECK(pump_until(base, small, "198.51.100.200", GUARD_HOST_UNKNOWN) &&
	              guard_hosts_state(small) == GUARD_HOSTS_FULL,
	      "over the bound: FULL, and even a stranger is UNKNOWN");
	CHECK(look(h, "192.0.2.11") == GUARD_HOST_OWN, "the unbounded set is unaffected");
	before = hostaddr_watch_rereads(ws);
	CHECK(ipaddr(RTM_DELADDR, "192.0.2.10", 32) == 0, "deleted 192.0.2.10: 3 entries");
	CHECK(pump_known(base, small) && hostaddr_watch_rereads(ws) > before + 1,
	      "read again after the deletion (the first read's replies lost, so twice), and it "
	      "fits: KNOWN (%u re-reads)",
	      hostaddr_watch_rereads(ws) - before);
	CHECK(look(small, "192.0.2.11") == GUARD_HOST_OWN &&
	              look(small, "192.0.2.10") == GUARD_HOST_OTHER &&
	              look(small, "198.51.100.200") == GUARD_HOST_OTHER,
	      "and right: .11 the host's, .10 and a stranger not (%d %d %d, %zu entries)",
	      look(small, "192.0.2.11"), look(small, "192.0.2.10"), look(small, "198.51.100.200"),
	      guard_hosts_count(small));

	/* Without its watch the set fails closed. */
	hostaddr_watch_free(ws);
	CHECK(guard_hosts_state(small) == GUARD_HOSTS_LOST &&
	              look(small, "198.51.100.200") == GUARD_HOST_UNKNOWN,
	      "a set whose watch is gone is LOST: UNKNOWN");
	hostaddr_watch_free(w);
	guard_hosts_free(small);
	guard_hosts_free(h);
	event_base_free(base);
	mnl_socket_close(ctl);
	printf("%s\n", failures == 0 ? "hostaddr_e2e: all passed" : "hostaddr_e2e: FAILED");
	return failures == 0 ? 0 : 1;
}
