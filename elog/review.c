/* `airlock log show` and `airlock log summary`. */
#include "elog/review.h"

#include <fnmatch.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/log.h"
#include "common/util.h"
#include "elog/buf.h"
#include "elog/elog.h"
#include "elog/record.h"
#include "elog/strmap.h"

#define C_RED    "\033[31m"
#define C_GREEN  "\033[32m"
#define C_YELLOW "\033[33m"
#define C_DIM    "\033[2m"
#define C_RESET  "\033[0m"

static bool
is_allowed(const char *verdict)
{
	return verdict != NULL && strcmp(verdict, "allow") == 0;
}

int
review_parse_since(const char *s, int64_t now, int64_t *out)
{
	uint64_t ms;

	if (elog_parse_time(s, out) == 0)
		return 0;
	if (parse_duration_ms(s, 0, (uint64_t)100 * 365 * 86400 * 1000, &ms) < 0)
		return -1;
	*out = now - (int64_t)ms;
	return 0;
}

/* host:port, [v6]:port, or what there is. */
static void
put_dest(struct elog_buf *b, const struct elog_record *r, bool safe)
{
	const char *name = r->host != NULL ? r->host : r->ip;
	bool v6 = r->host == NULL && r->ip != NULL && strchr(r->ip, ':') != NULL;

	if (name == NULL) {
		elog_buf_putc(b, '-');
		return;
	}
	if (v6 && r->port >= 0)
		elog_buf_putc(b, '[');
	if (safe)
		elog_buf_safe_text(b, name, 255);
	else
		elog_buf_puts(b, name);
	if (v6 && r->port >= 0)
		elog_buf_putc(b, ']');
	if (r->port >= 0) {
		elog_buf_putc(b, ':');
		elog_buf_i64(b, r->port);
	}
}

static void
pad_to(struct elog_buf *b, size_t start, size_t width)
{
	while (b->len - start < width)
		elog_buf_putc(b, ' ');
	elog_buf_putc(b, ' ');
}

static void
put_bytes(struct elog_buf *b, uint64_t v)
{
	static const char units[] = "BKMGTP";
	double d = (double)v;
	int u = 0;
	char tmp[32];
	int n;

	if (v < 1024) {
		elog_buf_u64(b, v);
		elog_buf_putc(b, 'B');
		return;
	}
	while (d >= 1024 && u < 5) {
		d /= 1024;
		u++;
	}
	n = snprintf(tmp, sizeof(tmp), "%.1f%c", d, units[u]);
	elog_buf_put(b, tmp, (size_t)n);
}

static void
show_line(const struct elog_record *r, const struct review_show_opts *o, FILE *out)
{
	char storage[4096];
	struct elog_buf b;
	char ts[40];
	size_t start;
	const char *color = NULL;

	elog_buf_init(&b, storage, sizeof(storage) - 1);
	elog_format_time(r->ts_ms, ts, sizeof(ts));
	ts[10] = ' ';
	ts[23] = '\0'; /* "2026-11-30 10:24:48.123" */
	elog_buf_puts(&b, ts);
	elog_buf_putc(&b, ' ');
	if (r->type == ELOG_REC_TASK_START) {
		elog_buf_puts(&b, "task-start ");
		elog_buf_safe_text(&b, r->task != NULL ? r->task : "-", 128);
		elog_buf_puts(&b, " policy ");
		elog_buf_safe_text(&b, r->policy != NULL ? r->policy : "-", 255);
		if (r->mode != NULL) {
			elog_buf_puts(&b, " (");
			elog_buf_safe_text(&b, r->mode, 32);
			elog_buf_putc(&b, ')');
		}
		if (r->command >= 0) {
			elog_buf_puts(&b, ":");
			for (uint32_t k = 0; k < r->json->tok[r->command].count; k++) {
				elog_buf_putc(&b, ' ');
				elog_buf_safe_text(
				        &b,
				        elog_json_str(r->json,
				                      elog_json_elem(r->json, r->command, k)),
				        200);
			}
		}
	} else if (r->type == ELOG_REC_LOG_BUDGET) {
		elog_buf_puts(&b, "log-budget ");
		elog_buf_safe_text(&b, r->reason != NULL ? r->reason : "spent", 512);
	} else if (r->type == ELOG_REC_TASK_END) {
		elog_buf_puts(&b, "task-end   ");
		elog_buf_safe_text(&b, r->task != NULL ? r->task : "-", 128);
		elog_buf_puts(&b, " exit ");
		elog_buf_i64(&b, r->exit_status);
		if (r->signal != 0) {
			elog_buf_puts(&b, " signal ");
			elog_buf_i64(&b, r->signal);
		}
		elog_buf_puts(&b, " after ");
		elog_buf_u64(&b, r->duration_ms);
		elog_buf_puts(&b, " ms");
		if (r->has_totals) {
			elog_buf_puts(&b, ": ");
			elog_buf_u64(&b, r->t_connections);
			elog_buf_puts(&b, r->t_connections == 1 ? " event, " : " events, ");
			elog_buf_u64(&b, r->t_allowed);
			elog_buf_puts(&b, " allowed, ");
			elog_buf_u64(&b, r->t_denied);
			elog_buf_puts(&b, " denied");
		}
	} else {
		const char *v = r->verdict != NULL ? r->verdict : "-";

		if (o->color)
			color = is_allowed(v)                  ? C_GREEN
			        : strcmp(v, "deny") == 0       ? C_RED
			        : strcmp(v, "audit-deny") == 0 ? C_YELLOW
			                                       : NULL;
		start = b.len;
		if (color != NULL)
			elog_buf_puts(&b, color);
		elog_buf_safe_text(&b, v, 32);
		if (color != NULL)
			elog_buf_puts(&b, C_RESET);
		pad_to(&b, start, 10 + (color != NULL ? strlen(color) + strlen(C_RESET) : 0));
		start = b.len;
		elog_buf_safe_text(&b, r->kind, 32);
		pad_to(&b, start, 7);
		start = b.len;
		put_dest(&b, r, true);
		pad_to(&b, start, 30);
		start = b.len;
		if (r->host != NULL && r->ip != NULL)
			elog_buf_safe_text(&b, r->ip, 64);
		else if (r->qtype != NULL)
			elog_buf_safe_text(&b, r->qtype, 32);
		else if (r->proto != NULL)
			elog_buf_safe_text(&b, r->proto, 32);
		else
			elog_buf_putc(&b, '-');
		pad_to(&b, start, 16);
		start = b.len;
		if (r->bytes_up != 0 || r->bytes_down != 0) {
			put_bytes(&b, r->bytes_up);
			elog_buf_putc(&b, '/');
			put_bytes(&b, r->bytes_down);
		} else {
			elog_buf_putc(&b, '-');
		}
		pad_to(&b, start, 14);
		if (o->color && color == NULL)
			elog_buf_puts(&b, C_DIM);
		if (r->reason != NULL)
			elog_buf_safe_text(&b, r->reason, 512);
		else if (r->rule != NULL)
			elog_buf_safe_text(&b, r->rule, 512);
		if (r->rcode != NULL) {
			elog_buf_puts(&b, (r->reason != NULL || r->rule != NULL) ? "; " : "");
			elog_buf_safe_text(&b, r->rcode, 32);
		}
		/* What the sandbox was told: the first few DNS answers. */
		for (uint32_t k = 0; r->answers >= 0 && k < r->json->tok[r->answers].count; k++) {
			if (k == 4) {
				elog_buf_puts(&b, ", ...");
				break;
			}
			elog_buf_puts(&b, k == 0 ? " " : ", ");
			elog_buf_safe_text(
			        &b, elog_json_str(r->json, elog_json_elem(r->json, r->answers, k)),
			        64);
		}
		if (r->count > 0) {
			elog_buf_puts(&b, " (");
			elog_buf_u64(&b, r->count);
			elog_buf_puts(&b, " more since the last line)");
		}
		if (o->color && color == NULL)
			elog_buf_puts(&b, C_RESET);
	}
	while (b.len > 0 && b.data[b.len - 1] == ' ')
		b.len--;
	elog_buf_putc(&b, '\n');
	fwrite(b.data, 1, b.len, out);
}

static bool
selected(const struct elog_record *r, const struct review_show_opts *o)
{
	bool is_event = r->type == ELOG_REC_EVENT;

	if (o->task != NULL && (r->task == NULL || strcmp(r->task, o->task) != 0))
		return false;
	if (o->has_since && r->ts_ms < o->since_ms)
		return false;
	if (o->denied && (!is_event || !elog_verdict_denied(r->verdict)))
		return false;
	if (o->host_glob != NULL) {
		const char *h = r->host != NULL ? r->host : r->ip;
		if (!is_event || h == NULL || fnmatch(o->host_glob, h, FNM_CASEFOLD) != 0)
			return false;
	}
	return true;
}

struct show_ctx {
	const struct review_show_opts *o;
	FILE *out;
};

static int
show_each(const struct elog_record *r, void *arg)
{
	const struct show_ctx *sc = arg;

	if (!selected(r, sc->o))
		return 0;
	if (sc->o->json) {
		fwrite(r->raw, 1, r->raw_len, sc->out);
		fputc('\n', sc->out);
	} else {
		show_line(r, sc->o, sc->out);
	}
	return 0;
}

int
review_show(char *const *files, int n_files, const struct review_show_opts *o, FILE *out)
{
	struct show_ctx sc = {.o = o, .out = out};

	return elog_read_files(files, n_files, show_each, &sc);
}

/* ---- summary ---- */

struct dest {
	char *key;
	char *host, *ip, *kind, *proto;
	int port;
	uint64_t attempts, allowed, denied, up, down;
	int64_t first, last;
};

struct task {
	char *id;
	char *policy, *mode;
	char **command;
	size_t argc;
	bool started, ended;
	int64_t exit_status, sig;
	uint64_t duration_ms;
	/* From the task-end line when present, else counted from events. */
	bool has_totals;
	uint64_t connections, allowed, denied, up, down;
	uint64_t c_connections, c_allowed, c_denied, c_up, c_down;
	int64_t first, last;
};

struct summary {
	struct elog_strmap *dests;
	struct elog_strmap *tasks;
	bool oom;
};

static char *
dup_or_null(const char *s)
{
	return s != NULL ? strdup(s) : NULL;
}

static void
dest_free(struct dest *d)
{
	free(d->key);
	free(d->host);
	free(d->ip);
	free(d->kind);
	free(d->proto);
	free(d);
}

static void
task_free(struct task *t)
{
	free(t->id);
	free(t->policy);
	free(t->mode);
	for (size_t i = 0; i < t->argc; i++)
		free(t->command[i]);
	free(t->command);
	free(t);
}

/* The destination key: "host:port", "ip:port", "name (dns)" for DNS
 * queries, "ip:port/udp" for blocked packets. */
static void
dest_key(const struct elog_record *r, struct elog_buf *b)
{
	bool dns = strcmp(r->kind, "dns") == 0;

	put_dest(b, r, false);
	if (dns && r->port < 0)
		elog_buf_puts(b, " (dns)");
	else if (strcmp(r->kind, "packet") == 0 && r->proto != NULL) {
		elog_buf_putc(b, '/');
		elog_buf_puts(b, r->proto);
	}
	elog_buf_putc(b, '\0');
}

static struct task *
task_get(struct summary *s, const char *id)
{
	struct task *t = elog_strmap_get(s->tasks, id);

	if (t != NULL)
		return t;
	t = calloc(1, sizeof(*t));
	if (t == NULL || (t->id = strdup(id)) == NULL || elog_strmap_put(s->tasks, id, t) < 0) {
		if (t != NULL)
			task_free(t);
		s->oom = true;
		return NULL;
	}
	t->first = INT64_MAX;
	t->last = INT64_MIN;
	return t;
}

static void
summary_add(struct summary *s, const struct elog_record *r)
{
	struct task *t = task_get(s, r->task != NULL ? r->task : "-");

	if (t == NULL)
		return;
	if (r->ts_ms < t->first)
		t->first = r->ts_ms;
	if (r->ts_ms > t->last)
		t->last = r->ts_ms;
	if (r->type == ELOG_REC_TASK_START) {
		t->started = true;
		free(t->policy);
		free(t->mode);
		t->policy = dup_or_null(r->policy);
		t->mode = dup_or_null(r->mode);
		if (r->command >= 0 && t->command == NULL) {
			uint32_t n = r->json->tok[r->command].count;
			t->command = calloc(n + 1, sizeof(char *));
			if (t->command == NULL) {
				s->oom = true;
				return;
			}
			for (uint32_t k = 0; k < n; k++) {
				t->command[k] = strdup(elog_json_str(
				        r->json, elog_json_elem(r->json, r->command, k)));
				if (t->command[k] == NULL) {
					s->oom = true;
					return;
				}
				t->argc = k + 1;
			}
		}
		return;
	}
	if (r->type == ELOG_REC_TASK_END) {
		t->ended = true;
		t->exit_status = r->exit_status;
		t->sig = r->signal;
		t->duration_ms = r->duration_ms;
		if (r->has_totals) {
			t->has_totals = true;
			t->connections = r->t_connections;
			t->allowed = r->t_allowed;
			t->denied = r->t_denied;
			t->up = r->t_bytes_up;
			t->down = r->t_bytes_down;
		}
		return;
	}
	if (r->type != ELOG_REC_EVENT)
		return;
	/* A packet line stands for its packets field's worth of packets, a
	 * line of repeats for its count (one for lines written before the
	 * fields existed). */
	uint64_t n = elog_record_events(r);

	t->c_connections += n;
	t->c_allowed += is_allowed(r->verdict) ? n : 0;
	t->c_denied += elog_verdict_denied(r->verdict) ? n : 0;
	t->c_up += r->bytes_up;
	t->c_down += r->bytes_down;

	char storage[600];
	struct elog_buf kb;
	struct dest *d;

	elog_buf_init(&kb, storage, sizeof(storage));
	dest_key(r, &kb);
	if (kb.overflow)
		return; /* cannot happen: host and ip are capped by the writer */
	d = elog_strmap_get(s->dests, kb.data);
	if (d == NULL) {
		d = calloc(1, sizeof(*d));
		if (d == NULL || (d->key = strdup(kb.data)) == NULL ||
		    (r->host != NULL && (d->host = strdup(r->host)) == NULL) ||
		    (r->host == NULL && r->ip != NULL && (d->ip = strdup(r->ip)) == NULL) ||
		    (d->kind = strdup(r->kind)) == NULL ||
		    (r->proto != NULL && (d->proto = strdup(r->proto)) == NULL) ||
		    elog_strmap_put(s->dests, kb.data, d) < 0) {
			if (d != NULL)
				dest_free(d);
			s->oom = true;
			return;
		}
		d->port = r->port;
		d->first = INT64_MAX;
		d->last = INT64_MIN;
	}
	d->attempts += n;
	d->allowed += is_allowed(r->verdict) ? n : 0;
	d->denied += elog_verdict_denied(r->verdict) ? n : 0;
	d->up += r->bytes_up;
	d->down += r->bytes_down;
	if (r->ts_ms < d->first)
		d->first = r->ts_ms;
	if (r->ts_ms > d->last)
		d->last = r->ts_ms;
}

/* elog_read_files callback: stop reading once out of memory. */
static int
summary_each(const struct elog_record *r, void *arg)
{
	struct summary *s = arg;

	summary_add(s, r);
	return s->oom ? -1 : 0;
}

static int
dest_cmp(const void *a, const void *b)
{
	const struct dest *x = *(struct dest *const *)a, *y = *(struct dest *const *)b;

	if (x->attempts != y->attempts)
		return x->attempts > y->attempts ? -1 : 1;
	return strcmp(x->key, y->key);
}

static void
task_totals(const struct task *t, uint64_t v[5])
{
	if (t->has_totals) {
		v[0] = t->connections, v[1] = t->allowed, v[2] = t->denied;
		v[3] = t->up, v[4] = t->down;
	} else {
		v[0] = t->c_connections, v[1] = t->c_allowed, v[2] = t->c_denied;
		v[3] = t->c_up, v[4] = t->c_down;
	}
}

static void
json_time(struct elog_buf *b, const char *name, int64_t ms)
{
	char ts[40];

	elog_buf_puts(b, ",\"");
	elog_buf_puts(b, name);
	elog_buf_puts(b, "\":\"");
	elog_format_time(ms, ts, sizeof(ts));
	elog_buf_puts(b, ts);
	elog_buf_putc(b, '"');
}

static void
summary_json(struct summary *s, struct dest **ds, size_t nd, FILE *out)
{
	static char storage[4 * ELOG_LINE_MAX];
	struct elog_buf b;

	fputs("{\"destinations\":[", out);
	for (size_t i = 0; i < nd; i++) {
		const struct dest *d = ds[i];

		elog_buf_init(&b, storage, sizeof(storage));
		if (i > 0)
			elog_buf_putc(&b, ',');
		elog_buf_puts(&b, "{\"destination\":");
		elog_buf_json_str(&b, d->key, SIZE_MAX);
		if (d->host != NULL) {
			elog_buf_puts(&b, ",\"host\":");
			elog_buf_json_str(&b, d->host, SIZE_MAX);
		}
		if (d->ip != NULL) {
			elog_buf_puts(&b, ",\"ip\":");
			elog_buf_json_str(&b, d->ip, SIZE_MAX);
		}
		if (d->port >= 0) {
			elog_buf_puts(&b, ",\"port\":");
			elog_buf_i64(&b, d->port);
		}
		elog_buf_puts(&b, ",\"kind\":");
		elog_buf_json_str(&b, d->kind, SIZE_MAX);
		if (d->proto != NULL) {
			elog_buf_puts(&b, ",\"proto\":");
			elog_buf_json_str(&b, d->proto, SIZE_MAX);
		}
		elog_buf_puts(&b, ",\"attempts\":");
		elog_buf_u64(&b, d->attempts);
		elog_buf_puts(&b, ",\"allowed\":");
		elog_buf_u64(&b, d->allowed);
		elog_buf_puts(&b, ",\"denied\":");
		elog_buf_u64(&b, d->denied);
		elog_buf_puts(&b, ",\"bytes_up\":");
		elog_buf_u64(&b, d->up);
		elog_buf_puts(&b, ",\"bytes_down\":");
		elog_buf_u64(&b, d->down);
		json_time(&b, "first", d->first);
		json_time(&b, "last", d->last);
		elog_buf_putc(&b, '}');
		fwrite(b.data, 1, b.len, out);
	}
	fputs("],\"tasks\":[", out);
	for (size_t i = 0; i < elog_strmap_count(s->tasks); i++) {
		const struct task *t = elog_strmap_value(s->tasks, i);
		uint64_t v[5];

		task_totals(t, v);
		elog_buf_init(&b, storage, sizeof(storage));
		if (i > 0)
			elog_buf_putc(&b, ',');
		elog_buf_puts(&b, "{\"task\":");
		elog_buf_json_str(&b, t->id, SIZE_MAX);
		if (t->command != NULL) {
			elog_buf_puts(&b, ",\"command\":[");
			for (size_t k = 0; k < t->argc; k++) {
				if (k > 0)
					elog_buf_putc(&b, ',');
				elog_buf_json_str(&b, t->command[k], SIZE_MAX);
			}
			elog_buf_putc(&b, ']');
		}
		if (t->policy != NULL) {
			elog_buf_puts(&b, ",\"policy\":");
			elog_buf_json_str(&b, t->policy, SIZE_MAX);
		}
		if (t->mode != NULL) {
			elog_buf_puts(&b, ",\"mode\":");
			elog_buf_json_str(&b, t->mode, SIZE_MAX);
		}
		elog_buf_puts(&b, t->ended ? ",\"ended\":true" : ",\"ended\":false");
		if (t->ended) {
			elog_buf_puts(&b, ",\"exit_status\":");
			elog_buf_i64(&b, t->exit_status);
			elog_buf_puts(&b, ",\"signal\":");
			elog_buf_i64(&b, t->sig);
			elog_buf_puts(&b, ",\"duration_ms\":");
			elog_buf_u64(&b, t->duration_ms);
		}
		if (t->first <= t->last) {
			json_time(&b, "first", t->first);
			json_time(&b, "last", t->last);
		}
		elog_buf_puts(&b, ",\"totals\":{\"connections\":");
		elog_buf_u64(&b, v[0]);
		elog_buf_puts(&b, ",\"allowed\":");
		elog_buf_u64(&b, v[1]);
		elog_buf_puts(&b, ",\"denied\":");
		elog_buf_u64(&b, v[2]);
		elog_buf_puts(&b, ",\"bytes_up\":");
		elog_buf_u64(&b, v[3]);
		elog_buf_puts(&b, ",\"bytes_down\":");
		elog_buf_u64(&b, v[4]);
		elog_buf_puts(&b, "}}");
		fwrite(b.data, 1, b.len, out);
	}
	fputs("]}\n", out);
}

static void
short_time(int64_t ms, char *out, size_t outlen)
{
	char ts[40];

	elog_format_time(ms, ts, sizeof(ts));
	ts[10] = ' ';
	ts[19] = '\0';
	str_copy(out, ts, outlen);
}

/* The DESTINATION column is as wide as its longest entry, up to this;
 * a longer one stands alone on its line, and its figures on the next. */
#define SUMMARY_DEST_MAX 60

static void
summary_text(struct summary *s, struct dest **ds, size_t nd, FILE *out)
{
	char storage[8192];
	struct elog_buf b;
	int width = (int)strlen("DESTINATION");

	for (size_t i = 0; i < nd; i++) {
		elog_buf_init(&b, storage, sizeof(storage) - 1);
		elog_buf_safe_text(&b, ds[i]->key, 600);
		if (b.len > (size_t)width)
			width = b.len > SUMMARY_DEST_MAX ? SUMMARY_DEST_MAX : (int)b.len;
	}
	fprintf(out, "destinations: %zu\n", nd);
	if (nd > 0)
		fprintf(out, "  %-*s %8s %8s %8s %9s %9s  %-19s  %s\n", width, "DESTINATION",
		        "ATTEMPTS", "ALLOWED", "DENIED", "UP", "DOWN", "FIRST", "LAST");
	for (size_t i = 0; i < nd; i++) {
		const struct dest *d = ds[i];
		char up[32], down[32], first[32], last[32];
		struct elog_buf ub, db;

		elog_buf_init(&b, storage, sizeof(storage) - 1);
		elog_buf_safe_text(&b, d->key, 600);
		elog_buf_putc(&b, '\0');
		elog_buf_init(&ub, up, sizeof(up) - 1);
		put_bytes(&ub, d->up);
		up[ub.len] = '\0';
		elog_buf_init(&db, down, sizeof(down) - 1);
		put_bytes(&db, d->down);
		down[db.len] = '\0';
		short_time(d->first, first, sizeof(first));
		short_time(d->last, last, sizeof(last));
		if (b.len - 1 > (size_t)width)
			fprintf(out, "  %s\n  %-*s", b.data, width, "");
		else
			fprintf(out, "  %-*s", width, b.data);
		fprintf(out, " %8" PRIu64 " %8" PRIu64 " %8" PRIu64 " %9s %9s  %s  %s\n", d->attempts,
		        d->allowed, d->denied, up, down, first, last);
	}
	fprintf(out, "\ntasks: %zu\n", elog_strmap_count(s->tasks));
	for (size_t i = 0; i < elog_strmap_count(s->tasks); i++) {
		const struct task *t = elog_strmap_value(s->tasks, i);
		uint64_t v[5];

		task_totals(t, v);
		elog_buf_init(&b, storage, sizeof(storage) - 1);
		elog_buf_puts(&b, "  ");
		elog_buf_safe_text(&b, t->id, 128);
		elog_buf_puts(&b, "\n    command:  ");
		if (t->command == NULL)
			elog_buf_puts(&b, "(unknown: no task-start line)");
		for (size_t k = 0; k < t->argc; k++) {
			if (k > 0)
				elog_buf_putc(&b, ' ');
			elog_buf_safe_text(&b, t->command[k], 200);
		}
		elog_buf_puts(&b, "\n    policy:   ");
		elog_buf_safe_text(&b, t->policy != NULL ? t->policy : "-", 255);
		if (t->mode != NULL) {
			elog_buf_puts(&b, " (");
			elog_buf_safe_text(&b, t->mode, 32);
			elog_buf_putc(&b, ')');
		}
		elog_buf_puts(&b, "\n    result:   ");
		if (t->ended) {
			elog_buf_puts(&b, "exit ");
			elog_buf_i64(&b, t->exit_status);
			if (t->sig != 0) {
				elog_buf_puts(&b, ", signal ");
				elog_buf_i64(&b, t->sig);
			}
			elog_buf_puts(&b, ", ");
			elog_buf_u64(&b, t->duration_ms / 1000);
			elog_buf_putc(&b, '.');
			char ms[8];
			snprintf(ms, sizeof(ms), "%03u", (unsigned)(t->duration_ms % 1000));
			elog_buf_puts(&b, ms);
			elog_buf_puts(&b, " s");
		} else {
			elog_buf_puts(&b, "no task-end line (still running, or the log was cut)");
		}
		elog_buf_puts(&b, "\n    totals:   ");
		elog_buf_u64(&b, v[0]);
		elog_buf_puts(&b, " events, ");
		elog_buf_u64(&b, v[1]);
		elog_buf_puts(&b, " allowed, ");
		elog_buf_u64(&b, v[2]);
		elog_buf_puts(&b, " denied, up ");
		put_bytes(&b, v[3]);
		elog_buf_puts(&b, ", down ");
		put_bytes(&b, v[4]);
		elog_buf_putc(&b, '\n');
		fwrite(b.data, 1, b.len, out);
	}
}

int
review_summary(char *const *files, int n_files, bool json, FILE *out)
{
	struct summary s = {.dests = elog_strmap_new(), .tasks = elog_strmap_new()};
	struct dest **ds = NULL;
	size_t nd = 0;
	int rc = 0;

	if (s.dests == NULL || s.tasks == NULL) {
		log_warnx("log summary: out of memory");
		rc = -1;
		goto out;
	}
	rc = elog_read_files(files, n_files, summary_each, &s);
	if (s.oom) {
		log_warnx("log summary: out of memory");
		rc = -1;
		goto out;
	}
	nd = elog_strmap_count(s.dests);
	ds = calloc(nd + 1, sizeof(*ds));
	if (ds == NULL) {
		rc = -1;
		goto out;
	}
	for (size_t i = 0; i < nd; i++)
		ds[i] = elog_strmap_value(s.dests, i);
	qsort(ds, nd, sizeof(*ds), dest_cmp);
	if (json)
		summary_json(&s, ds, nd, out);
	else
		summary_text(&s, ds, nd, out);
out:
	free(ds);
	for (size_t i = 0; s.dests != NULL && i < elog_strmap_count(s.dests); i++)
		dest_free(elog_strmap_value(s.dests, i));
	for (size_t i = 0; s.tasks != NULL && i < elog_strmap_count(s.tasks); i++)
		task_free(elog_strmap_value(s.tasks, i));
	elog_strmap_free(s.dests);
	elog_strmap_free(s.tasks);
	return rc;
}
