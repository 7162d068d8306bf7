/* Why the sandbox cannot be made here (diagnose.h). Each cause gets one
 * line naming the setting, its value and the fix, because the fixes differ:
 * a sysctl is the host's administrator's, a seccomp profile or a masked
 * /proc the container's, a chroot the caller's. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/util.h"
#include "sandbox/diagnose.h"

/* The first number in a small file, or -1. */
static long
read_long(const char *path)
{
	char buf[64];
	long v;
	ssize_t n;
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		return -1;
	n = read(fd, buf, sizeof(buf) - 1);
	fd_close(&fd);
	if (n <= 0)
		return -1;
	buf[n] = '\0';
	if (sscanf(buf, "%ld", &v) != 1)
		return -1;
	return v;
}

static long
read_seccomp(void)
{
	char buf[4096];
	const char *p;
	long v;
	ssize_t n;
	int fd = open("/proc/self/status", O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		return -1;
	n = read(fd, buf, sizeof(buf) - 1);
	fd_close(&fd);
	if (n <= 0)
		return -1;
	buf[n] = '\0';
	p = strstr(buf, "\nSeccomp:");
	if (p == NULL || sscanf(p + strlen("\nSeccomp:"), "%ld", &v) != 1)
		return -1;
	return v;
}

/* A mount point of /proc/self/mountinfo (the fifth field), unescaped
 * enough to compare: octal escapes are left as they are. */
static bool
mount_point(const char *line, char *out, size_t outlen)
{
	const char *p = line;

	for (int i = 0; i < 4; i++) {
		p = strchr(p, ' ');
		if (p == NULL)
			return false;
		p++;
	}
	size_t len = strcspn(p, " \n");
	if (len == 0 || len >= outlen)
		return false;
	memcpy(out, p, len);
	out[len] = '\0';
	return true;
}

/* Mounts under /proc, as container runtimes make them (maskedPaths over
 * /proc/kcore and others, /proc/sys read-only over itself), make the
 * kernel refuse a new proc mount in a user namespace: it may not reveal
 * what they cover. binfmt_misc sits on a directory that is always empty,
 * which the kernel allows. Also: is "/" a mount point of ours at all
 * (not in a chroot of a directory)? */
static void
read_mounts(struct sbx_diag_facts *f)
{
	char line[4096], mp[PATH_MAX];
	bool root = false;
	FILE *m = fopen("/proc/self/mountinfo", "re");

	if (m == NULL)
		return;
	bool start = true; /* line starts a line of the file */

	while (fgets(line, sizeof(line), m) != NULL) {
		bool whole = strchr(line, '\n') != NULL;
		bool ok = start && mount_point(line, mp, sizeof(mp));

		/* The rest of a line longer than the buffer is no mount. */
		start = whole;
		if (!ok)
			continue;
		if (strcmp(mp, "/") == 0)
			root = true;
		if (strncmp(mp, "/proc/", 6) == 0 && strcmp(mp, "/proc/sys/fs/binfmt_misc") != 0 &&
		    !f->proc_masked) {
			f->proc_masked = true;
			str_copy(f->proc_mask, mp, sizeof(f->proc_mask));
		}
	}
	fclose(m);
	f->chrooted = f->chrooted || !root;
}

void
sbx_diag_read(struct sbx_diag_facts *f)
{
	struct stat a, b;

	memset(f, 0, sizeof(*f));
	f->max_user_namespaces = read_long("/proc/sys/user/max_user_namespaces");
	f->unprivileged_userns_clone = read_long("/proc/sys/kernel/unprivileged_userns_clone");
	f->apparmor_restrict = read_long("/proc/sys/kernel/apparmor_restrict_unprivileged_userns");
	f->seccomp = read_seccomp();
	/* pid 1's root is its mount namespace's (readable as root only). */
	if (stat("/", &a) == 0 && stat("/proc/1/root/.", &b) == 0)
		f->chrooted = a.st_dev != b.st_dev || a.st_ino != b.st_ino;
	read_mounts(f);
}

void
sbx_diag_userns(int e, const struct sbx_diag_facts *f, char *out, size_t outlen)
{
	static const char head[] = "cannot create the sandbox's namespaces: clone";

	if (e == ENOSPC || e == EUSERS) {
		snprintf(out, outlen,
		         "%s: %s; the namespace limit is reached: raise sysctl "
		         "user.max_user_namespaces (now %ld; and user.max_net_namespaces, "
		         "user.max_mnt_namespaces)",
		         head, strerror(e), f->max_user_namespaces);
		return;
	}
	if (e != EPERM && e != EACCES) {
		snprintf(out, outlen, "%s: %s", head, strerror(e));
		return;
	}
	/* The host's settings first: they hold whatever else is true. */
	if (f->max_user_namespaces == 0)
		snprintf(out, outlen,
		         "%s: %s; user namespaces are disabled: sysctl user.max_user_namespaces "
		         "is 0 (must be > 0)",
		         head, strerror(e));
	else if (f->unprivileged_userns_clone == 0)
		snprintf(out, outlen,
		         "%s: %s; unprivileged user namespaces are disabled: sysctl "
		         "kernel.unprivileged_userns_clone is 0 (must be 1)",
		         head, strerror(e));
	else if (f->seccomp > 0)
		snprintf(out, outlen,
		         "%s: %s; a seccomp filter refuses it (Seccomp: %ld in /proc/self/status): "
		         "airlock is already sandboxed, or a container runtime's seccomp profile "
		         "applies: run the container with airlock's profile (docker/podman run "
		         "--security-opt seccomp=airlock.json from contrib/seccomp; Kubernetes "
		         "seccompProfile type: Localhost; docs/deploy.md)",
		         head, strerror(e), f->seccomp);
	else if (f->chrooted)
		snprintf(out, outlen,
		         "%s: %s; airlock runs in a chroot, where the kernel refuses new user "
		         "namespaces: run it outside the chroot, or in a container instead",
		         head, strerror(e));
	else if (f->apparmor_restrict > 0)
		snprintf(out, outlen,
		         "%s: %s; AppArmor restricts unprivileged user namespaces: sysctl "
		         "kernel.apparmor_restrict_unprivileged_userns is %ld: install airlock's "
		         "AppArmor profile (meson -Dapparmor=true; docs/deploy.md) or set it to 0",
		         head, strerror(e), f->apparmor_restrict);
	else
		snprintf(out, outlen,
		         "%s: %s; unprivileged user namespaces are disabled here: check sysctl "
		         "user.max_user_namespaces (must be > 0), "
		         "kernel.apparmor_restrict_unprivileged_userns (must be 0, or give "
		         "airlock an AppArmor profile with 'userns,'), and on older "
		         "Debian/Ubuntu kernel.unprivileged_userns_clone (must be 1)",
		         head, strerror(e));
}

void
sbx_diag_proc(int e, const struct sbx_diag_facts *f, char *out, size_t outlen)
{
	out[0] = '\0';
	if (e != EPERM && e != EACCES)
		return;
	if (f->proc_masked)
		snprintf(out, outlen,
		         "; /proc is masked here (%s is covered, as container runtimes do), so "
		         "the kernel refuses a fresh /proc: run the container with "
		         "--security-opt systempaths=unconfined (Docker, Podman) or "
		         "securityContext procMount: Unmasked (Kubernetes, with hostUsers: false)",
		         f->proc_mask);
	else
		snprintf(out, outlen,
		         "; the kernel refuses a fresh /proc where the existing one is partly "
		         "hidden or read-only (a container's masked /proc): see docs/deploy.md");
}
