/* Fuzz the egress-log line reader (elog/json.c, elog/record.c), the
 * writer's escaping, and `airlock log verify`'s chain checker
 * (elog/verify.c) with the writer's sealing (elog/chain.c). Properties
 * checked, beyond "no crash, no UB":
 *  - any bytes, escaped by the writer as a JSON string, parse back as a
 *    string that is the input with invalid UTF-8 replaced by U+FFFD;
 *  - a line accepted by the reader has the fields it promises (ts, kind),
 *    and stands for at least one event (elog_record_events);
 *  - the input's lines, checked as a log, give a break on a line that was
 *    fed, or none;
 *  - the input's lines, as host fields of lines the writer seals into a
 *    chain, verify; one byte changed anywhere in one of them but the last
 *    is found, on that line or the one after it. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "elog/buf.h"
#include "elog/chain.h"
#include "elog/json.h"
#include "elog/record.h"
#include "elog/verify.h"

static struct elog_json J;

static void
check_escape_round_trip(const uint8_t *data, size_t size)
{
	static char in[4097], out[6 * 4096 + 8], expect[3 * 4096 + 8];
	struct elog_buf b;
	char why[160];
	size_t n = 0, e = 0;

	/* C strings: stop at the first NUL, as the writer sees them. */
	for (; n < size && n < sizeof(in) - 1 && data[n] != 0; n++)
		in[n] = (char)data[n];
	in[n] = '\0';
	elog_buf_init(&b, out, sizeof(out));
	if (elog_buf_json_str(&b, in, SIZE_MAX) || b.overflow)
		abort();
	if (elog_json_parse(&J, out, b.len, why, sizeof(why)) != 0)
		abort();
	for (size_t i = 0; i < n;) {
		size_t sl = elog_utf8_len((const unsigned char *)in + i, n - i);
		if (sl == 0) {
			memcpy(expect + e, "\xef\xbf\xbd", 3);
			e += 3;
			i++;
		} else {
			memcpy(expect + e, in + i, sl);
			e += sl;
			i += sl;
		}
	}
	expect[e] = '\0';
	const char *got = elog_json_str(&J, 0);
	if (got == NULL || strcmp(got, expect) != 0)
		abort();
}

/* The input as a log: lines at each newline, the last one cut when the
 * input does not end in one. */
static void
check_verify_raw(const uint8_t *data, size_t size)
{
	struct elog_verify *v = elog_verify_new();
	struct elog_verify_break brk;
	struct elog_line l = {.lineno = 0};
	char what[320];
	size_t at = 0;
	int r = 0;

	if (v == NULL)
		abort();
	while (r == 0 && at < size) {
		const uint8_t *nl = memchr(data + at, '\n', size - at);
		size_t len = nl != NULL ? (size_t)(nl - (data + at)) : size - at;

		l = (struct elog_line){.data = (const char *)data + at,
		                       .len = len,
		                       .lineno = l.lineno + 1,
		                       .cut = nl == NULL,
		                       .too_long = len > ELOG_LINE_MAX};
		if (l.too_long)
			l.data = NULL;
		r = elog_verify_line(v, &l, &brk);
		at += len + 1;
	}
	if (r == 0)
		r = elog_verify_end(v, &brk);
	if (r == 1) {
		if (brk.what == ELOG_BREAK_NONE || brk.line == 0 || brk.line > l.lineno)
			abort();
		elog_verify_describe(&brk, what, sizeof(what));
	} else if (r != 0) {
		abort();
	}
	elog_verify_free(v);
}

#define CHAIN_LINES 16

/* Feed lines[0..n) to a fresh checker: 0 when it holds, else the line of
 * the break. */
static uint64_t
verify_lines(char lines[][2048], const size_t *lens, size_t n)
{
	struct elog_verify *v = elog_verify_new();
	struct elog_verify_break brk;
	uint64_t at = 0;
	int r = 0;

	if (v == NULL)
		abort();
	for (size_t i = 0; r == 0 && i < n; i++) {
		struct elog_line l = {.data = lines[i], .len = lens[i], .lineno = i + 1};
		r = elog_verify_line(v, &l, &brk);
	}
	if (r == 0)
		r = elog_verify_end(v, &brk);
	if (r == 1)
		at = brk.line;
	elog_verify_free(v);
	return at;
}

static void
check_chain_sealed(const uint8_t *data, size_t size)
{
	static char lines[CHAIN_LINES][2048];
	size_t lens[CHAIN_LINES], n = 0, at = 0;
	struct elog_chain c;
	char host[256];

	elog_chain_init(&c);
	while (n < CHAIN_LINES && (at < size || n == 0)) {
		const uint8_t *nl = memchr(data + at, '\n', size - at);
		size_t len = nl != NULL ? (size_t)(nl - (data + at)) : size - at, k;
		struct elog_buf b;

		for (k = 0; k < len && k < sizeof(host) - 1 && data[at + k] != 0; k++)
			host[k] = (char)data[at + k];
		host[k] = '\0';
		elog_buf_init(&b, lines[n], sizeof(lines[n]));
		elog_buf_puts(&b, "{\"ts\":\"2026-12-01T00:00:00.000Z\",\"task\":\"f\",\"kind\":");
		elog_buf_puts(&b, n == 0 ? "\"task-start\"" : "\"dns\"");
		elog_buf_puts(&b, ",\"host\":");
		elog_buf_json_str(&b, host, 255);
		if (n == 0)
			elog_chain_restart(&c);
		if (elog_chain_seal(&c, &b) < 0)
			abort();
		elog_chain_commit(&c);
		lens[n] = b.len - 1; /* without the newline */
		n++;
		at += len + 1;
	}
	if (verify_lines(lines, lens, n) != 0)
		abort();
	if (n < 2 || size == 0)
		return;
	/* One byte of one line but the last, changed. */
	unsigned sel = data[0] | (unsigned)data[size - 1] << 8;
	size_t m = sel % (n - 1), pos = (sel >> 3) % lens[m];
	uint8_t flip = (uint8_t)(1 + data[size / 2] % 255);
	uint64_t got;

	lines[m][pos] = (char)(lines[m][pos] ^ flip);
	got = verify_lines(lines, lens, n);
	if (got != m + 1 && got != m + 2)
		abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct elog_record rec;
	char why[160];

	if (elog_record_parse(&J, (const char *)data, size, &rec, why, sizeof(why)) == 0) {
		if (rec.ts == NULL || rec.kind == NULL || rec.port > 65535)
			abort();
		if (rec.type == ELOG_REC_EVENT && elog_record_events(&rec) == 0)
			abort();
		if (rec.answers >= 0)
			for (uint32_t k = 0; k < J.tok[rec.answers].count; k++)
				if (elog_json_str(&J, elog_json_elem(&J, rec.answers, k)) == NULL)
					abort();
	}
	check_escape_round_trip(data, size);
	check_verify_raw(data, size);
	check_chain_sealed(data, size);
	return 0;
}
