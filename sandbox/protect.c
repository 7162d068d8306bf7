/* What airlock reads at start and writes during the run, kept out of CMD's
 * reach (docs/run.md, Filesystem). CMD is hostile and knows airlock: a
 * policy in the workdir rewritten is what its next run enforces, a log
 * directory renamed away leaves the reviewer a forgery planted at the old
 * path while airlock writes on through its fd. So for each kept path, as
 * the next run will name it (symlinks and all), every entry on the way
 * to it that lies in a writable part of the view -- the host's files
 * under the workdir or an --rw path -- gets a mount of its own:
 *
 *  - a directory or symlink on the way: a copy of the view at that path
 *    on itself ("pin"). The kernel refuses to rename, replace or unlink
 *    a mount point in the namespace it is mounted in (EBUSY), while a
 *    plain directory could be renamed with every mount below it;
 *  - the path itself: read-only (the policy, a preset directory) or
 *    masked (the log: /dev/null, or an empty directory for the default
 *    log directory), which makes it a mount point too.
 *
 * Where the path lies in a read-only or private part nothing is needed,
 * so an ordinary run (a preset in /usr, the log under a hidden home)
 * mounts nothing at all. The view is modelled as the list of layers init
 * mounts, in order: the last one over a path decides what CMD finds
 * there. Copies do not hide what lies beneath them (a recursive clone of
 * the view at the time).
 *
 * A path is not a file's only name. Hard links are refused where CMD
 * could write through one (check_links). Bind mounts on the host show the
 * same directories at other paths, which realpath cannot see: the host's
 * mount table names them (keep_aliases), and each is kept as the path
 * itself is -- a rename through any of them is refused anyway (the kernel
 * asks whether the directory, not the path, is a mount point), but a
 * write is not. */
#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "common/log.h"
#include "common/util.h"
#include "sandbox/cache.h"
#include "sandbox/internal.h"

#define MAX_LINKS 40 /* as the kernel's path walk */

void
sbx_plan_init(struct sbx_plan *p)
{
	p->n_layers = 0;
	p->n_ops = 0;
}

void
sbx_plan_free(struct sbx_plan *p)
{
	for (size_t i = 0; i < p->n_ops; i++)
		free(p->op_path[i]);
	p->n_ops = 0;
	p->n_layers = 0;
}

int
sbx_plan_layer(struct sbx_plan *p, const char *path, enum sbx_view view, bool copy,
               const char *what)
{
	if (p->n_layers >= SBX_MAX_LAYERS)
		return -1;
	p->layer[p->n_layers++] = (struct sbx_layer){
	        .path = path,
	        .len = strlen(path),
	        .view = view,
	        .copy = copy,
	        .what = what,
	};
	return 0;
}

/* a is x or one of its ancestors ("/" is everyone's). */
static bool
is_under(const char *x, size_t xlen, const char *a, size_t alen)
{
	if (alen == 1 && a[0] == '/')
		return true;
	return alen <= xlen && memcmp(a, x, alen) == 0 && (x[alen] == '/' || x[alen] == '\0');
}

int
sbx_plan_view(struct sbx_plan *p, const struct sbx *s, char *err, size_t errlen)
{
	/* sbx_fs_setup's order: the root, the sandbox's own filesystems, the
	 * hidden directories, the workdir, the user's mounts. */
	static const char *const own[] = {"/dev",      "/proc", "/tmp", "/run", "/etc/resolv.conf",
	                                  "/etc/hosts"};
	static const enum sbx_view user_view[] = {
	        [SBX_MOUNT_RW] = SBX_VIEW_HOST_RW,
	        [SBX_MOUNT_RO] = SBX_VIEW_HOST_RO,
	        [SBX_MOUNT_TMPFS] = SBX_VIEW_PRIVATE,
	        [SBX_MOUNT_HIDE] = SBX_VIEW_PRIVATE,
	};
	static const char *const user_what[] = {
	        [SBX_MOUNT_RW] = "--rw path",
	        [SBX_MOUNT_RO] = "--ro path",
	        [SBX_MOUNT_TMPFS] = "--tmpfs path",
	        [SBX_MOUNT_HIDE] = "--hide path",
	};
	int rc = sbx_plan_layer(p, "/", SBX_VIEW_HOST_RO, false, "/");

	for (size_t i = 0; i < ARRAY_SIZE(own); i++)
		rc |= sbx_plan_layer(p, own[i], SBX_VIEW_PRIVATE, false, own[i]);
	for (size_t i = 0; i < s->n_hidden; i++)
		rc |= sbx_plan_layer(p, s->hidden[i].path, SBX_VIEW_PRIVATE, false,
		                     "hidden directory");
	rc |= sbx_plan_layer(p, s->workdir, SBX_VIEW_HOST_RW, false, "workdir");
	for (size_t i = 0; i < s->cfg->n_mounts; i++) {
		enum sbx_mount_kind kind = s->cfg->mounts[i].kind;

		if (!s->umounts[i].skip)
			rc |= sbx_plan_layer(p, s->umounts[i].target, user_view[kind], false,
			                     user_what[kind]);
	}
	if (rc < 0) {
		snprintf(err, errlen, "filesystem: too many mounts");
		return -1;
	}
	return 0;
}

/* What CMD finds at path x: the view (*view), whether x is a mount point
 * (*mp), and the index of the last layer that hides what lay beneath it
 * there. */
static size_t
view_of(const struct sbx_plan *p, const char *x, size_t xlen, enum sbx_view *view, bool *mp)
{
	size_t top = 0;

	for (size_t i = 0; i < p->n_layers; i++)
		if (!p->layer[i].copy && is_under(x, xlen, p->layer[i].path, p->layer[i].len))
			top = i;
	*view = p->layer[top].view;
	*mp = false;
	for (size_t i = top; i < p->n_layers; i++) {
		const struct sbx_layer *l = &p->layer[i];

		if (!is_under(x, xlen, l->path, l->len))
			continue;
		if (l->len == xlen)
			*mp = true;
		/* A read-only copy over x or above it. */
		if (l->copy && l->view == SBX_VIEW_HOST_RO && *view == SBX_VIEW_HOST_RW)
			*view = SBX_VIEW_HOST_RO;
	}
	return top;
}

/* The first writable host layer at x or beneath it, visible: NULL if none. */
static const struct sbx_layer *
writable_within(const struct sbx_plan *p, size_t top, const char *x, size_t xlen)
{
	for (size_t i = top; i < p->n_layers; i++) {
		const struct sbx_layer *l = &p->layer[i];

		if (!l->copy && l->view == SBX_VIEW_HOST_RW && is_under(l->path, l->len, x, xlen))
			return l;
	}
	return NULL;
}

static int
add_op(struct sbx_plan *p, enum sbx_keep_op op, const char *path, size_t len,
       const struct sbx_keep *k, char *err, size_t errlen)
{
	char *copy;

	if (p->n_ops >= SBX_MAX_KEEP_MOUNTS || p->n_layers >= SBX_MAX_LAYERS) {
		snprintf(err, errlen,
		         "%s %s: keeping airlock's files out of CMD's reach would take more than "
		         "%d mounts; keep the policy, the presets and the log outside the workdir "
		         "and the --rw paths",
		         k->what, k->path, SBX_MAX_KEEP_MOUNTS);
		return -1;
	}
	copy = strndup(path, len);
	if (copy == NULL) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	p->op[p->n_ops] = op;
	p->op_path[p->n_ops++] = copy;
	(void)sbx_plan_layer(p, copy,
	                     op == SBX_KEEP_MASK     ? SBX_VIEW_PRIVATE
	                     : op == SBX_KEEP_RDONLY ? SBX_VIEW_HOST_RO
	                                             : SBX_VIEW_HOST_RW,
	                     op != SBX_KEEP_MASK, "kept path");
	log_debug("keep %s: %s %s", k->path,
	          op == SBX_KEEP_PIN      ? "pin"
	          : op == SBX_KEEP_RDONLY ? "read-only"
	                                  : "mask",
	          copy);
	return 0;
}

enum entry {
	ENTRY_DIR,     /* a directory on the way */
	ENTRY_LINK,    /* a symlink on the way (or the path itself) */
	ENTRY_LAST,    /* what the path names */
	ENTRY_MISSING, /* not there (or not reachable: e is why) */
};

/* One entry of the walk. Returns 1 to go on, 0 when the walk is done (the
 * path named, or a part of it missing where that is harmless), -1 with
 * the reason. */
static int
plan_entry(struct sbx_plan *p, const struct sbx_keep *k, const char *x, size_t xlen,
           enum entry type, bool is_dir, int e, char *err, size_t errlen)
{
	enum sbx_view view;
	bool mp;
	size_t top = view_of(p, x, xlen, &view, &mp);
	const struct sbx_layer *w;

	/* Through private places too: CMD cannot see them, but a symlink
	 * there may lead back into its sight. */
	switch (type) {
	case ENTRY_MISSING:
		if (view != SBX_VIEW_HOST_RW)
			return 0;
		snprintf(err, errlen,
		         "%s %s: %.*s %s%s%s, and CMD could make it in the %s %s: create it "
		         "before the run%s",
		         k->what, k->path, (int)xlen, x,
		         e == ENOENT ? "does not exist" : "cannot be reached (",
		         e == ENOENT ? "" : strerror(e), e == ENOENT ? "" : ")", p->layer[top].what,
		         p->layer[top].path,
		         k->how == SBX_KEEP_READ ? ", or keep it outside the writable paths" : "");
		return -1;
	case ENTRY_DIR:
	case ENTRY_LINK:
		if (view == SBX_VIEW_HOST_RW && !mp &&
		    add_op(p, SBX_KEEP_PIN, x, xlen, k, err, errlen) < 0)
			return -1;
		return 1;
	case ENTRY_LAST:
		break;
	}
	/* A directory kept read-only or hidden must not be, or hold, a
	 * place CMD may write to: it would stay writable, or be lost. */
	if (is_dir && (w = writable_within(p, top, x, xlen)) != NULL) {
		if (w->len == xlen)
			snprintf(err, errlen,
			         "%s %s is the %s: CMD must not %s it; use another %s%s", k->what,
			         k->path, w->what, k->how == SBX_KEEP_HIDE ? "see" : "change",
			         w->what, k->how == SBX_KEEP_HIDE ? " or --log FILE" : "");
		else
			snprintf(err, errlen,
			         "%s %s holds the %s %s: CMD must not %s it; use another %s%s",
			         k->what, k->path, w->what, w->path,
			         k->how == SBX_KEEP_HIDE ? "see" : "change", w->what,
			         k->how == SBX_KEEP_HIDE ? " or --log FILE" : "");
		return -1;
	}
	if (k->how == SBX_KEEP_READ) {
		if (view == SBX_VIEW_HOST_RW &&
		    add_op(p, SBX_KEEP_RDONLY, x, xlen, k, err, errlen) < 0)
			return -1;
	} else if (view != SBX_VIEW_PRIVATE &&
	           add_op(p, SBX_KEEP_MASK, x, xlen, k, err, errlen) < 0) {
		return -1;
	}
	return 0;
}

/* rest (absolute) has no empty, "." or ".." component. */
static bool
is_clean(const char *rest)
{
	for (const char *c = rest; *c != '\0'; c++) {
		if (c[0] != '/')
			continue;
		if (c[1] == '/' || c[1] == '\0' ||
		    (c[1] == '.' && (c[2] == '/' || c[2] == '\0' ||
		                     (c[2] == '.' && (c[3] == '/' || c[3] == '\0')))))
			return false;
	}
	return rest[0] == '/';
}

/* What the path named, into *f: its resolved path and what statx says. */
static void
found(struct sbx_found *f, const char *real, size_t len, const struct statx *stx)
{
	memcpy(f->real, real, len);
	f->real[len] = '\0';
	f->mode = stx->stx_mode;
	f->nlink = stx->stx_nlink;
	f->uid = stx->stx_uid;
	f->mnt_id = stx->stx_mask & STATX_MNT_ID ? stx->stx_mnt_id : 0;
	f->there = true;
}

#define FOUND_MASK (STATX_TYPE | STATX_MODE | STATX_NLINK | STATX_UID | STATX_MNT_ID)

/* Most paths have no symlink on the way: one openat2 says so, and the
 * plan follows from the path alone (every prefix a directory). 1 when
 * the path has a symlink on the way or is not there (the caller walks
 * it), else plan_entry's 0 or -1. */
static int
plan_direct(struct sbx_plan *p, const struct sbx_keep *k, const char *path, struct sbx_found *f,
            char *err, size_t errlen)
{
	struct open_how how = {.flags = O_PATH | O_CLOEXEC, .resolve = RESOLVE_NO_SYMLINKS};
	struct statx stx;
	size_t len = strlen(path);
	int fd, rc;

	if (len <= 1 || !is_clean(path))
		return 1;
	fd = (int)syscall(SYS_openat2, AT_FDCWD, path, &how, sizeof(how));
	if (fd < 0)
		return 1;
	rc = statx(fd, "", AT_EMPTY_PATH, FOUND_MASK, &stx);
	close(fd);
	if (rc < 0)
		return 1;
	for (const char *c = strchr(path + 1, '/'); c != NULL; c = strchr(c + 1, '/'))
		if (plan_entry(p, k, path, (size_t)(c - path), ENTRY_DIR, true, 0, err, errlen) < 0)
			return -1;
	found(f, path, len, &stx);
	return plan_entry(p, k, path, len, ENTRY_LAST, S_ISDIR(stx.stx_mode), 0, err, errlen) < 0
	               ? -1
	               : 0;
}

int
sbx_plan_keep(struct sbx_plan *p, const struct sbx_keep *k, struct sbx_found *f, char *err,
              size_t errlen)
{
	/* cur: the resolved part ("" is /); rest: what is left, from r on. */
	char cur[PATH_MAX], rest[PATH_MAX], next[PATH_MAX], link[PATH_MAX];
	const char *r;
	size_t curlen = 0;
	int links = 0, rc, n;
	struct stat st;
	struct statx stx;

	if (k->path == NULL || k->path[0] == '\0') {
		snprintf(err, errlen, "%s: empty path", k->what);
		return -1;
	}
	if (k->path[0] == '/') {
		n = snprintf(rest, sizeof(rest), "%s", k->path);
	} else {
		if (getcwd(cur, sizeof(cur)) == NULL) {
			snprintf(err, errlen, "%s %s: current directory: %s", k->what, k->path,
			         strerror(errno));
			return -1;
		}
		n = snprintf(rest, sizeof(rest), "%s/%s", cur, k->path);
	}
	if (n < 0 || (size_t)n >= sizeof(rest))
		goto too_long;
	f->there = false;
	rc = plan_direct(p, k, rest, f, err, errlen);
	if (rc <= 0)
		return rc;
	r = rest;
	cur[0] = '\0';
	for (;;) {
		const char *comp, *end;
		size_t clen;
		bool last;

		while (*r == '/')
			r++;
		if (*r == '\0')
			break;
		comp = r;
		end = strchrnul(comp, '/');
		clen = (size_t)(end - comp);
		r = end;
		while (*r == '/')
			r++;
		last = *r == '\0';
		if (clen == 1 && comp[0] == '.')
			continue;
		if (clen == 2 && comp[0] == '.' && comp[1] == '.') {
			char *slash = strrchr(cur, '/');
			curlen = slash != NULL ? (size_t)(slash - cur) : 0;
			cur[curlen] = '\0';
			continue;
		}
		if (curlen + 1 + clen >= sizeof(cur))
			goto too_long;
		cur[curlen] = '/';
		memcpy(cur + curlen + 1, comp, clen);
		curlen += 1 + clen;
		cur[curlen] = '\0';
		if (lstat(cur, &st) < 0)
			return plan_entry(p, k, cur, curlen, ENTRY_MISSING, false, errno, err,
			                  errlen) < 0
			               ? -1
			               : 0;
		if (S_ISLNK(st.st_mode)) {
			ssize_t ln;

			rc = plan_entry(p, k, cur, curlen, ENTRY_LINK, false, 0, err, errlen);
			if (rc <= 0)
				return rc;
			if (++links > MAX_LINKS) {
				snprintf(err, errlen, "%s %s: %s", k->what, k->path,
				         strerror(ELOOP));
				return -1;
			}
			ln = readlink(cur, link, sizeof(link) - 1);
			if (ln < 0) {
				snprintf(err, errlen, "%s %s: %s: %s", k->what, k->path, cur,
				         strerror(errno));
				return -1;
			}
			link[ln] = '\0';
			n = snprintf(next, sizeof(next), "%s/%s", link, r);
			if (n < 0 || (size_t)n >= sizeof(next))
				goto too_long;
			memcpy(rest, next, (size_t)n + 1);
			r = rest;
			/* Relative to the link's directory, or from the root. */
			if (link[0] == '/') {
				curlen = 0;
			} else {
				char *slash = strrchr(cur, '/');
				curlen = (size_t)(slash - cur);
			}
			cur[curlen] = '\0';
			continue;
		}
		if (!last && !S_ISDIR(st.st_mode))
			return plan_entry(p, k, cur, curlen, ENTRY_MISSING, false, ENOTDIR, err,
			                  errlen) < 0
			               ? -1
			               : 0;
		if (last && statx(AT_FDCWD, cur, AT_SYMLINK_NOFOLLOW, FOUND_MASK, &stx) == 0)
			found(f, cur, curlen, &stx);
		rc = plan_entry(p, k, cur, curlen, last ? ENTRY_LAST : ENTRY_DIR,
		                S_ISDIR(st.st_mode), 0, err, errlen);
		if (rc <= 0)
			return rc;
	}
	/* The path ended in "." or "..", or named /: what it names is a
	 * directory already walked through. */
	if (curlen == 0) {
		cur[0] = '/';
		cur[1] = '\0';
		curlen = 1;
	}
	if (statx(AT_FDCWD, cur, AT_SYMLINK_NOFOLLOW, FOUND_MASK, &stx) == 0)
		found(f, cur, curlen, &stx);
	return plan_entry(p, k, cur, curlen, ENTRY_LAST, true, 0, err, errlen) < 0 ? -1 : 0;
too_long:
	snprintf(err, errlen, "%s %s: path too long", k->what, k->path);
	return -1;
}

/* A file with more than one name (hard links) may be reached through
 * another, which nothing here covers: refused when CMD could write it
 * that way (always for a file airlock writes; for one it reads, when its
 * mode lets anyone write). */
static int
check_links(const struct sbx *s, const struct sbx_keep *k, const struct sbx_found *f, char *err,
            size_t errlen)
{
	if (!f->there || !S_ISREG(f->mode) || f->nlink <= 1)
		return 0;
	/* Another name is harmless only for a file CMD can neither write nor
	 * chmod: CMD runs as the caller's uid (root's when root runs
	 * airlock), so the caller's own files are out, whatever their mode. */
	if (k->how == SBX_KEEP_READ && f->uid != s->uid && (f->mode & 0022) == 0)
		return 0;
	snprintf(err, errlen,
	         "%s %s has %lu names (hard links): CMD could write it through another; use a "
	         "file with one name (cp it to a new file)",
	         k->what, k->path, (unsigned long)f->nlink);
	return -1;
}

/* The host's mount table, as much of it as keep_aliases needs. */
struct mnt {
	unsigned long id;
	unsigned major, minor;
	const char *root;  /* what of its filesystem it shows; in the table's buf */
	const char *point; /* where */
	size_t root_len, point_len;
};

struct mnt_table {
	char *buf; /* /proc/self/mountinfo, split and unescaped in place */
	struct mnt *m;
	size_t n;
};

#define MOUNTINFO_MAX (16u << 20)

static void
mnt_table_free(struct mnt_table *t)
{
	free(t->buf);
	free(t->m);
	t->buf = NULL;
	t->m = NULL;
	t->n = 0;
}

/* Cut the next space-separated field out of *s; the kernel escapes space,
 * tab, newline and backslash in paths as \ooo. NULL at the line's end. */
static char *
mnt_field(char **s, bool unescape)
{
	char *f = *s, *in, *out;

	while (*f == ' ')
		f++;
	if (*f == '\0' || *f == '\n')
		return NULL;
	for (in = out = f; *in != '\0' && *in != ' ' && *in != '\n'; in++) {
		if (unescape && in[0] == '\\' && in[1] >= '0' && in[1] <= '3' && in[2] >= '0' &&
		    in[2] <= '7' && in[3] >= '0' && in[3] <= '7') {
			*out++ = (char)((in[1] - '0') << 6 | (in[2] - '0') << 3 | (in[3] - '0'));
			in += 3;
		} else {
			*out++ = *in;
		}
	}
	*s = *in == ' ' ? in + 1 : in;
	*out = '\0';
	return f;
}

static int
mnt_table_read(struct mnt_table *t, char *err, size_t errlen)
{
	size_t len = 0, cap = 16384, lines = 0;
	int fd = open("/proc/self/mountinfo", O_RDONLY | O_CLOEXEC);
	char *line, *next;

	memset(t, 0, sizeof(*t));
	if (fd < 0)
		goto fail;
	for (;;) {
		ssize_t r;

		if (cap - len < 4096) {
			char *nb;

			if (cap >= MOUNTINFO_MAX) {
				errno = EFBIG;
				goto fail;
			}
			nb = realloc(t->buf, cap * 2);
			if (nb == NULL)
				goto fail;
			t->buf = nb;
			cap *= 2;
		} else if (t->buf == NULL && (t->buf = malloc(cap)) == NULL) {
			goto fail;
		}
		r = read(fd, t->buf + len, cap - len - 1);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			goto fail;
		if (r == 0)
			break;
		len += (size_t)r;
	}
	fd_close(&fd);
	t->buf[len] = '\0';
	for (size_t i = 0; i < len; i++)
		lines += t->buf[i] == '\n';
	t->m = calloc(lines + 1, sizeof(*t->m));
	if (t->m == NULL)
		goto fail;
	/* ID PARENT MAJOR:MINOR ROOT POINT OPTIONS ... */
	for (line = t->buf; line != NULL && *line != '\0'; line = next) {
		struct mnt *m = &t->m[t->n];
		char *eol = strchr(line, '\n'), *f[5];

		next = eol != NULL ? eol + 1 : NULL;
		if (eol != NULL)
			*eol = '\0';
		for (int i = 0; i < 5; i++)
			if ((f[i] = mnt_field(&line, i >= 3)) == NULL)
				break;
		if (f[4] == NULL || sscanf(f[2], "%u:%u", &m->major, &m->minor) != 2)
			continue;
		m->id = strtoul(f[0], NULL, 10);
		m->root = f[3];
		m->point = f[4];
		m->root_len = strlen(f[3]);
		m->point_len = strlen(f[4]);
		t->n++;
	}
	return 0;
fail:
	snprintf(err, errlen, "filesystem: the host's mount table: %s", strerror(errno));
	fd_close(&fd);
	mnt_table_free(t);
	return -1;
}

/* The mount f lies in: by its mount id where the kernel says it (statx,
 * Linux 5.8), else the last mount on the longest prefix of its path. */
static const struct mnt *
mnt_of(const struct mnt_table *t, const struct sbx_found *f)
{
	const struct mnt *best = NULL;
	size_t len = strlen(f->real);

	for (size_t i = 0; f->mnt_id != 0 && i < t->n; i++)
		if (t->m[i].id == f->mnt_id)
			return &t->m[i];
	for (size_t i = 0; i < t->n; i++)
		if (is_under(f->real, len, t->m[i].point, t->m[i].point_len) &&
		    (best == NULL || t->m[i].point_len >= best->point_len))
			best = &t->m[i];
	return best;
}

/* Where f lies as its filesystem knows it: the mount it is in (*home) and
 * its path within the filesystem, which every bind mount showing it
 * shares. The path's length, or 0 when the table does not say. */
static size_t
fs_locate(const struct mnt_table *t, const struct sbx_found *f, const struct mnt **home,
          char *in_fs, size_t size)
{
	const char *rel;
	int n;

	*home = mnt_of(t, f);
	if (*home == NULL)
		return 0;
	rel = (*home)->point_len == 1 ? f->real : f->real + (*home)->point_len;
	n = snprintf(in_fs, size, "%s%s", (*home)->root_len == 1 ? "" : (*home)->root,
	             rel[0] == '\0' && (*home)->root_len == 1 ? "/" : rel);
	return n > 0 && (size_t)n < size ? (size_t)n : 0;
}

/* Every other path the host's mounts show k's path at (a bind mount of it
 * or of a directory above it; for a directory also of one below it), kept
 * as k is. */
static int
keep_aliases(struct sbx_plan *p, const struct mnt_table *t, const struct sbx_keep *k,
             const struct sbx_found *f, char *err, size_t errlen)
{
	char in_fs[PATH_MAX], alias[PATH_MAX];
	const char *real = f->real, *rel;
	const struct mnt *home;
	size_t len;
	int n;

	if (!f->there)
		return 0; /* the walk said what that means */
	len = fs_locate(t, f, &home, in_fs, sizeof(in_fs));
	if (len == 0)
		return 0;
	for (size_t i = 0; i < t->n; i++) {
		const struct mnt *m = &t->m[i];
		struct sbx_keep ak = *k;
		struct sbx_found af;

		if (m == home || m->major != home->major || m->minor != home->minor)
			continue;
		if (is_under(in_fs, len, m->root, m->root_len)) {
			rel = m->root_len == 1 ? in_fs : in_fs + m->root_len;
			n = snprintf(alias, sizeof(alias), "%s%s",
			             m->point_len == 1 ? "" : m->point, rel);
		} else if (S_ISDIR(f->mode) && is_under(m->root, m->root_len, in_fs, len)) {
			n = snprintf(alias, sizeof(alias), "%s", m->point);
		} else {
			continue;
		}
		if (n <= 0 || (size_t)n >= sizeof(alias) || strcmp(alias, real) == 0)
			continue;
		log_debug("keep %s: also at %s", k->path, alias);
		ak.path = alias;
		if (sbx_plan_keep(p, &ak, &af, err, errlen) < 0)
			return -1;
	}
	return 0;
}

/* Locate path (or, while it is not there yet, the nearest directory above
 * it that is: where it will be made) in the host's filesystems. */
static size_t
fs_locate_path(const struct mnt_table *t, const char *path, char *in_fs, size_t size,
               const struct mnt **home)
{
	struct sbx_found f = {.there = true};
	char at[PATH_MAX];
	struct statx stx;

	if (str_copy(at, path, sizeof(at)) >= sizeof(at))
		return 0;
	while (realpath(at[0] != '\0' ? at : ".", f.real) == NULL) {
		char *slash = strrchr(at, '/');

		if (errno != ENOENT || at[0] == '\0')
			return 0;
		if (slash == NULL)
			at[0] = '\0';
		else if (slash == at)
			slash[1] = '\0';
		else
			*slash = '\0';
	}
	if (statx(AT_FDCWD, f.real, AT_SYMLINK_NOFOLLOW, STATX_MNT_ID, &stx) < 0)
		return 0;
	f.mnt_id = stx.stx_mask & STATX_MNT_ID ? stx.stx_mnt_id : 0;
	return fs_locate(t, &f, home, in_fs, size);
}

/* --cache DIR and what airlock keeps must not nest by any path: a bind
 * mount shows one directory at two, and realpath sees only one of them
 * (sbx_cache_check_keep compares those). Compared as the filesystem knows
 * them, the device and the path within it, every alias is the same. */
static int
cache_aliases(const struct mnt_table *t, const struct sbx_cache *c, const struct sbx_keep *keep,
              size_t n, char *err, size_t errlen)
{
	char cache_fs[PATH_MAX], kept_fs[PATH_MAX];
	const struct mnt *cache_home, *kept_home;
	size_t clen = fs_locate_path(t, sbx_cache_path(c), cache_fs, sizeof(cache_fs), &cache_home);

	const char *dir = sbx_cache_path(c);
	size_t dlen = strlen(dir);

	if (clen == 0) {
		snprintf(err, errlen, "--cache %s: not found in the host's mount table", dir);
		return -1;
	}
	/* The cache is bound alone, not what is mounted below it, which no
	 * check here has looked at; the kernel would refuse it anyway. */
	for (size_t i = 0; i < t->n; i++)
		if (t->m[i].point_len > dlen && is_under(t->m[i].point, t->m[i].point_len, dir, dlen)) {
			snprintf(err, errlen,
			         "--cache %s: %s is mounted inside it; give the cache a directory "
			         "with no mount below it",
			         dir, t->m[i].point);
			return -1;
		}
	for (size_t i = 0; i < n; i++) {
		size_t klen = fs_locate_path(t, keep[i].path, kept_fs, sizeof(kept_fs), &kept_home);

		if (klen == 0 || kept_home->major != cache_home->major ||
		    kept_home->minor != cache_home->minor)
			continue;
		if (is_under(kept_fs, klen, cache_fs, clen) || is_under(cache_fs, clen, kept_fs, klen)) {
			snprintf(err, errlen,
			         "--cache %s: it and the %s %s are one inside the other (the host "
			         "shows the same directory at both through a bind mount), where CMD "
			         "could change what airlock reads or writes; give the cache a "
			         "directory of its own",
			         dir, keep[i].what, keep[i].path);
			return -1;
		}
	}
	return 0;
}

int
sbx_protect(struct sbx *s, const struct sbx_keep *keep, size_t n, char *err, size_t errlen)
{
	struct mnt_table mt = {0};
	struct sbx_found f;
	struct sbx_plan *p;
	struct sbx_msg_keep m;
	int rc = -1;

	if (s->kept || s->sock < 0) {
		snprintf(err, errlen, "sandbox: protect called %s",
		         s->kept ? "twice" : "before the start");
		return -1;
	}
	/* Some KiB: not on the stack of a caller that may be deep already. */
	p = malloc(sizeof(*p));
	if (p == NULL) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	sbx_plan_init(p);
	if ((s->cfg->cache != NULL &&
	     sbx_cache_check_keep(s->cfg->cache, keep, n, err, errlen) < 0) ||
	    sbx_plan_view(p, s, err, errlen) < 0 || (n > 0 && mnt_table_read(&mt, err, errlen) < 0) ||
	    (s->cfg->cache != NULL && n > 0 &&
	     cache_aliases(&mt, s->cfg->cache, keep, n, err, errlen) < 0))
		goto out;
	for (size_t i = 0; i < n; i++)
		if (sbx_plan_keep(p, &keep[i], &f, err, errlen) < 0 ||
		    check_links(s, &keep[i], &f, err, errlen) < 0 ||
		    keep_aliases(p, &mt, &keep[i], &f, err, errlen) < 0)
			goto out;
	for (size_t i = 0; i <= p->n_ops; i++) {
		size_t len = 0;

		memset(&m, 0, offsetof(struct sbx_msg_keep, path));
		m.type = SBX_MSG_KEEP;
		m.op = i < p->n_ops ? p->op[i] : SBX_KEEP_END;
		m.path[0] = '\0';
		if (i < p->n_ops)
			len = str_copy(m.path, p->op_path[i], sizeof(m.path));
		if (sbx_pkt_send(s->sock, &m, offsetof(struct sbx_msg_keep, path) + len + 1) < 0) {
			if (errno == EPIPE || errno == ECONNRESET)
				sbx_setup_lost(s, "tell init what to keep", errno, err, errlen);
			else
				snprintf(err, errlen, "sandbox set-up: tell init what to keep: %s",
				         strerror(errno));
			goto out;
		}
	}
	s->kept = true;
	rc = 0;
out:
	mnt_table_free(&mt);
	sbx_plan_free(p);
	free(p);
	return rc;
}
