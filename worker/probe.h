/* Test builds only (-Dconfine_probe=true): right after each step of its
 * confinement the worker tries what that step forbids and writes each
 * errno to stderr, one "airlock[worker]: confine-probe STEP CALL=ERRNO"
 * line per try, so a test proves the confinement from inside the worker
 * (tests/sandbox/confine.sh). airlock as installed never has it. */
#ifndef AIRLOCK_WORKER_PROBE_H
#define AIRLOCK_WORKER_PROBE_H

enum worker_probe_step {
	WORKER_PROBE_MOUNT,    /* the empty mount view is in place */
	WORKER_PROBE_LANDLOCK, /* rlimits, capabilities, Landlock */
	WORKER_PROBE_SECCOMP,  /* the filter */
};

#ifdef WORKER_CONFINE_PROBE
void worker_probe(enum worker_probe_step step);
#else
static inline void
worker_probe(enum worker_probe_step step)
{
	(void)step;
}
#endif

#endif
