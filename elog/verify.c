/* Checking the egress log's hash chains (verify.h). */
#include "elog/verify.h"

#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "common/util.h"
#include "elog/buf.h"
#include "elog/chain.h"
#include "elog/json.h"

/* Chains open at once (runs without their task-end yet). Past that, the
 * one unused longest is forgotten: runs that were killed never end, and
 * a file of many of them must not grow the table; only a forgotten run
 * that goes on after this many others started breaks falsely (as
 * NO_START). */
#define OPEN_MAX 256

struct vchain {
	bool vc_used;
	unsigned char vc_key[ELOG_SHA256_LEN];  /* SHA-256 of the task id */
	uint64_t vc_next;                       /* the seq the next line must have */
	unsigned char vc_last[ELOG_SHA256_LEN]; /* hash of the chain's last line */
	uint64_t vc_last_line;
};

/* A prev that did not match: line j's prev is not line i's hash. Whether
 * i or j was changed shows in the chain's next line: its prev matching j
 * means j is as written, so i is the changed one. */
struct pending {
	bool pd_active;
	size_t pd_chain;
	uint64_t pd_i, pd_j;
};

struct elog_verify {
	struct elog_verify_stats st;
	struct vchain chains[OPEN_MAX];
	struct pending pend;
	bool done;
	struct elog_json json; /* large: last */
};

struct elog_verify *
elog_verify_new(void)
{
	struct elog_verify *v = malloc(sizeof(*v));

	if (v != NULL)
		memset(v, 0, offsetof(struct elog_verify, json));
	return v;
}

void
elog_verify_free(struct elog_verify *v)
{
	free(v);
}

const struct elog_verify_stats *
elog_verify_stats(const struct elog_verify *v)
{
	return &v->st;
}

/* The first break ends the check. A prev mismatch still being pinned down
 * lies before anything found after it, so it is the one reported. */
static int
brk_at(struct elog_verify *v, struct elog_verify_break *brk, enum elog_break what, uint64_t line,
       uint64_t other)
{
	memset(brk, 0, sizeof(*brk));
	if (v->pend.pd_active) {
		brk->what = ELOG_BREAK_PREV;
		brk->line = v->pend.pd_j;
		brk->other = v->pend.pd_i;
	} else {
		brk->what = what;
		brk->line = line;
		brk->other = other;
	}
	v->done = true;
	return 1;
}

static bool
is_hex64(const char *s)
{
	size_t n = strspn(s, "0123456789abcdef");

	return n == ELOG_SHA256_HEX && s[n] == '\0';
}

static bool
prev_is(const char *prev, const unsigned char h[ELOG_SHA256_LEN])
{
	char hex[ELOG_SHA256_HEX + 1];

	elog_sha256_hex(h, hex);
	return strcmp(prev, hex) == 0;
}

/* Chains are told apart by task id; the key is its hash, so that a task
 * id of any length costs the same, with "no task" distinct from "". */
static int
chain_key(const char *task, unsigned char key[ELOG_SHA256_LEN])
{
	if (task == NULL)
		return elog_sha256("", 0, key);
	return elog_sha256(task, strlen(task) + 1, key);
}

static struct vchain *
chain_find(struct elog_verify *v, const unsigned char key[ELOG_SHA256_LEN])
{
	for (size_t i = 0; i < OPEN_MAX; i++)
		if (v->chains[i].vc_used && memcmp(v->chains[i].vc_key, key, ELOG_SHA256_LEN) == 0)
			return &v->chains[i];
	return NULL;
}

/* A free slot, or the one whose last line is oldest. */
static struct vchain *
chain_slot(struct elog_verify *v)
{
	struct vchain *old = &v->chains[0];

	for (size_t i = 0; i < OPEN_MAX; i++) {
		if (!v->chains[i].vc_used)
			return &v->chains[i];
		if (v->chains[i].vc_last_line < old->vc_last_line)
			old = &v->chains[i];
	}
	return old;
}

static size_t
chain_index(const struct elog_verify *v, const struct vchain *c)
{
	return (size_t)(c - v->chains);
}

static void
chain_advance(struct vchain *c, const unsigned char h[ELOG_SHA256_LEN], uint64_t line)
{
	memcpy(c->vc_last, h, ELOG_SHA256_LEN);
	c->vc_last_line = line;
	c->vc_next++;
}

static int
line_task_start(struct elog_verify *v, const struct elog_line *l, const struct elog_record *rec,
                struct vchain *c, const unsigned char key[ELOG_SHA256_LEN],
                const unsigned char h[ELOG_SHA256_LEN], struct elog_verify_break *brk)
{
	if (rec->seq != 0 || strcmp(rec->prev, ELOG_CHAIN_GENESIS) != 0) {
		int r = brk_at(v, brk, ELOG_BREAK_BAD_START, l->lineno, 0);
		brk->got = rec->seq;
		return r;
	}
	if (c == NULL)
		c = chain_slot(v);
	/* The chain being pinned down ends here unconfirmed (a new run of
	 * its task id), or is forgotten for room. */
	if (v->pend.pd_active && v->pend.pd_chain == chain_index(v, c))
		return brk_at(v, brk, ELOG_BREAK_PREV, 0, 0);
	/* A chain still open for this task (or the forgotten one) simply
	 * ends without its task-end. */
	c->vc_used = true;
	memcpy(c->vc_key, key, ELOG_SHA256_LEN);
	c->vc_next = 0;
	chain_advance(c, h, l->lineno);
	v->st.chains++;
	v->st.chained++;
	return 0;
}

int
elog_verify_line(struct elog_verify *v, const struct elog_line *l, struct elog_verify_break *brk)
{
	struct elog_record rec;
	unsigned char key[ELOG_SHA256_LEN], h[ELOG_SHA256_LEN];
	struct vchain *c;
	char why[160];
	bool chained;

	if (v->done)
		return 0;
	v->st.lines++;
	if (l->too_long)
		return brk_at(v, brk, ELOG_BREAK_TOO_LONG, l->lineno, 0);
	if (elog_record_parse(&v->json, l->data, l->len, &rec, why, sizeof(why)) < 0) {
		int r = brk_at(v, brk, l->cut ? ELOG_BREAK_CUT : ELOG_BREAK_GARBAGE, l->lineno, 0);
		if (brk->line == l->lineno)
			str_copy(brk->detail, l->len == 0 ? "an empty line" : why,
			         sizeof(brk->detail));
		return r;
	}
	if (l->cut)
		return brk_at(v, brk, ELOG_BREAK_CUT, l->lineno, 0);
	chained = rec.has_seq || rec.prev != NULL;
	if (chained && (!rec.has_seq || rec.prev == NULL || !is_hex64(rec.prev)))
		return brk_at(v, brk, ELOG_BREAK_HALF, l->lineno, 0);
	if (chain_key(rec.task, key) < 0 || elog_sha256(l->data, l->len, h) < 0) {
		int r = brk_at(v, brk, ELOG_BREAK_GARBAGE, l->lineno, 0);
		str_copy(brk->detail, "SHA-256 failed (OpenSSL)", sizeof(brk->detail));
		return r;
	}
	c = chain_find(v, key);
	if (!chained) {
		if (c != NULL)
			return brk_at(v, brk, ELOG_BREAK_UNCHAINED, l->lineno, c->vc_last_line);
		v->st.unchained++;
		return 0;
	}
	if (rec.type == ELOG_REC_TASK_START)
		return line_task_start(v, l, &rec, c, key, h, brk);
	if (c == NULL) {
		int r = brk_at(v, brk, ELOG_BREAK_NO_START, l->lineno, 0);
		struct elog_buf b;

		if (brk->line == l->lineno) {
			elog_buf_init(&b, brk->detail, sizeof(brk->detail) - 1);
			elog_buf_safe_text(&b, rec.task != NULL ? rec.task : "", 64);
			brk->detail[b.len] = '\0';
		}
		return r;
	}
	if (v->pend.pd_active && v->pend.pd_chain == chain_index(v, c)) {
		/* The line after j: does it confirm j as written? */
		bool confirms = rec.seq == c->vc_next && prev_is(rec.prev, c->vc_last);
		uint64_t i = v->pend.pd_i, j = v->pend.pd_j;

		v->pend.pd_active = false;
		return confirms ? brk_at(v, brk, ELOG_BREAK_CHANGED, i, j)
		                : brk_at(v, brk, ELOG_BREAK_PREV, j, i);
	}
	if (rec.seq != c->vc_next) {
		int r = brk_at(v, brk, ELOG_BREAK_SEQ, l->lineno, c->vc_last_line);
		if (brk->line == l->lineno) {
			brk->want = c->vc_next;
			brk->got = rec.seq;
		}
		return r;
	}
	if (!prev_is(rec.prev, c->vc_last)) {
		/* A task-end has no line after it to tell which was changed;
		 * and one mismatch is pinned down at a time (the first). */
		if (rec.type == ELOG_REC_TASK_END || v->pend.pd_active)
			return brk_at(v, brk, ELOG_BREAK_PREV, l->lineno, c->vc_last_line);
		v->pend = (struct pending){
		        .pd_active = true,
		        .pd_chain = chain_index(v, c),
		        .pd_i = c->vc_last_line,
		        .pd_j = l->lineno,
		};
		chain_advance(c, h, l->lineno);
		return 0;
	}
	chain_advance(c, h, l->lineno);
	v->st.chained++;
	if (rec.type == ELOG_REC_LOG_BUDGET)
		v->st.budget++;
	if (rec.type == ELOG_REC_TASK_END) {
		v->st.ended++;
		c->vc_used = false;
	}
	return 0;
}

int
elog_verify_end(struct elog_verify *v, struct elog_verify_break *brk)
{
	if (v->done || !v->pend.pd_active)
		return 0;
	return brk_at(v, brk, ELOG_BREAK_PREV, 0, 0);
}

void
elog_verify_describe(const struct elog_verify_break *brk, char *out, size_t outlen)
{
	unsigned long long other = (unsigned long long)brk->other;

	switch (brk->what) {
	case ELOG_BREAK_NONE:
		snprintf(out, outlen, "no break");
		break;
	case ELOG_BREAK_GARBAGE:
		snprintf(out, outlen, "not a log line: %s", brk->detail);
		break;
	case ELOG_BREAK_TOO_LONG:
		snprintf(out, outlen, "not a log line: longer than %d bytes", ELOG_LINE_MAX);
		break;
	case ELOG_BREAK_CUT:
		snprintf(out, outlen, "the last line is cut short (no newline)%s%s",
		         brk->detail[0] != '\0' ? ": " : "", brk->detail);
		break;
	case ELOG_BREAK_HALF:
		snprintf(out, outlen,
		         "seq and prev must both be there, prev as 64 lowercase hex digits");
		break;
	case ELOG_BREAK_NO_START:
		snprintf(out, outlen, "a chained line with no task-start of task \"%s\" before it",
		         brk->detail);
		break;
	case ELOG_BREAK_BAD_START:
		snprintf(out, outlen,
		         "a task-start that does not begin a chain (seq %llu, prev not 64 zeros)",
		         (unsigned long long)brk->got);
		break;
	case ELOG_BREAK_SEQ:
		snprintf(out, outlen,
		         "seq %llu where %llu was expected after line %llu: a line is missing, "
		         "out of order or inserted",
		         (unsigned long long)brk->got, (unsigned long long)brk->want, other);
		break;
	case ELOG_BREAK_PREV:
		snprintf(out, outlen,
		         "prev is not the SHA-256 of line %llu, the chain's previous line: one of "
		         "the two was changed",
		         other);
		break;
	case ELOG_BREAK_CHANGED:
		snprintf(out, outlen,
		         "changed after it was written: line %llu's prev is not its SHA-256 (and "
		         "the line after %llu confirms %llu)",
		         other, other, other);
		break;
	case ELOG_BREAK_UNCHAINED:
		snprintf(out, outlen,
		         "no seq and prev inside the chain of its task (last line %llu): "
		         "inserted, or stripped",
		         other);
		break;
	}
}

/* ---- files ------------------------------------------------------------ */

/* One file: 1 broken (reported on out), 0 held, -1 unreadable. */
static int
verify_file(const char *path, FILE *out, struct elog_verify_stats *sum)
{
	struct elog_verify_break brk = {.what = ELOG_BREAK_NONE};
	char err[256], what[320];
	struct elog_reader *r = elog_reader_open(path, err, sizeof(err));
	struct elog_verify *v = NULL;
	struct elog_line l;
	int got, broke = 0;

	if (r == NULL) {
		log_warnx("%s", err);
		return -1;
	}
	v = elog_verify_new();
	if (v == NULL) {
		log_warnx("%s: out of memory", path);
		elog_reader_free(r);
		return -1;
	}
	while (broke == 0 && (got = elog_reader_line(r, &l)) > 0)
		broke = elog_verify_line(v, &l, &brk);
	if (broke == 0 && got == 0)
		broke = elog_verify_end(v, &brk);
	if (broke) {
		elog_verify_describe(&brk, what, sizeof(what));
		fprintf(out, "%s:%llu: %s\n", path, (unsigned long long)brk.line, what);
	} else {
		const struct elog_verify_stats *st = elog_verify_stats(v);

		sum->lines += st->lines;
		sum->chained += st->chained;
		sum->unchained += st->unchained;
		sum->chains += st->chains;
		sum->ended += st->ended;
		sum->budget += st->budget;
	}
	elog_verify_free(v);
	elog_reader_free(r);
	if (broke)
		return 1;
	return got < 0 ? -1 : 0;
}

enum elog_verify_result
elog_verify_files(char *const *files, int n_files, FILE *out)
{
	struct elog_verify_stats sum = {0};
	bool broken = false;

	for (int f = 0; f < n_files; f++)
		if (verify_file(files[f], out, &sum) != 0)
			broken = true;
	if (broken)
		return ELOG_VERIFY_BROKEN;
	if (sum.chains == 0)
		fprintf(out, "no chain: %llu lines in %d file%s", (unsigned long long)sum.lines,
		        n_files, n_files == 1 ? "" : "s");
	else
		fprintf(out, "%llu chain%s hold%s: %llu of %llu lines chained in %d file%s",
		        (unsigned long long)sum.chains, sum.chains == 1 ? "" : "s",
		        sum.chains == 1 ? "s" : "", (unsigned long long)sum.chained,
		        (unsigned long long)sum.lines, n_files, n_files == 1 ? "" : "s");
	if (sum.chains > sum.ended)
		fprintf(out, "; %llu without task-end (running, killed, or its end removed)",
		        (unsigned long long)(sum.chains - sum.ended));
	if (sum.budget > 0)
		fprintf(out, "; %llu spent the log budget", (unsigned long long)sum.budget);
	if (sum.unchained > 0)
		fprintf(out,
		        "; %llu lines carry no chain (written before seq and prev), not checked",
		        (unsigned long long)sum.unchained);
	fputc('\n', out);
	return sum.unchained > 0 ? ELOG_VERIFY_UNCHAINED : ELOG_VERIFY_OK;
}
