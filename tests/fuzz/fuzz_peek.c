/* Fuzz peek_parse() the way bytes arrive on a connection: the input after
 * the first two bytes is offered as growing prefixes cut at points drawn
 * from those two bytes, as in fuzz_sni.c. A prefix may only ask for more
 * (PEEK_MORE) or give the whole input's answer: kind, error and name. From
 * PEEK_MAX_INPUT bytes on it never asks for more; names and lengths stay
 * within their bounds, and every refusal has a reason and a status. A name
 * read is the same name as itself folded (peek_same_name, as a tunnel's
 * first bytes are checked against its target) and never another. The
 * record walker (peek_tls_record, a named TLS connection's later
 * ClientHellos) is run over the same bytes from record to record: every
 * answer stays within the input, and a prefix only ever asks for more or
 * gives the same answer. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "policy/policy.h"
#include "proxy/peek.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static struct http_head head;

static enum peek_kind
peek_copy(const uint8_t *data, size_t len, struct peek *out)
{
	/* exact-size heap copy so ASan catches any read past len */
	uint8_t *copy = malloc(len ? len : 1);
	enum peek_kind k;

	if (copy == NULL)
		abort();
	if (len > 0)
		memcpy(copy, data, len);
	k = peek_parse(copy, len, 8080, &head, out);
	free(copy);
	return k;
}

static void
check(enum peek_kind k, const struct peek *p, size_t len)
{
	char why[512];

	if (strnlen(p->name, sizeof(p->name)) == sizeof(p->name) ||
	    strnlen(p->detail, sizeof(p->detail)) == sizeof(p->detail))
		abort();
	if ((k == PEEK_TLS || k == PEEK_HTTP) && (p->len == 0 || p->len > len))
		abort();
	if ((k == PEEK_BAD) != (p->error != PEEK_OK))
		abort();
	if (k == PEEK_BAD) {
		int st = peek_status(p);

		peek_reason(p, why, sizeof(why));
		if (why[0] == '\0' || (st != 400 && st != 431))
			abort();
	}
	if (len >= PEEK_MAX_INPUT && k == PEEK_MORE)
		abort();
	if ((k == PEEK_TLS || k == PEEK_HTTP) && p->name[0] != '\0') {
		char folded[HTTP_HOST_MAX];
		const char *bad;

		if (p->ip_literal) {
			if (!peek_same_name(p, p->name, true) || peek_same_name(p, p->name, false))
				abort();
		} else if (policy_name_normalize(p->name, folded, sizeof(folded), &bad) == 0) {
			if (!peek_same_name(p, folded, false) || peek_same_name(p, "0.0.0.0", true))
				abort();
			folded[0] = folded[0] == 'a' ? 'b' : 'a';
			if (peek_same_name(p, folded, false))
				abort();
		}
	}
}

static enum peek_rec
record_copy(const uint8_t *data, size_t len, bool ccs, struct peek *out, size_t *skip)
{
	uint8_t *copy = malloc(len ? len : 1);
	enum peek_rec r;

	if (copy == NULL)
		abort();
	if (len > 0)
		memcpy(copy, data, len);
	r = peek_tls_record(copy, len, ccs, out, skip);
	free(copy);
	return r;
}

/* Walk records as bind.c does; each answer checked against a prefix. */
static void
walk_records(const uint8_t *data, size_t size, bool ccs)
{
	size_t off = 0;

	for (int i = 0; i < 64 && off < size; i++) {
		struct peek p, q;
		size_t skip, qskip;
		enum peek_rec r = record_copy(data + off, size - off, ccs, &p, &skip);
		enum peek_rec pr = record_copy(data + off, (size - off) / 2, ccs, &q, &qskip);

		if (pr != PEEK_REC_MORE && pr != PEEK_REC_END && (pr != r || qskip != skip))
			abort();
		if (strnlen(p.name, sizeof(p.name)) == sizeof(p.name))
			abort();
		switch (r) {
		case PEEK_REC_MORE:
		case PEEK_REC_END:
			return;
		case PEEK_REC_BAD:
			if (p.error == PEEK_OK)
				abort();
			return;
		case PEEK_REC_SKIP:
			if (skip == 0 || skip > size - off)
				abort();
			ccs = ccs || data[off] == 0x14;
			off += skip;
			break;
		case PEEK_REC_HELLO:
			if (p.len == 0 || p.len > size - off)
				abort();
			off += p.len;
			break;
		}
	}
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct peek whole, p;
	enum peek_kind wk, k;
	unsigned seed;

	if (size < 2)
		return 0;
	seed = (unsigned)data[0] << 8 | data[1];
	data += 2;
	size -= 2;
	if (size > PEEK_MAX_INPUT)
		size = PEEK_MAX_INPUT;
	wk = peek_copy(data, size, &whole);
	check(wk, &whole, size);
	walk_records(data, size, (seed & 1) != 0);
	for (size_t off = 0; off < size;) {
		seed = seed * 1103515245u + 12345u;
		off += 1 + (seed >> 16) % 61;
		if (off > size)
			off = size;
		k = peek_copy(data, off, &p);
		check(k, &p, off);
		if (k == PEEK_MORE)
			continue;
		if (k != wk || p.error != whole.error || strcmp(p.name, whole.name) != 0 ||
		    p.ech != whole.ech || p.len != whole.len)
			abort();
		break;
	}
	return 0;
}
