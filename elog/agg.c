/* The memory of repeated events (agg.h): each event's key fields packed
 * into one byte string, the key of a bounded table (tab.h) whose payload
 * is the count of repeats since the last line. */
#include "elog/agg.h"

#include <stdlib.h>
#include <string.h>

#include "elog/caps.h"
#include "elog/tab.h"

/* The key fields, in packing order, with the caps the writer applies to
 * them. A field is kept up to its cap plus one UTF-8 sequence, so that the
 * line written from the stored copy is cut (and marked truncated) exactly
 * where the line of the original was; values that differ only past that
 * count as one event. */
enum {
	K_KIND,
	K_HOST,
	K_IP,
	K_VERDICT,
	K_RULE,
	K_REASON,
	K_SNI,
	K_METHOD,
	K_QTYPE,
	K_RCODE,
	K_PROTO,
	K_ORIG_DST,
	K_CLIENT,
	K_PATH,
	K_DETAIL,
	N_KEYS
};

static const size_t key_caps[N_KEYS] = {
        [K_KIND] = ELOG_CAP_SHORT,    [K_HOST] = ELOG_CAP_NAME,    [K_IP] = ELOG_CAP_ADDR,
        [K_VERDICT] = ELOG_CAP_SHORT, [K_RULE] = ELOG_CAP_RULE,    [K_REASON] = ELOG_CAP_RULE,
        [K_SNI] = ELOG_CAP_NAME,      [K_METHOD] = ELOG_CAP_SHORT, [K_QTYPE] = ELOG_CAP_SHORT,
        [K_RCODE] = ELOG_CAP_SHORT,   [K_PROTO] = ELOG_CAP_SHORT,  [K_ORIG_DST] = ELOG_CAP_ADDR,
        [K_CLIENT] = ELOG_CAP_ADDR,   [K_PATH] = ELOG_CAP_NAME,     [K_DETAIL] = ELOG_CAP_RULE,
};

/* The largest packed key: the port, then per field a tag, the bytes and
 * a NUL. */
#define KEY_MAX                                                                                    \
	(4 + N_KEYS * 2 + 3 * ELOG_CAP_RULE + 3 * ELOG_CAP_NAME + 3 * ELOG_CAP_ADDR +              \
	 6 * ELOG_CAP_SHORT + N_KEYS * 4)

struct agg_counts {
	uint64_t ac_repeats; /* events like the first since the last line */
	uint64_t ac_bytes_up, ac_bytes_down, ac_duration_ms;
	bool ac_quiet; /* a whole window passed with no repeat */
};

struct elog_agg {
	struct elog_tab *ag_tab;
	void (*ag_emit)(const struct elog_event *ev, void *arg); /* during a flush */
	void *ag_arg;
	bool ag_final;
	char ag_key[KEY_MAX]; /* scratch for one packed key */
};

static const char **
key_field(struct elog_event *ev, int k)
{
	switch (k) {
	case K_KIND:
		return &ev->kind;
	case K_HOST:
		return &ev->host;
	case K_IP:
		return &ev->ip;
	case K_VERDICT:
		return &ev->verdict;
	case K_RULE:
		return &ev->rule;
	case K_REASON:
		return &ev->reason;
	case K_SNI:
		return &ev->sni;
	case K_METHOD:
		return &ev->method;
	case K_QTYPE:
		return &ev->qtype;
	case K_RCODE:
		return &ev->rcode;
	case K_PROTO:
		return &ev->proto;
	case K_ORIG_DST:
		return &ev->orig_dst;
	case K_CLIENT:
		return &ev->client;
	case K_DETAIL:
		return &ev->detail;
	default:
		return &ev->path;
	}
}

/* Pack ev's key into a->ag_key: the port (4 bytes), then for each field
 * 0 (absent) or 1, its bytes and a NUL (a C string holds none, so the
 * packing is unambiguous). Returns the length. */
static size_t
key_pack(struct elog_agg *a, const struct elog_event *ev)
{
	struct elog_event copy = *ev;
	int32_t port = ev->port < 0 ? -1 : ev->port;
	size_t len = 0;

	memcpy(a->ag_key, &port, sizeof(port));
	len += sizeof(port);
	for (int k = 0; k < N_KEYS; k++) {
		const char *s = *key_field(&copy, k);
		size_t n;

		if (s == NULL) {
			a->ag_key[len++] = 0;
			continue;
		}
		n = strnlen(s, key_caps[k] + 4);
		a->ag_key[len++] = 1;
		memcpy(a->ag_key + len, s, n);
		len += n;
		a->ag_key[len++] = '\0';
	}
	return len;
}

/* The inverse, into ev (pointing into key, which must stay put). */
static void
key_unpack(const char *key, struct elog_event *ev)
{
	int32_t port;
	size_t off = sizeof(port);

	memset(ev, 0, sizeof(*ev));
	memcpy(&port, key, sizeof(port));
	ev->port = port;
	for (int k = 0; k < N_KEYS; k++) {
		if (key[off++] == 0)
			continue;
		*key_field(ev, k) = key + off;
		off += strlen(key + off) + 1;
	}
}

struct elog_agg *
elog_agg_new(size_t max_entries, size_t arena_bytes)
{
	struct elog_agg *a = calloc(1, sizeof(*a));

	if (a == NULL)
		return NULL;
	a->ag_tab = elog_tab_new(max_entries, arena_bytes, sizeof(struct agg_counts));
	if (a->ag_tab == NULL) {
		free(a);
		return NULL;
	}
	return a;
}

void
elog_agg_free(struct elog_agg *a)
{
	if (a == NULL)
		return;
	elog_tab_free(a->ag_tab);
	free(a);
}

enum elog_agg_result
elog_agg_note(struct elog_agg *a, const struct elog_event *ev)
{
	size_t len = key_pack(a, ev);
	struct agg_counts *c = elog_tab_find(a->ag_tab, a->ag_key, len);

	if (c != NULL) {
		c->ac_repeats++;
		c->ac_bytes_up += ev->bytes_up;
		c->ac_bytes_down += ev->bytes_down;
		if (ev->duration_ms > c->ac_duration_ms)
			c->ac_duration_ms = ev->duration_ms;
		c->ac_quiet = false;
		return ELOG_AGG_COUNTED;
	}
	return elog_tab_insert(a->ag_tab, a->ag_key, len) != NULL ? ELOG_AGG_FIRST : ELOG_AGG_FULL;
}

static bool
agg_close(void *payload, const char *key, size_t len, void *arg)
{
	struct elog_agg *a = arg;
	struct agg_counts *c = payload;
	struct elog_event ev;
	(void)len;

	if (c->ac_repeats > 0) {
		key_unpack(key, &ev);
		ev.count = c->ac_repeats;
		ev.bytes_up = c->ac_bytes_up;
		ev.bytes_down = c->ac_bytes_down;
		ev.duration_ms = c->ac_duration_ms;
		a->ag_emit(&ev, a->ag_arg);
		memset(c, 0, sizeof(*c));
		return !a->ag_final;
	}
	if (a->ag_final || c->ac_quiet)
		return false;
	c->ac_quiet = true;
	return true;
}

void
elog_agg_flush(struct elog_agg *a, bool final, void (*emit)(const struct elog_event *ev, void *arg),
               void *arg)
{
	a->ag_emit = emit;
	a->ag_arg = arg;
	a->ag_final = final;
	elog_tab_retain(a->ag_tab, agg_close, a);
	a->ag_emit = NULL;
	a->ag_arg = NULL;
}

size_t
elog_agg_size(const struct elog_agg *a)
{
	return elog_tab_count(a->ag_tab);
}
