/* --cache DIR (cache.h, docs/run.md "Caches"). The checks are on the open
 * directory (fstat of the fd that also holds the lock), and init checks
 * that what it mounts is that same directory (sbx_cache_same), so a path
 * swapped between the check and the mount is refused, not mounted. */
#include "sandbox/cache.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <unistd.h>

#include "common/util.h"

#define C SBX_CACHE_PATH

const char *const sbx_cache_env[] = {
        "XDG_CACHE_HOME=" C "/xdg",      /* yarn, and the many tools that follow XDG */
        "PIP_CACHE_DIR=" C "/pip",       /* pip (pip's own name wins over XDG) */
        "npm_config_cache=" C "/npm",    /* npm's _cacache */
        "CARGO_HOME=" C "/cargo",        /* cargo's registry index, crates, git */
        "GOMODCACHE=" C "/go/mod",       /* go modules */
        "GOCACHE=" C "/go/build",        /* go build cache */
        "GRADLE_USER_HOME=" C "/gradle", /* gradle's caches and wrapper */
        NULL,
};

struct sbx_cache {
	int fd; /* DIR, O_RDONLY: holds the flock; -1 */
	dev_t dev;
	ino_t ino;
	char path[PATH_MAX]; /* realpath of DIR */
	bool created;        /* sbx_cache_open made DIR */
};

void
sbx_cache_free(struct sbx_cache *c)
{
	if (c == NULL)
		return;
	fd_close(&c->fd); /* the lock goes with the last copy of the fd */
	free(c);
}

struct sbx_cache *
sbx_cache_open(const char *dir, bool shared, char *err, size_t errlen)
{
	struct sbx_cache *c = calloc(1, sizeof(*c));
	struct stat st;

	if (c == NULL) {
		snprintf(err, errlen, "--cache %s: out of memory", dir);
		return NULL;
	}
	c->fd = -1;
	if (mkdir(dir, 0700) == 0) {
		c->created = true;
	} else if (errno != EEXIST) {
		snprintf(err, errlen, "--cache %s: cannot make it: %s", dir, strerror(errno));
		goto fail;
	}
	c->fd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (c->fd < 0) {
		if (errno == ELOOP || errno == ENOTDIR)
			snprintf(err, errlen,
			         "--cache %s: not a directory (a symlink or a file); "
			         "name the directory itself",
			         dir);
		else
			snprintf(err, errlen, "--cache %s: %s", dir, strerror(errno));
		goto fail;
	}
	if (fstat(c->fd, &st) < 0) {
		snprintf(err, errlen, "--cache %s: %s", dir, strerror(errno));
		goto fail;
	}
	/* Whoever else may write it could plant what the next task runs
	 * (a cached wheel, a crate, cargo's bin/). */
	if (st.st_uid != geteuid()) {
		snprintf(err, errlen, "--cache %s: owned by uid %u, not by you (uid %u)", dir,
		         (unsigned)st.st_uid, (unsigned)geteuid());
		goto fail;
	}
	/* Nor may anyone else enter it: what a task leaves there (a setuid
	 * file; nosuid holds only inside) must not be theirs to run. */
	if (st.st_mode & 077) {
		snprintf(err, errlen,
		         "--cache %s: open to others (mode %04o), and what a task leaves there "
		         "would be theirs to use; chmod 700 it",
		         dir, (unsigned)(st.st_mode & 07777));
		goto fail;
	}
	if (flock(c->fd, (shared ? LOCK_SH : LOCK_EX) | LOCK_NB) < 0) {
		if (errno == EWOULDBLOCK)
			snprintf(err, errlen,
			         "--cache %s: in use by another run; a cache serves one task at a "
			         "time unless every run sharing it says --cache-shared",
			         dir);
		else
			snprintf(err, errlen, "--cache %s: lock: %s", dir, strerror(errno));
		goto fail;
	}
	if (realpath(dir, c->path) == NULL) {
		snprintf(err, errlen, "--cache %s: %s", dir, strerror(errno));
		goto fail;
	}
	if (strcmp(c->path, "/") == 0) {
		snprintf(err, errlen, "--cache %s: that is the root of the filesystem", dir);
		goto fail;
	}
	c->dev = st.st_dev;
	c->ino = st.st_ino;
	return c;
fail:
	sbx_cache_free(c);
	return NULL;
}

void
sbx_cache_abandon(struct sbx_cache *c)
{
	if (c != NULL && c->created && c->path[0] != '\0')
		(void)rmdir(c->path); /* only while empty */
	sbx_cache_free(c);
}

const char *
sbx_cache_path(const struct sbx_cache *c)
{
	return c->path;
}

bool
sbx_cache_same(const struct sbx_cache *c, const struct stat *st)
{
	return S_ISDIR(st->st_mode) && st->st_dev == c->dev && st->st_ino == c->ino;
}

/* a is x or one of its ancestors. */
static bool
under(const char *x, const char *a)
{
	size_t n = strlen(a);

	if (strcmp(a, "/") == 0)
		return true;
	return strncmp(x, a, n) == 0 && (x[n] == '/' || x[n] == '\0');
}

bool
sbx_cache_nests(const struct sbx_cache *c, const char *p)
{
	return under(p, c->path) || under(c->path, p);
}

int
sbx_cache_check_keep(const struct sbx_cache *c, const struct sbx_keep *keep, size_t n, char *err,
                     size_t errlen)
{
	for (size_t i = 0; i < n; i++) {
		char real[PATH_MAX], parent[PATH_MAX];

		/* A path not there yet: where it would be made, i.e. its
		 * nearest ancestor that is. */
		if (str_copy(parent, keep[i].path, sizeof(parent)) >= sizeof(parent)) {
			snprintf(err, errlen, "--cache: %s %s: path too long", keep[i].what,
			         keep[i].path);
			return -1;
		}
		while (realpath(parent[0] != '\0' ? parent : ".", real) == NULL) {
			char *slash = strrchr(parent, '/');

			if (errno != ENOENT || parent[0] == '\0') {
				snprintf(err, errlen, "--cache: %s %s: %s", keep[i].what,
				         keep[i].path, strerror(errno));
				return -1;
			}
			if (slash == NULL)
				parent[0] = '\0';
			else if (slash == parent)
				slash[1] = '\0';
			else
				*slash = '\0';
		}
		/* Inside it CMD could rewrite the file; around it, add files
		 * next to it (a log directory's forged log). */
		if (under(real, c->path) || under(c->path, real)) {
			snprintf(err, errlen,
			         "--cache %s: it and the %s %s are one inside the other, where "
			         "CMD could change what airlock reads or writes; give the cache a "
			         "directory of its own",
			         c->path, keep[i].what, keep[i].path);
			return -1;
		}
	}
	return 0;
}
