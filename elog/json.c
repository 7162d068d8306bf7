#include "elog/json.h"

#include <stdio.h>
#include <string.h>

#include "elog/buf.h"

struct parser {
	struct elog_json *j;
	const unsigned char *s;
	size_t len;
	size_t pos;
	const char *err;
	size_t err_pos;
};

static int
fail(struct parser *p, const char *what)
{
	if (p->err == NULL) {
		p->err = what;
		p->err_pos = p->pos;
	}
	return -1;
}

static void
skip_ws(struct parser *p)
{
	while (p->pos < p->len) {
		unsigned char c = p->s[p->pos];
		if (c != ' ' && c != '\t' && c != '\n' && c != '\r')
			break;
		p->pos++;
	}
}

static int
new_tok(struct parser *p, enum elog_json_type type)
{
	struct elog_json *j = p->j;

	if (j->n_tok >= ELOG_JSON_MAX_TOKENS)
		return fail(p, "too many values");
	j->tok[j->n_tok] = (struct elog_json_tok){.type = (uint8_t)type};
	return (int)j->n_tok++;
}

static int
hex4(const unsigned char *s, unsigned *out)
{
	unsigned v = 0;

	for (int i = 0; i < 4; i++) {
		unsigned char c = s[i];
		v <<= 4;
		if (c >= '0' && c <= '9')
			v |= (unsigned)(c - '0');
		else if (c >= 'a' && c <= 'f')
			v |= (unsigned)(c - 'a' + 10);
		else if (c >= 'A' && c <= 'F')
			v |= (unsigned)(c - 'A' + 10);
		else
			return -1;
	}
	*out = v;
	return 0;
}

static void
put_utf8(struct elog_json *j, unsigned cp)
{
	char *o = j->strings + j->str_len;

	if (cp < 0x80) {
		o[0] = (char)cp;
		j->str_len += 1;
	} else if (cp < 0x800) {
		o[0] = (char)(0xc0 | (cp >> 6));
		o[1] = (char)(0x80 | (cp & 0x3f));
		j->str_len += 2;
	} else if (cp < 0x10000) {
		o[0] = (char)(0xe0 | (cp >> 12));
		o[1] = (char)(0x80 | ((cp >> 6) & 0x3f));
		o[2] = (char)(0x80 | (cp & 0x3f));
		j->str_len += 3;
	} else {
		o[0] = (char)(0xf0 | (cp >> 18));
		o[1] = (char)(0x80 | ((cp >> 12) & 0x3f));
		o[2] = (char)(0x80 | ((cp >> 6) & 0x3f));
		o[3] = (char)(0x80 | (cp & 0x3f));
		j->str_len += 4;
	}
}

/* Bytes that stand for themselves inside a JSON string: printable ASCII
 * other than '"' and the backslash. */
static const bool plain[256] = {
        [0x20] = true,
        [0x21] = true,
        [0x23 ... 0x5b] = true,
        [0x5d ... 0x7f] = true,
};

/* The decoded form of a string is never longer than its source (an escape
 * of 6 or 12 bytes yields at most 4), so strings[] of the line's size plus
 * one NUL per string always fits: each string has two quotes in the
 * source but only one NUL in strings[]. */
static int
parse_string(struct parser *p)
{
	struct elog_json *j = p->j;
	int t = new_tok(p, ELOG_JSON_STRING);
	size_t start;

	if (t < 0)
		return -1;
	p->pos++; /* opening quote */
	start = j->str_len;
	j->tok[t].off = (uint32_t)start;
	for (;;) {
		unsigned char c;

		if (p->pos >= p->len)
			return fail(p, "unterminated string");
		/* Fast path: a run of plain printable ASCII is copied at once;
		 * most of a log line is exactly that. */
		size_t run = p->pos;
		while (run < p->len && plain[p->s[run]])
			run++;
		if (run > p->pos) {
			memcpy(j->strings + j->str_len, p->s + p->pos, run - p->pos);
			j->str_len += run - p->pos;
			p->pos = run;
			continue;
		}
		c = p->s[p->pos];
		if (c == '"') {
			p->pos++;
			break;
		}
		if (c < 0x20)
			return fail(p, "control character in string");
		if (c == '\\') {
			unsigned cp, lo;

			if (p->pos + 1 >= p->len)
				return fail(p, "unterminated string");
			c = p->s[p->pos + 1];
			p->pos += 2;
			switch (c) {
			case '"':
			case '\\':
			case '/':
				j->strings[j->str_len++] = (char)c;
				continue;
			case 'b':
				j->strings[j->str_len++] = '\b';
				continue;
			case 'f':
				j->strings[j->str_len++] = '\f';
				continue;
			case 'n':
				j->strings[j->str_len++] = '\n';
				continue;
			case 'r':
				j->strings[j->str_len++] = '\r';
				continue;
			case 't':
				j->strings[j->str_len++] = '\t';
				continue;
			case 'u':
				break;
			default:
				return fail(p, "bad escape in string");
			}
			if (p->pos + 4 > p->len || hex4(p->s + p->pos, &cp) < 0)
				return fail(p, "bad \\u escape");
			p->pos += 4;
			if (cp >= 0xdc00 && cp <= 0xdfff)
				return fail(p, "lone low surrogate");
			if (cp >= 0xd800 && cp <= 0xdbff) {
				if (p->pos + 6 > p->len || p->s[p->pos] != '\\' ||
				    p->s[p->pos + 1] != 'u' || hex4(p->s + p->pos + 2, &lo) < 0 ||
				    lo < 0xdc00 || lo > 0xdfff)
					return fail(p, "lone high surrogate");
				p->pos += 6;
				cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
			}
			if (cp == 0)
				cp = 0xfffd;
			put_utf8(j, cp);
			continue;
		}
		size_t sl = elog_utf8_len(p->s + p->pos, p->len - p->pos);
		if (sl == 0)
			return fail(p, "invalid UTF-8 in string");
		memcpy(j->strings + j->str_len, p->s + p->pos, sl);
		j->str_len += sl;
		p->pos += sl;
	}
	j->tok[t].len = (uint32_t)(j->str_len - start);
	j->strings[j->str_len++] = '\0';
	j->tok[t].next = j->n_tok;
	return t;
}

static int
is_digit(unsigned char c)
{
	return c >= '0' && c <= '9';
}

static int
parse_number(struct parser *p)
{
	int t = new_tok(p, ELOG_JSON_NUMBER);
	size_t start = p->pos;

	if (t < 0)
		return -1;
	if (p->s[p->pos] == '-')
		p->pos++;
	if (p->pos >= p->len || !is_digit(p->s[p->pos]))
		return fail(p, "bad number");
	if (p->s[p->pos] == '0')
		p->pos++;
	else
		while (p->pos < p->len && is_digit(p->s[p->pos]))
			p->pos++;
	if (p->pos < p->len && p->s[p->pos] == '.') {
		p->pos++;
		if (p->pos >= p->len || !is_digit(p->s[p->pos]))
			return fail(p, "bad number");
		while (p->pos < p->len && is_digit(p->s[p->pos]))
			p->pos++;
	}
	if (p->pos < p->len && (p->s[p->pos] == 'e' || p->s[p->pos] == 'E')) {
		p->pos++;
		if (p->pos < p->len && (p->s[p->pos] == '+' || p->s[p->pos] == '-'))
			p->pos++;
		if (p->pos >= p->len || !is_digit(p->s[p->pos]))
			return fail(p, "bad number");
		while (p->pos < p->len && is_digit(p->s[p->pos]))
			p->pos++;
	}
	p->j->tok[t].off = (uint32_t)start;
	p->j->tok[t].len = (uint32_t)(p->pos - start);
	p->j->tok[t].next = p->j->n_tok;
	return t;
}

static int
parse_literal(struct parser *p, const char *word, enum elog_json_type type)
{
	size_t n = strlen(word);
	int t;

	if (p->len - p->pos < n || memcmp(p->s + p->pos, word, n) != 0)
		return fail(p, "unexpected character");
	t = new_tok(p, type);
	if (t < 0)
		return -1;
	p->pos += n;
	p->j->tok[t].next = p->j->n_tok;
	return t;
}

static int parse_value(struct parser *p, int depth);

static int
parse_container(struct parser *p, int depth, bool is_obj)
{
	int t = new_tok(p, is_obj ? ELOG_JSON_OBJECT : ELOG_JSON_ARRAY);
	char close = is_obj ? '}' : ']';
	uint32_t count = 0;

	if (t < 0)
		return -1;
	if (depth >= ELOG_JSON_MAX_DEPTH)
		return fail(p, "nested too deeply");
	p->pos++;
	skip_ws(p);
	if (p->pos < p->len && p->s[p->pos] == close) {
		p->pos++;
		p->j->tok[t].next = p->j->n_tok;
		return t;
	}
	for (;;) {
		skip_ws(p);
		if (is_obj) {
			if (p->pos >= p->len || p->s[p->pos] != '"')
				return fail(p, "expected a key");
			if (parse_string(p) < 0)
				return -1;
			skip_ws(p);
			if (p->pos >= p->len || p->s[p->pos] != ':')
				return fail(p, "expected ':'");
			p->pos++;
		}
		if (parse_value(p, depth + 1) < 0)
			return -1;
		count++;
		skip_ws(p);
		if (p->pos >= p->len)
			return fail(p, is_obj ? "unterminated object" : "unterminated array");
		if (p->s[p->pos] == ',') {
			p->pos++;
			continue;
		}
		if (p->s[p->pos] == close) {
			p->pos++;
			break;
		}
		return fail(p, is_obj ? "expected ',' or '}'" : "expected ',' or ']'");
	}
	p->j->tok[t].count = count;
	p->j->tok[t].next = p->j->n_tok;
	return t;
}

static int
parse_value(struct parser *p, int depth)
{
	skip_ws(p);
	if (p->pos >= p->len)
		return fail(p, "unexpected end of line");
	switch (p->s[p->pos]) {
	case '{':
		return parse_container(p, depth, true);
	case '[':
		return parse_container(p, depth, false);
	case '"':
		return parse_string(p);
	case 't':
		return parse_literal(p, "true", ELOG_JSON_TRUE);
	case 'f':
		return parse_literal(p, "false", ELOG_JSON_FALSE);
	case 'n':
		return parse_literal(p, "null", ELOG_JSON_NULL);
	default:
		if (p->s[p->pos] == '-' || is_digit(p->s[p->pos]))
			return parse_number(p);
		return fail(p, "unexpected character");
	}
}

int
elog_json_parse(struct elog_json *j, const char *line, size_t len, char *why, size_t whylen)
{
	struct parser p = {.j = j, .s = (const unsigned char *)line, .len = len};

	j->n_tok = 0;
	j->str_len = 0;
	j->src = line;
	if (len > ELOG_LINE_MAX) {
		snprintf(why, whylen, "line longer than %d bytes", ELOG_LINE_MAX);
		return -1;
	}
	if (parse_value(&p, 0) >= 0) {
		skip_ws(&p);
		if (p.pos == p.len)
			return 0;
		fail(&p, "text after the value");
	}
	snprintf(why, whylen, "%s at byte %zu", p.err, p.err_pos + 1);
	return -1;
}

int
elog_json_type(const struct elog_json *j, int i)
{
	if (i < 0 || (uint32_t)i >= j->n_tok)
		return -1;
	return j->tok[i].type;
}

int
elog_json_get(const struct elog_json *j, int obj, const char *key)
{
	size_t klen = strlen(key);
	uint32_t k;

	if (elog_json_type(j, obj) != ELOG_JSON_OBJECT)
		return -1;
	k = (uint32_t)obj + 1;
	for (uint32_t m = 0; m < j->tok[obj].count; m++) {
		uint32_t v = k + 1;
		if (j->tok[k].len == klen && memcmp(j->strings + j->tok[k].off, key, klen) == 0)
			return (int)v;
		k = j->tok[v].next;
	}
	return -1;
}

int
elog_json_elem(const struct elog_json *j, int i, uint32_t k)
{
	uint32_t e;

	if (elog_json_type(j, i) != ELOG_JSON_ARRAY || k >= j->tok[i].count)
		return -1;
	e = (uint32_t)i + 1;
	while (k-- > 0)
		e = j->tok[e].next;
	return (int)e;
}

const char *
elog_json_str(const struct elog_json *j, int i)
{
	if (elog_json_type(j, i) != ELOG_JSON_STRING)
		return NULL;
	return j->strings + j->tok[i].off;
}

static int
digits_u64(const char *s, size_t len, uint64_t *out)
{
	uint64_t v = 0;

	if (len == 0)
		return -1;
	for (size_t k = 0; k < len; k++) {
		if (!is_digit((unsigned char)s[k]))
			return -1;
		if (v > (UINT64_MAX - (uint64_t)(s[k] - '0')) / 10)
			return -1;
		v = v * 10 + (uint64_t)(s[k] - '0');
	}
	*out = v;
	return 0;
}

int
elog_json_u64(const struct elog_json *j, int i, uint64_t *out)
{
	if (elog_json_type(j, i) != ELOG_JSON_NUMBER)
		return -1;
	return digits_u64(j->src + j->tok[i].off, j->tok[i].len, out);
}

int
elog_json_i64(const struct elog_json *j, int i, int64_t *out)
{
	const char *s;
	size_t len;
	uint64_t v;

	if (elog_json_type(j, i) != ELOG_JSON_NUMBER)
		return -1;
	s = j->src + j->tok[i].off;
	len = j->tok[i].len;
	if (s[0] != '-') {
		if (digits_u64(s, len, &v) < 0 || v > INT64_MAX)
			return -1;
		*out = (int64_t)v;
		return 0;
	}
	if (digits_u64(s + 1, len - 1, &v) < 0 || v > (uint64_t)INT64_MAX + 1)
		return -1;
	*out = v == (uint64_t)INT64_MAX + 1 ? INT64_MIN : -(int64_t)v;
	return 0;
}
