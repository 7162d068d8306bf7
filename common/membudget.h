/* The bound on bytes the supervisor queues for connections (proxy tunnels
 * and exchanges, DNS over TCP): one counter that every queue charges and
 * releases, a cap, and backpressure beyond it.
 *
 * Queues are charged where they change, not where code happens to look:
 * a share watches a bufferevent's two evbuffers (every byte added or
 * drained, by any path, moves the count), and code that queues elsewhere
 * (bytes in a splice pipe, a copy buffer) adds and subtracts by hand.
 *
 * When the total reaches the cap the budget is over: every user's pause
 * hook runs at once, inside the charge that reached it, and stops reading;
 * producers ask membudget_over() before they read again. Once the total
 * has fallen to 7/8 of the cap, the resume hooks run from the loop. One
 * loop, one thread. */
#ifndef AIRLOCK_COMMON_MEMBUDGET_H
#define AIRLOCK_COMMON_MEMBUDGET_H

#include <stdbool.h>
#include <stddef.h>

struct bufferevent;
struct event_base;
struct evbuffer;
struct evbuffer_cb_entry;
struct membudget;

/* A user of the budget. pause runs inside the charge that reached the
 * cap (an evbuffer callback, perhaps inside libevent's own read): it may
 * only stop reading (bufferevent_disable, event_del), never free, write
 * or charge. resume runs from the loop. */
struct membudget_hooks {
	void (*pause)(void *arg);
	void (*resume)(void *arg);
	void *arg;
};

/* A budget of cap bytes (at least 1) on base's loop. NULL on failure. */
struct membudget *membudget_new(struct event_base *base, size_t cap);
/* Every share must have been released first. Tolerates NULL. */
void membudget_free(struct membudget *b);
/* Register a user (at most 4); 0 or -1. */
int membudget_add_user(struct membudget *b, const struct membudget_hooks *h);
/* Forget the user registered with arg. */
void membudget_remove_user(struct membudget *b, void *arg);

/* Whether producers must not read: from the moment the total reached the
 * cap until the resume hooks have run. False for NULL. */
bool membudget_over(const struct membudget *b);
/* Bytes that may still be queued before the cap (0 while over); SIZE_MAX
 * for NULL. */
size_t membudget_room(const struct membudget *b);
size_t membudget_cap(const struct membudget *b);
size_t membudget_used(const struct membudget *b);
/* The most the total has been. */
size_t membudget_peak(const struct membudget *b);

/* What one owner (a connection's side, a DNS client, a relay direction)
 * has queued. All zero is a valid, inactive share. */
struct membudget_share {
	struct membudget *b; /* borrowed; NULL counts nothing */
	size_t held;
	struct evbuffer *buf[2]; /* watched (borrowed from their bufferevent) */
	struct evbuffer_cb_entry *cb[2];
};

/* Start s on b (NULL: an inactive share). s holds nothing yet. */
void membudget_share_init(struct membudget_share *s, struct membudget *b);
/* Charge to s what bev's input and output buffers hold now, and every
 * change to them from now on, until membudget_share_release(). bev is
 * borrowed and must outlive the watch. At most one bufferevent per share.
 * Returns 0, or -1 (nothing watched). */
int membudget_share_watch(struct membudget_share *s, struct bufferevent *bev);
/* Stop watching, and give back everything s holds. Call it before the
 * watched bufferevent is freed. Tolerates an inactive share; s stays on
 * its budget for later watches. */
void membudget_share_release(struct membudget_share *s);
/* Queue kept outside a watched buffer. */
void membudget_share_add(struct membudget_share *s, size_t n);
void membudget_share_sub(struct membudget_share *s, size_t n);

#endif
