/* airlock run's exit statuses (docs/run.md) and the mapping from CMD's wait
 * status to them. Pure. */
#ifndef AIRLOCK_SANDBOX_STATUS_H
#define AIRLOCK_SANDBOX_STATUS_H

#define SBX_EXIT_TIMEOUT  124 /* --timeout expired; the sandbox was killed */
#define SBX_EXIT_FAILURE  125 /* airlock's own failure (set-up, usage, policy) */
#define SBX_EXIT_NOEXEC   126 /* CMD found but could not be executed */
#define SBX_EXIT_NOTFOUND 127 /* CMD not found */

/* Map a waitpid() status to an exit status: the exit code, or 128+N when
 * killed by signal N (then *sig = N, else *sig = 0; sig may be NULL).
 * Anything else (stopped, garbage) is SBX_EXIT_FAILURE. */
int sbx_exit_status(int wstatus, int *sig);

/* Exit status for a failed execve() errno: 127 for "not found" errors
 * (ENOENT, ENOTDIR), 126 for the rest (EACCES, ENOEXEC, ...). */
int sbx_exec_errno_status(int err);

#endif
