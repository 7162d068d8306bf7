#include "elog/buf.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

void
elog_buf_init(struct elog_buf *b, char *storage, size_t cap)
{
	b->data = storage;
	b->len = 0;
	b->cap = cap;
	b->overflow = false;
}

void
elog_buf_put(struct elog_buf *b, const char *s, size_t n)
{
	if (n > b->cap - b->len) {
		b->overflow = true;
		return;
	}
	memcpy(b->data + b->len, s, n);
	b->len += n;
}

void
elog_buf_puts(struct elog_buf *b, const char *s)
{
	elog_buf_put(b, s, strlen(s));
}

void
elog_buf_putc(struct elog_buf *b, char c)
{
	elog_buf_put(b, &c, 1);
}

void
elog_buf_u64(struct elog_buf *b, uint64_t v)
{
	char tmp[24];
	int n = snprintf(tmp, sizeof(tmp), "%" PRIu64, v);

	elog_buf_put(b, tmp, (size_t)n);
}

void
elog_buf_i64(struct elog_buf *b, int64_t v)
{
	char tmp[24];
	int n = snprintf(tmp, sizeof(tmp), "%" PRId64, v);

	elog_buf_put(b, tmp, (size_t)n);
}

size_t
elog_utf8_len(const unsigned char *s, size_t n)
{
	unsigned char c = s[0];

	if (c < 0x80)
		return 1;
	/* Table 3-7 of the Unicode standard: the second byte's range depends
	 * on the first, which rules out overlongs, surrogates and values
	 * above U+10FFFF in one place. */
	if (c >= 0xc2 && c <= 0xdf) {
		if (n >= 2 && (s[1] & 0xc0) == 0x80)
			return 2;
		return 0;
	}
	if (c >= 0xe0 && c <= 0xef) {
		unsigned char lo = 0x80, hi = 0xbf;
		if (c == 0xe0)
			lo = 0xa0;
		else if (c == 0xed)
			hi = 0x9f;
		if (n >= 3 && s[1] >= lo && s[1] <= hi && (s[2] & 0xc0) == 0x80)
			return 3;
		return 0;
	}
	if (c >= 0xf0 && c <= 0xf4) {
		unsigned char lo = 0x80, hi = 0xbf;
		if (c == 0xf0)
			lo = 0x90;
		else if (c == 0xf4)
			hi = 0x8f;
		if (n >= 4 && s[1] >= lo && s[1] <= hi && (s[2] & 0xc0) == 0x80 &&
		    (s[3] & 0xc0) == 0x80)
			return 4;
		return 0;
	}
	return 0;
}

static const char hexdig[] = "0123456789abcdef";

bool
elog_buf_json_str(struct elog_buf *b, const char *s, size_t cap)
{
	const unsigned char *p = (const unsigned char *)s;
	size_t n = strlen(s), i = 0, out = 0;
	bool cut = false;

	elog_buf_putc(b, '"');
	while (i < n) {
		unsigned char c = p[i];
		size_t sl = elog_utf8_len(p + i, n - i);
		size_t take = sl == 0 ? 1 : sl;
		/* What this character costs escaped: the cap is on those bytes,
		 * so a field's worst case is its cap, not six times it. */
		size_t cost = sl == 0                                        ? 6
		              : c == '"' || c == '\\' || c == '\n' || c == '\t' || c == '\r' ? 2
		              : c < 0x20 || c == 0x7f                        ? 6
		                                                             : sl;

		if (out + cost > cap) {
			cut = true;
			break;
		}
		out += cost;
		if (sl == 0) {
			elog_buf_put(b, "\\ufffd", 6);
		} else if (c == '"' || c == '\\') {
			char e[2] = {'\\', (char)c};
			elog_buf_put(b, e, 2);
		} else if (c == '\n') {
			elog_buf_put(b, "\\n", 2);
		} else if (c == '\t') {
			elog_buf_put(b, "\\t", 2);
		} else if (c == '\r') {
			elog_buf_put(b, "\\r", 2);
		} else if (c < 0x20 || c == 0x7f) {
			char e[6] = {'\\', 'u', '0', '0', hexdig[c >> 4], hexdig[c & 15]};
			elog_buf_put(b, e, 6);
		} else {
			elog_buf_put(b, (const char *)p + i, sl);
		}
		i += take;
	}
	elog_buf_putc(b, '"');
	return cut;
}

bool
elog_buf_safe_text(struct elog_buf *b, const char *s, size_t cap)
{
	const unsigned char *p = (const unsigned char *)s;
	size_t n = strlen(s), i = 0;

	while (i < n) {
		unsigned char c = p[i];
		size_t sl = elog_utf8_len(p + i, n - i);
		size_t take = sl == 0 ? 1 : sl;

		if (i + take > cap)
			return true;
		if (sl == 0 || c < 0x20 || c == 0x7f || c == '\\') {
			char e[4] = {'\\', 'x', hexdig[c >> 4], hexdig[c & 15]};
			elog_buf_put(b, e, 4);
		} else {
			/* C1 controls (U+0080..U+009F) are terminal escapes too. */
			if (sl == 2 && c == 0xc2 && p[i + 1] < 0xa0) {
				char e[8] = {'\\',
				             'x',
				             'c',
				             '2',
				             '\\',
				             'x',
				             hexdig[p[i + 1] >> 4],
				             hexdig[p[i + 1] & 15]};
				elog_buf_put(b, e, 8);
			} else {
				elog_buf_put(b, (const char *)p + i, sl);
			}
		}
		i += take;
	}
	return false;
}
