/* The logger's confinement, seen from inside it (tests/elog/ only): the
 * probe build of the logger (ELOG_LOGGER_SELFTEST, elog/logger.c) tries,
 * once confined, to open a file, create a socket and exec, and says each
 * errno on stderr. This runs it for one log line and checks each is
 * ENOSYS, and that the line was still written and chained. Exit 0 when
 * all hold; 1 with the reason otherwise. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "elog/elog.h"
#include "elog/logger.h"

int
main(int argc, char **argv)
{
	char logpath[] = "/tmp/elog-probe-log-XXXXXX", errpath[] = "/tmp/elog-probe-err-XXXXXX";
	char err[256], out[4096] = "", log[4096] = "";
	struct elog_task_start ts = {.policy = "probe", .mode = "enforce", .selftest = "pass"};
	int logfd = mkstemp(logpath), errfd = mkstemp(errpath), saved = dup(STDERR_FILENO);
	int e_open = -1, e_socket = -1, e_exec = -1, landlock = -2, rc = 1;
	struct elog *elog;
	const char *p;
	FILE *f;
	(void)argc;
	(void)argv;

	if (logfd < 0 || errfd < 0 || saved < 0) {
		perror("logger_probe: set-up");
		return 1;
	}
	/* The logger's stderr, for its report. */
	dup2(errfd, STDERR_FILENO);
	elog = elog_logger_open(logfd, err, sizeof(err));
	if (elog != NULL && elog_task_start(elog, &ts) == 0 && elog_drain(elog, 5000) == 0)
		rc = 0;
	elog_free(elog);
	dup2(saved, STDERR_FILENO);
	if (rc != 0) {
		fprintf(stderr, "logger_probe: the log failed: %s\n",
		        elog != NULL ? "see the report" : err);
		rc = 1;
	}
	if ((f = fopen(errpath, "r")) != NULL) {
		out[fread(out, 1, sizeof(out) - 1, f)] = '\0';
		fclose(f);
	}
	if ((f = fopen(logpath, "r")) != NULL) {
		log[fread(log, 1, sizeof(log) - 1, f)] = '\0';
		fclose(f);
	}
	unlink(logpath);
	unlink(errpath);
	fputs(out, stderr);
	p = strstr(out, "logger selftest:");
	if (p == NULL ||
	    sscanf(p, "logger selftest: openat %d socket %d execve %d landlock %d", &e_open,
	           &e_socket, &e_exec, &landlock) != 4) {
		fprintf(stderr, "logger_probe: no report from the logger\n");
		return 1;
	}
	printf("logger after confinement: openat %s, socket %s, execve %s; Landlock ABI %d\n",
	       strerror(e_open), strerror(e_socket), strerror(e_exec), landlock);
	if (e_open != ENOSYS || e_socket != ENOSYS || e_exec != ENOSYS) {
		fprintf(stderr, "logger_probe: FAIL: each must be ENOSYS (%d)\n", ENOSYS);
		rc = 1;
	}
	if (strstr(log, "\"kind\":\"task-start\"") == NULL || strstr(log, "\"seq\":0,") == NULL) {
		fprintf(stderr, "logger_probe: FAIL: the line was not written: %s\n", log);
		rc = 1;
	}
	return rc;
}
