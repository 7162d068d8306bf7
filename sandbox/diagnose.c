/* Why the kernel refused the sandbox's namespaces or its /proc, in one
 * line that names the setting and its value (docs/run.md, Diagnosis).
 * Every file is read under root ("" for this machine; the unit tests give
 * a directory standing in for it), so the causes can be told apart
 * without the machine being in that state. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "sandbox/internal.h"

/* The first line of root/path as a number: 0 and *v set, or -1 if the
 * file is missing or does not hold one. */
static int
read_long(const char *root, const char *path, long *v)
{
	char p[PATH_MAX];
	char buf[64];
	char *end;
	ssize_t n;
	int fd;

	snprintf(p, sizeof(p), "%s%s", root, path);
	fd = open(p, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return -1;
	buf[n] = '\0';
	errno = 0;
	*v = strtol(buf, &end, 10);
	if (errno != 0 || end == buf || (*end != '\n' && *end != '\0'))
		return -1;
	return 0;
}

/* The Seccomp: field of root/proc/self/status (0 none, 1 strict, 2 filter),
 * or -1 if unknown. */
long
sbx_seccomp_mode(const char *root)
{
	char p[PATH_MAX];
	char line[256];
	long mode = -1;
	FILE *f;

	snprintf(p, sizeof(p), "%s/proc/self/status", root);
	f = fopen(p, "re");
	if (f == NULL)
		return -1;
	while (fgets(line, sizeof(line), f) != NULL) {
		char *end;
		if (strncmp(line, "Seccomp:", 8) != 0)
			continue;
		mode = strtol(line + 8, &end, 10);
		if (end == line + 8)
			mode = -1;
		break;
	}
	fclose(f);
	return mode;
}

/* In a chroot, / is not the root of pid 1's (or our own mount namespace's)
 * tree; the kernel then refuses CLONE_NEWUSER with EPERM. */
static bool
in_chroot(const char *root)
{
	char p[PATH_MAX];
	struct stat here, init;

	snprintf(p, sizeof(p), "%s/", root);
	if (stat(p, &here) < 0)
		return false;
	snprintf(p, sizeof(p), "%s/proc/1/root/", root);
	if (stat(p, &init) < 0)
		return false;
	return here.st_dev != init.st_dev || here.st_ino != init.st_ino;
}

void
sbx_diagnose_userns(const char *root, int e, char *err, size_t errlen)
{
	static const char pre[] = "cannot create the sandbox's namespaces: clone";
	long v;

	if (e == ENOSPC || e == EUSERS) {
		if (read_long(root, "/proc/sys/user/max_user_namespaces", &v) == 0)
			snprintf(err, errlen,
			         "%s: %s; the namespace limit is reached: sysctl "
			         "user.max_user_namespaces is %ld, raise it (and "
			         "user.max_net_namespaces, user.max_mnt_namespaces)",
			         pre, strerror(e), v);
		else
			snprintf(err, errlen,
			         "%s: %s; the namespace limit is reached: raise sysctl "
			         "user.max_user_namespaces (and user.max_net_namespaces, "
			         "user.max_mnt_namespaces)",
			         pre, strerror(e));
		return;
	}
	if (e != EPERM && e != EACCES) {
		snprintf(err, errlen, "%s: %s", pre, strerror(e));
		return;
	}
	if (read_long(root, "/proc/sys/user/max_user_namespaces", &v) == 0 && v == 0) {
		snprintf(err, errlen,
		         "%s: %s; user namespaces are disabled: sysctl "
		         "user.max_user_namespaces is 0 (must be > 0)",
		         pre, strerror(e));
		return;
	}
	if (read_long(root, "/proc/sys/kernel/unprivileged_userns_clone", &v) == 0 && v == 0) {
		snprintf(err, errlen,
		         "%s: %s; unprivileged user namespaces are disabled: sysctl "
		         "kernel.unprivileged_userns_clone is 0 (must be 1)",
		         pre, strerror(e));
		return;
	}
	if (read_long(root, "/proc/sys/kernel/apparmor_restrict_unprivileged_userns", &v) == 0 &&
	    v != 0) {
		snprintf(err, errlen,
		         "%s: %s; AppArmor restricts user namespaces: sysctl "
		         "kernel.apparmor_restrict_unprivileged_userns is %ld: give "
		         "airlock an AppArmor profile granting 'userns,' or set it to 0",
		         pre, strerror(e), v);
		return;
	}
	if (in_chroot(root)) {
		snprintf(err, errlen,
		         "%s: %s; this process is in a chroot, where the kernel refuses new "
		         "user namespaces: run airlock outside it",
		         pre, strerror(e));
		return;
	}
	v = sbx_seccomp_mode(root);
	if (v > 0) {
		snprintf(err, errlen,
		         "%s: %s; a seccomp filter is applied (Seccomp: %ld in /proc/self/status): "
		         "already sandboxed or a container runtime's seccomp profile: give "
		         "the container airlock's (contrib/seccomp/airlock.json; Docker, "
		         "Podman: --security-opt seccomp=airlock.json; Kubernetes: "
		         "securityContext.seccompProfile type Localhost)",
		         pre, strerror(e), v);
		return;
	}
	snprintf(err, errlen,
	         "%s: %s; unprivileged user namespaces are refused here, for no reason "
	         "airlock can see (sysctls, AppArmor, chroot, seccomp all allow them)",
	         pre, strerror(e));
}

/* Whether anything is mounted below root/proc in our mount namespace: the
 * kernel refuses a new proc to a user namespace when the one it could see
 * is partly covered (Docker's and Kubernetes' masked paths). */
bool
sbx_proc_masked(const char *root)
{
	char p[PATH_MAX];
	char line[4096];
	bool masked = false;
	FILE *f;

	snprintf(p, sizeof(p), "%s/proc/self/mountinfo", root);
	f = fopen(p, "re");
	if (f == NULL)
		return false;
	while (!masked && fgets(line, sizeof(line), f) != NULL) {
		/* "id parent major:minor root mountpoint ..." */
		char mnt[PATH_MAX];
		if (sscanf(line, "%*s %*s %*s %*s %4095s", mnt) == 1 &&
		    strncmp(mnt, "/proc/", 6) == 0)
			masked = true;
	}
	fclose(f);
	return masked;
}

bool
sbx_diagnose_proc(const char *root, int e, char *err, size_t errlen)
{
	if (e != EPERM || !sbx_proc_masked(root))
		return false;
	snprintf(err, errlen,
	         "filesystem: mount /proc: %s; this /proc has masked entries (a "
	         "container's masked paths), so the kernel refuses a new one: run the "
	         "container with --security-opt systempaths=unconfined (Docker, "
	         "Podman) or securityContext.procMount: Unmasked (Kubernetes)",
	         strerror(e));
	return true;
}
