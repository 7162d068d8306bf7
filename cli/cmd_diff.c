/* airlock diff DIR: what a task's kept upper layer (run --overlay-keep DIR,
 * docs/run.md "Writable root") changed in the host's view, one path per
 * line, sorted by path:
 *
 *   A /path   added: not in the host's view now
 *   M /path   modified: a file, link or device the host also has
 *   D /path   deleted: an overlay whiteout
 *   R /path   a directory replaced: the host's contents hidden (opaque)
 *
 * Directories copied up only to hold a change are not listed. A and M are
 * judged against the host as it is when diff runs. The names are the
 * task's: a byte outside printable ASCII, and a backslash, is printed as
 * \ooo (octal), so no name can make a line of its own or reach the
 * terminal as a control sequence. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "cli/cmd.h"
#include "common/log.h"
#include "common/util.h"

#define DIFF_MAX_DEPTH 256

struct change {
	char kind;
	char *path;
};

#define ESC_MAX (4 * PATH_MAX + 1) /* a path, every byte as \ooo */

struct diff {
	struct change *v;
	size_t n, cap;
	bool failed;
	char shown[ESC_MAX]; /* a warning's path, escaped */
};

static int
add(struct diff *d, char kind, const char *path)
{
	if (d->n == d->cap) {
		size_t cap = d->cap != 0 ? d->cap * 2 : 256;
		struct change *v = reallocarray(d->v, cap, sizeof(*v));
		if (v == NULL)
			return -1;
		d->v = v;
		d->cap = cap;
	}
	d->v[d->n].kind = kind;
	d->v[d->n].path = strdup(path);
	if (d->v[d->n].path == NULL)
		return -1;
	d->n++;
	return 0;
}

/* An overlay mark (user.overlay.NAME, or trusted.overlay.NAME of a layer
 * made by real root) on fd's file. */
static bool
has_mark(int fd, const char *name)
{
	char attr[64], v[4];
	const char *ns[] = {"user", "trusted"};

	for (size_t i = 0; i < ARRAY_SIZE(ns); i++) {
		snprintf(attr, sizeof(attr), "%s.overlay.%s", ns[i], name);
		if (fgetxattr(fd, attr, v, sizeof(v)) >= 0)
			return true;
	}
	return false;
}

static bool
is_whiteout(int dir, const char *name, const struct stat *st)
{
	bool mark = false;
	int fd;

	if (S_ISCHR(st->st_mode) && major(st->st_rdev) == 0 && minor(st->st_rdev) == 0)
		return true;
	if (!S_ISREG(st->st_mode) || st->st_size != 0)
		return false;
	fd = openat(dir, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
	if (fd >= 0) {
		mark = has_mark(fd, "whiteout");
		close(fd);
	}
	return mark;
}

/* A name the task chose, escaped as the listing escapes it (see the top),
 * for stdout and for warnings alike: a newline or a terminal's escape
 * sequence in it must not reach the reader as itself. Cut at size. */
static const char *
escaped(const char *path, char *out, size_t size)
{
	size_t n = 0;

	for (const unsigned char *p = (const unsigned char *)path; *p != '\0' && n + 5 <= size;
	     p++) {
		if (*p < 0x20 || *p >= 0x7f || *p == '\\')
			n += (size_t)snprintf(out + n, size - n, "\\%03o", *p);
		else
			out[n++] = (char)*p;
	}
	out[n] = '\0';
	return out;
}

static void
walk(struct diff *d, int dir, char *path, size_t len, int depth)
{
	DIR *dp;
	struct dirent *e;
	int fd;

	if (depth > DIFF_MAX_DEPTH) {
		log_warnx("diff: %s: deeper than %d levels, not listed",
		          escaped(path, d->shown, sizeof(d->shown)), DIFF_MAX_DEPTH);
		d->failed = true;
		return;
	}
	fd = dup(dir);
	dp = fd >= 0 ? fdopendir(fd) : NULL;
	if (dp == NULL) {
		log_warnx("diff: %s: %s", len > 0 ? escaped(path, d->shown, sizeof(d->shown)) : "/",
		          strerror(errno));
		if (fd >= 0)
			close(fd);
		d->failed = true;
		return;
	}
	while ((e = readdir(dp)) != NULL) {
		struct stat st, host;
		size_t nl = strlen(e->d_name);
		bool on_host;

		if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
			continue;
		if (len + 1 + nl >= PATH_MAX) {
			log_warnx("diff: %s/...: path too long",
			          escaped(path, d->shown, sizeof(d->shown)));
			d->failed = true;
			continue;
		}
		path[len] = '/';
		memcpy(path + len + 1, e->d_name, nl + 1);
		if (fstatat(dir, e->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0) {
			log_warnx("diff: %s: %s", escaped(path, d->shown, sizeof(d->shown)),
			          strerror(errno));
			d->failed = true;
			continue;
		}
		on_host = lstat(path, &host) == 0;
		if (is_whiteout(dir, e->d_name, &st)) {
			if (add(d, 'D', path) < 0)
				goto oom;
		} else if (S_ISDIR(st.st_mode)) {
			int sub = openat(dir, e->d_name,
			                 O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
			bool opaque = sub >= 0 && has_mark(sub, "opaque");

			if (!on_host || !S_ISDIR(host.st_mode) || opaque) {
				if (add(d, on_host && S_ISDIR(host.st_mode) ? 'R' : 'A', path) <
				    0) {
					if (sub >= 0)
						close(sub);
					goto oom;
				}
			}
			if (sub < 0) {
				log_warnx("diff: %s: %s", escaped(path, d->shown, sizeof(d->shown)),
				          strerror(errno));
				d->failed = true;
			} else {
				walk(d, sub, path, len + 1 + nl, depth + 1);
				close(sub);
			}
		} else if (add(d, on_host ? 'M' : 'A', path) < 0) {
			goto oom;
		}
		path[len] = '\0';
	}
	path[len] = '\0';
	closedir(dp);
	return;
oom:
	log_warnx("diff: out of memory");
	d->failed = true;
	path[len] = '\0';
	closedir(dp);
}

/* path, escaped (see the top), to out. */
static void
put_path(const char *path, FILE *out)
{
	static char shown[ESC_MAX];

	fputs(escaped(path, shown, sizeof(shown)), out);
}

static int
by_path(const void *a, const void *b)
{
	return strcmp(((const struct change *)a)->path, ((const struct change *)b)->path);
}

static const char diff_usage[] =
        "usage: airlock diff DIR\n"
        "What the task's kept upper layer (airlock run --overlay-keep DIR) changed,\n"
        "one path per line, sorted: A added, M modified, D deleted, R directory\n"
        "replaced. See docs/run.md.\n";

int
cmd_diff(int argc, char **argv)
{
	struct diff d = {.v = NULL};
	char path[PATH_MAX], upper[PATH_MAX];
	int dir;

	if (argc == 2 && (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0)) {
		fputs(diff_usage, stdout);
		return 0;
	}
	if (argc != 2 || argv[1][0] == '\0' || argv[1][0] == '-') {
		fputs(diff_usage, stderr);
		return EXIT_USAGE;
	}
	if ((size_t)snprintf(upper, sizeof(upper), "%s/upper", argv[1]) >= sizeof(upper)) {
		log_warnx("diff: %s: path too long", argv[1]);
		return 1;
	}
	dir = open(upper, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dir < 0) {
		log_warnx("diff: %s: %s (not a layer kept by airlock run --overlay-keep)", upper,
		          strerror(errno));
		return 1;
	}
	path[0] = '\0';
	walk(&d, dir, path, 0, 0);
	close(dir);
	qsort(d.v, d.n, sizeof(*d.v), by_path);
	for (size_t i = 0; i < d.n; i++) {
		printf("%c ", d.v[i].kind);
		put_path(d.v[i].path, stdout);
		putchar('\n');
		free(d.v[i].path);
	}
	free(d.v);
	if (fflush(stdout) != 0) {
		log_warn("diff: stdout");
		return 1;
	}
	return d.failed ? 1 : 0;
}
