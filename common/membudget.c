/* The queued-bytes budget (membudget.h). */
#include "common/membudget.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>

#include "common/log.h"

#define MEMBUDGET_MAX_USERS 4

struct membudget {
	size_t mb_cap;
	size_t mb_resume_at; /* the resume hooks run at or below this */
	size_t mb_used, mb_peak;
	bool mb_over;
	struct event *mb_resume; /* runs the resume hooks from the loop */
	struct membudget_hooks mb_users[MEMBUDGET_MAX_USERS];
	size_t mb_n_users;
};

static void
membudget_resume(evutil_socket_t fd, short what, void *arg)
{
	struct membudget *b = arg;
	(void)fd;
	(void)what;

	/* The total may have grown again since this was scheduled: then
	 * the next release that brings it down schedules this again. */
	if (!b->mb_over || b->mb_used > b->mb_resume_at)
		return;
	b->mb_over = false;
	log_debug("queued bytes: %zu of %zu; reading again", b->mb_used, b->mb_cap);
	for (size_t i = 0; i < b->mb_n_users; i++)
		b->mb_users[i].resume(b->mb_users[i].arg);
}

struct membudget *
membudget_new(struct event_base *base, size_t cap)
{
	struct membudget *b = calloc(1, sizeof(*b));

	if (b == NULL)
		return NULL;
	b->mb_cap = cap > 0 ? cap : 1;
	/* An eighth of the cap between pausing and going on again, so that
	 * every user is walked at most once per that many bytes drained. */
	b->mb_resume_at = b->mb_cap - b->mb_cap / 8;
	b->mb_resume = event_new(base, -1, 0, membudget_resume, b);
	if (b->mb_resume == NULL) {
		free(b);
		return NULL;
	}
	return b;
}

void
membudget_free(struct membudget *b)
{
	if (b == NULL)
		return;
	if (b->mb_used != 0)
		log_warnx("queued bytes: %zu still charged at exit", b->mb_used);
	event_free(b->mb_resume);
	free(b);
}

int
membudget_add_user(struct membudget *b, const struct membudget_hooks *h)
{
	if (b->mb_n_users == MEMBUDGET_MAX_USERS)
		return -1;
	b->mb_users[b->mb_n_users++] = *h;
	return 0;
}

void
membudget_remove_user(struct membudget *b, void *arg)
{
	for (size_t i = 0; i < b->mb_n_users; i++) {
		if (b->mb_users[i].arg != arg)
			continue;
		b->mb_users[i] = b->mb_users[--b->mb_n_users];
		return;
	}
}

bool
membudget_over(const struct membudget *b)
{
	return b != NULL && b->mb_over;
}

size_t
membudget_room(const struct membudget *b)
{
	if (b == NULL)
		return SIZE_MAX;
	if (b->mb_over || b->mb_used >= b->mb_cap)
		return 0;
	return b->mb_cap - b->mb_used;
}

size_t
membudget_cap(const struct membudget *b)
{
	return b != NULL ? b->mb_cap : 0;
}

size_t
membudget_used(const struct membudget *b)
{
	return b != NULL ? b->mb_used : 0;
}

size_t
membudget_peak(const struct membudget *b)
{
	return b != NULL ? b->mb_peak : 0;
}

static void
membudget_charge(struct membudget *b, size_t n)
{
	b->mb_used += n;
	if (b->mb_used > b->mb_peak)
		b->mb_peak = b->mb_used;
	if (b->mb_over || b->mb_used < b->mb_cap)
		return;
	b->mb_over = true;
	log_info("queued bytes: the cap (%zu) is reached; reading pauses until %zu", b->mb_cap,
	         b->mb_resume_at);
	for (size_t i = 0; i < b->mb_n_users; i++)
		b->mb_users[i].pause(b->mb_users[i].arg);
}

static void
membudget_release(struct membudget *b, size_t n)
{
	b->mb_used = n < b->mb_used ? b->mb_used - n : 0;
	if (b->mb_over && b->mb_used <= b->mb_resume_at)
		event_active(b->mb_resume, 0, 0);
}

/* ---- shares ---- */

void
membudget_share_init(struct membudget_share *s, struct membudget *b)
{
	memset(s, 0, sizeof(*s));
	s->b = b;
}

void
membudget_share_add(struct membudget_share *s, size_t n)
{
	if (s->b == NULL || n == 0)
		return;
	s->held += n;
	membudget_charge(s->b, n);
}

void
membudget_share_sub(struct membudget_share *s, size_t n)
{
	if (s->b == NULL || n == 0)
		return;
	if (n > s->held)
		n = s->held; /* never give back more than was taken */
	s->held -= n;
	membudget_release(s->b, n);
}

/* Every change to a watched buffer, from any path (read, write, move,
 * drain), lands here. */
static void
share_buffer_changed(struct evbuffer *buf, const struct evbuffer_cb_info *info, void *arg)
{
	struct membudget_share *s = arg;
	(void)buf;

	if (info->n_added > info->n_deleted)
		membudget_share_add(s, info->n_added - info->n_deleted);
	else
		membudget_share_sub(s, info->n_deleted - info->n_added);
}

int
membudget_share_watch(struct membudget_share *s, struct bufferevent *bev)
{
	struct evbuffer *bufs[2] = {bufferevent_get_input(bev), bufferevent_get_output(bev)};

	if (s->b == NULL)
		return 0;
	if (s->buf[0] != NULL)
		membudget_share_release(s);
	for (int i = 0; i < 2; i++) {
		s->cb[i] = evbuffer_add_cb(bufs[i], share_buffer_changed, s);
		if (s->cb[i] == NULL) {
			membudget_share_release(s);
			return -1;
		}
		s->buf[i] = bufs[i];
		membudget_share_add(s, evbuffer_get_length(bufs[i]));
	}
	return 0;
}

void
membudget_share_release(struct membudget_share *s)
{
	for (int i = 0; i < 2; i++) {
		if (s->cb[i] != NULL)
			evbuffer_remove_cb_entry(s->buf[i], s->cb[i]);
		s->cb[i] = NULL;
		s->buf[i] = NULL;
	}
	membudget_share_sub(s, s->held);
}
