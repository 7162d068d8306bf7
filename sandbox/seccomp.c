/* The seccomp filter CMD runs under (docs/run.md, seccomp): default allow,
 * EPERM for the syscalls a build never needs and that widen the kernel
 * attack surface or could undo the sandbox, and a user notification for
 * the calls that can reach a unix socket by its path, which the
 * supervisor's gate answers (unixgate.c). */
#include <errno.h>
#include <sched.h>
#include <stdbool.h>
#include <sys/socket.h>
#include <seccomp.h>
#include <stdio.h>
#include <string.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stdlib.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "common/confine_gen.h"
#include "common/util.h"
#include "sandbox/internal.h"

#ifndef CLONE_NEWTIME
#define CLONE_NEWTIME 0x00000080
#endif

/* Refused outright with EPERM. */
static const char *const denied[] = {
        /* kernel code and kernel-side programs */
        "kexec_load",
        "kexec_file_load",
        "init_module",
        "finit_module",
        "delete_module",
        "bpf",
        "perf_event_open",
        /* the kernel keyring is not namespaced: keep CMD out of it */
        "keyctl",
        "add_key",
        "request_key",
        /* a classic exploit helper; builds do not use it */
        "userfaultfd",
        /* the filesystem view is final once set up */
        "mount",
        "umount2",
        "pivot_root",
        "move_mount",
        "open_tree",
        "fsopen",
        "fsmount",
        "fsconfig",
        "fspick",
        "mount_setattr",
        "chroot",
        /* no joining other namespaces */
        "setns",
        /* io_uring bypasses per-syscall filtering; its users fall back */
        "io_uring_setup",
        "io_uring_enter",
        "io_uring_register",
        /* host-wide administration nobody in a sandbox needs */
        "acct",
        "swapon",
        "swapoff",
        "reboot",
        "syslog",
        "quotactl",
        "open_by_handle_at",
        "lookup_dcookie",
        "uselib",
        "vhangup",
        "iopl",
        "ioperm",
        "settimeofday",
        "clock_settime",
        "clock_adjtime",
        "adjtimex",
};

/* Namespace flags: any of them in clone/unshare is refused. A new user
 * namespace would give CMD capabilities again; the others need one. */
static const unsigned long ns_flags[] = {
        CLONE_NEWUSER, CLONE_NEWNET, CLONE_NEWNS,     CLONE_NEWPID,
        CLONE_NEWUTS,  CLONE_NEWIPC, CLONE_NEWCGROUP, CLONE_NEWTIME,
};

/* socket() and socketpair() get these families only; everything else
 * (AF_VSOCK to the hypervisor, AF_PACKET, AF_BLUETOOTH, AF_ALG, ...) fails
 * with EAFNOSUPPORT, as on a kernel without them. AF_NETLINK stays for
 * getifaddrs() and the like (the netns has only lo). */
static const int families_allowed[] = {AF_UNIX, AF_INET, AF_INET6, AF_NETLINK};

static bool
family_allowed(unsigned long fam)
{
	for (size_t i = 0; i < ARRAY_SIZE(families_allowed); i++)
		if ((unsigned long)families_allowed[i] == fam)
			return true;
	return false;
}

/* The filter allows by default, so the allowlist is written as denials:
 * every family below the largest allowed one that is not allowed, then
 * anything above it. The comparison is on the whole 64-bit register: a
 * family with high bits set is above the largest and refused, though the
 * kernel would only look at the low 32. */
static int
add_family_rules(scmp_filter_ctx ctx, char *err, size_t errlen)
{
	static const char *const calls[] = {"socket", "socketpair"};
	unsigned long max = 0;
	struct scmp_arg_cmp a;

	for (size_t i = 0; i < ARRAY_SIZE(families_allowed); i++)
		if ((unsigned long)families_allowed[i] > max)
			max = (unsigned long)families_allowed[i];
	for (size_t c = 0; c < ARRAY_SIZE(calls); c++) {
		for (unsigned long fam = 0; fam < max; fam++) {
			if (family_allowed(fam))
				continue;
			a = (struct scmp_arg_cmp){
			        .arg = 0, .op = SCMP_CMP_EQ, .datum_a = fam, .datum_b = 0};
			if (confine_rule_add(ctx, SCMP_ACT_ERRNO(EAFNOSUPPORT), calls[c], 1, &a,
			                     err, errlen) < 0)
				return -1;
		}
		a = (struct scmp_arg_cmp){
		        .arg = 0, .op = SCMP_CMP_GT, .datum_a = max, .datum_b = 0};
		if (confine_rule_add(ctx, SCMP_ACT_ERRNO(EAFNOSUPPORT), calls[c], 1, &a, err,
		                     errlen) < 0)
			return -1;
	}
	return 0;
}

/* The calls that can name a destination: connect, sendto with an address
 * (send() is sendto with none, and goes unnotified: it can only reach the
 * peer a connect already chose), sendmsg and sendmmsg (their msghdr is in
 * memory the filter cannot read, so every one is notified). For 32-bit x86
 * libseccomp adds the same for socketcall's multiplexed forms, whose
 * arguments are in memory: each of those is notified. */
static int
add_notify_rules(scmp_filter_ctx ctx, char *err, size_t errlen)
{
	struct scmp_arg_cmp a = {.arg = 4, .op = SCMP_CMP_NE, .datum_a = 0, .datum_b = 0};

	/* A filter of CMD's own with a listener would get these
	 * notifications instead (the newest filter returning USER_NOTIF
	 * wins) and could answer "continue"; the kernel refuses a second
	 * listener in one task's chain (EBUSY) while ours is open, and the
	 * sandbox does not outlive ours. tests/sandbox/seccomp.sh checks. */
	if (confine_rule_add(ctx, SCMP_ACT_NOTIFY, "connect", 0, NULL, err, errlen) < 0 ||
	    confine_rule_add(ctx, SCMP_ACT_NOTIFY, "sendto", 1, &a, err, errlen) < 0 ||
	    confine_rule_add(ctx, SCMP_ACT_NOTIFY, "sendmsg", 0, NULL, err, errlen) < 0 ||
	    confine_rule_add(ctx, SCMP_ACT_NOTIFY, "sendmmsg", 0, NULL, err, errlen) < 0)
		return -1;
	return 0;
}

/* Compile the filter to classic BPF in memory. Done at build time by
 * gen_seccomp (seccomp_prebuilt.c). */
static int
export_bpf(scmp_filter_ctx ctx, struct sbx_filter *f, char *err, size_t errlen)
{
	return confine_bpf_export(ctx, &f->insns, &f->len, err, errlen);
}

void
sbx_seccomp_free(struct sbx_filter *f)
{
	free(f->insns);
	f->insns = NULL;
	f->len = 0;
}

int
sbx_seccomp_install(const struct sbx_filter *f, char *err, size_t errlen)
{
	struct sock_fprog prog = {.len = f->len, .filter = f->insns};
	long fd;

	if (f->insns == NULL) {
		snprintf(err, errlen, "seccomp: install: no filter");
		return -1;
	}
	/* Killable waits (Linux 5.19): once the gate has taken a call, only a
	 * fatal signal interrupts CMD's wait for the answer. Otherwise a
	 * signal handler would restart a connect the gate already made. */
	fd = syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER,
	             SECCOMP_FILTER_FLAG_NEW_LISTENER | SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV,
	             &prog);
	if (fd < 0 && errno == EINVAL)
		fd = syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, SECCOMP_FILTER_FLAG_NEW_LISTENER,
		             &prog);
	if (fd < 0) {
		snprintf(err, errlen, "seccomp: install: %s", strerror(errno));
		return -1;
	}
	return (int)fd;
}

int
sbx_seccomp_compile(struct sbx_filter *f, char *err, size_t errlen)
{
	scmp_filter_ctx ctx;
	struct scmp_arg_cmp a;
	int rc;

	f->insns = NULL;
	f->len = 0;
	ctx = seccomp_init(SCMP_ACT_ALLOW);
	if (ctx == NULL) {
		snprintf(err, errlen, "seccomp: init failed");
		return -1;
	}
	/* A binary tree of syscall numbers instead of a list. At install the
	 * kernel runs the filter once for every syscall number of both ABIs
	 * to find those it always allows (seccomp_cache_prepare). Through
	 * libseccomp's default list of comparisons that took 170 us of init's
	 * set-up, through the tree 80 us (300 installs each, medians). */
	if ((rc = seccomp_attr_set(ctx, SCMP_FLTATR_CTL_OPTIMIZE, 2)) < 0) {
		snprintf(err, errlen, "seccomp: optimize: %s", strerror(-rc));
		goto fail;
	}
	/* 32-bit x86 programs get the same rules instead of a kill; x32 and
	 * any other ABI hit the default bad-arch action (kill). */
	if (seccomp_arch_native() == SCMP_ARCH_X86_64 &&
	    (rc = seccomp_arch_add(ctx, SCMP_ARCH_X86)) < 0 && rc != -EEXIST) {
		snprintf(err, errlen, "seccomp: add x86 arch: %s", strerror(-rc));
		goto fail;
	}
	for (size_t i = 0; i < ARRAY_SIZE(denied); i++)
		if (confine_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), denied[i], 0, NULL, err, errlen) <
		    0)
			goto fail;
	for (size_t i = 0; i < ARRAY_SIZE(ns_flags); i++) {
		a = (struct scmp_arg_cmp)SCMP_A0(SCMP_CMP_MASKED_EQ, ns_flags[i], ns_flags[i]);
		if (confine_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), "unshare", 1, &a, err, errlen) <
		            0 ||
		    confine_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), "clone", 1, &a, err, errlen) < 0)
			goto fail;
	}
	/* clone3 passes its flags in memory seccomp cannot read: ENOSYS makes
	 * libc fall back to clone, whose flags are checked above. */
	if (confine_rule_add(ctx, SCMP_ACT_ERRNO(ENOSYS), "clone3", 0, NULL, err, errlen) < 0)
		goto fail;
	/* Typing into the terminal CMD shares with the caller's shell would
	 * run commands outside the sandbox (TIOCSTI); TIOCLINUX can too.
	 * Compare the low 32 bits only: the kernel ignores the rest. */
	a = (struct scmp_arg_cmp)SCMP_A1(SCMP_CMP_MASKED_EQ, 0xffffffffu, TIOCSTI);
	if (confine_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), "ioctl", 1, &a, err, errlen) < 0)
		goto fail;
	a = (struct scmp_arg_cmp)SCMP_A1(SCMP_CMP_MASKED_EQ, 0xffffffffu, TIOCLINUX);
	if (confine_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), "ioctl", 1, &a, err, errlen) < 0)
		goto fail;
	if (add_family_rules(ctx, err, errlen) < 0)
		goto fail;
	if (add_notify_rules(ctx, err, errlen) < 0)
		goto fail;
	if (export_bpf(ctx, f, err, errlen) < 0)
		goto fail;
	seccomp_release(ctx);
	return 0;
fail:
	seccomp_release(ctx);
	return -1;
}
