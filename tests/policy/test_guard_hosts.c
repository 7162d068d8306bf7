/* The host's own addresses (guard_hosts in policy/guard.h): what is kept,
 * entries per interface and prefix length, the mapped spelling, the
 * bound, and every state that is not KNOWN reading as UNKNOWN. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <cmocka.h>

#include "policy/guard.h"
#include "tests/policy/util.h"

/* An entry for text (v4 or v6) on interface ifindex. */
static struct guard_host_addr
ent(const char *text, uint32_t ifindex, uint8_t plen)
{
	struct guard_host_addr a;

	memset(&a, 0, sizeof(a));
	a.ifindex = ifindex;
	a.prefixlen = plen;
	if (inet_pton(AF_INET, text, a.addr) == 1)
		a.family = AF_INET;
	else if (inet_pton(AF_INET6, text, a.addr) == 1)
		a.family = AF_INET6;
	else
		fail_msg("bad address %s", text);
	return a;
}

static enum guard_host
look(const struct guard_hosts *h, const char *text)
{
	struct sockaddr_storage ss;

	return guard_hosts_lookup(h, addr(&ss, text));
}

static struct guard_hosts *
known(size_t max)
{
	struct guard_hosts *h = guard_hosts_new(max);

	assert_non_null(h);
	guard_hosts_set_state(h, GUARD_HOSTS_KNOWN);
	return h;
}

static void
test_starts_unknown(void **state)
{
	struct guard_hosts *h = guard_hosts_new(0);
	(void)state;

	/* Nothing read yet is not "nothing is the host's". */
	assert_int_equal(guard_hosts_state(h), GUARD_HOSTS_READING);
	assert_int_equal(look(h, "203.0.113.1"), GUARD_HOST_UNKNOWN);
	assert_int_equal(look(h, "2001:db8::1"), GUARD_HOST_UNKNOWN);
	guard_hosts_set_state(h, GUARD_HOSTS_KNOWN);
	assert_int_equal(look(h, "203.0.113.1"), GUARD_HOST_OTHER);
	guard_hosts_free(h);
	guard_hosts_free(NULL);
}

static void
test_add_lookup_del(void **state)
{
	struct guard_hosts *h = known(0);
	struct guard_host_addr a4 = ent("203.0.113.9", 2, 24);
	struct guard_host_addr a6 = ent("2001:db8:5::9", 2, 64);
	(void)state;

	assert_int_equal(guard_hosts_add(h, &a4), 0);
	assert_int_equal(guard_hosts_add(h, &a6), 0);
	assert_int_equal(guard_hosts_count(h), 2);
	assert_int_equal(look(h, "203.0.113.9"), GUARD_HOST_OWN);
	assert_int_equal(look(h, "2001:db8:5::9"), GUARD_HOST_OWN);
	/* Neighbours are not the host. */
	assert_int_equal(look(h, "203.0.113.8"), GUARD_HOST_OTHER);
	assert_int_equal(look(h, "203.0.113.10"), GUARD_HOST_OTHER);
	assert_int_equal(look(h, "2001:db8:5::8"), GUARD_HOST_OTHER);
	/* A v4 address is never its v6 namesake's bytes. */
	assert_int_equal(look(h, "::cb00:7109"), GUARD_HOST_OTHER);

	/* Again (NEWADDR repeats for every change of flags): one entry. */
	assert_int_equal(guard_hosts_add(h, &a4), 0);
	assert_int_equal(guard_hosts_count(h), 2);

	guard_hosts_del(h, &a4);
	assert_int_equal(look(h, "203.0.113.9"), GUARD_HOST_OTHER);
	assert_int_equal(look(h, "2001:db8:5::9"), GUARD_HOST_OWN);
	/* Absent: nothing happens. */
	guard_hosts_del(h, &a4);
	assert_int_equal(guard_hosts_count(h), 1);
	guard_hosts_free(h);
}

/* ::ffff:a.b.c.d reaches a.b.c.d through a dual-stack socket: it is the
 * host's whenever a.b.c.d is. */
static void
test_mapped(void **state)
{
	struct guard_hosts *h = known(0);
	struct guard_host_addr a4 = ent("198.51.100.7", 3, 32);
	(void)state;

	assert_int_equal(guard_hosts_add(h, &a4), 0);
	assert_int_equal(look(h, "::ffff:198.51.100.7"), GUARD_HOST_OWN);
	assert_int_equal(look(h, "::ffff:198.51.100.8"), GUARD_HOST_OTHER);
	guard_hosts_free(h);
}

/* The same address on two interfaces, or twice on one with two prefix
 * lengths: the host's until the last entry goes. */
static void
test_last_entry_counts(void **state)
{
	struct guard_hosts *h = known(0);
	struct guard_host_addr lo = ent("203.0.113.72", 1, 32);
	struct guard_host_addr eth = ent("203.0.113.72", 2, 32);
	struct guard_host_addr eth24 = ent("203.0.113.72", 2, 24);
	struct guard_host_addr v6lo = ent("2001:db8:72::72", 1, 128);
	struct guard_host_addr v6eth = ent("2001:db8:72::72", 2, 128);
	(void)state;

	assert_int_equal(guard_hosts_add(h, &lo), 0);
	assert_int_equal(guard_hosts_add(h, &eth), 0);
	assert_int_equal(guard_hosts_add(h, &eth24), 0);
	assert_int_equal(guard_hosts_add(h, &v6lo), 0);
	assert_int_equal(guard_hosts_add(h, &v6eth), 0);
	assert_int_equal(guard_hosts_count(h), 5);

	guard_hosts_del(h, &lo);
	assert_int_equal(look(h, "203.0.113.72"), GUARD_HOST_OWN);
	guard_hosts_del(h, &eth);
	assert_int_equal(look(h, "203.0.113.72"), GUARD_HOST_OWN);
	guard_hosts_del(h, &eth24);
	assert_int_equal(look(h, "203.0.113.72"), GUARD_HOST_OTHER);

	guard_hosts_del(h, &v6eth);
	assert_int_equal(look(h, "2001:db8:72::72"), GUARD_HOST_OWN);
	guard_hosts_del(h, &v6lo);
	assert_int_equal(look(h, "2001:db8:72::72"), GUARD_HOST_OTHER);
	assert_int_equal(guard_hosts_count(h), 0);
	guard_hosts_free(h);
}

/* Only public addresses are kept: the rest are refused by class. */
static void
test_only_public_kept(void **state)
{
	static const char *const skipped[] = {
	        "127.0.0.1", "10.1.2.3", "192.168.1.1", "169.254.1.1",     "100.64.0.1",
	        "::1",       "fe80::1",  "fd00::1",     "::ffff:10.0.0.1",
	};
	struct guard_hosts *h = known(2);
	struct guard_host_addr a;
	(void)state;

	for (size_t i = 0; i < sizeof(skipped) / sizeof(skipped[0]); i++) {
		a = ent(skipped[i], 5, 8);
		assert_int_equal(guard_hosts_add(h, &a), 0);
	}
	/* So they never count towards the bound (2 here). */
	assert_int_equal(guard_hosts_count(h), 0);
	assert_int_equal(guard_hosts_state(h), GUARD_HOSTS_KNOWN);
	a = ent("203.0.113.1", 5, 24);
	assert_int_equal(guard_hosts_add(h, &a), 0);
	assert_int_equal(guard_hosts_count(h), 1);
	/* Another family is ignored. */
	a.family = AF_UNIX;
	assert_int_equal(guard_hosts_add(h, &a), 0);
	assert_int_equal(guard_hosts_count(h), 1);
	guard_hosts_free(h);
}

/* Past the bound the set cannot answer: FULL, every lookup UNKNOWN, and
 * KNOWN is refused until a fresh read (clear) that fits. */
static void
test_bound_fails_closed(void **state)
{
	struct guard_hosts *h = known(3);
	struct guard_host_addr a;
	char text[32];
	(void)state;

	for (int i = 1; i <= 3; i++) {
		snprintf(text, sizeof(text), "203.0.113.%d", i);
		a = ent(text, 2, 24);
		assert_int_equal(guard_hosts_add(h, &a), 0);
	}
	assert_int_equal(guard_hosts_state(h), GUARD_HOSTS_KNOWN);
	a = ent("203.0.113.4", 2, 24);
	assert_int_equal(guard_hosts_add(h, &a), -1);
	assert_int_equal(guard_hosts_state(h), GUARD_HOSTS_FULL);
	assert_int_equal(guard_hosts_count(h), 3);
	/* Every address, kept or not, is possibly the host's. */
	assert_int_equal(look(h, "203.0.113.4"), GUARD_HOST_UNKNOWN);
	assert_int_equal(look(h, "203.0.113.1"), GUARD_HOST_UNKNOWN);
	assert_int_equal(look(h, "198.51.100.1"), GUARD_HOST_UNKNOWN);
	/* An existing entry again is still fine. */
	a = ent("203.0.113.1", 2, 24);
	assert_int_equal(guard_hosts_add(h, &a), 0);

	/* A deletion does not make the set whole again... */
	guard_hosts_del(h, &a);
	guard_hosts_set_state(h, GUARD_HOSTS_KNOWN);
	assert_int_equal(guard_hosts_state(h), GUARD_HOSTS_FULL);
	assert_int_equal(look(h, "198.51.100.1"), GUARD_HOST_UNKNOWN);

	/* ...a fresh read that fits does. */
	guard_hosts_clear(h);
	assert_int_equal(guard_hosts_state(h), GUARD_HOSTS_READING);
	assert_int_equal(guard_hosts_count(h), 0);
	assert_int_equal(look(h, "198.51.100.1"), GUARD_HOST_UNKNOWN);
	a = ent("203.0.113.4", 2, 24);
	assert_int_equal(guard_hosts_add(h, &a), 0);
	guard_hosts_set_state(h, GUARD_HOSTS_KNOWN);
	assert_int_equal(guard_hosts_state(h), GUARD_HOSTS_KNOWN);
	assert_int_equal(look(h, "203.0.113.4"), GUARD_HOST_OWN);
	assert_int_equal(look(h, "203.0.113.1"), GUARD_HOST_OTHER);
	guard_hosts_free(h);
}

static void
test_states_unknown(void **state)
{
	static const enum guard_hosts_state states[] = {GUARD_HOSTS_READING, GUARD_HOSTS_FULL,
	                                                GUARD_HOSTS_LOST};
	struct guard_hosts *h = known(0);
	(void)state;

	for (size_t i = 0; i < sizeof(states) / sizeof(states[0]); i++) {
		guard_hosts_set_state(h, states[i]);
		assert_int_equal(look(h, "203.0.113.1"), GUARD_HOST_UNKNOWN);
		assert_int_equal(look(h, "2001:db8::1"), GUARD_HOST_UNKNOWN);
		assert_non_null(strstr(guard_hosts_state_text(states[i]), "host"));
	}
	guard_hosts_set_state(h, GUARD_HOSTS_KNOWN);
	assert_int_equal(look(h, "203.0.113.1"), GUARD_HOST_OTHER);
	guard_hosts_free(h);
}

/* Insertion order does not matter: the set stays sorted, every entry is
 * found, and only those. */
static void
test_many_any_order(void **state)
{
	struct guard_hosts *h = known(0);
	struct guard_host_addr a;
	char text[64];
	(void)state;

	/* 0..999 in a scrambled order (7 is coprime to 1000). */
	for (int k = 0; k < 1000; k++) {
		int i = (k * 7) % 1000;

		if (i % 2 == 0)
			snprintf(text, sizeof(text), "198.51.%d.%d", 100 + i / 250, i % 250 + 1);
		else
			snprintf(text, sizeof(text), "2001:db8:%x::%x", i, i + 1);
		a = ent(text, (uint32_t)(i % 3 + 1), 24);
		assert_int_equal(guard_hosts_add(h, &a), 0);
	}
	assert_int_equal(guard_hosts_count(h), 1000);
	for (int i = 0; i < 1000; i++) {
		if (i % 2 == 0)
			snprintf(text, sizeof(text), "198.51.%d.%d", 100 + i / 250, i % 250 + 1);
		else
			snprintf(text, sizeof(text), "2001:db8:%x::%x", i, i + 1);
		assert_int_equal(look(h, text), GUARD_HOST_OWN);
		if (i % 2 == 1) {
			snprintf(text, sizeof(text), "2001:db8:%x::%x", i, i + 2);
			assert_int_equal(look(h, text), GUARD_HOST_OTHER);
		}
	}
	assert_int_equal(look(h, "198.51.104.1"), GUARD_HOST_OTHER);
	guard_hosts_free(h);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test(test_starts_unknown),   cmocka_unit_test(test_add_lookup_del),
	        cmocka_unit_test(test_mapped),           cmocka_unit_test(test_last_entry_counts),
	        cmocka_unit_test(test_only_public_kept), cmocka_unit_test(test_bound_fails_closed),
	        cmocka_unit_test(test_states_unknown),   cmocka_unit_test(test_many_any_order),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
