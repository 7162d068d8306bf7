/* --cache DIR (docs/run.md, Caches): a host directory that keeps package
 * managers' caches from one run to the next, bound read-write at
 * SBX_CACHE_PATH inside, outside the workdir, with the usual variables
 * pointing into it. One task at a time holds it (an exclusive flock on
 * DIR for the whole run) unless every run sharing it says --cache-shared
 * (a shared flock). */
#ifndef AIRLOCK_SANDBOX_CACHE_H
#define AIRLOCK_SANDBOX_CACHE_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/stat.h>

#include "sandbox/sandbox.h"

/* Where CMD finds the cache: /run is the sandbox's own tmpfs, so the mount
 * point can be made there whatever the host has. */
#define SBX_CACHE_PATH "/run/airlock/cache"

/* The variables CMD gets with --cache, "NAME=VALUE", NULL-terminated: each
 * tool's cache in a subdirectory of its own (the tool makes it). */
extern const char *const sbx_cache_env[];

struct sbx_cache;

/* Check DIR and take its lock. DIR is made (0700) when missing; it must
 * be a directory (not a symlink) owned by the caller's euid that others
 * may not write. Returns NULL with a one-line reason naming DIR in err:
 * a bad DIR, or another run holding it (exclusively, or shared when this
 * one is not shared). The lock lasts until sbx_cache_free. */
struct sbx_cache *sbx_cache_open(const char *dir, bool shared, char *err, size_t errlen);

/* Release the lock and free. NULL is fine. */
void sbx_cache_free(struct sbx_cache *c);

/* For a run refused before its sandbox started: remove DIR again if
 * sbx_cache_open made it and it is still empty, then sbx_cache_free. */
void sbx_cache_abandon(struct sbx_cache *c);

/* DIR resolved (realpath at open); borrowed, valid until sbx_cache_free. */
const char *sbx_cache_path(const struct sbx_cache *c);

/* st (fstat of what is about to be mounted) is the directory checked and
 * locked at open, not something put in its place since. */
bool sbx_cache_same(const struct sbx_cache *c, const struct stat *st);

/* DIR and the resolved path p nest, one in the other or equal. */
bool sbx_cache_nests(const struct sbx_cache *c, const char *p);

/* 0 when no path of keep[0..n) (as airlock names them; resolved here,
 * or their nearest ancestor that exists) lies in DIR or holds it, where
 * CMD could rewrite it (or write next to it) through SBX_CACHE_PATH;
 * otherwise -1 with a reason naming the path and what it is.
 * sbx_protect calls it. */
int sbx_cache_check_keep(const struct sbx_cache *c, const struct sbx_keep *keep, size_t n,
                         char *err, size_t errlen);

#endif
