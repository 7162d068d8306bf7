#include "elog/logdir.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pwd.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common/util.h"

/* mkdir -p, each directory made with mode. */
static int
mkdirs(const char *path, mode_t mode)
{
	char p[PATH_MAX];

	if (str_copy(p, path, sizeof(p)) >= sizeof(p)) {
		errno = ENAMETOOLONG;
		return -1;
	}
	for (char *s = p + 1; *s != '\0'; s++) {
		if (*s != '/')
			continue;
		*s = '\0';
		if (mkdir(p, mode) < 0 && errno != EEXIST)
			return -1;
		*s = '/';
	}
	if (mkdir(p, mode) < 0 && errno != EEXIST)
		return -1;
	return 0;
}

int
elog_logdir(char *out, size_t outlen, bool create, char *err, size_t errlen)
{
	const char *state = getenv("XDG_STATE_HOME");
	const char *home = getenv("HOME");
	int n;

	if (state != NULL && state[0] == '/') {
		n = snprintf(out, outlen, "%s/airlock", state);
	} else {
		if (home == NULL || home[0] != '/') {
			struct passwd *pw = getpwuid(geteuid());

			home = pw != NULL ? pw->pw_dir : NULL;
		}
		if (home == NULL || home[0] != '/') {
			snprintf(err, errlen, "no log directory: HOME is not set; use --log FILE");
			return -1;
		}
		n = snprintf(out, outlen, "%s/.local/state/airlock", home);
	}
	if (n < 0 || (size_t)n >= outlen) {
		snprintf(err, errlen, "log directory path too long; use --log FILE");
		return -1;
	}
	if (create && mkdirs(out, 0700) < 0) {
		snprintf(err, errlen, "log directory %s: %s", out, strerror(errno));
		return -1;
	}
	return 0;
}

bool
elog_task_id_valid(const char *id)
{
	size_t n = strlen(id);

	if (n == 0 || n > ELOG_TASK_ID_MAX)
		return false;
	if (!((id[0] >= 'a' && id[0] <= 'z') || (id[0] >= 'A' && id[0] <= 'Z') ||
	      (id[0] >= '0' && id[0] <= '9')))
		return false;
	return strspn(id, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-") == n;
}

/* A log file of ours: NAME.jsonl, NAME a task id. */
static bool
is_log_name(const char *name)
{
	size_t n = strlen(name), ext = strlen(".jsonl");
	char id[ELOG_TASK_ID_MAX + 1];

	if (n <= ext || n - ext > ELOG_TASK_ID_MAX || strcmp(name + n - ext, ".jsonl") != 0)
		return false;
	memcpy(id, name, n - ext);
	id[n - ext] = '\0';
	return elog_task_id_valid(id);
}

/* Calls fn for every log file in dir (regular files only, not followed
 * through symlinks). 0, or -1 with errno. */
static int
each_log(const char *dir, int (*fn)(int dfd, const char *name, const struct stat *st, void *arg),
         void *arg)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	int rc = 0;

	if (d == NULL)
		return -1;
	while (rc == 0 && (e = readdir(d)) != NULL) {
		struct stat st;

		if (!is_log_name(e->d_name) ||
		    fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0 || !S_ISREG(st.st_mode))
			continue;
		rc = fn(dirfd(d), e->d_name, &st, arg);
	}
	closedir(d);
	return rc;
}

struct newest {
	char name[NAME_MAX + 1];
	struct timespec mtime;
	bool found;
};

static int
take_newest(int dfd, const char *name, const struct stat *st, void *arg)
{
	struct newest *nw = arg;

	(void)dfd;
	if (!nw->found || st->st_mtim.tv_sec > nw->mtime.tv_sec ||
	    (st->st_mtim.tv_sec == nw->mtime.tv_sec && st->st_mtim.tv_nsec > nw->mtime.tv_nsec)) {
		str_copy(nw->name, name, sizeof(nw->name));
		nw->mtime = st->st_mtim;
		nw->found = true;
	}
	return 0;
}

int
elog_logdir_last(const char *dir, char *out, size_t outlen, char *err, size_t errlen)
{
	struct newest nw = {.found = false};
	int n;

	if (each_log(dir, take_newest, &nw) < 0) {
		snprintf(err, errlen, "log directory %s: %s", dir, strerror(errno));
		return -1;
	}
	if (!nw.found) {
		snprintf(err, errlen, "no log in %s yet", dir);
		return -1;
	}
	n = snprintf(out, outlen, "%s/%s", dir, nw.name);
	if (n < 0 || (size_t)n >= outlen) {
		snprintf(err, errlen, "log path too long");
		return -1;
	}
	return 0;
}

struct prune {
	const struct elog_prune_opts *o;
	FILE *out;
	const char *dir;
	time_t before;
	long n;
	int err;
};

static int
prune_one(int dfd, const char *name, const struct stat *st, void *arg)
{
	struct prune *p = arg;

	if (st->st_mtim.tv_sec >= p->before)
		return 0;
	if (!p->o->dry_run && unlinkat(dfd, name, 0) < 0) {
		p->err = errno;
		fprintf(p->out, "cannot remove %s/%s: %s\n", p->dir, name, strerror(errno));
		return 0;
	}
	fprintf(p->out, "%s %s/%s\n", p->o->dry_run ? "would remove" : "removed", p->dir, name);
	p->n++;
	return 0;
}

long
elog_logdir_prune(const char *dir, const struct elog_prune_opts *o, FILE *out, char *err,
                  size_t errlen)
{
	struct prune p = {.o = o, .out = out, .dir = dir};

	p.before = time(NULL) - (time_t)(o->older_ms / 1000);
	if (each_log(dir, prune_one, &p) < 0) {
		if (errno == ENOENT)
			return 0; /* no logs yet: nothing to prune */
		snprintf(err, errlen, "log directory %s: %s", dir, strerror(errno));
		return -1;
	}
	if (p.err != 0) {
		snprintf(err, errlen, "some logs in %s could not be removed", dir);
		return -1;
	}
	return p.n;
}
