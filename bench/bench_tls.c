/* bench-tls: the cost of the task CA's leaves (tls/ca.h), against issue
 * 17's target of at most 0.3 ms of CPU per leaf minted on a cache miss.
 *
 *   bench-tls [N]   (default 2000 leaves)
 *
 * Times, in this process's CPU clock (so a shared machine's load does not
 * count): making a CA; N leaves for N distinct names (every one a miss:
 * a P-256 ECDSA signature and the certificate built around it); N lookups
 * of cached names (hits); the parse of a leaf's DER and key by the side
 * that presents it; and the memory a cached leaf holds (mallinfo2
 * before and after filling the cache). No network. */
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "tls/ca.h"

static double
cpu_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

int
main(int argc, char **argv)
{
	unsigned n = argc > 1 ? (unsigned)strtoul(argv[1], NULL, 10) : 2000;
	struct tlsca_config cfg = {.cache_max = n, .mint_limit = n};
	struct tlsca *ca;
	struct tlsca_stats st;
	char err[256], name[64];
	double t0, t_ca, t_miss, t_hit, t_parse;
	size_t mem0, mem1;

	if (n == 0 || n > 100000) {
		fprintf(stderr, "bench-tls: N must be 1-100000\n");
		return 2;
	}
	t0 = cpu_s();
	if ((ca = tlsca_new(&cfg, err, sizeof(err))) == NULL) {
		fprintf(stderr, "bench-tls: %s\n", err);
		return 1;
	}
	t_ca = cpu_s() - t0;
	mem0 = mallinfo2().uordblks;
	t0 = cpu_s();
	for (unsigned i = 0; i < n; i++) {
		const unsigned char *der;
		size_t len;

		snprintf(name, sizeof(name), "host%u.bench.test", i);
		if (tlsca_leaf(ca, name, &der, &len) != TLSCA_OK) {
			fprintf(stderr, "bench-tls: leaf %s refused\n", name);
			return 1;
		}
	}
	t_miss = cpu_s() - t0;
	mem1 = mallinfo2().uordblks;
	t0 = cpu_s();
	for (unsigned i = 0; i < n; i++) {
		const unsigned char *der;
		size_t len;

		snprintf(name, sizeof(name), "host%u.bench.test", (i * 7919u) % n);
		if (tlsca_leaf(ca, name, &der, &len) != TLSCA_OK)
			return 1;
	}
	t_hit = cpu_s() - t0;
	/* What the side that presents a leaf pays to take one in: parse the
	 * DER and decode its key (as SSL_use_certificate does). */
	t0 = cpu_s();
	for (unsigned i = 0; i < n; i++) {
		const unsigned char *der, *p;
		size_t len;
		X509 *x;

		snprintf(name, sizeof(name), "host%u.bench.test", i);
		if (tlsca_leaf(ca, name, &der, &len) != TLSCA_OK)
			return 1;
		p = der;
		if ((x = d2i_X509(NULL, &p, (long)len)) == NULL || X509_get0_pubkey(x) == NULL) {
			fprintf(stderr, "bench-tls: leaf %s does not parse\n", name);
			return 1;
		}
		X509_free(x);
	}
	t_parse = cpu_s() - t0 - t_hit;
	tlsca_stats(ca, &st);
	printf("CA (two P-256 keys, the CA certificate): %.3f ms\n", t_ca * 1e3);
	printf("leaf minted (cache miss), %u names: %.1f us CPU each (target <= 300 us)\n", n,
	       t_miss / n * 1e6);
	printf("leaf from the cache (hit), %u lookups: %.2f us CPU each\n", n, t_hit / n * 1e6);
	printf("leaf parsed with its key by the presenting side: %.1f us CPU each\n",
	       t_parse / n * 1e6);
	printf("memory per cached leaf: %.0f bytes (%llu minted, %llu hits)\n",
	       (double)(mem1 - mem0) / n, (unsigned long long)st.minted,
	       (unsigned long long)st.hits);
	tlsca_free(ca);
	return 0;
}
