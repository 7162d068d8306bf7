/* The review commands over egress logs (docs/log.md): show, summary,
 * suggest, replay. Each reads the files in order (a file may be "-" for
 * stdin), skips garbage lines with a report on stderr, and writes its
 * result to out. They return 0 on success and -1 when a file cannot be
 * read or out of memory (reported); replay returns 0 (no change) or 1
 * (something would change). */
#ifndef AIRLOCK_ELOG_REVIEW_H
#define AIRLOCK_ELOG_REVIEW_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

struct review_show_opts {
	bool denied;           /* only deny and audit-deny events */
	const char *host_glob; /* fnmatch(3) on host (or ip), case-insensitive */
	const char *task;      /* only this task id */
	bool has_since;
	int64_t since_ms; /* only events at or after this time */
	bool json;        /* pass the selected lines through unchanged */
	bool color;       /* ANSI colours for verdicts */
};

int review_show(char *const *files, int n_files, const struct review_show_opts *o, FILE *out);
int review_summary(char *const *files, int n_files, bool json, FILE *out);

/* Parse "--since": an RFC 3339 time, or a duration back from now_ms
 * (wall clock) such as "90s", "10m", "2h", "7d". Returns 0 or -1. */
int review_parse_since(const char *s, int64_t now_ms, int64_t *out);

struct review_suggest_opts {
	unsigned wildcard_min; /* siblings needed for a *.parent rule; 0: never */
	const char *name;      /* the policy's name: field */
	bool include_denied;   /* names only denied in enforce mode, and look-alikes,
	                          become rules too (guarded and loopback names never) */
};
/* Write a policy (schema v1 YAML) to out; warnings on stderr. */
int review_suggest(char *const *files, int n_files, const struct review_suggest_opts *o, FILE *out);

/* What-if: evaluate the policy at policy_path against the logged events.
 * Returns 0 when no verdict would change, 1 when one would, -1 on error
 * (bad policy or unreadable file, reported). */
int review_replay(const char *policy_path, char *const *files, int n_files, FILE *out);

#endif
