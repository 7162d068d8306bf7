/* The host's own addresses, from rtnetlink, into the guard's set.
 *
 * One socket, subscribed to both address groups, carries the notifications
 * and our dumps: the kernel queues a dump's parts when it reads the state
 * and a notification when the state changes, so handling the socket's
 * messages in order leaves the set equal to the kernel's list, whatever
 * happened during the dump. That holds while nothing is lost; whenever
 * something may have been (an overrun, a truncated or malformed datagram,
 * a dump marked interrupted), the set is emptied and read again, and reads
 * as "unknown" (every public address refused) until that dump ends.
 *
 * The bytes come from the kernel, not from the sandbox (which lives in
 * another network namespace and cannot reach this socket); the parser is
 * bounded all the same, and fuzzed (tests/fuzz/fuzz_hostaddr.c). */
#include "nft/hostaddr.h"

#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include <linux/if_addr.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <netinet/in.h>

#include <event2/event.h>
#include <libmnl/libmnl.h>

#include "common/log.h"
#include "common/util.h"

/* One datagram: a notification is ~100 bytes; the kernel sizes a dump part
 * to a page (at most 8 KiB) until a bigger read buffer asks for more.
 * Anything longer arrives truncated and counts as lost. */
#define HOSTADDR_RECV_SIZE 8192
/* Datagrams per wake-up, so a burst of changes cannot starve the proxy. */
#define HOSTADDR_READS_PER_EVENT 32
/* A dump request the socket refused (memory) is sent again after this. */
#define HOSTADDR_RETRY_MS 100
/* A dump from which nothing has come for this long is asked again. */
#define HOSTADDR_STALL_MS 250

/* --- the parser ---------------------------------------------------------- */

struct addr_attrs {
	const struct nlattr *local, *address;
};

static int
addr_attr(const struct nlattr *attr, void *data)
{
	struct addr_attrs *tb = data;

	/* Attributes newer than this code are skipped, not refused. */
	switch (mnl_attr_get_type(attr)) {
	case IFA_LOCAL:
		tb->local = attr;
		break;
	case IFA_ADDRESS:
		tb->address = attr;
		break;
	default:
		break;
	}
	return MNL_CB_OK;
}

/* An RTM_NEWADDR/DELADDR into m->addr: 1, 0 to skip (another family), -1
 * malformed. */
static int
parse_addr(const struct nlmsghdr *nlh, struct hostaddr_msg *m)
{
	const struct ifaddrmsg *ifa;
	struct addr_attrs tb = {0};
	const struct nlattr *a;
	size_t want;

	if (mnl_nlmsg_get_payload_len(nlh) < sizeof(*ifa))
		return -1;
	ifa = mnl_nlmsg_get_payload(nlh);
	if (ifa->ifa_family == AF_INET)
		want = 4;
	else if (ifa->ifa_family == AF_INET6)
		want = 16;
	else
		return 0;
	if (mnl_attr_parse(nlh, sizeof(*ifa), addr_attr, &tb) < MNL_CB_OK)
		return -1;
	/* IFA_LOCAL is the local end where there is a peer (IFA_ADDRESS is
	 * then the peer's); otherwise IFA_ADDRESS is the address itself. */
	a = tb.local != NULL ? tb.local : tb.address;
	if (a == NULL || mnl_attr_get_payload_len(a) != want)
		return -1;
	m->addr.family = ifa->ifa_family;
	memcpy(m->addr.addr, mnl_attr_get_payload(a), want);
	m->addr.ifindex = ifa->ifa_index;
	m->addr.prefixlen = ifa->ifa_prefixlen;
	return 1;
}

int
hostaddr_parse(const void *buf, size_t len, void (*fn)(const struct hostaddr_msg *m, void *arg),
               void *arg)
{
	const uint8_t *p = buf;
	size_t off, step;
	int n = 0;

	/* Headers are read in place: a recv buffer is aligned. */
	if (len > INT32_MAX || (len > 0 && (buf == NULL || (uintptr_t)buf % 4 != 0)))
		return -1;
	/* The framing is walked here, as in nflog.c: mnl_nlmsg_ok() compares
	 * the length as a signed int, so a length above 2^31 passes it and
	 * mnl_nlmsg_next() then jumps out of the buffer (found by
	 * fuzz_hostaddr). A datagram is whole messages, each with its
	 * alignment padding (the kernel's always have it; libmnl's attribute
	 * walk reads up to the aligned end), and nothing else. */
	for (off = 0; off < len; off += step) {
		const struct nlmsghdr *nlh = (const struct nlmsghdr *)(p + off);
		struct hostaddr_msg m;
		int r;

		if (len - off < sizeof(*nlh) || nlh->nlmsg_len < sizeof(*nlh) ||
		    nlh->nlmsg_len > len - off)
			return -1;
		step = NLMSG_ALIGN(nlh->nlmsg_len);
		if (step > len - off)
			return -1;
		memset(&m, 0, sizeof(m));
		m.seq = nlh->nlmsg_seq;
		m.portid = nlh->nlmsg_pid;
		m.dump_intr = (nlh->nlmsg_flags & NLM_F_DUMP_INTR) != 0;
		switch (nlh->nlmsg_type) {
		case RTM_NEWADDR:
		case RTM_DELADDR:
			m.kind = nlh->nlmsg_type == RTM_NEWADDR ? HOSTADDR_NEW : HOSTADDR_DEL;
			r = parse_addr(nlh, &m);
			if (r < 0)
				return -1;
			if (r == 0)
				continue;
			break;
		case NLMSG_DONE:
			m.kind = HOSTADDR_DONE;
			break;
		case NLMSG_ERROR: {
			const struct nlmsgerr *e;

			if (mnl_nlmsg_get_payload_len(nlh) < sizeof(*e))
				return -1;
			e = mnl_nlmsg_get_payload(nlh);
			m.kind = HOSTADDR_ERROR;
			/* A negative errno, or 0 for an ACK; anything else is
			 * no errno at all. */
			if (e->error < 0 && e->error > -4096)
				m.error = -e->error;
			else if (e->error != 0)
				m.error = EPROTO;
			break;
		}
		default:
			continue;
		}
		if (fn != NULL)
			fn(&m, arg);
		n++;
	}
	return n;
}

/* --- the watch ------------------------------------------------------------ */

/*
 * A dump is settled only by its end (NLMSG_DONE) or by silence. The kernel
 * answers a dump request with an error when it cannot start it (EBUSY: one
 * of ours still runs), but on a full socket it may answer ENOBUFS and then
 * keep dumping as the socket drains, parts and end included (seen on 6.18);
 * and an overrun can drop the error itself, or the ENOBUFS that the next
 * request gets. So an error is noted, not acted on, and a dump from which
 * nothing has come for HOSTADDR_STALL_MS is given up and asked again: the
 * new request either runs, or its error comes and reading it lets a
 * stalled earlier dump go on, whose parts (not ours, but in order, like
 * notifications) do no harm.
 */

struct hostaddr_watch {
	struct guard_hosts *hw_hosts; /* borrowed */
	struct mnl_socket *hw_nl;
	struct event *hw_ev;    /* the socket is readable */
	struct event *hw_timer; /* at hw_due: ask again */
	uint64_t hw_due;        /* ms (now_ms) when to ask again, 0 when not */
	uint32_t hw_portid;
	uint32_t hw_seq;      /* the dump being read, 0 when none */
	uint32_t hw_last_seq; /* the last dump's number */
	bool hw_again;        /* lost during this dump: dump again after it */
	bool hw_want_dump;    /* dump once this datagram is handled */
	bool hw_heard;        /* part of the dump in this datagram */
	bool hw_lost;         /* the socket failed for good */
	bool hw_said_full;    /* warned about the bound since the last KNOWN */
	int hw_lost_err;      /* why hw_lost (errno) */
	int hw_dump_err;      /* the last error a dump request got (errno) */
	unsigned hw_dumps;    /* dumps started, the first included */
	uint32_t hw_lose;     /* tests: discard the replies to these dumps */
	uint32_t hw_lose_seq; /* tests: the dump being discarded, 0 when none */
	/* Scratch for one datagram, aligned for nlmsghdr. */
	uint64_t hw_buf[HOSTADDR_RECV_SIZE / sizeof(uint64_t)];
};

/* Ask again in ms (a refused request, or a dump gone silent). During set-up
 * there is no loop yet: hw_first_dump polls until hw_due. */
static void
hw_arm(struct hostaddr_watch *w, unsigned ms)
{
	struct timeval tv = {ms / 1000, (ms % 1000) * 1000};

	w->hw_due = now_ms() + ms;
	if (w->hw_timer != NULL)
		evtimer_add(w->hw_timer, &tv);
}

static void
hw_disarm(struct hostaddr_watch *w)
{
	w->hw_due = 0;
	if (w->hw_timer != NULL)
		evtimer_del(w->hw_timer);
}

/* The socket failed for good. In the loop that is said here; during
 * set-up the caller reports hw_lost_err. */
static void
hw_set_lost(struct hostaddr_watch *w, const char *why, int err)
{
	w->hw_lost = true;
	w->hw_lost_err = err;
	guard_hosts_set_state(w->hw_hosts, GUARD_HOSTS_LOST);
	hw_disarm(w);
	if (w->hw_ev == NULL)
		return;
	event_del(w->hw_ev);
	log_warnx("host addresses: %s: %s; from now on every public address counts as possibly "
	          "the host's (refused unless a cidr rule allows it)",
	          why, strerror(err));
}

/* Ask for every address of the namespace, into an emptied set. */
static void
hw_dump(struct hostaddr_watch *w)
{
	uint64_t req[64 / sizeof(uint64_t)];
	struct nlmsghdr *nlh;
	struct ifaddrmsg *ifa;

	w->hw_want_dump = false;
	if (w->hw_seq != 0) {
		w->hw_again = true;
		return;
	}
	guard_hosts_clear(w->hw_hosts);
	w->hw_again = false;
	if (++w->hw_last_seq == 0)
		w->hw_last_seq = 1;
	memset(req, 0, sizeof(req));
	nlh = mnl_nlmsg_put_header(req);
	nlh->nlmsg_type = RTM_GETADDR;
	nlh->nlmsg_flags = NLM_F_REQUEST | NLM_F_DUMP;
	nlh->nlmsg_seq = w->hw_last_seq;
	ifa = mnl_nlmsg_put_extra_header(nlh, sizeof(*ifa));
	ifa->ifa_family = AF_UNSPEC;
	if (mnl_socket_sendto(w->hw_nl, nlh, nlh->nlmsg_len) < 0) {
		int err = errno;

		if (err == ENOBUFS || err == ENOMEM || err == EAGAIN || err == EBUSY ||
		    err == EINTR) {
			w->hw_dump_err = err;
			hw_arm(w, HOSTADDR_RETRY_MS);
			return;
		}
		hw_set_lost(w, "cannot ask for the address list", err);
		return;
	}
	w->hw_seq = w->hw_last_seq;
	if (w->hw_dumps < 32 && (w->hw_lose & (UINT32_C(1) << w->hw_dumps)) != 0)
		w->hw_lose_seq = w->hw_seq;
	w->hw_dumps++;
	hw_arm(w, HOSTADDR_STALL_MS);
}

/* Notifications may have been lost: what the set holds is unreliable from
 * now until a fresh dump has been read. */
static void
hw_lose(struct hostaddr_watch *w, const char *why)
{
	log_info("host addresses: %s; reading them again (public addresses are refused until "
	         "then)",
	         why);
	guard_hosts_set_state(w->hw_hosts, GUARD_HOSTS_READING);
	if (w->hw_seq != 0)
		w->hw_again = true;
	else
		w->hw_want_dump = true;
}

static void
hw_msg(const struct hostaddr_msg *m, void *arg)
{
	struct hostaddr_watch *w = arg;
	bool ours = w->hw_seq != 0 && m->seq == w->hw_seq && m->portid == w->hw_portid;

	if (w->hw_lose_seq != 0 && m->seq == w->hw_lose_seq && m->portid == w->hw_portid)
		return;
	w->hw_heard = w->hw_heard || ours;
	switch (m->kind) {
	case HOSTADDR_NEW:
		if (guard_hosts_add(w->hw_hosts, &m->addr) < 0 && !w->hw_said_full) {
			w->hw_said_full = true;
			log_warnx(
			        "host addresses: more than the %zu airlock tracks (or no memory); "
			        "every public address counts as possibly the host's until some go",
			        guard_hosts_count(w->hw_hosts));
		}
		break;
	case HOSTADDR_DEL:
		guard_hosts_del(w->hw_hosts, &m->addr);
		/* Over the bound, the set lost entries: only a fresh dump can
		 * say whether the rest fits now. */
		if (guard_hosts_state(w->hw_hosts) == GUARD_HOSTS_FULL && !ours)
			hw_lose(w, "an address went while over the bound");
		break;
	case HOSTADDR_DONE:
		if (!ours)
			break;
		w->hw_seq = 0;
		w->hw_dump_err = 0;
		hw_disarm(w);
		if (w->hw_again) {
			w->hw_want_dump = true;
			break;
		}
		guard_hosts_set_state(w->hw_hosts, GUARD_HOSTS_KNOWN);
		if (guard_hosts_state(w->hw_hosts) == GUARD_HOSTS_KNOWN)
			w->hw_said_full = false;
		break;
	case HOSTADDR_ERROR:
		/* Not the end of it: see the top of this part. */
		if (ours)
			w->hw_dump_err = m->error != 0 ? m->error : EPROTO;
		break;
	}
	/* The kernel saw the list change while it dumped: entries may have
	 * moved under its cursor and been skipped. */
	if (ours && m->dump_intr)
		w->hw_again = true;
}

/* Read what is queued, at most HOSTADDR_READS_PER_EVENT datagrams. */
static void
hw_read(struct hostaddr_watch *w)
{
	int fd = mnl_socket_get_fd(w->hw_nl);

	for (int i = 0; i < HOSTADDR_READS_PER_EVENT && !w->hw_lost; i++) {
		struct sockaddr_nl from;
		socklen_t fromlen = sizeof(from);
		ssize_t n;

		memset(&from, 0, sizeof(from));
		w->hw_heard = false;
		/* MSG_TRUNC: the datagram's real length, to see truncation. */
		n = recvfrom(fd, w->hw_buf, sizeof(w->hw_buf), MSG_TRUNC, (struct sockaddr *)&from,
		             &fromlen);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			if (errno == EAGAIN || errno == EWOULDBLOCK)
				break;
			if (errno == ENOBUFS)
				hw_lose(w, "notifications lost (socket overrun)");
			else
				hw_set_lost(w, "reading the address notifications", errno);
		} else if ((size_t)n > sizeof(w->hw_buf)) {
			hw_lose(w, "a notification too long for the buffer");
		} else if (from.nl_pid != 0) {
			/* Not the kernel (only a privileged process could
			 * send it): not an account of the host's addresses. */
			continue;
		} else if (hostaddr_parse(w->hw_buf, (size_t)n, hw_msg, w) < 0) {
			hw_lose(w, "a malformed notification");
		}
		/* The dump still speaks: its silence is counted from here. */
		if (w->hw_heard && w->hw_seq != 0)
			hw_arm(w, HOSTADDR_STALL_MS);
		if (w->hw_want_dump && !w->hw_lost)
			hw_dump(w);
	}
}

/* hw_due has come: a refused request is sent again, a silent dump given
 * up and asked again. */
static void
hw_ask_again(struct hostaddr_watch *w)
{
	w->hw_due = 0;
	if (w->hw_lost)
		return;
	if (w->hw_seq != 0)
		log_debug("host addresses: no answer to dump %" PRIu32 " for %d ms; asking again",
		          w->hw_seq, HOSTADDR_STALL_MS);
	w->hw_seq = 0;
	hw_dump(w);
}

static void
hw_readable(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	hw_read(arg);
}

static void
hw_timer(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	hw_ask_again(arg);
}

/* The first dump, read before the loop runs. 0, or -1 with errno. */
static int
hw_first_dump(struct hostaddr_watch *w)
{
	uint64_t deadline = now_ms() + HOSTADDR_START_MS;
	struct pollfd pfd = {.fd = mnl_socket_get_fd(w->hw_nl), .events = POLLIN};

	hw_dump(w);
	while (guard_hosts_state(w->hw_hosts) == GUARD_HOSTS_READING ||
	       guard_hosts_state(w->hw_hosts) == GUARD_HOSTS_FULL) {
		uint64_t now = now_ms(), until = deadline;
		int r;

		if (w->hw_lost) {
			errno = w->hw_lost_err;
			return -1;
		}
		/* Done, but over the bound: FULL is the answer. */
		if (w->hw_seq == 0 && !w->hw_want_dump && w->hw_due == 0)
			return 0;
		if (now >= deadline) {
			errno = w->hw_dump_err != 0 ? w->hw_dump_err : ETIMEDOUT;
			return -1;
		}
		if (w->hw_due != 0 && now >= w->hw_due) {
			hw_ask_again(w);
			continue;
		}
		if (w->hw_due != 0 && w->hw_due < until)
			until = w->hw_due;
		r = poll(&pfd, 1, (int)(until - now));
		if (r < 0 && errno != EINTR)
			return -1;
		if (r > 0)
			hw_read(w);
	}
	return 0;
}

struct hostaddr_watch *
hostaddr_watch_new_opts(struct event_base *base, struct guard_hosts *hosts,
                        const struct hostaddr_watch_opts *opts, char *err, size_t errlen)
{
	struct hostaddr_watch *w = calloc(1, sizeof(*w));
	int rcvbuf = opts != NULL && opts->rcvbuf > 0 ? opts->rcvbuf : HOSTADDR_RCVBUF;
	const char *step = "allocating the watch";

	if (w == NULL)
		goto fail;
	w->hw_hosts = hosts;
	w->hw_lose = opts != NULL ? opts->lose_dumps : 0;
	step = "opening an rtnetlink socket";
	w->hw_nl = mnl_socket_open2(NETLINK_ROUTE, SOCK_CLOEXEC | SOCK_NONBLOCK);
	if (w->hw_nl == NULL)
		goto fail;
	/* A bigger buffer makes overruns rarer; the kernel caps it at
	 * net.core.rmem_max, and an overrun is handled anyway. */
	(void)setsockopt(mnl_socket_get_fd(w->hw_nl), SOL_SOCKET, SO_RCVBUF, &rcvbuf,
	                 sizeof(rcvbuf));
	/* Subscribed before the dump is asked for: see the top. Any user may
	 * listen to these groups. */
	step = "subscribing to address notifications";
	if (mnl_socket_bind(w->hw_nl, RTMGRP_IPV4_IFADDR | RTMGRP_IPV6_IFADDR, MNL_SOCKET_AUTOPID) <
	    0)
		goto fail;
	w->hw_portid = mnl_socket_get_portid(w->hw_nl);
	step = "reading the host's addresses";
	if (hw_first_dump(w) < 0)
		goto fail;
	log_debug("host addresses: %zu public, watching for changes", guard_hosts_count(hosts));
	step = "watching the socket";
	w->hw_ev =
	        event_new(base, mnl_socket_get_fd(w->hw_nl), EV_READ | EV_PERSIST, hw_readable, w);
	w->hw_timer = evtimer_new(base, hw_timer, w);
	if (w->hw_ev == NULL || w->hw_timer == NULL || event_add(w->hw_ev, NULL) < 0) {
		errno = ENOMEM;
		goto fail;
	}
	return w;
fail:
	snprintf(err, errlen, "host addresses: %s: %s", step, strerror(errno));
	hostaddr_watch_free(w);
	return NULL;
}

struct hostaddr_watch *
hostaddr_watch_new(struct event_base *base, struct guard_hosts *hosts, char *err, size_t errlen)
{
	return hostaddr_watch_new_opts(base, hosts, NULL, err, errlen);
}

unsigned
hostaddr_watch_rereads(const struct hostaddr_watch *w)
{
	return w->hw_dumps > 0 ? w->hw_dumps - 1 : 0;
}

void
hostaddr_watch_free(struct hostaddr_watch *w)
{
	if (w == NULL)
		return;
	if (w->hw_ev != NULL)
		event_free(w->hw_ev);
	if (w->hw_timer != NULL)
		event_free(w->hw_timer);
	if (w->hw_nl != NULL)
		mnl_socket_close(w->hw_nl);
	guard_hosts_set_state(w->hw_hosts, GUARD_HOSTS_LOST);
	free(w);
}
