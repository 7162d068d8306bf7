/* The egress log writer (schema v1, docs/log.md). Each line is built in a
 * fixed buffer and handed to the kernel with one write(2) on an O_APPEND
 * fd, so concurrent writers never interleave and a crash can cut only the
 * last line. */
#include "elog/elog.h"

#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common/log.h"
#include "common/util.h"
#include "elog/buf.h"

/* Caps on input bytes per field (docs/log.md). Sandbox-controlled fields
 * are capped hardest; the sum of the worst cases, escaped (x6), stays
 * under ELOG_LINE_MAX. */
#define CAP_NAME    255 /* host, sni */
#define CAP_URL     2048
#define CAP_SHORT   32  /* kind, verdict, method, qtype, rcode, proto, mode */
#define CAP_ADDR    64  /* ip, orig_dst, one DNS answer */
#define CAP_RULE    512 /* rule, reason */
#define CAP_TASK    128
#define CAP_ANSWERS 32   /* entries */
#define CAP_ARG     1024 /* one command word */
#define CAP_COMMAND 8192 /* all command words together */
#define CAP_WORDS   512  /* command words (each costs at least 3 bytes) */
#define CAP_TEXT    255  /* policy, selftest */

struct elog {
	int fd;
	bool failed;
	bool is_stream; /* a pipe or socket: a gone reader is visible early */
	char *task;
	FILE *human;
	struct elog_task_end totals;
	char line[ELOG_LINE_MAX];
};

/* The names of fields that were cut, written as "truncated": [...]. */
struct cuts {
	const char *names[24];
	size_t n;
};

static void
cut_note(struct cuts *c, bool was_cut, const char *name)
{
	if (was_cut && c->n < ARRAY_SIZE(c->names))
		c->names[c->n++] = name;
}

struct elog *
elog_open_fd(int fd)
{
	/* The line buffer is written before it is read: only the fields
	 * before it are zeroed, so its 64 KiB are not all touched (each page
	 * touched costs a fault, on every run). */
	struct elog *log = malloc(sizeof(*log));
	struct stat st;

	if (log == NULL) {
		fd_close(&fd);
		return NULL;
	}
	memset(log, 0, offsetof(struct elog, line));
	log->fd = fd;
	log->is_stream = fstat(fd, &st) == 0 && (S_ISFIFO(st.st_mode) || S_ISSOCK(st.st_mode));
	return log;
}

struct elog *
elog_open(const char *path, char *err, size_t errlen)
{
	struct elog *log;
	int fd;

	if (strcmp(path, "-") == 0)
		/* A copy, so elog_free() closes what it owns and stdout stays. */
		fd = fcntl(STDOUT_FILENO, F_DUPFD_CLOEXEC, 3);
	else
		fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC | O_NOCTTY, 0600);
	if (fd < 0) {
		snprintf(err, errlen, "cannot open egress log %s: %s", path, strerror(errno));
		return NULL;
	}
	log = elog_open_fd(fd);
	if (log == NULL)
		snprintf(err, errlen, "cannot open egress log %s: out of memory", path);
	return log;
}

void
elog_free(struct elog *log)
{
	if (log == NULL)
		return;
	fd_close(&log->fd);
	free(log->task);
	free(log);
}

void
elog_set_task(struct elog *log, const char *task_id)
{
	free(log->task);
	log->task = task_id != NULL ? strdup(task_id) : NULL;
}

void
elog_set_human(struct elog *log, FILE *human)
{
	log->human = human;
}

bool
elog_failed(const struct elog *log)
{
	struct pollfd pfd = {.fd = log->fd, .events = 0};

	if (log->failed)
		return true;
	/* Lines are written when a connection ends, so a log piped to a reader
	 * that has gone would only be found broken after the next connection
	 * was let through unrecorded. A pipe or socket whose reader is gone
	 * reports POLLERR/POLLHUP at once: call the log failed before that. */
	if (log->is_stream && poll(&pfd, 1, 0) == 1 &&
	    (pfd.revents & (POLLERR | POLLHUP | POLLNVAL)) != 0)
		return true;
	return false;
}

void
elog_totals(const struct elog *log, struct elog_task_end *te)
{
	te->connections = log->totals.connections;
	te->allowed = log->totals.allowed;
	te->denied = log->totals.denied;
	te->bytes_up = log->totals.bytes_up;
	te->bytes_down = log->totals.bytes_down;
}

/* ts, task and kind: the first three fields of every line. */
static void
line_begin(struct elog *log, struct elog_buf *b, const char *kind, struct timespec *now,
           struct cuts *cuts)
{
	struct tm tm;
	char ts[40];
	int n;

	clock_gettime(CLOCK_REALTIME, now);
	gmtime_r(&now->tv_sec, &tm);
	n = snprintf(ts, sizeof(ts), "%04d-%02d-%02dT%02d:%02d:%02d.%03ldZ", tm.tm_year + 1900,
	             tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec,
	             now->tv_nsec / 1000000L);
	elog_buf_init(b, log->line, sizeof(log->line));
	elog_buf_puts(b, "{\"ts\":\"");
	elog_buf_put(b, ts, (size_t)n);
	elog_buf_putc(b, '"');
	if (log->task != NULL) {
		elog_buf_puts(b, ",\"task\":");
		cut_note(cuts, elog_buf_json_str(b, log->task, CAP_TASK), "task");
	}
	elog_buf_puts(b, ",\"kind\":");
	cut_note(cuts, elog_buf_json_str(b, kind, CAP_SHORT), "kind");
}

static void
field_str(struct elog_buf *b, struct cuts *cuts, const char *name, const char *val, size_t cap)
{
	if (val == NULL)
		return;
	elog_buf_puts(b, ",\"");
	elog_buf_puts(b, name);
	elog_buf_puts(b, "\":");
	cut_note(cuts, elog_buf_json_str(b, val, cap), name);
}

static void
field_u64(struct elog_buf *b, const char *name, uint64_t val)
{
	elog_buf_puts(b, ",\"");
	elog_buf_puts(b, name);
	elog_buf_puts(b, "\":");
	elog_buf_u64(b, val);
}

/* Close the object, write it in one write(2). A line that did not fit or
 * was written short marks the log failed: a partial record is worse than
 * none, and the caller must stop letting traffic through. */
static int
line_end(struct elog *log, struct elog_buf *b, struct cuts *cuts)
{
	ssize_t n;

	if (cuts->n > 0) {
		elog_buf_puts(b, ",\"truncated\":[");
		for (size_t i = 0; i < cuts->n; i++) {
			if (i > 0)
				elog_buf_putc(b, ',');
			elog_buf_json_str(b, cuts->names[i], CAP_SHORT);
		}
		elog_buf_putc(b, ']');
	}
	elog_buf_puts(b, "}\n");
	if (b->overflow) {
		log_warnx("egress log: a line exceeded %d bytes; log marked failed", ELOG_LINE_MAX);
		log->failed = true;
		return -1;
	}
	do
		n = write(log->fd, b->data, b->len);
	while (n < 0 && errno == EINTR);
	if (n < 0 || (size_t)n != b->len) {
		if (n < 0)
			log_warn("egress log: write failed; log marked failed");
		else
			log_warnx("egress log: short write (%zd of %zu bytes); log "
			          "marked failed",
			          n, b->len);
		log->failed = true;
		return -1;
	}
	return 0;
}

static void
human_time(struct elog_buf *h, const struct timespec *now)
{
	struct tm tm;
	char t[16];
	int n;

	gmtime_r(&now->tv_sec, &tm);
	n = snprintf(t, sizeof(t), "%02d:%02d:%02d ", tm.tm_hour, tm.tm_min, tm.tm_sec);
	elog_buf_put(h, t, (size_t)n);
}

static void
human_emit(struct elog *log, struct elog_buf *h)
{
	elog_buf_putc(h, '\n');
	fwrite(h->data, 1, h->len, log->human);
	fflush(log->human);
}

static void
human_pad(struct elog_buf *h, const char *s, size_t width)
{
	size_t start = h->len;

	elog_buf_safe_text(h, s, CAP_SHORT);
	while (h->len - start < width)
		elog_buf_putc(h, ' ');
	elog_buf_putc(h, ' ');
}

/* `10:24:48 deny  tls     evil.test:443 (203.0.113.66) no match` */
static void
human_event(struct elog *log, const struct elog_event *ev, const struct timespec *now)
{
	char storage[1024];
	struct elog_buf h;

	elog_buf_init(&h, storage, sizeof(storage) - 1);
	human_time(&h, now);
	human_pad(&h, ev->verdict != NULL ? ev->verdict : "-", 5);
	human_pad(&h, ev->kind != NULL ? ev->kind : "-", 7);
	if (ev->path != NULL)
		elog_buf_safe_text(&h, ev->path, 120);
	else if (ev->host != NULL)
		elog_buf_safe_text(&h, ev->host, 80);
	else if (ev->ip != NULL && strchr(ev->ip, ':') != NULL && ev->port >= 0) {
		elog_buf_putc(&h, '[');
		elog_buf_safe_text(&h, ev->ip, CAP_ADDR);
		elog_buf_putc(&h, ']');
	} else if (ev->ip != NULL)
		elog_buf_safe_text(&h, ev->ip, CAP_ADDR);
	else
		elog_buf_putc(&h, '-');
	if (ev->port >= 0) {
		elog_buf_putc(&h, ':');
		elog_buf_i64(&h, ev->port);
	}
	if (ev->host != NULL && ev->ip != NULL) {
		elog_buf_puts(&h, " (");
		elog_buf_safe_text(&h, ev->ip, CAP_ADDR);
		elog_buf_putc(&h, ')');
	}
	if (ev->qtype != NULL) {
		elog_buf_putc(&h, ' ');
		elog_buf_safe_text(&h, ev->qtype, CAP_SHORT);
	}
	if (ev->bytes_up != 0 || ev->bytes_down != 0) {
		elog_buf_puts(&h, " up ");
		elog_buf_u64(&h, ev->bytes_up);
		elog_buf_puts(&h, " down ");
		elog_buf_u64(&h, ev->bytes_down);
	}
	if (ev->reason != NULL) {
		elog_buf_putc(&h, ' ');
		elog_buf_safe_text(&h, ev->reason, 200);
	} else if (ev->rule != NULL) {
		elog_buf_putc(&h, ' ');
		elog_buf_safe_text(&h, ev->rule, 200);
	}
	human_emit(log, &h);
}

bool
elog_verdict_denied(const char *verdict)
{
	return verdict != NULL &&
	       (strcmp(verdict, "deny") == 0 || strcmp(verdict, "audit-deny") == 0);
}

int
elog_event(struct elog *log, const struct elog_event *ev)
{
	struct elog_buf b;
	struct cuts cuts = {.n = 0};
	struct timespec now;

	if (log->failed)
		return -1;
	log->totals.connections++;
	if (ev->verdict != NULL && strcmp(ev->verdict, "allow") == 0)
		log->totals.allowed++;
	else if (elog_verdict_denied(ev->verdict))
		log->totals.denied++;
	log->totals.bytes_up += ev->bytes_up;
	log->totals.bytes_down += ev->bytes_down;

	line_begin(log, &b, ev->kind != NULL ? ev->kind : "unknown", &now, &cuts);
	field_str(&b, &cuts, "host", ev->host, CAP_NAME);
	field_str(&b, &cuts, "ip", ev->ip, CAP_ADDR);
	if (ev->port >= 0)
		field_u64(&b, "port", (uint64_t)ev->port);
	field_str(&b, &cuts, "verdict", ev->verdict, CAP_SHORT);
	field_str(&b, &cuts, "rule", ev->rule, CAP_RULE);
	field_str(&b, &cuts, "reason", ev->reason, CAP_RULE);
	field_u64(&b, "bytes_up", ev->bytes_up);
	field_u64(&b, "bytes_down", ev->bytes_down);
	field_u64(&b, "duration_ms", ev->duration_ms);
	field_str(&b, &cuts, "sni", ev->sni, CAP_NAME);
	field_str(&b, &cuts, "method", ev->method, CAP_SHORT);
	field_str(&b, &cuts, "url", ev->url, CAP_URL);
	field_str(&b, &cuts, "qtype", ev->qtype, CAP_SHORT);
	field_str(&b, &cuts, "rcode", ev->rcode, CAP_SHORT);
	if (ev->answers != NULL) {
		size_t n = ev->n_answers;
		bool cut = false;

		if (n > CAP_ANSWERS) {
			n = CAP_ANSWERS;
			cut = true;
		}
		elog_buf_puts(&b, ",\"answers\":[");
		for (size_t i = 0; i < n; i++) {
			if (i > 0)
				elog_buf_putc(&b, ',');
			if (elog_buf_json_str(&b, ev->answers[i] != NULL ? ev->answers[i] : "",
			                      CAP_ADDR))
				cut = true;
		}
		elog_buf_putc(&b, ']');
		cut_note(&cuts, cut, "answers");
	}
	field_str(&b, &cuts, "proto", ev->proto, CAP_SHORT);
	field_str(&b, &cuts, "orig_dst", ev->orig_dst, CAP_ADDR);
	if (ev->packets > 0)
		field_u64(&b, "packets", ev->packets);
	field_str(&b, &cuts, "path", ev->path, CAP_NAME);
	if (line_end(log, &b, &cuts) < 0)
		return -1;
	if (log->human != NULL)
		human_event(log, ev, &now);
	return 0;
}

int
elog_task_start(struct elog *log, const struct elog_task_start *ts)
{
	struct elog_buf b;
	struct cuts cuts = {.n = 0};
	struct timespec now;
	size_t budget = CAP_COMMAND;

	if (log->failed)
		return -1;
	line_begin(log, &b, "task-start", &now, &cuts);
	field_str(&b, &cuts, "airlock", AIRLOCK_VERSION, CAP_SHORT);
	field_u64(&b, "pid", (uint64_t)getpid());
	field_str(&b, &cuts, "policy", ts->policy, CAP_TEXT);
	field_str(&b, &cuts, "policy_sha256", ts->policy_sha256, 64);
	field_str(&b, &cuts, "mode", ts->mode, CAP_SHORT);
	if (ts->argv != NULL) {
		bool cut = false;

		elog_buf_puts(&b, ",\"command\":[");
		for (int i = 0; i < ts->argc; i++) {
			const char *arg = ts->argv[i] != NULL ? ts->argv[i] : "";
			size_t cap = budget < CAP_ARG ? budget : CAP_ARG;
			size_t len = strlen(arg);

			if (cap == 0 || i == CAP_WORDS) {
				cut = true;
				break;
			}
			if (i > 0)
				elog_buf_putc(&b, ',');
			if (elog_buf_json_str(&b, arg, cap))
				cut = true;
			budget -= len < cap ? len : cap;
		}
		elog_buf_putc(&b, ']');
		cut_note(&cuts, cut, "command");
	}
	field_str(&b, &cuts, "selftest", ts->selftest, CAP_TEXT);
	if (line_end(log, &b, &cuts) < 0)
		return -1;
	if (log->human != NULL) {
		char storage[1024];
		struct elog_buf h;

		elog_buf_init(&h, storage, sizeof(storage) - 1);
		human_time(&h, &now);
		elog_buf_puts(&h, "start policy ");
		elog_buf_safe_text(&h, ts->policy != NULL ? ts->policy : "-", 80);
		elog_buf_puts(&h, " mode ");
		elog_buf_safe_text(&h, ts->mode != NULL ? ts->mode : "-", CAP_SHORT);
		for (int i = 0; ts->argv != NULL && i < ts->argc && i < 16; i++) {
			elog_buf_putc(&h, ' ');
			elog_buf_safe_text(&h, ts->argv[i] != NULL ? ts->argv[i] : "", 80);
		}
		human_emit(log, &h);
	}
	return 0;
}

int
elog_task_end(struct elog *log, const struct elog_task_end *te)
{
	struct elog_buf b;
	struct cuts cuts = {.n = 0};
	struct timespec now;

	if (log->failed)
		return -1;
	line_begin(log, &b, "task-end", &now, &cuts);
	elog_buf_puts(&b, ",\"exit_status\":");
	elog_buf_i64(&b, te->exit_status);
	elog_buf_puts(&b, ",\"signal\":");
	elog_buf_i64(&b, te->signal);
	field_u64(&b, "duration_ms", te->duration_ms);
	elog_buf_puts(&b, ",\"totals\":{\"connections\":");
	elog_buf_u64(&b, te->connections);
	field_u64(&b, "allowed", te->allowed);
	field_u64(&b, "denied", te->denied);
	field_u64(&b, "bytes_up", te->bytes_up);
	field_u64(&b, "bytes_down", te->bytes_down);
	elog_buf_putc(&b, '}');
	if (line_end(log, &b, &cuts) < 0)
		return -1;
	if (log->human != NULL) {
		char storage[256];
		struct elog_buf h;

		elog_buf_init(&h, storage, sizeof(storage) - 1);
		human_time(&h, &now);
		elog_buf_puts(&h, "end   exit ");
		elog_buf_i64(&h, te->exit_status);
		if (te->signal != 0) {
			elog_buf_puts(&h, " signal ");
			elog_buf_i64(&h, te->signal);
		}
		elog_buf_puts(&h, ", ");
		elog_buf_u64(&h, te->connections);
		elog_buf_puts(&h, te->connections == 1 ? " event, " : " events, ");
		elog_buf_u64(&h, te->allowed);
		elog_buf_puts(&h, " allowed, ");
		elog_buf_u64(&h, te->denied);
		elog_buf_puts(&h, " denied");
		human_emit(log, &h);
	}
	return 0;
}
