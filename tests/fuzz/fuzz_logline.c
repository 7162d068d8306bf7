/* Fuzz the egress-log line reader (elog/json.c, elog/record.c) and the
 * writer's escaping. Properties checked, beyond "no crash, no UB":
 *  - any bytes, escaped by the writer as a JSON string, parse back as a
 *    string that is the input with invalid UTF-8 replaced by U+FFFD;
 *  - a line accepted by the reader has the fields it promises (ts, kind),
 *    and stands for at least one event (elog_record_events). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "elog/buf.h"
#include "elog/json.h"
#include "elog/record.h"

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
	return 0;
}
