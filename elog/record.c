#include "elog/record.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <netinet/in.h>
#include <unistd.h>

#include "common/log.h"
#include "common/util.h"

#define READ_CHUNK  (256 * 1024)
#define MAX_REPORTS 20

struct elog_reader {
	int fd;
	char *path;
	char *buf; /* READ_CHUNK + ELOG_LINE_MAX bytes */
	size_t start, end;
	bool eof;
	bool skipping; /* inside an over-long line, dropping to its newline */
	uint64_t lineno;
	uint64_t garbage;
	struct elog_json json;
};

static int
digits(const char *s, int n, int *out)
{
	int v = 0;

	for (int i = 0; i < n; i++) {
		if (s[i] < '0' || s[i] > '9')
			return -1;
		v = v * 10 + (s[i] - '0');
	}
	*out = v;
	return 0;
}

/* Days from 1970-01-01 to y-m-d in the proleptic Gregorian calendar
 * (H. Hinnant's days_from_civil): no timegm(), no TZ, no locale. */
static int64_t
days_from_civil(int64_t y, unsigned m, unsigned d)
{
	y -= m <= 2;
	const int64_t era = (y >= 0 ? y : y - 399) / 400;
	const unsigned yoe = (unsigned)(y - era * 400);
	const unsigned doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
	const unsigned doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
	return era * 146097 + (int64_t)doe - 719468;
}

int
elog_parse_time(const char *s, int64_t *ms)
{
	int y, mo, d, h, mi, sec, frac = 0, off = 0;
	size_t i = 19;

	if (strlen(s) < 20 || s[4] != '-' || s[7] != '-' ||
	    (s[10] != 'T' && s[10] != 't' && s[10] != ' ') || s[13] != ':' || s[16] != ':')
		return -1;
	if (digits(s, 4, &y) < 0 || digits(s + 5, 2, &mo) < 0 || digits(s + 8, 2, &d) < 0 ||
	    digits(s + 11, 2, &h) < 0 || digits(s + 14, 2, &mi) < 0 || digits(s + 17, 2, &sec) < 0)
		return -1;
	if (mo < 1 || mo > 12 || d < 1 || d > 31 || h > 23 || mi > 59 || sec > 60)
		return -1;
	if (s[i] == '.') {
		int scale = 100, n = 0;
		i++;
		while (s[i] >= '0' && s[i] <= '9') {
			frac += (s[i] - '0') * scale;
			scale /= 10;
			i++;
			n++;
		}
		if (n == 0)
			return -1;
	}
	if ((s[i] == 'Z' || s[i] == 'z') && s[i + 1] == '\0') {
		off = 0;
	} else if ((s[i] == '+' || s[i] == '-') && strlen(s + i) == 6 && s[i + 3] == ':') {
		int oh, om;
		if (digits(s + i + 1, 2, &oh) < 0 || digits(s + i + 4, 2, &om) < 0 || oh > 23 ||
		    om > 59)
			return -1;
		off = (oh * 60 + om) * (s[i] == '+' ? 1 : -1);
	} else {
		return -1;
	}
	*ms = ((days_from_civil(y, (unsigned)mo, (unsigned)d) * 86400 + h * 3600 + mi * 60 + sec -
	        (int64_t)off * 60) *
	       1000) +
	      frac;
	return 0;
}

void
elog_format_time(int64_t ms, char *out, size_t outlen)
{
	time_t t = (time_t)(ms >= 0 ? ms / 1000 : (ms - 999) / 1000);
	int64_t rem = ms - (int64_t)t * 1000;
	struct tm tm;

	gmtime_r(&t, &tm);
	snprintf(out, outlen, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tm.tm_year + 1900,
	         tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, (int)rem);
}

/* The documented top-level fields; the line's members are matched
 * against this table once, so decoding costs one pass over the object. */
enum field {
	F_TS,
	F_KIND,
	F_TASK,
	F_HOST,
	F_IP,
	F_PORT,
	F_VERDICT,
	F_RULE,
	F_REASON,
	F_BYTES_UP,
	F_BYTES_DOWN,
	F_DURATION,
	F_SNI,
	F_METHOD,
	F_URL,
	F_QTYPE,
	F_RCODE,
	F_PROTO,
	F_ORIG_DST,
	F_ANSWERS,
	F_POLICY,
	F_POLICY_SHA,
	F_MODE,
	F_SELFTEST,
	F_COMMAND,
	F_EXIT,
	F_SIGNAL,
	F_TOTALS,
	F_PACKETS,
	F_COUNT,
	F_CLIENT,
	F_SEQ,
	F_PREV,
	N_FIELDS
};

static const char *const field_names[N_FIELDS] = {
        "ts",       "kind",        "task",   "host",          "ip",         "port",
        "verdict",  "rule",        "reason", "bytes_up",      "bytes_down", "duration_ms",
        "sni",      "method",      "url",    "qtype",         "rcode",      "proto",
        "orig_dst", "answers",     "policy", "policy_sha256", "mode",       "selftest",
        "command",  "exit_status", "signal", "totals",        "packets",    "count",
        "client",   "seq",         "prev",
};

static const uint8_t field_lens[N_FIELDS] = {
        2, 4, 4, 4, 2, 4,  7, 4, 6, 8,  10, 11, 3, 6, 3, 5,
        5, 5, 8, 7, 6, 13, 4, 8, 7, 11, 6,  6,  7, 5, 6, 3, 4,
};

static void
index_fields(const struct elog_json *j, int idx[N_FIELDS])
{
	uint32_t k = 1;

	for (int f = 0; f < N_FIELDS; f++)
		idx[f] = -1;
	for (uint32_t m = 0; m < j->tok[0].count; m++) {
		const char *key = j->strings + j->tok[k].off;
		uint32_t klen = j->tok[k].len;
		uint32_t v = k + 1;

		for (int f = 0; f < N_FIELDS; f++) {
			const char *name = field_names[f];
			if (name[0] == key[0] && field_lens[f] == klen &&
			    memcmp(name, key, klen) == 0) {
				if (idx[f] < 0) /* the first of duplicate keys wins */
					idx[f] = (int)v;
				break;
			}
		}
		k = j->tok[v].next;
	}
}

static bool
absent(const struct elog_json *j, int i)
{
	return i < 0 || elog_json_type(j, i) == ELOG_JSON_NULL;
}

/* A known field present with the wrong type makes the line garbage: a
 * consumer must be able to trust the types docs/log.md promises. */
static int
get_str(const struct elog_json *j, const int *idx, int f, const char **out, const char **bad)
{
	*out = NULL;
	if (absent(j, idx[f]))
		return 0;
	*out = elog_json_str(j, idx[f]);
	if (*out == NULL) {
		*bad = field_names[f];
		return -1;
	}
	return 0;
}

static int
get_u64_at(const struct elog_json *j, int i, const char *name, uint64_t *out, const char **bad)
{
	*out = 0;
	if (absent(j, i))
		return 0;
	if (elog_json_u64(j, i, out) < 0) {
		*bad = name;
		return -1;
	}
	return 0;
}

static int
get_u64(const struct elog_json *j, const int *idx, int f, uint64_t *out, const char **bad)
{
	return get_u64_at(j, idx[f], field_names[f], out, bad);
}

static int
get_i64(const struct elog_json *j, const int *idx, int f, int64_t *out, const char **bad)
{
	*out = 0;
	if (absent(j, idx[f]))
		return 0;
	if (elog_json_i64(j, idx[f], out) < 0) {
		*bad = field_names[f];
		return -1;
	}
	return 0;
}

static int
get_array_of_str(const struct elog_json *j, const int *idx, int f, int *out, const char **bad)
{
	int i = idx[f];

	*out = -1;
	if (absent(j, i))
		return 0;
	if (elog_json_type(j, i) != ELOG_JSON_ARRAY)
		goto wrong;
	for (uint32_t e = (uint32_t)i + 1, k = 0; k < j->tok[i].count; k++) {
		if (j->tok[e].type != ELOG_JSON_STRING)
			goto wrong;
		e = j->tok[e].next;
	}
	*out = i;
	return 0;
wrong:
	*bad = field_names[f];
	return -1;
}

uint64_t
elog_record_events(const struct elog_record *r)
{
	if (r->packets > 0 && strcmp(r->kind, "packet") == 0)
		return r->packets;
	return r->count > 0 ? r->count : 1;
}

int
elog_record_parse(struct elog_json *j, const char *line, size_t len, struct elog_record *rec,
                  char *why, size_t whylen)
{
	const char *bad = NULL;
	int idx[N_FIELDS];
	uint64_t port;
	int rc = 0;

	memset(rec, 0, sizeof(*rec));
	rec->port = -1;
	rec->answers = -1;
	rec->command = -1;
	rec->raw = line;
	rec->raw_len = len;
	rec->json = j;
	if (elog_json_parse(j, line, len, why, whylen) < 0)
		return -1;
	if (elog_json_type(j, 0) != ELOG_JSON_OBJECT) {
		snprintf(why, whylen, "not a JSON object");
		return -1;
	}
	index_fields(j, idx);
	rc |= get_str(j, idx, F_TS, &rec->ts, &bad);
	rc |= get_str(j, idx, F_KIND, &rec->kind, &bad);
	if (rc == 0 && (rec->ts == NULL || rec->kind == NULL)) {
		snprintf(why, whylen, "no \"%s\" field", rec->ts == NULL ? "ts" : "kind");
		return -1;
	}
	if (rc == 0 && elog_parse_time(rec->ts, &rec->ts_ms) < 0) {
		snprintf(why, whylen, "\"ts\" is not an RFC 3339 time");
		return -1;
	}
	rc |= get_str(j, idx, F_TASK, &rec->task, &bad);
	rc |= get_str(j, idx, F_HOST, &rec->host, &bad);
	rc |= get_str(j, idx, F_IP, &rec->ip, &bad);
	rc |= get_u64(j, idx, F_PORT, &port, &bad);
	if (rc == 0 && !absent(j, idx[F_PORT])) {
		if (port > 65535) {
			bad = "port";
			rc = -1;
		} else {
			rec->port = (int)port;
		}
	}
	rc |= get_str(j, idx, F_VERDICT, &rec->verdict, &bad);
	rc |= get_str(j, idx, F_RULE, &rec->rule, &bad);
	rc |= get_str(j, idx, F_REASON, &rec->reason, &bad);
	rc |= get_u64(j, idx, F_BYTES_UP, &rec->bytes_up, &bad);
	rc |= get_u64(j, idx, F_BYTES_DOWN, &rec->bytes_down, &bad);
	rc |= get_u64(j, idx, F_DURATION, &rec->duration_ms, &bad);
	rc |= get_str(j, idx, F_SNI, &rec->sni, &bad);
	rc |= get_str(j, idx, F_METHOD, &rec->method, &bad);
	rc |= get_str(j, idx, F_URL, &rec->url, &bad);
	rc |= get_str(j, idx, F_QTYPE, &rec->qtype, &bad);
	rc |= get_str(j, idx, F_RCODE, &rec->rcode, &bad);
	rc |= get_str(j, idx, F_PROTO, &rec->proto, &bad);
	rc |= get_str(j, idx, F_ORIG_DST, &rec->orig_dst, &bad);
	rc |= get_str(j, idx, F_CLIENT, &rec->client, &bad);
	rc |= get_u64(j, idx, F_PACKETS, &rec->packets, &bad);
	rc |= get_u64(j, idx, F_COUNT, &rec->count, &bad);
	rc |= get_array_of_str(j, idx, F_ANSWERS, &rec->answers, &bad);
	rc |= get_u64(j, idx, F_SEQ, &rec->seq, &bad);
	rec->has_seq = !absent(j, idx[F_SEQ]);
	rc |= get_str(j, idx, F_PREV, &rec->prev, &bad);
	if (rc == 0 && strcmp(rec->kind, "task-start") == 0) {
		rec->type = ELOG_REC_TASK_START;
		rc |= get_str(j, idx, F_POLICY, &rec->policy, &bad);
		rc |= get_str(j, idx, F_POLICY_SHA, &rec->policy_sha256, &bad);
		rc |= get_str(j, idx, F_MODE, &rec->mode, &bad);
		rc |= get_str(j, idx, F_SELFTEST, &rec->selftest, &bad);
		rc |= get_array_of_str(j, idx, F_COMMAND, &rec->command, &bad);
	} else if (rc == 0 && strcmp(rec->kind, "log-budget") == 0) {
		rec->type = ELOG_REC_LOG_BUDGET;
	} else if (rc == 0 && strcmp(rec->kind, "task-end") == 0) {
		int t = idx[F_TOTALS];

		rec->type = ELOG_REC_TASK_END;
		rc |= get_i64(j, idx, F_EXIT, &rec->exit_status, &bad);
		rc |= get_i64(j, idx, F_SIGNAL, &rec->signal, &bad);
		if (t >= 0 && elog_json_type(j, t) == ELOG_JSON_OBJECT) {
			rec->has_totals = true;
			rc |= get_u64_at(j, elog_json_get(j, t, "connections"), "connections",
			                 &rec->t_connections, &bad);
			rc |= get_u64_at(j, elog_json_get(j, t, "allowed"), "allowed",
			                 &rec->t_allowed, &bad);
			rc |= get_u64_at(j, elog_json_get(j, t, "denied"), "denied", &rec->t_denied,
			                 &bad);
			rc |= get_u64_at(j, elog_json_get(j, t, "bytes_up"), "bytes_up",
			                 &rec->t_bytes_up, &bad);
			rc |= get_u64_at(j, elog_json_get(j, t, "bytes_down"), "bytes_down",
			                 &rec->t_bytes_down, &bad);
			rc |= get_u64_at(j, elog_json_get(j, t, "unlogged"), "unlogged",
			                 &rec->t_unlogged, &bad);
		} else if (!absent(j, t)) {
			bad = "totals";
			rc = -1;
		}
	}
	if (rc != 0) {
		snprintf(why, whylen, "field \"%s\" has the wrong type", bad != NULL ? bad : "?");
		return -1;
	}
	return 0;
}

struct elog_reader *
elog_reader_open(const char *path, char *err, size_t errlen)
{
	struct elog_reader *r = calloc(1, sizeof(*r));

	if (r == NULL)
		goto oom;
	r->fd = -1;
	r->path = strdup(path);
	r->buf = malloc(READ_CHUNK + ELOG_LINE_MAX + 1);
	if (r->path == NULL || r->buf == NULL)
		goto oom;
	if (strcmp(path, "-") == 0)
		r->fd = fcntl(STDIN_FILENO, F_DUPFD_CLOEXEC, 3);
	else
		r->fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
	if (r->fd < 0) {
		snprintf(err, errlen, "cannot open %s: %s", path, strerror(errno));
		elog_reader_free(r);
		return NULL;
	}
	return r;
oom:
	snprintf(err, errlen, "cannot read %s: out of memory", path);
	elog_reader_free(r);
	return NULL;
}

void
elog_reader_free(struct elog_reader *r)
{
	if (r == NULL)
		return;
	if (r->garbage > MAX_REPORTS)
		log_warnx("%s: %llu garbage lines skipped in all", r->path,
		          (unsigned long long)r->garbage);
	fd_close(&r->fd);
	free(r->buf);
	free(r->path);
	free(r);
}

uint64_t
elog_reader_garbage(const struct elog_reader *r)
{
	return r->garbage;
}

int
elog_read_files(char *const *files, int n_files,
                int (*each)(const struct elog_record *r, void *arg), void *arg)
{
	int rc = 0;
	bool stop = false;

	for (int f = 0; f < n_files && !stop; f++) {
		char err[256];
		struct elog_reader *rd = elog_reader_open(files[f], err, sizeof(err));
		struct elog_record rec;
		int got = 0;

		if (rd == NULL) {
			log_warnx("%s", err);
			rc = -1;
			continue;
		}
		while ((got = elog_reader_next(rd, &rec)) > 0) {
			if (each(&rec, arg) != 0) {
				stop = true;
				break;
			}
		}
		if (got < 0)
			rc = -1;
		elog_reader_free(rd);
	}
	return rc;
}

bool
elog_parse_addr(const char *s, struct sockaddr_storage *ss)
{
	char tmp[64];
	size_t n = strlen(s);

	if (n >= 2 && s[0] == '[' && s[n - 1] == ']' && n - 2 < sizeof(tmp)) {
		memcpy(tmp, s + 1, n - 2);
		tmp[n - 2] = '\0';
		s = tmp;
	}
	return sockaddr_set(ss, 0, s, 0) != 0;
}

static void
report(struct elog_reader *r, const char *what)
{
	r->garbage++;
	if (r->garbage <= MAX_REPORTS)
		log_warnx("%s:%llu: %s; line skipped", r->path, (unsigned long long)r->lineno,
		          what);
	if (r->garbage == MAX_REPORTS)
		log_warnx("%s: further garbage lines are only counted", r->path);
}

/* Refill: keep the unread tail, read more after it. */
static int
fill(struct elog_reader *r)
{
	ssize_t n;

	if (r->start > 0) {
		memmove(r->buf, r->buf + r->start, r->end - r->start);
		r->end -= r->start;
		r->start = 0;
	}
	do
		n = read(r->fd, r->buf + r->end, READ_CHUNK + ELOG_LINE_MAX - r->end);
	while (n < 0 && errno == EINTR);
	if (n < 0) {
		log_warn("%s: read failed", r->path);
		return -1;
	}
	if (n == 0)
		r->eof = true;
	r->end += (size_t)n;
	return 0;
}

int
elog_reader_line(struct elog_reader *r, struct elog_line *l)
{
	for (;;) {
		char *line = r->buf + r->start;
		size_t avail = r->end - r->start;
		char *nl = memchr(line, '\n', avail);

		memset(l, 0, sizeof(*l));
		if (nl == NULL) {
			if (r->skipping) {
				r->start = r->end; /* drop what we have */
				if (r->eof)
					return 0;
				if (fill(r) < 0)
					return -1;
				continue;
			}
			if (avail > ELOG_LINE_MAX) {
				r->skipping = true;
				l->lineno = ++r->lineno;
				l->too_long = true;
				return 1;
			}
			if (!r->eof) {
				if (fill(r) < 0)
					return -1;
				continue;
			}
			if (avail == 0)
				return 0;
			/* The last line has no newline: a crashed run. */
			l->len = avail;
			l->cut = true;
			r->start = r->end;
		} else {
			l->len = (size_t)(nl - line);
			r->start += l->len + 1;
			if (r->skipping) {
				r->skipping = false;
				continue;
			}
		}
		l->data = line;
		l->lineno = ++r->lineno;
		if (l->len > ELOG_LINE_MAX) {
			l->data = NULL;
			l->len = 0;
			l->too_long = true;
		}
		return 1;
	}
}

const char *
elog_reader_path(const struct elog_reader *r)
{
	return r->path;
}

int
elog_reader_next(struct elog_reader *r, struct elog_record *rec)
{
	struct elog_line l;
	char why[160];
	int got;

	while ((got = elog_reader_line(r, &l)) > 0) {
		if (l.too_long) {
			report(r, "line longer than 65536 bytes");
			continue;
		}
		if (l.len == 0 || (l.len == 1 && l.data[0] == '\r'))
			continue; /* blank lines are harmless */
		if (elog_record_parse(&r->json, l.data, l.len, rec, why, sizeof(why)) == 0) {
			rec->file = r->path;
			rec->lineno = l.lineno;
			return 1;
		}
		if (l.cut) {
			char what[240];
			snprintf(what, sizeof(what), "last line is cut short (a crashed run?): %s",
			         why);
			report(r, what);
		} else {
			report(r, why);
		}
	}
	return got;
}
