/* Where `airlock run` keeps its logs when no --log is given, and what the
 * review commands find there without a FILE: $XDG_STATE_HOME/airlock/, or
 * ~/.local/state/airlock/, one TASK.jsonl per run (docs/log.md, "Where
 * the log is"). Task ids given by the user are checked here too, since
 * they name files. */
#ifndef AIRLOCK_ELOG_LOGDIR_H
#define AIRLOCK_ELOG_LOGDIR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* Longest task id: what --task-id takes, and what the log carries. */
#define ELOG_TASK_ID_MAX 64

/* The directory, into out; with create, made 0700 (parents too). 0, or -1
 * with a one-line reason in err. */
int elog_logdir(char *out, size_t outlen, bool create, char *err, size_t errlen);

/* A task id a user gave (--task-id): 1 to ELOG_TASK_ID_MAX of A-Z a-z 0-9
 * . _ -, starting with a letter or digit (it names a file, and is matched
 * by --task). */
bool elog_task_id_valid(const char *id);

/* The most recently written TASK.jsonl in dir, into out. 0; -1 with a
 * reason in err (none there, or dir unreadable). */
int elog_logdir_last(const char *dir, char *out, size_t outlen, char *err, size_t errlen);

/* Remove (or with dry_run only list, on out) every *.jsonl in dir last
 * written more than older_ms ago; each one named on out as it goes.
 * Returns how many, or -1 with a reason in err. */
struct elog_prune_opts {
	uint64_t older_ms;
	bool dry_run;
};
long elog_logdir_prune(const char *dir, const struct elog_prune_opts *o, FILE *out, char *err,
                       size_t errlen);

#endif
