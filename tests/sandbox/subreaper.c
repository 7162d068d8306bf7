/* subreaper CMD [ARG...]: run CMD as a child subreaper would (a container's
 * init, systemd --user, a supervisor daemon), then report whether CMD left
 * any process for its caller to reap. An orphan of CMD's tree comes to us,
 * the nearest subreaper, so right after CMD's own wait we hold every
 * process it left behind, dead (a zombie nobody else will reap) or alive.
 *
 * Exits with CMD's status when nothing was left; otherwise says what was
 * and exits 99. For tests/sandbox/leaks.sh. */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#define LEFT_BEHIND 99

/* The name and state of pid, from /proc (a zombie still has them). */
static void
describe(pid_t pid, char *out, size_t len)
{
	char path[64], buf[512];
	FILE *f;
	char *lp, *rp;

	snprintf(out, len, "pid %d", (int)pid);
	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	f = fopen(path, "r");
	if (f == NULL)
		return;
	if (fgets(buf, sizeof(buf), f) != NULL && (lp = strchr(buf, '(')) != NULL &&
	    (rp = strrchr(buf, ')')) != NULL && rp[1] == ' ')
		snprintf(out, len, "pid %d (%.*s) state %c", (int)pid, (int)(rp - lp - 1), lp + 1,
		         rp[2]);
	fclose(f);
}

int
main(int argc, char **argv)
{
	siginfo_t si;
	pid_t child;
	int st, rc;

	if (argc < 2) {
		fprintf(stderr, "usage: subreaper CMD [ARG...]\n");
		return 2;
	}
	if (prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) < 0) {
		perror("subreaper: PR_SET_CHILD_SUBREAPER");
		return 2;
	}
	child = fork();
	if (child < 0) {
		perror("subreaper: fork");
		return 2;
	}
	if (child == 0) {
		execvp(argv[1], argv + 1);
		fprintf(stderr, "subreaper: %s: %s\n", argv[1], strerror(errno));
		_exit(127);
	}
	while (waitpid(child, &st, 0) < 0) {
		if (errno != EINTR) {
			perror("subreaper: waitpid");
			return 2;
		}
	}
	rc = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);

	/* Any child left? WNOWAIT: look at a zombie without reaping it;
	 * si_pid stays 0 when the only children left are alive. */
	memset(&si, 0, sizeof(si));
	if (waitid(P_ALL, 0, &si, WEXITED | WNOHANG | WNOWAIT) < 0) {
		if (errno == ECHILD)
			return rc;
		perror("subreaper: waitid");
		return 2;
	}
	if (si.si_pid != 0) {
		char what[128];
		describe(si.si_pid, what, sizeof(what));
		fprintf(stderr, "subreaper: %s left %s for its caller to reap\n", argv[1], what);
	} else {
		fprintf(stderr, "subreaper: %s left a process running\n", argv[1]);
	}
	/* Reap the dead ones rather than pass them on to our own caller. */
	while (waitpid(-1, NULL, WNOHANG) > 0)
		;
	return LEFT_BEHIND;
}
