/* The egress log writer (schema v1, docs/log.md). Each line is built in a
 * fixed buffer, sealed into the hash chain (elog/chain.h) and handed whole
 * to the sink (elog/sink.h), which never blocks and never leaves a partial
 * line; line_emit is the one way out. Around that: the task's totals,
 * the memory of repeated events (elog/agg.h) with its window, and the log
 * budget with the destinations the log names (elog/tab.h). */
#include "elog/elog.h"

#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <event2/event.h>

#include "common/log.h"
#include "common/util.h"
#include "elog/agg.h"
#include "elog/buf.h"
#include "elog/caps.h"
#include "elog/chain.h"
#include "elog/logmsg.h"
#include "elog/notice.h"
#include "elog/sink.h"
#include "elog/tab.h"

#define CAP_NAME    ELOG_CAP_NAME
#define CAP_URL     ELOG_CAP_URL
#define CAP_SHORT   ELOG_CAP_SHORT
#define CAP_ADDR    ELOG_CAP_ADDR
#define CAP_RULE    ELOG_CAP_RULE
#define CAP_TASK    ELOG_CAP_TASK
#define CAP_ANSWERS ELOG_CAP_ANSWERS
#define CAP_ARG     ELOG_CAP_ARG
#define CAP_COMMAND ELOG_CAP_COMMAND
#define CAP_WORDS   ELOG_CAP_WORDS
#define CAP_TEXT    ELOG_CAP_TEXT

/* Keys of repeated events kept at most (agg.h): a full table is flushed
 * early. 4096 events of ~150 bytes fit; the worst case (every field at
 * its cap) fits about 500. */
#define AGG_ARENA (1024 * 1024)
/* Destinations remembered for the budget (admitted or named); past that,
 * a destination is unknown: refused once the budget is spent. */
#define KNOWN_MAX   8192
#define KNOWN_ARENA (1024 * 1024)
/* The longest destination kept as a key (a name is at most 255 bytes). */
#define KNOWN_DEST_MAX 300

/* What the budget knows of a destination (key: dest, NUL, port). */
struct known {
	bool kn_written; /* a line names it */
};

struct elog {
	struct elog_sink *sink;
	bool failed; /* a line could not even be built (the sink is fine) */
	char error[128];
	char *task;
	FILE *human;
	struct elog_notice *notice; /* borrowed: denials said on stderr */
	struct elog_task_end totals;

	/* Repeated events (elog_event_agg): made on first use. */
	struct elog_agg *agg;
	unsigned agg_window_ms;
	size_t agg_max;
	uint64_t agg_deadline_ms; /* when the open window closes; 0: none */

	/* The budget: bytes of event lines written of budget (0: none). */
	uint64_t budget, spent_bytes;
	bool spent;
	struct elog_tab *known; /* made on first use */

	/* With a loop attached (elog_attach). */
	struct event *ev_window; /* closes the aggregation window */
	struct event *ev_write;  /* the sink's fd is writable again */

	/* seq and prev of the next line (restarted by task-start). With a
	 * logger (remote), the chain is the logger's: only seq is counted
	 * here, for the budget's count of the fields the logger adds. */
	struct elog_chain chain;
	bool remote;

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

/* The parts of a log around its sink (which is set). */
static struct elog *
log_new(struct elog_sink *sink)
{
	/* The line buffer is written before it is read: only the fields
	 * before it are zeroed, so its 64 KiB are not all touched (each page
	 * touched costs a fault, on every run). */
	struct elog *log = malloc(sizeof(*log));

	if (log == NULL) {
		elog_sink_free(sink);
		return NULL;
	}
	memset(log, 0, offsetof(struct elog, line));
	log->sink = sink;
	log->agg_window_ms = ELOG_AGG_WINDOW_MS;
	log->agg_max = ELOG_AGG_MAX;
	elog_chain_init(&log->chain);
	return log;
}

struct elog *
elog_open_logger(int fd, pid_t pid)
{
	struct elog_sink *sink;
	struct elog *log;
	char err[256];

	if ((sink = elog_sink_new_logger(fd, pid, err, sizeof(err))) == NULL) {
		log_warnx("egress log: %s", err);
		return NULL;
	}
	if ((log = log_new(sink)) != NULL)
		log->remote = true;
	return log;
}

struct elog *
elog_open_fd(int fd)
{
	struct elog_sink *sink;
	char err[256];

	if ((sink = elog_sink_new(fd, err, sizeof(err))) == NULL) {
		log_warnx("egress log: %s", err);
		return NULL;
	}
	return log_new(sink);
}

/* stdout as the log: a description of our own when stdout is a pipe or
 * terminal (reopened through /proc), so that making it non-blocking does
 * not change the caller's stdout; else (a file, a socket, no /proc) a
 * duplicate. */
static int
open_stdout(void)
{
	struct stat st;
	int fd = -1;

	if (fstat(STDOUT_FILENO, &st) == 0 && !S_ISREG(st.st_mode) && !S_ISSOCK(st.st_mode))
		/* O_NONBLOCK: a FIFO whose reader has gone must not block
		 * the open; that fails, and the duplicate then fails the log
		 * at its first line. */
		fd = open("/proc/self/fd/1", O_WRONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
	if (fd < 0)
		fd = fcntl(STDOUT_FILENO, F_DUPFD_CLOEXEC, 3);
	return fd;
}

int
elog_open_path(const char *path, char *err, size_t errlen)
{
	int fd;

	if (strcmp(path, "-") == 0)
		/* A copy, so elog_free() closes what it owns and stdout stays. */
		fd = open_stdout();
	else
		/* O_NONBLOCK: a FIFO with no reader fails at once (ENXIO)
		 * instead of blocking here; it changes nothing for a file. */
		fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC | O_NOCTTY | O_NONBLOCK,
		          0600);
	if (fd < 0)
		snprintf(err, errlen, "cannot open egress log %s: %s", path, strerror(errno));
	return fd;
}

struct elog *
elog_open(const char *path, char *err, size_t errlen)
{
	int fd = elog_open_path(path, err, errlen);
	struct elog *log;

	if (fd < 0)
		return NULL;
	log = elog_open_fd(fd);
	if (log == NULL)
		snprintf(err, errlen, "cannot use egress log %s (see above)", path);
	return log;
}

void
elog_free(struct elog *log)
{
	if (log == NULL)
		return;
	elog_detach(log);
	elog_sink_free(log->sink);
	elog_agg_free(log->agg);
	elog_tab_free(log->known);
	free(log->task);
	free(log);
}

void
elog_abandon(struct elog *log)
{
	if (log == NULL)
		return;
	elog_sink_abandon(log->sink);
	log->sink = NULL;
	elog_free(log);
}

pid_t
elog_disown_logger(struct elog *log)
{
	return log != NULL ? elog_sink_disown(log->sink) : 0;
}

void
elog_set_task(struct elog *log, const char *task_id)
{
	free(log->task);
	log->task = task_id != NULL ? strdup(task_id) : NULL;
}

void
elog_set_notice(struct elog *log, struct elog_notice *notice)
{
	log->notice = notice;
}

void
elog_set_human(struct elog *log, FILE *human)
{
	log->human = human;
}

void
elog_set_budget(struct elog *log, uint64_t bytes)
{
	log->budget = bytes;
}

int
elog_parse_size(const char *s, uint64_t *out)
{
	static const struct {
		const char *suffix;
		unsigned shift;
	} units[] = {{"", 0},     {"k", 10}, {"kib", 10}, {"m", 20},
	             {"mib", 20}, {"g", 30}, {"gib", 30}};
	char digits[24];
	size_t n = strspn(s, "0123456789");
	uint64_t v;

	if (n == 0 || n >= sizeof(digits))
		return -1;
	memcpy(digits, s, n);
	digits[n] = '\0';
	if (parse_uint(digits, 0, 1ULL << 40, &v) < 0)
		return -1;
	for (size_t i = 0; i < ARRAY_SIZE(units); i++) {
		if (strcasecmp(s + n, units[i].suffix) != 0)
			continue;
		if (v > (1ULL << 40) >> units[i].shift)
			return -1;
		*out = v << units[i].shift;
		return 0;
	}
	return -1;
}

void
elog_set_agg(struct elog *log, unsigned window_ms, size_t max_events)
{
	log->agg_window_ms = window_ms > 0 ? window_ms : ELOG_AGG_WINDOW_MS;
	log->agg_max = max_events > 0 ? max_events : ELOG_AGG_MAX;
}

bool
elog_failed(struct elog *log)
{
	return log->failed || elog_sink_failed(log->sink);
}

/* elog_failed without its poll(2), for every line: the callers check
 * elog_failed per connection, and the sink notices on the write. */
static bool
log_dead(const struct elog *log)
{
	return log->failed || elog_sink_dead(log->sink);
}

const char *
elog_error(const struct elog *log)
{
	return log->failed ? log->error : elog_sink_error(log->sink);
}

bool
elog_budget_spent(const struct elog *log)
{
	return log->spent;
}

void
elog_totals(const struct elog *log, struct elog_task_end *te)
{
	te->connections = log->totals.connections;
	te->allowed = log->totals.allowed;
	te->denied = log->totals.denied;
	te->bytes_up = log->totals.bytes_up;
	te->bytes_down = log->totals.bytes_down;
	te->unlogged = log->totals.unlogged;
}

/* ts, task and kind: the first three fields of every line, into b (set
 * up by the caller: log->line, or storage of its own). */
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

/* The line's last own field; line_emit closes the object with the chain's
 * fields, for which room is kept. A line that did not fit marks the log
 * failed: a partial record is worse than none, and the caller must stop
 * letting traffic through. Returns 0, or -1 (nothing to write). */
static int
line_end(struct elog *log, struct elog_buf *b, struct cuts *cuts)
{
	if (cuts->n > 0) {
		elog_buf_puts(b, ",\"truncated\":[");
		for (size_t i = 0; i < cuts->n; i++) {
			if (i > 0)
				elog_buf_putc(b, ',');
			elog_buf_json_str(b, cuts->names[i], CAP_SHORT);
		}
		elog_buf_putc(b, ']');
	}
	if (b->overflow || b->len + ELOG_CHAIN_SUFFIX_MAX >= ELOG_WRITE_MAX) {
		snprintf(log->error, sizeof(log->error), "a line exceeded %d bytes", ELOG_WRITE_MAX);
		log_warnx("egress log: %s; log marked failed", log->error);
		log->failed = true;
		return -1;
	}
	return 0;
}

/* Seal a built line into the chain and hand it to the sink, in the order
 * lines are written; what a slow reader had no room for is written when
 * its fd is writable again. A line that cannot be sealed is not written
 * and fails the log: an unchained line would break every later one. */
static int
line_emit(struct elog *log, struct elog_buf *b)
{
	if (log->remote) {
		/* The logger seals it: the line goes as built, still open. */
		if (elog_sink_write(log->sink, b->data, b->len) < 0)
			return -1;
		elog_chain_commit(&log->chain);
		goto queued;
	}
	if (elog_chain_seal(&log->chain, b) < 0) {
		snprintf(log->error, sizeof(log->error),
		         "a line could not be hashed for its chain");
		log_warnx("egress log: %s; log marked failed", log->error);
		log->failed = true;
		return -1;
	}
	if (elog_sink_write(log->sink, b->data, b->len) < 0)
		return -1;
	elog_chain_commit(&log->chain);
queued:
	if (log->ev_write != NULL && elog_sink_queued(log->sink) > 0 &&
	    !event_pending(log->ev_write, EV_WRITE, NULL))
		(void)event_add(log->ev_write, NULL);
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
		if (ev->detail != NULL) {
			elog_buf_puts(&h, ": ");
			elog_buf_safe_text(&h, ev->detail, 200);
		}
	} else if (ev->rule != NULL) {
		elog_buf_putc(&h, ' ');
		elog_buf_safe_text(&h, ev->rule, 200);
	}
	if (ev->count > 0) {
		elog_buf_puts(&h, " (");
		elog_buf_u64(&h, ev->count);
		elog_buf_puts(&h, " more since the last line)");
	}
	human_emit(log, &h);
}

bool
elog_verdict_denied(const char *verdict)
{
	return verdict != NULL &&
	       (strcmp(verdict, "deny") == 0 || strcmp(verdict, "audit-deny") == 0);
}

/* ---- the budget ------------------------------------------------------ */

/* The known-destination entry for dest:port, inserted when insert is set
 * and there is room; NULL when absent. */
static struct known *
known_get(struct elog *log, const char *dest, int port, bool insert)
{
	char key[KNOWN_DEST_MAX + 1 + sizeof(int32_t)];
	size_t n = strnlen(dest, KNOWN_DEST_MAX);
	int32_t p = port < 0 ? -1 : port;
	struct known *k;

	if (log->known == NULL) {
		if (!insert)
			return NULL;
		log->known = elog_tab_new(KNOWN_MAX, KNOWN_ARENA, sizeof(struct known));
		if (log->known == NULL)
			return NULL;
	}
	memcpy(key, dest, n);
	key[n] = '\0';
	memcpy(key + n + 1, &p, sizeof(p));
	k = elog_tab_find(log->known, key, n + 1 + sizeof(p));
	if (k == NULL && insert)
		k = elog_tab_insert(log->known, key, n + 1 + sizeof(p));
	return k;
}

/* Traffic was let through: the verdicts of connections that went on. */
static bool
verdict_let_through(const char *verdict)
{
	return verdict != NULL &&
	       (strcmp(verdict, "allow") == 0 || strcmp(verdict, "audit-deny") == 0);
}

/* The one log-budget line, outside the budget, and its stderr twin. */
static void
budget_spend(struct elog *log)
{
	struct elog_buf b;
	struct cuts cuts = {.n = 0};
	struct timespec now;
	/* Not log->line: the line of the event that spent the budget is in
	 * it, and may still be written after this one. */
	char storage[2048], reason[160];

	log->spent = true;
	snprintf(reason, sizeof(reason),
	         "egress log budget of %" PRIu64 " bytes spent: detail stops, counts go on "
	         "(task-end), new destinations are refused",
	         log->budget);
	log_warnx("%s", reason);
	elog_buf_init(&b, storage, sizeof(storage));
	line_begin(log, &b, "log-budget", &now, &cuts);
	field_str(&b, &cuts, "reason", reason, CAP_RULE);
	field_u64(&b, "log_budget", log->budget);
	if (line_end(log, &b, &cuts) == 0)
		(void)line_emit(log, &b);
}

/* Whether the built line for ev (len bytes) is written: within the budget;
 * or, once it is spent, when it is the first line of a destination that
 * traffic went to. Otherwise the event is only counted, as unlogged. */
static bool
budget_admits_line(struct elog *log, const struct elog_event *ev, size_t len)
{
	const char *dest = ev->host != NULL ? ev->host : ev->ip;
	struct known *k = NULL;
	bool traffic = dest != NULL && verdict_let_through(ev->verdict);

	if (log->budget == 0)
		return true;
	/* The whole line counts, with the chain's fields line_emit adds. */
	len += elog_chain_suffix_len(&log->chain);
	if (traffic)
		k = known_get(log, dest, ev->port, true);
	if (!log->spent && len <= log->budget - log->spent_bytes) {
		log->spent_bytes += len;
		if (k != NULL)
			k->kn_written = true;
		return true;
	}
	if (!log->spent)
		budget_spend(log);
	/* Admitted before the budget ran out, never named yet: name it, so
	 * every destination reached is in the log. At most one line per
	 * destination; with the table full (k NULL), as many as connections
	 * were admitted before, since none is admitted after. */
	if (traffic && (k == NULL || !k->kn_written)) {
		if (k != NULL)
			k->kn_written = true;
		return true;
	}
	log->totals.unlogged += ev->count > 0 ? ev->count : 1;
	return false;
}

bool
elog_admit(struct elog *log, const char *dest, int port)
{
	if (log->budget == 0 || dest == NULL)
		return true;
	/* Before the budget is spent, remember what was admitted: its line
	 * may come later (a connection is logged when it ends). */
	return known_get(log, dest, port, !log->spent) != NULL || !log->spent;
}

/* ---- event lines ------------------------------------------------------- */

/* The task's totals count every event, whether it gets a line or not. */
static void
account(struct elog *log, const struct elog_event *ev)
{
	log->totals.connections++;
	if (ev->verdict != NULL && strcmp(ev->verdict, "allow") == 0)
		log->totals.allowed++;
	else if (elog_verdict_denied(ev->verdict))
		log->totals.denied++;
	log->totals.bytes_up += ev->bytes_up;
	log->totals.bytes_down += ev->bytes_down;
}

/* Build ev's line and write it, if the budget lets it. Accounts nothing.
 * 0 (written, or left to the counts), or -1 when the log has failed. */
static int
event_write(struct elog *log, const struct elog_event *ev)
{
	struct elog_buf b;
	struct cuts cuts = {.n = 0};
	struct timespec now;

	if (log_dead(log))
		return -1;
	/* Said whether or not the budget lets the line through. */
	elog_notice_event(log->notice, ev);
	elog_buf_init(&b, log->line, sizeof(log->line));
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
	if (ev->count > 0)
		field_u64(&b, "count", ev->count);
	field_str(&b, &cuts, "detail", ev->detail, CAP_RULE);
	if (line_end(log, &b, &cuts) < 0)
		return -1;
	if (!budget_admits_line(log, ev, b.len))
		return 0;
	if (line_emit(log, &b) < 0)
		return -1;
	if (log->human != NULL)
		human_event(log, ev, &now);
	return 0;
}

int
elog_event(struct elog *log, const struct elog_event *ev)
{
	if (log_dead(log))
		return -1;
	account(log, ev);
	return event_write(log, ev);
}

/* ---- repeated events --------------------------------------------------- */

static void
agg_emit(const struct elog_event *ev, void *arg)
{
	/* Accounted when each repeat was noted. */
	(void)event_write(arg, ev);
}

static void
window_arm(struct elog *log, uint64_t now)
{
	struct timeval tv = {(time_t)(log->agg_window_ms / 1000),
	                     (suseconds_t)(log->agg_window_ms % 1000) * 1000};

	log->agg_deadline_ms = now + log->agg_window_ms;
	if (log->ev_window != NULL)
		(void)evtimer_add(log->ev_window, &tv);
}

/* The window closes: the counts go out; a window opens again while
 * anything is remembered, so that a quiet event is forgotten a window
 * later. */
static void
window_close(struct elog *log, bool final)
{
	log->agg_deadline_ms = 0;
	if (log->ev_window != NULL)
		(void)evtimer_del(log->ev_window);
	if (log->agg == NULL)
		return;
	elog_agg_flush(log->agg, final, agg_emit, log);
	if (!final && elog_agg_size(log->agg) > 0)
		window_arm(log, now_ms());
}

static void
window_timer(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	window_close(arg, false);
}

int
elog_event_agg(struct elog *log, const struct elog_event *ev)
{
	enum elog_agg_result r;
	uint64_t now;

	if (ev->bytes_up != 0 || ev->bytes_down != 0 || ev->count != 0)
		return elog_event(log, ev);
	if (log_dead(log))
		return -1;
	if (log->agg == NULL) {
		log->agg = elog_agg_new(log->agg_max, AGG_ARENA);
		if (log->agg == NULL)
			return elog_event(log, ev); /* no memory: every one written */
	}
	account(log, ev);
	/* Without a loop (or before its timer runs), the window closes here. */
	now = now_ms();
	if (log->agg_deadline_ms != 0 && now >= log->agg_deadline_ms)
		window_close(log, false);
	r = elog_agg_note(log->agg, ev);
	if (r == ELOG_AGG_FULL) {
		/* Flush early: every count goes out now, nothing is dropped. */
		window_close(log, true);
		r = elog_agg_note(log->agg, ev);
	}
	if (r == ELOG_AGG_COUNTED)
		return 0;
	if (log->agg_deadline_ms == 0)
		window_arm(log, now);
	return event_write(log, ev);
}

void
elog_flush(struct elog *log)
{
	window_close(log, true);
	elog_sink_flush(log->sink);
}

int
elog_drain(struct elog *log, unsigned max_ms)
{
	if (log->failed)
		return -1;
	return elog_sink_drain(log->sink, max_ms);
}

/* ---- the event loop ---------------------------------------------------- */

static void
sink_writable(evutil_socket_t fd, short what, void *arg)
{
	struct elog *log = arg;
	(void)fd;
	(void)what;

	elog_sink_flush(log->sink);
	if (elog_sink_queued(log->sink) > 0 && !log_dead(log))
		(void)event_add(log->ev_write, NULL);
}

int
elog_attach(struct elog *log, struct event_base *base)
{
	elog_detach(log);
	log->ev_window = evtimer_new(base, window_timer, log);
	log->ev_write = event_new(base, elog_sink_fd(log->sink), EV_WRITE, sink_writable, log);
	if (log->ev_window == NULL || log->ev_write == NULL) {
		elog_detach(log);
		return -1;
	}
	if (log->agg_deadline_ms != 0)
		window_arm(log, now_ms());
	if (elog_sink_queued(log->sink) > 0)
		(void)event_add(log->ev_write, NULL);
	return 0;
}

void
elog_detach(struct elog *log)
{
	if (log->ev_window != NULL)
		event_free(log->ev_window);
	if (log->ev_write != NULL)
		event_free(log->ev_write);
	log->ev_window = log->ev_write = NULL;
}

int
elog_task_start(struct elog *log, const struct elog_task_start *ts)
{
	struct elog_buf b;
	struct cuts cuts = {.n = 0};
	struct timespec now;
	size_t budget = CAP_COMMAND;

	if (elog_failed(log))
		return -1;
	elog_buf_init(&b, log->line, sizeof(log->line));
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
			/* The word's quotes and the comma before it count too. */
			size_t cap = budget < 3 ? 0 : budget - 3 < CAP_ARG ? budget - 3 : CAP_ARG;
			size_t before;

			if (cap == 0 || i == CAP_WORDS) {
				cut = true;
				break;
			}
			if (i > 0)
				elog_buf_putc(&b, ',');
			before = b.len;
			if (elog_buf_json_str(&b, arg, cap))
				cut = true;
			/* What it wrote, its quotes (at most cap + 2), and a
			 * comma: never more than the budget. */
			budget -= (b.len - before <= cap + 2 ? b.len - before : cap + 2) + 1;
		}
		elog_buf_putc(&b, ']');
		cut_note(&cuts, cut, "command");
	}
	field_str(&b, &cuts, "selftest", ts->selftest, CAP_TEXT);
	if (ts->n_labels > 0) {
		bool cut = false;

		elog_buf_puts(&b, ",\"labels\":{");
		for (size_t i = 0; i < ts->n_labels && i < ELOG_CAP_LABELS; i++) {
			const char *eq = strchr(ts->labels[i], '=');
			char key[64];

			if (eq == NULL || (size_t)(eq - ts->labels[i]) >= sizeof(key))
				continue;
			memcpy(key, ts->labels[i], (size_t)(eq - ts->labels[i]));
			key[eq - ts->labels[i]] = '\0';
			if (i > 0)
				elog_buf_putc(&b, ',');
			cut |= elog_buf_json_str(&b, key, CAP_SHORT);
			elog_buf_putc(&b, ':');
			cut |= elog_buf_json_str(&b, eq + 1, CAP_TEXT);
		}
		elog_buf_putc(&b, '}');
		cut_note(&cuts, cut || ts->n_labels > ELOG_CAP_LABELS, "labels");
	}
	if (ts->worker)
		field_u64(&b, "landlock", ts->landlock > 0 ? (uint64_t)ts->landlock : 0);
	field_str(&b, &cuts, "ids", ts->ids, CAP_SHORT);
	field_str(&b, &cuts, "overlay", ts->overlay, CAP_TEXT);
	/* Each run's chain starts here, also in a file earlier runs wrote. */
	elog_chain_restart(&log->chain);
	if (line_end(log, &b, &cuts) < 0 || line_emit(log, &b) < 0)
		return -1;
	/* With a logger, the line is written only once it says so: a log
	 * that cannot be written stops the run before the command starts. */
	if (elog_sink_sync(log->sink, ELOG_LOGMSG_SYNC_MS) < 0)
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

	if (elog_failed(log))
		return -1;
	elog_buf_init(&b, log->line, sizeof(log->line));
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
	if (te->unlogged > 0)
		field_u64(&b, "unlogged", te->unlogged);
	elog_buf_putc(&b, '}');
	if (line_end(log, &b, &cuts) < 0 || line_emit(log, &b) < 0)
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
