/* The queued-bytes budget (common/membudget.h): shares count what their
 * watched buffers hold through every kind of change, the pause hook runs
 * as the cap is reached, the resume hook from the loop once the total is
 * down to 7/8 of it, and a released share counts nothing more. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/socket.h>

#include <cmocka.h>
#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>

#include "common/membudget.h"

struct calls {
	int paused, resumed;
};

static void
on_pause(void *arg)
{
	((struct calls *)arg)->paused++;
}

static void
on_resume(void *arg)
{
	((struct calls *)arg)->resumed++;
}

/* Two socket bufferevents on the two ends of a socketpair, each watched
 * by its own share; nothing enabled, so libevent moves bytes only when a
 * test enables it. */
struct pair {
	struct event_base *base;
	struct bufferevent *bev[2];
	struct membudget *b;
	struct membudget_share s[2];
	struct calls calls;
};

static void
pair_open(struct pair *p, size_t cap)
{
	struct membudget_hooks h = {on_pause, on_resume, &p->calls};
	int sv[2];

	memset(p, 0, sizeof(*p));
	p->base = event_base_new();
	assert_non_null(p->base);
	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sv), 0);
	p->b = membudget_new(p->base, cap);
	assert_non_null(p->b);
	assert_int_equal(membudget_add_user(p->b, &h), 0);
	for (int i = 0; i < 2; i++) {
		p->bev[i] = bufferevent_socket_new(p->base, sv[i], BEV_OPT_CLOSE_ON_FREE);
		assert_non_null(p->bev[i]);
		bufferevent_disable(p->bev[i], EV_READ | EV_WRITE);
		membudget_share_init(&p->s[i], p->b);
		assert_int_equal(membudget_share_watch(&p->s[i], p->bev[i]), 0);
	}
}

static void
pair_close(struct pair *p)
{
	for (int i = 0; i < 2; i++) {
		membudget_share_release(&p->s[i]);
		bufferevent_free(p->bev[i]);
	}
	assert_int_equal(membudget_used(p->b), 0);
	membudget_free(p->b);
	event_base_free(p->base);
}

/* What the bufferevent API lets a user do to its buffers (take from an
 * input's start, add at an output's end), what libevent does itself
 * (read into an input, write an output out): every change is counted. */
static void
test_counts_every_change(void **state)
{
	struct pair p;
	struct evbuffer *in0, *out1;
	char buf[3000];
	(void)state;

	pair_open(&p, 1 << 20);
	in0 = bufferevent_get_input(p.bev[0]);
	out1 = bufferevent_get_output(p.bev[1]);
	memset(buf, 'x', sizeof(buf));
	evbuffer_prepend(in0, buf, 1000);
	assert_int_equal(membudget_used(p.b), 1000);
	assert_int_equal(p.s[0].held, 1000);
	/* Moved between two watched buffers, copied or relinked: the total
	 * stays, the shares follow the bytes. */
	evbuffer_remove_buffer(in0, out1, 400);
	assert_int_equal(p.s[0].held, 600);
	assert_int_equal(p.s[1].held, 400);
	evbuffer_add_buffer(out1, in0);
	assert_int_equal(membudget_used(p.b), 1000);
	assert_int_equal(p.s[0].held, 0);
	assert_int_equal(p.s[1].held, 1000);
	evbuffer_add(out1, buf, 1000);
	assert_int_equal(membudget_used(p.b), 2000);
	/* bev[1] writes its 2000 bytes out (given back), bev[0] reads them
	 * (charged). */
	bufferevent_enable(p.bev[1], EV_WRITE);
	bufferevent_enable(p.bev[0], EV_READ);
	for (int i = 0; i < 100 && evbuffer_get_length(in0) < 2000; i++)
		event_base_loop(p.base, EVLOOP_NONBLOCK);
	assert_int_equal(evbuffer_get_length(out1), 0);
	assert_int_equal(evbuffer_get_length(in0), 2000);
	assert_int_equal(p.s[1].held, 0);
	assert_int_equal(p.s[0].held, 2000);
	assert_int_equal(membudget_peak(p.b), 2000);
	/* Drained, removed: given back. */
	evbuffer_drain(in0, 300);
	evbuffer_remove(in0, buf, 700);
	assert_int_equal(membudget_used(p.b), 1000);
	/* A released share counts nothing more, and gave back all it held. */
	membudget_share_release(&p.s[0]);
	assert_int_equal(membudget_used(p.b), 0);
	evbuffer_drain(in0, 10);
	evbuffer_prepend(in0, buf, 10);
	assert_int_equal(membudget_used(p.b), 0);
	pair_close(&p);
}

static void
test_pause_at_cap_resume_from_loop(void **state)
{
	struct pair p;
	struct evbuffer *in0;
	char buf[1000];
	(void)state;

	pair_open(&p, 8000);
	in0 = bufferevent_get_input(p.bev[0]);
	memset(buf, 'y', sizeof(buf));
	for (int i = 0; i < 7; i++)
		evbuffer_prepend(in0, buf, sizeof(buf));
	assert_false(membudget_over(p.b));
	assert_int_equal(membudget_room(p.b), 1000);
	assert_int_equal(p.calls.paused, 0);
	/* The charge that reaches the cap pauses, inside the charge. */
	evbuffer_prepend(in0, buf, sizeof(buf));
	assert_true(membudget_over(p.b));
	assert_int_equal(p.calls.paused, 1);
	assert_int_equal(membudget_room(p.b), 0);
	/* More while over: no second pause. */
	evbuffer_prepend(in0, buf, 500);
	assert_int_equal(p.calls.paused, 1);
	/* Down to just above 7/8 of the cap: still over. */
	evbuffer_drain(in0, 8500 - 7001);
	event_base_loop(p.base, EVLOOP_NONBLOCK);
	assert_true(membudget_over(p.b));
	assert_int_equal(p.calls.resumed, 0);
	/* At 7/8: the resume runs, but from the loop, not inside the drain. */
	evbuffer_drain(in0, 1);
	assert_true(membudget_over(p.b));
	assert_int_equal(p.calls.resumed, 0);
	event_base_loop(p.base, EVLOOP_NONBLOCK);
	assert_false(membudget_over(p.b));
	assert_int_equal(p.calls.resumed, 1);
	assert_int_equal(membudget_room(p.b), 1000);
	evbuffer_drain(in0, evbuffer_get_length(in0));
	pair_close(&p);
}

/* Grown again before the loop ran the resume: it waits for the next
 * time the total is down at the mark. */
static void
test_resume_rechecks(void **state)
{
	struct pair p;
	struct evbuffer *in0;
	char buf[8000];
	(void)state;

	pair_open(&p, 8000);
	in0 = bufferevent_get_input(p.bev[0]);
	memset(buf, 'z', sizeof(buf));
	evbuffer_prepend(in0, buf, 8000);
	evbuffer_drain(in0, 4000); /* resume scheduled */
	evbuffer_prepend(in0, buf, 4000);
	event_base_loop(p.base, EVLOOP_NONBLOCK);
	assert_true(membudget_over(p.b));
	assert_int_equal(p.calls.resumed, 0);
	evbuffer_drain(in0, 8000);
	event_base_loop(p.base, EVLOOP_NONBLOCK);
	assert_int_equal(p.calls.resumed, 1);
	pair_close(&p);
}

/* By hand (pipes), and the inactive cases. */
static void
test_manual_and_null(void **state)
{
	struct event_base *base = event_base_new();
	struct membudget *b = membudget_new(base, 100);
	struct membudget_share s, none;
	(void)state;

	memset(&none, 0, sizeof(none));
	membudget_share_add(&none, 50);
	membudget_share_release(&none);
	assert_false(membudget_over(NULL));
	assert_true(membudget_room(NULL) == SIZE_MAX);
	membudget_share_init(&s, b);
	membudget_share_add(&s, 60);
	membudget_share_sub(&s, 100); /* never more than was taken */
	assert_int_equal(membudget_used(b), 0);
	membudget_share_add(&s, 30);
	membudget_share_release(&s);
	assert_int_equal(membudget_used(b), 0);
	membudget_free(b);
	event_base_free(base);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test(test_counts_every_change),
	        cmocka_unit_test(test_pause_at_cap_resume_from_loop),
	        cmocka_unit_test(test_resume_rechecks),
	        cmocka_unit_test(test_manual_and_null),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
