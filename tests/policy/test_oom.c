/* Allocation-failure torture for the loader (after curl's torture mode):
 * fail the 1st, 2nd, 3rd ... allocation the policy library makes itself
 * (malloc, calloc and realloc are wrapped with -Wl,--wrap) until a load
 * runs without reaching the failure. Every run must either return a
 * working policy or NULL; never crash, and under ASan never leak. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <cmocka.h>

#include "policy/inspect.h"
#include "tests/policy/util.h"

void *__real_malloc(size_t n);
void *__real_calloc(size_t n, size_t size);
void *__real_realloc(void *p, size_t n);
void *__wrap_malloc(size_t n);
void *__wrap_calloc(size_t n, size_t size);
void *__wrap_realloc(void *p, size_t n);

static long countdown = -1; /* fail when it reaches 0; -1: never */
static long calls;

static bool
fail_now(void)
{
	calls++;
	if (countdown < 0)
		return false;
	return countdown-- == 0;
}

void *
__wrap_malloc(size_t n)
{
	return fail_now() ? NULL : __real_malloc(n);
}

void *
__wrap_calloc(size_t n, size_t size)
{
	return fail_now() ? NULL : __real_calloc(n, size);
}

void *
__wrap_realloc(void *p, size_t n)
{
	return fail_now() ? NULL : __real_realloc(p, n);
}

static const char *const yaml_head =
        "version: 1\nname: torture\n"
        "allow:\n"
        "  - host: pypi.org\n"
        "  - host: \"*.pythonhosted.org\"\n    ports: [443, \"8000-8100\"]\n"
        "  - cidr: 203.0.113.0/24\n"
        "  - cidr: 2001:db8::/32\n"
        "  - host: pastebin.com\n"
        "  - host: origin.lab\n    ports: [443]\n"
        "    inspect: {http: {access: read-only, deny: [{methods: [\"*\"], path: \"/**/x\"}],"
        " allow: [{methods: [POST], path: \"/a/*\"}], only_paths: [\"/a/**\"],"
        " max_request_body: 1MiB}}\n"
        "deny:\n  - host: upload.pypi.org\n";

static void
test_every_allocation_fails_once(void **state)
{
	long n, total, loaded = 0, refused = 0;
	char *yaml = __real_malloc(64 * 1024);
	size_t off = (size_t)snprintf(yaml, 1024, "%s", yaml_head);

	(void)state;
	/* enough rules and ports that every vector grows a few times */
	for (int i = 0; i < 300; i++)
		off += (size_t)snprintf(yaml + off, 64 * 1024 - off,
		                        "  - host: h%d.test\n    ports: [%d]\n", i, i + 1);
	/* How many allocations does a clean load make? */
	countdown = -1;
	calls = 0;
	{
		struct policy_diag d = {0};
		struct policy *p = load_str(yaml, &d);

		assert_non_null(p);
		policy_free(p);
		policy_diag_clear(&d);
	}
	total = calls;
	assert_true(total > 5);
	for (n = 0; n <= total; n++) {
		struct policy_diag d = {0};
		struct policy *p;

		countdown = n;
		p = load_str(yaml, &d);
		countdown = -1;
		if (p != NULL) {
			struct policy_verdict v;

			/* a policy that loaded despite a failure must be whole */
			policy_match_host(p, "files.pythonhosted.org", 8080, &v);
			assert_int_equal(v.action, POLICY_ALLOW);
			policy_match_host(p, "upload.pypi.org", 443, &v);
			assert_int_equal(v.action, POLICY_DENY);
			/* its inspect: whole too */
			{
				const struct policy_inspect *pi =
				        policy_match_inspect(p, "origin.lab", 443);

				assert_non_null(pi);
				assert_int_equal(pi->http.n_deny, 1);
				assert_int_equal(pi->http.n_allow, 1);
				assert_int_equal(pi->http.n_only_paths, 1);
				assert_non_null(pi->http.only_paths[0]);
				assert_non_null(pi->http.deny[0].where);
				assert_non_null(pi->where);
			}
			policy_free(p);
			loaded++;
		} else {
			refused++;
		}
		policy_diag_clear(&d);
	}
	printf("%ld allocations per load: %ld runs refused, %ld loaded\n", total, refused, loaded);
	assert_true(refused > 0);
	free(yaml);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test(test_every_allocation_fails_once),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
