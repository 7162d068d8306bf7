/* See confine_gen.h. libseccomp writes the program to an fd: a memfd. */
#include "common/confine_gen.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/filter.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/util.h"

int
confine_rule_add(scmp_filter_ctx ctx, uint32_t action, const char *name, unsigned nargs,
                 const struct scmp_arg_cmp *args, char *err, size_t errlen)
{
	int nr = seccomp_syscall_resolve_name(name);
	int rc;

	/* A syscall this architecture does not have needs no rule. */
	if (nr == __NR_SCMP_ERROR)
		return 0;
	rc = seccomp_rule_add_array(ctx, action, nr, nargs, args);
	if (rc < 0) {
		snprintf(err, errlen, "seccomp: rule for %s: %s", name, strerror(-rc));
		return -1;
	}
	return 0;
}

int
confine_add_common(scmp_filter_ctx ctx, char *err, size_t errlen)
{
	static const int cmds[] = {F_GETFD,         F_SETFD,      F_GETFL,
	                           F_DUPFD_CLOEXEC, F_SETPIPE_SZ, F_GETPIPE_SZ};
	struct scmp_arg_cmp setfl[2] = {SCMP_A1(SCMP_CMP_EQ, F_SETFL, 0),
	                                SCMP_A2(SCMP_CMP_MASKED_EQ, O_ASYNC, 0)};
	struct scmp_arg_cmp self = SCMP_A0(SCMP_CMP_EQ, 0, 0);

	for (size_t i = 0; i < sizeof(cmds) / sizeof(cmds[0]); i++) {
		struct scmp_arg_cmp c = SCMP_A1(SCMP_CMP_EQ, (scmp_datum_t)cmds[i], 0);

		if (confine_rule_add(ctx, SCMP_ACT_ALLOW, "fcntl", 1, &c, err, errlen) < 0)
			return -1;
	}
	if (confine_rule_add(ctx, SCMP_ACT_ALLOW, "fcntl", 2, setfl, err, errlen) < 0)
		return -1;
	return confine_rule_add(ctx, SCMP_ACT_ALLOW, "prlimit64", 1, &self, err, errlen);
}

/* What every confined process of airlock needs, whatever else it does:
 * its waits and clocks, writing and closing what it holds, the datagrams
 * of its socketpairs, memory (mmap and mprotect, never executable, are
 * added below), threads' futexes, signals' returns and its exit.
 * AddressSanitizer asks for the signal stack before every noreturn call
 * (_exit): memory of its own, nothing else. */
static const char *const base[] = {
        "poll",     "ppoll",      "clock_gettime", "clock_getres",   "gettimeofday",
        "time",     "write",      "writev",        "close",          "sendto",
        "recvfrom", "brk",        "munmap",        "mremap",         "madvise",
        "exit",     "exit_group", "rt_sigreturn",  "rt_sigprocmask", "restart_syscall",
        "getpid",   "gettid",     "futex",         "sigaltstack",
};

scmp_filter_ctx
confine_filter_begin(uint32_t dflt, const char *const *allowed, size_t n, char *err, size_t errlen)
{
	scmp_filter_ctx ctx = seccomp_init(dflt);
	struct scmp_arg_cmp noexec = SCMP_A2(SCMP_CMP_MASKED_EQ, PROT_EXEC, 0);
	int rc;

	if (ctx == NULL) {
		snprintf(err, errlen, "seccomp: init failed");
		return NULL;
	}
	/* Only the native architecture is in the filter: the others take
	 * the bad-arch action. */
	if ((rc = seccomp_attr_set(ctx, SCMP_FLTATR_ACT_BADARCH, SCMP_ACT_KILL_PROCESS)) < 0 ||
	    (rc = seccomp_attr_set(ctx, SCMP_FLTATR_CTL_OPTIMIZE, 2)) < 0) {
		snprintf(err, errlen, "seccomp: attributes: %s", strerror(-rc));
		goto fail;
	}
	for (size_t i = 0; i < sizeof(base) / sizeof(base[0]); i++)
		if (confine_rule_add(ctx, SCMP_ACT_ALLOW, base[i], 0, NULL, err, errlen) < 0)
			goto fail;
	for (size_t i = 0; i < n; i++)
		if (confine_rule_add(ctx, SCMP_ACT_ALLOW, allowed[i], 0, NULL, err, errlen) < 0)
			goto fail;
	/* Memory, never executable: no new code in a compromised process. */
	if (confine_add_common(ctx, err, errlen) < 0 ||
	    confine_rule_add(ctx, SCMP_ACT_ALLOW, "mmap", 1, &noexec, err, errlen) < 0 ||
	    confine_rule_add(ctx, SCMP_ACT_ALLOW, "mprotect", 1, &noexec, err, errlen) < 0)
		goto fail;
	return ctx;
fail:
	seccomp_release(ctx);
	return NULL;
}

int
confine_add_inet_socket(scmp_filter_ctx ctx, char *err, size_t errlen)
{
	static const int families[] = {AF_INET, AF_INET6};
	static const int types[] = {SOCK_STREAM, SOCK_DGRAM};

	/* The family on the low 32 bits (the kernel's int); the type
	 * without its SOCK_NONBLOCK/SOCK_CLOEXEC flags. */
	for (size_t i = 0; i < sizeof(families) / sizeof(families[0]); i++) {
		for (size_t t = 0; t < sizeof(types) / sizeof(types[0]); t++) {
			struct scmp_arg_cmp two[2] = {
			        SCMP_A0(SCMP_CMP_MASKED_EQ, 0xffffffffu, (unsigned)families[i]),
			        SCMP_A1(SCMP_CMP_MASKED_EQ,
			                0xffffffffu & ~(unsigned)(SOCK_NONBLOCK | SOCK_CLOEXEC),
			                (unsigned)types[t]),
			};

			if (confine_rule_add(ctx, SCMP_ACT_ALLOW, "socket", 2, two, err, errlen) <
			    0)
				return -1;
		}
	}
	return 0;
}

int
confine_filter_end(scmp_filter_ctx ctx, struct sock_filter **insns, unsigned short *len, char *err,
                   size_t errlen)
{
	int rc = confine_bpf_export(ctx, insns, len, err, errlen);

	seccomp_release(ctx);
	return rc;
}

int
confine_bpf_export(scmp_filter_ctx ctx, struct sock_filter **insns, unsigned short *len, char *err,
                   size_t errlen)
{
	struct stat st;
	ssize_t n;
	int rc, fd = memfd_create("airlock-seccomp", MFD_CLOEXEC);

	*insns = NULL;
	*len = 0;
	if (fd < 0) {
		snprintf(err, errlen, "seccomp: memfd: %s", strerror(errno));
		return -1;
	}
	rc = seccomp_export_bpf(ctx, fd);
	if (rc < 0 || fstat(fd, &st) < 0 || st.st_size <= 0 ||
	    (size_t)st.st_size % sizeof(struct sock_filter) != 0 ||
	    (size_t)st.st_size / sizeof(struct sock_filter) > BPF_MAXINSNS) {
		snprintf(err, errlen, "seccomp: export: %s",
		         rc < 0 ? strerror(-rc) : "bad program size");
		fd_close(&fd);
		return -1;
	}
	*insns = malloc((size_t)st.st_size);
	if (*insns == NULL) {
		snprintf(err, errlen, "seccomp: out of memory");
		fd_close(&fd);
		return -1;
	}
	n = pread(fd, *insns, (size_t)st.st_size, 0);
	fd_close(&fd);
	if (n != st.st_size) {
		snprintf(err, errlen, "seccomp: read back the program");
		free(*insns);
		*insns = NULL;
		return -1;
	}
	*len = (unsigned short)((size_t)st.st_size / sizeof(struct sock_filter));
	return 0;
}

int
confine_bpf_print(FILE *out, const char *name, const struct sock_filter *insns, unsigned short len)
{
	fprintf(out,
	        "/* Generated at build time: do not edit. */\n"
	        "const struct sock_filter %s[%u] = {\n",
	        name, (unsigned)len);
	for (unsigned i = 0; i < len; i++)
		fprintf(out, "\t{0x%04x, %u, %u, 0x%08x},\n", (unsigned)insns[i].code,
		        (unsigned)insns[i].jt, (unsigned)insns[i].jf, (unsigned)insns[i].k);
	fprintf(out, "};\nconst unsigned short %s_len = %u;\n", name, (unsigned)len);
	return fflush(out) == 0 && !ferror(out) ? 0 : -1;
}

int
confine_gen_main(const char *who, const char *array,
                 int (*compile)(struct sock_filter **insns, unsigned short *len, char *err,
                                size_t errlen))
{
	struct sock_filter *insns;
	unsigned short len;
	char err[256];
	int rc;

	if (compile(&insns, &len, err, sizeof(err)) < 0) {
		fprintf(stderr, "%s gen_seccomp: %s\n", who, err);
		return 1;
	}
	rc = confine_bpf_print(stdout, array, insns, len);
	free(insns);
	return rc == 0 ? 0 : 1;
}
