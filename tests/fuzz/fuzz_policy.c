/* Fuzz target: the policy loader on arbitrary bytes, then a few matches on
 * whatever loaded, plus the name normaliser and the guard on the same
 * bytes. Any crash, leak or UB under ASan/UBSan is a bug. */
#include <netinet/in.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "policy/guard.h"
#include "policy/policy.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const char *const names[] = {
	        "pypi.org",
	        "files.pythonhosted.org",
	        "a.b.c.example.com",
	        "example.com",
	        "com",
	        "evil.test",
	        "1.2.3.4",
	        "x",
	};
	struct policy_diag d = {0};
	struct policy *p;
	char in[300], norm[256];
	const char *why;
	size_t n = size < sizeof(in) - 1 ? size : sizeof(in) - 1;

	/* The normaliser sees the raw bytes as a C string. */
	memcpy(in, data, n);
	in[n] = '\0';
	if (policy_name_normalize(in, norm, sizeof(norm), &why) == 0 && strlen(norm) > 253)
		abort();

	/* The guard on the first 16 bytes, as v4 and v6. */
	if (size >= 16) {
		struct sockaddr_in sin = {.sin_family = AF_INET};
		struct sockaddr_in6 sin6 = {.sin6_family = AF_INET6};

		memcpy(&sin.sin_addr, data, 4);
		memcpy(&sin6.sin6_addr, data, 16);
		(void)guard_classify((struct sockaddr *)&sin);
		(void)guard_class_name(guard_classify((struct sockaddr *)&sin6));
	}

	p = policy_load_buffer("fuzz.yaml", data, size, &d);
	if (p != NULL) {
		struct policy_verdict v;
		struct sockaddr_in sin = {.sin_family = AF_INET};
		struct sockaddr_in6 sin6 = {.sin6_family = AF_INET6};
		char *desc;

		if (d.n_lines != 0)
			abort(); /* a loaded policy never comes with errors */
		for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
			policy_match_host(p, names[i], 443, &v);
			policy_match_host(p, names[i], 80, &v);
		}
		if (norm[0] != '\0')
			policy_match_host(p, norm, 443, &v);
		sin.sin_addr.s_addr = htonl(0xcb007101u);
		policy_match_addr(p, (struct sockaddr *)&sin, 443, &v);
		sin6.sin6_addr.s6_addr[0] = 0x20;
		sin6.sin6_addr.s6_addr[1] = 0x01;
		sin6.sin6_addr.s6_addr[2] = 0x0d;
		sin6.sin6_addr.s6_addr[3] = 0xb8;
		(void)policy_cidr_allows(p, (struct sockaddr *)&sin6, 22);
		(void)policy_name(p);
		(void)policy_sha256(p);
		if ((desc = policy_describe(p)) != NULL)
			free(desc);
		policy_free(p);
	} else if (d.n_lines == 0) {
		abort(); /* a refused policy always says why */
	}
	policy_diag_clear(&d);
	return 0;
}
