/* nflog_parse gets netlink datagrams whose packet bytes the sandboxed
 * process chose. Whatever arrives: no crash, no read outside the buffer,
 * and every packet handed on is well-formed. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "nft/nflog.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void
check(const struct nflog_packet *pkt, void *arg)
{
	(void)arg;
	if (memchr(pkt->dst, '\0', sizeof(pkt->dst)) == NULL ||
	    memchr(pkt->proto, '\0', sizeof(pkt->proto)) == NULL || pkt->dport < -1 ||
	    pkt->dport > 65535 || pkt->proto[0] == '\0' ||
	    memchr(pkt->prefix, '\0', sizeof(pkt->prefix)) == NULL || pkt->sport < -1 ||
	    pkt->sport > 65535 || (pkt->sport < 0) != (pkt->dport < 0))
		abort();
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	/* A copy of exactly size bytes, so ASan sees any over-read, in
	 * malloc's alignment, as a recv buffer would be. */
	uint8_t *buf = malloc(size > 0 ? size : 1);
	int n;

	if (buf == NULL)
		return 0;
	memcpy(buf, data, size);
	n = nflog_parse(buf, size, check, NULL);
	if (n < -1 || (n > 0 && (size_t)n > size / 16))
		abort();
	free(buf);
	return 0;
}
