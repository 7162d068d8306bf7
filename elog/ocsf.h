/* The egress log as OCSF 1.1 events (docs/log.md, "OCSF"): `airlock log
 * export --format ocsf`. */
#ifndef AIRLOCK_ELOG_OCSF_H
#define AIRLOCK_ELOG_OCSF_H

#include <stdio.h>

/* Write one OCSF event per event line of files[0..n_files) to out, as
 * JSON Lines, in order; unreadable files and garbage lines are reported
 * on stderr as the review commands do. Returns 0, or -1 when a file could
 * not be read or out could not be written. */
int elog_export_ocsf(char *const *files, int n_files, FILE *out);

#endif
