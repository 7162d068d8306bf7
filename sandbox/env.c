#include "sandbox/env.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/netconst.h"
#include "common/util.h"
#include "sandbox/cache.h"

#define STR2(x)       #x
#define STR(x)        STR2(x)
#define PROXY_URL     "http://127.0.0.1:" STR(AIRLOCK_PROXY_PORT)
#define NO_PROXY_LIST "localhost,127.0.0.1,::1"

/* Variables airlock owns; the caller's values are dropped so a stale proxy
 * setting can never point CMD somewhere else. */
static const char *const proxy_vars[][2] = {
        {"HTTP_PROXY", PROXY_URL},   {"http_proxy", PROXY_URL},   {"HTTPS_PROXY", PROXY_URL},
        {"https_proxy", PROXY_URL},  {"ALL_PROXY", PROXY_URL},    {"all_proxy", PROXY_URL},
        {"NO_PROXY", NO_PROXY_LIST}, {"no_proxy", NO_PROXY_LIST},
};

struct envb {
	char **v;
	size_t n, cap;
	size_t bytes;
};

static size_t
name_len(const char *entry)
{
	const char *eq = strchr(entry, '=');

	return eq != NULL ? (size_t)(eq - entry) : strlen(entry);
}

static long
envb_find(const struct envb *b, const char *name, size_t nlen)
{
	for (size_t i = 0; i < b->n; i++)
		if (strncmp(b->v[i], name, nlen) == 0 && b->v[i][nlen] == '=')
			return (long)i;
	return -1;
}

static void
envb_del(struct envb *b, const char *name, size_t nlen)
{
	long i = envb_find(b, name, nlen);

	if (i < 0)
		return;
	b->bytes -= strlen(b->v[i]) + 1;
	free(b->v[i]);
	memmove(&b->v[i], &b->v[i + 1], (b->n - (size_t)i) * sizeof(char *));
	b->n--;
}

/* Set name (nlen bytes of name) to value; replaces an existing entry. */
static int
envb_set(struct envb *b, const char *name, size_t nlen, const char *value)
{
	size_t len = nlen + 1 + strlen(value) + 1;
	char *e;

	envb_del(b, name, nlen);
	if (b->bytes + len > SBX_ENV_MAX_BYTES)
		return -1;
	if (b->n + 2 > b->cap) {
		size_t ncap = b->cap ? b->cap * 2 : 64;
		char **nv = realloc(b->v, ncap * sizeof(char *));
		if (nv == NULL)
			return -1;
		b->v = nv;
		b->cap = ncap;
	}
	if ((e = malloc(len)) == NULL)
		return -1;
	memcpy(e, name, nlen);
	e[nlen] = '=';
	memcpy(e + nlen + 1, value, len - nlen - 1);
	b->v[b->n++] = e;
	b->v[b->n] = NULL;
	b->bytes += len;
	return 0;
}

const char *
sbx_env_get(char *const *env, const char *name)
{
	size_t nlen = strlen(name);

	for (size_t i = 0; env != NULL && env[i] != NULL; i++)
		if (strncmp(env[i], name, nlen) == 0 && env[i][nlen] == '=')
			return env[i] + nlen + 1;
	return NULL;
}

void
sbx_env_free(char **env)
{
	for (size_t i = 0; env != NULL && env[i] != NULL; i++)
		free(env[i]);
	free(env);
}

static int
valid_name(const char *name, size_t nlen)
{
	if (nlen == 0 || nlen > 255)
		return 0;
	for (size_t i = 0; i < nlen; i++) {
		char c = name[i];
		if (!((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || c == '_' ||
		      (i > 0 && c >= '0' && c <= '9')))
			return 0;
	}
	return 1;
}

char **
sbx_env_build(char *const *caller, bool clear, const struct sbx_env_marks *marks,
              const char *const *args, size_t n_args, char *err, size_t errlen)
{
	struct envb b = {0};
	const char *path;

	if (n_args > SBX_MAX_ENV) {
		snprintf(err, errlen, "too many --env flags (at most %d)", SBX_MAX_ENV);
		return NULL;
	}
	if (!clear) {
		for (size_t i = 0; caller != NULL && caller[i] != NULL; i++) {
			const char *eq = strchr(caller[i], '=');
			/* An entry without '=' is not a variable; execve would
			 * pass it but no program can read it. */
			if (eq == NULL || eq == caller[i])
				continue;
			if (envb_set(&b, caller[i], (size_t)(eq - caller[i]), eq + 1) < 0)
				goto toobig;
		}
	} else {
		path = sbx_env_get(caller, "PATH");
		if (envb_set(&b, "PATH", 4, path != NULL ? path : SBX_DEFAULT_PATH) < 0)
			goto toobig;
	}
	for (size_t i = 0; i < ARRAY_SIZE(proxy_vars); i++)
		if (envb_set(&b, proxy_vars[i][0], strlen(proxy_vars[i][0]), proxy_vars[i][1]) < 0)
			goto toobig;
	/* An outer airlock's marks never describe this run. */
	envb_del(&b, "AIRLOCK_TASK", strlen("AIRLOCK_TASK"));
	envb_del(&b, "AIRLOCK_POLICY", strlen("AIRLOCK_POLICY"));
	if (marks != NULL && marks->task != NULL &&
	    envb_set(&b, "AIRLOCK_TASK", strlen("AIRLOCK_TASK"), marks->task) < 0)
		goto toobig;
	if (marks != NULL && marks->policy != NULL &&
	    envb_set(&b, "AIRLOCK_POLICY", strlen("AIRLOCK_POLICY"), marks->policy) < 0)
		goto toobig;
	/* Before --env, which may still point one tool elsewhere. */
	for (size_t i = 0; marks != NULL && marks->cache && sbx_cache_env[i] != NULL; i++) {
		const char *a = sbx_cache_env[i];
		size_t nlen = name_len(a);

		if (envb_set(&b, a, nlen, a + nlen + 1) < 0)
			goto toobig;
	}
	for (size_t i = 0; i < n_args; i++) {
		const char *a = args[i];
		size_t nlen = name_len(a);

		if (!valid_name(a, nlen)) {
			snprintf(err, errlen,
			         "--env '%.64s': NAME must be letters, digits and '_', "
			         "not starting with a digit",
			         a);
			goto fail;
		}
		if (a[nlen] == '=') {
			if (envb_set(&b, a, nlen, a + nlen + 1) < 0)
				goto toobig;
		} else {
			char name[256];
			memcpy(name, a, nlen);
			name[nlen] = '\0';
			const char *v = sbx_env_get(caller, name);
			if (v != NULL && envb_set(&b, a, nlen, v) < 0)
				goto toobig;
		}
	}
	if (b.v == NULL && envb_set(&b, "PATH", 4, SBX_DEFAULT_PATH) < 0)
		goto toobig;
	return b.v;
toobig:
	snprintf(err, errlen, "environment too large (at most %u bytes) or out of memory",
	         SBX_ENV_MAX_BYTES);
fail:
	sbx_env_free(b.v);
	return NULL;
}
