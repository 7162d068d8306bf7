/* CMD's environment (docs/run.md, Environment). Pure: builds a new array
 * from the caller's environment and the --env / --clearenv flags. */
#ifndef AIRLOCK_SANDBOX_ENV_H
#define AIRLOCK_SANDBOX_ENV_H

#include <stdbool.h>
#include <stddef.h>

#define SBX_MAX_ENV       256        /* --env flags */
#define SBX_ENV_MAX_BYTES (1u << 20) /* whole environment, as execve allows */
#define SBX_DEFAULT_PATH  "/usr/local/bin:/usr/bin:/bin"

/* Who CMD runs as, for CMD to read: AIRLOCK_TASK (the task id, as in the
 * egress log's "task") and AIRLOCK_POLICY (the policy as given to -p: a
 * preset name or a path). NULL members are left out. */
struct sbx_env_marks {
	const char *task;
	const char *policy;
	bool cache; /* --cache: sbx_cache_env's variables (sandbox/cache.h) */
};

/* Build CMD's environment:
 *  1. all of caller (a NULL-terminated environ), or with clear only PATH
 *     (the caller's, or SBX_DEFAULT_PATH);
 *  2. the proxy variables (HTTP_PROXY, HTTPS_PROXY, ALL_PROXY and their
 *     lowercase forms, http://127.0.0.1:AIRLOCK_PROXY_PORT; NO_PROXY and
 *     no_proxy = localhost,127.0.0.1,::1) and marks (NULL: none) replace
 *     any the caller had; with marks->cache, so do the cache variables;
 *  3. each of args in order: "NAME=VALUE" sets NAME, "NAME" copies the
 *     caller's NAME (nothing if unset).
 * Returns a malloc'd NULL-terminated array (sbx_env_free), or NULL with a
 * one-line reason in err (bad NAME, too many, too big, no memory). */
char **sbx_env_build(char *const *caller, bool clear, const struct sbx_env_marks *marks,
                     const char *const *args, size_t n_args, char *err, size_t errlen);
void sbx_env_free(char **env);

/* The value of name in env, or NULL. */
const char *sbx_env_get(char *const *env, const char *name);

#endif
