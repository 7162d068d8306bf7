/* `--overlay` and `--overlay-keep DIR` (docs/run.md "Writable root"): each
 * top-level directory of the host's root filesystem gets an overlayfs whose
 * lower layer is the host's directory and whose upper layer is private to
 * the task: a directory of a tmpfs, or DIR/upper/NAME (work dirs in
 * DIR/work). CMD may then change /usr, /etc, /var ... while the host's stay
 * as they are. Left out: what the sandbox mounts itself (/proc, /dev, /tmp,
 * /run, /sys), the home directories (hidden or shared as today), and a
 * directory with another mount beneath it: those keep today's read-only
 * view. That one cannot be done: the mounts beneath came from the host's
 * mount namespace, so the kernel locks them to their parent, and neither
 * overlayfs (its clone of the lower layer) nor open_tree without
 * AT_RECURSIVE may take a directory with locked mounts beneath it (EINVAL,
 * "overlayfs: failed to clone lowerpath"; fs/namespace.c,
 * has_locked_children). Called by sbx_fs_setup with the host view intact
 * (sbx_overlay_plan) and once the staging tmpfs is on /tmp
 * (sbx_overlay_mount), before anything else is attached on top. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "common/log.h"
#include "common/util.h"
#include "sandbox/internal.h"

#define OVL_STAGE "ovl" /* in the staging tmpfs, reached as /tmp/ovl */

static const char *const left_out[] = {"proc", "dev",  "sys",  "tmp",
                                       "run",  "home", "root", "lost+found"};

static bool
is_left_out(const char *name)
{
	for (size_t i = 0; i < ARRAY_SIZE(left_out); i++)
		if (strcmp(name, left_out[i]) == 0)
			return true;
	return false;
}

/* Whether a mount point lies beneath /name (mountinfo's fifth field). */
static bool
has_submount(const char *mountinfo, const char *name)
{
	size_t nl = strlen(name);

	for (const char *line = mountinfo; *line != '\0';) {
		const char *eol = strchr(line, '\n');
		const char *f = line;

		if (eol == NULL)
			eol = line + strlen(line);
		for (int i = 0; i < 4 && f != NULL && f < eol; i++) {
			f = memchr(f, ' ', (size_t)(eol - f));
			if (f != NULL)
				f++;
		}
		if (f != NULL && f < eol && (size_t)(eol - f) > nl + 1 && f[0] == '/' &&
		    memcmp(f + 1, name, nl) == 0 && (f[nl + 1] == '/' || f[nl + 1] == ' '))
			return true;
		line = *eol == '\n' ? eol + 1 : eol;
	}
	return false;
}

static int
read_mountinfo(char **out)
{
	size_t size = 1 << 16, got = 0;
	char *buf = malloc(size);
	int fd = open("/proc/self/mountinfo", O_RDONLY | O_CLOEXEC);
	ssize_t n;

	if (buf == NULL || fd < 0)
		goto fail;
	for (;;) {
		if (got + 1 >= size) {
			char *b = size < (1u << 24) ? realloc(buf, size * 2) : NULL;
			if (b == NULL)
				goto fail;
			buf = b;
			size *= 2;
		}
		n = read(fd, buf + got, size - 1 - got);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			goto fail;
		if (n == 0)
			break;
		got += (size_t)n;
	}
	buf[got] = '\0';
	fd_close(&fd);
	*out = buf;
	return 0;
fail:
	fd_close(&fd);
	free(buf);
	return -1;
}

int
sbx_overlay_plan(const struct sbx *s, struct sbx_overlay *ov, char *err, size_t errlen)
{
	char *mi = NULL;
	struct stat rootst, st;
	struct dirent *e;
	DIR *d;

	ov->n = 0;
	ov->keep_tree = -1;
	if (!s->cfg->overlay)
		return 0;
	if (s->cfg->overlay_keep != NULL) {
		ov->keep_tree = open_tree(AT_FDCWD, s->cfg->overlay_keep,
		                          OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC);
		if (ov->keep_tree < 0) {
			snprintf(err, errlen, "--overlay-keep %s: %s", s->cfg->overlay_keep,
			         strerror(errno));
			return -1;
		}
	}
	if (stat("/", &rootst) < 0 || read_mountinfo(&mi) < 0 || (d = opendir("/")) == NULL) {
		snprintf(err, errlen, "--overlay: read the host's root: %s", strerror(errno));
		free(mi);
		return -1;
	}
	while ((e = readdir(d)) != NULL && ov->n < SBX_OVERLAY_MAX) {
		if (e->d_name[0] == '.' || is_left_out(e->d_name) ||
		    strlen(e->d_name) >= sizeof(ov->name[0]))
			continue;
		if (fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0 ||
		    !S_ISDIR(st.st_mode) || st.st_dev != rootst.st_dev)
			continue;
		if (has_submount(mi, e->d_name)) {
			log_debug("overlay: /%s left read-only: a mount lies beneath it "
			          "(the kernel refuses it as a lower layer)",
			          e->d_name);
			continue;
		}
		str_copy(ov->name[ov->n++], e->d_name, sizeof(ov->name[0]));
	}
	closedir(d);
	free(mi);
	return 0;
}

/* lstat of /name, the host's top-level directory. */
static int
stat_top(const char *name, struct stat *st)
{
	char p[80];

	snprintf(p, sizeof(p), "/%s", name);
	return lstat(p, st);
}

/* mkdir -p of one more level; EEXIST is fine. */
static int
mkdir_at(int dir, const char *name)
{
	return mkdirat(dir, name, 0755) < 0 && errno != EEXIST ? -1 : 0;
}

/* One overlayfs over /name: lower the host's, upper and work under base. */
static int
mount_one(const char *base, const char *name, char *err, size_t errlen)
{
	char lower[PATH_MAX], upper[PATH_MAX], work[PATH_MAX];
	struct open_how how = {.flags = O_PATH | O_DIRECTORY | O_CLOEXEC,
	                       .resolve = RESOLVE_NO_SYMLINKS | RESOLVE_NO_XDEV};
	int fs, mnt = -1, t = -1, rc = -1;

	if ((size_t)snprintf(lower, sizeof(lower), "/%s", name) >= sizeof(lower) ||
	    (size_t)snprintf(upper, sizeof(upper), "%s/upper/%s", base, name) >= sizeof(upper) ||
	    (size_t)snprintf(work, sizeof(work), "%s/work/%s", base, name) >= sizeof(work)) {
		snprintf(err, errlen, "--overlay: /%s: name too long", name);
		return -1;
	}
	fs = fsopen("overlay", FSOPEN_CLOEXEC);
	if (fs < 0) {
		snprintf(err, errlen, "--overlay: overlayfs: %s", strerror(errno));
		return -1;
	}
	/* userxattr: the whiteouts' and opaque dirs' marks as user.overlay.*
	 * xattrs, which a user namespace may write (airlock diff reads them). */
	if (fsconfig(fs, FSCONFIG_SET_STRING, "lowerdir", lower, 0) < 0 ||
	    fsconfig(fs, FSCONFIG_SET_STRING, "upperdir", upper, 0) < 0 ||
	    fsconfig(fs, FSCONFIG_SET_STRING, "workdir", work, 0) < 0 ||
	    fsconfig(fs, FSCONFIG_SET_FLAG, "userxattr", NULL, 0) < 0 ||
	    fsconfig(fs, FSCONFIG_CMD_CREATE, NULL, NULL, 0) < 0) {
		snprintf(err, errlen, "--overlay: overlayfs on %s (upper %s): %s", lower, upper,
		         strerror(errno));
		goto out;
	}
	mnt = fsmount(fs, FSMOUNT_CLOEXEC, MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV);
	t = (int)syscall(SYS_openat2, AT_FDCWD, lower, &how, sizeof(how));
	if (mnt < 0 || t < 0 ||
	    move_mount(mnt, "", t, "", MOVE_MOUNT_F_EMPTY_PATH | MOVE_MOUNT_T_EMPTY_PATH) < 0) {
		snprintf(err, errlen, "--overlay: mount on %s: %s", lower, strerror(errno));
		goto out;
	}
	rc = 0;
out:
	fd_close(&t);
	fd_close(&mnt);
	fd_close(&fs);
	return rc;
}

int
sbx_overlay_mount(struct sbx_overlay *ov, int stage, const char *stage_path, char *err,
                  size_t errlen)
{
	char base[64];
	int dir = -1, up = -1, wk = -1, rc = -1;

	if (ov->n == 0 && ov->keep_tree < 0)
		return 0;
	if (mkdir_at(stage, OVL_STAGE) < 0) {
		snprintf(err, errlen, "--overlay: staging: %s", strerror(errno));
		return -1;
	}
	if (ov->keep_tree >= 0) {
		int t = openat(stage, OVL_STAGE, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (t < 0 || move_mount(ov->keep_tree, "", t, "",
		                        MOVE_MOUNT_F_EMPTY_PATH | MOVE_MOUNT_T_EMPTY_PATH) < 0) {
			snprintf(err, errlen, "--overlay-keep: attach: %s", strerror(errno));
			fd_close(&t);
			return -1;
		}
		fd_close(&t);
		fd_close(&ov->keep_tree);
	}
	if ((size_t)snprintf(base, sizeof(base), "%s/" OVL_STAGE, stage_path) >= sizeof(base)) {
		snprintf(err, errlen, "--overlay: staging path too long");
		return -1;
	}
	dir = openat(stage, OVL_STAGE, O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (dir < 0 || mkdir_at(dir, "upper") < 0 || mkdir_at(dir, "work") < 0 ||
	    (up = openat(dir, "upper", O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) < 0 ||
	    (wk = openat(dir, "work", O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) < 0) {
		snprintf(err, errlen, "--overlay: %s/upper, work: %s", base, strerror(errno));
		goto out;
	}
	for (size_t i = 0; i < ov->n; i++) {
		struct stat st;

		/* The merged top directory shows the upper's owner and mode:
		 * the host's mode (its owner is the creator's: root's as root,
		 * the caller's rootless). */
		if (mkdir_at(up, ov->name[i]) < 0 || mkdir_at(wk, ov->name[i]) < 0 ||
		    stat_top(ov->name[i], &st) < 0 ||
		    fchmodat(up, ov->name[i], st.st_mode & 07777, 0) < 0) {
			snprintf(err, errlen, "--overlay: %s/upper/%s: %s", base, ov->name[i],
			         strerror(errno));
			goto out;
		}
		if (mount_one(base, ov->name[i], err, errlen) < 0)
			goto out;
	}
	log_debug("overlay: %zu directories", ov->n);
	rc = 0;
out:
	fd_close(&up);
	fd_close(&wk);
	fd_close(&dir);
	return rc;
}

void
sbx_overlay_free(struct sbx_overlay *ov)
{
	fd_close(&ov->keep_tree);
}
