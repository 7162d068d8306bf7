/* The id maps of `--ids` (ids.h, docs/run.md "Ids"). */
#include <errno.h>
#include <fcntl.h>
#include <pwd.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/util.h"
#include "sandbox/ids.h"

extern char **environ;

int
sbx_ids_mode_parse(const char *s, enum sbx_ids_mode *mode)
{
	if (strcmp(s, "one") == 0)
		*mode = SBX_IDS_ONE;
	else if (strcmp(s, "range") == 0)
		*mode = SBX_IDS_RANGE;
	else
		return -1;
	return 0;
}

/* A decimal uint32 of [s, end); 0 or -1. */
static int
field_u32(const char *s, const char *end, uint32_t *out)
{
	char buf[16];
	uint64_t v;
	size_t len = (size_t)(end - s);

	if (len == 0 || len >= sizeof(buf))
		return -1;
	memcpy(buf, s, len);
	buf[len] = '\0';
	if (parse_uint(buf, 0, UINT32_MAX, &v) < 0)
		return -1;
	*out = (uint32_t)v;
	return 0;
}

int
sbx_subid_find(const char *text, const char *name, uint32_t id, uint32_t *base, uint32_t *count)
{
	char idbuf[16];

	snprintf(idbuf, sizeof(idbuf), "%u", (unsigned)id);
	for (const char *line = text; *line != '\0';) {
		const char *eol = strchr(line, '\n');
		const char *c1, *c2;
		size_t klen;
		uint32_t b, n;

		if (eol == NULL)
			eol = line + strlen(line);
		c1 = memchr(line, ':', (size_t)(eol - line));
		c2 = c1 != NULL ? memchr(c1 + 1, ':', (size_t)(eol - c1 - 1)) : NULL;
		if (c2 != NULL && field_u32(c1 + 1, c2, &b) == 0 &&
		    field_u32(c2 + 1, eol, &n) == 0 && n > 0) {
			klen = (size_t)(c1 - line);
			if ((name != NULL && klen == strlen(name) &&
			     memcmp(line, name, klen) == 0) ||
			    (klen == strlen(idbuf) && memcmp(line, idbuf, klen) == 0)) {
				*base = b;
				*count = n;
				return 1;
			}
		}
		line = *eol == '\n' ? eol + 1 : eol;
	}
	return 0;
}

int
sbx_idmap_build(struct sbx_idmap *m, uint32_t inside, uint32_t host, uint32_t base, uint32_t count)
{
	memset(m, 0, sizeof(*m));
	if (count == 0 || count > SBX_IDS_MAX_COUNT || base > UINT32_MAX - count)
		return -1;
	/* Inside ids below CMD's own, then CMD's, then the rest: the
	 * subordinate range is used in order, one host id per inside id. */
	if (inside >= count) {
		m->line[m->n++] = (struct sbx_idline){0, base, count};
		m->line[m->n++] = (struct sbx_idline){inside, host, 1};
		return 0;
	}
	if (inside > 0)
		m->line[m->n++] = (struct sbx_idline){0, base, inside};
	m->line[m->n++] = (struct sbx_idline){inside, host, 1};
	if (count - 1 - inside > 0)
		m->line[m->n++] =
		        (struct sbx_idline){inside + 1, base + inside, count - 1 - inside};
	return 0;
}

/* The whole of a small file into buf (NUL-terminated); 0, or -1 + errno. */
static int
read_small(const char *path, char *buf, size_t size)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	size_t got = 0;
	ssize_t n;

	if (fd < 0)
		return -1;
	while (got < size - 1 && (n = read(fd, buf + got, size - 1 - got)) != 0) {
		if (n < 0) {
			if (errno == EINTR)
				continue;
			fd_close(&fd);
			return -1;
		}
		got += (size_t)n;
	}
	fd_close(&fd);
	buf[got] = '\0';
	return 0;
}

/* The caller's range in one file: 1 found, 0 not, -1 unreadable. */
static int
find_range(const char *path, const char *name, uint32_t id, uint32_t *base, uint32_t *count)
{
	static char text[65536];

	if (read_small(path, text, sizeof(text)) < 0)
		return errno == ENOENT ? 0 : -1;
	return sbx_subid_find(text, name, id, base, count);
}

int
sbx_ids_resolve(struct sbx_ids *ids, enum sbx_ids_mode mode, uid_t uid, gid_t gid, uint32_t uin,
                uint32_t gin, const char *subuid, const char *subgid, char *err, size_t errlen)
{
	const char *files[2] = {subuid != NULL ? subuid : "/etc/subuid",
	                        subgid != NULL ? subgid : "/etc/subgid"};
	uint32_t base[2], count[2];
	struct passwd *pw;
	const char *name;

	memset(ids, 0, sizeof(*ids));
	ids->mode = mode;
	if (mode == SBX_IDS_ONE)
		return 0;
	if (uid == 0) {
		/* Root may map the host's own ids: 0-65535 inside are the
		 * host's, so what the host's system users own (apt's _apt
		 * directories, dpkg's root:adm files) keeps its owner inside.
		 * A subordinate range would leave those ids unmapped, and
		 * their files unchangeable (the kernel's rule). */
		ids->uid.line[0] = (struct sbx_idline){0, 0, SBX_IDS_MAX_COUNT};
		ids->gid.line[0] = (struct sbx_idline){0, 0, SBX_IDS_MAX_COUNT};
		ids->uid.n = ids->gid.n = 1;
		ids->helper = false;
		return 0;
	}
	pw = getpwuid(uid);
	name = pw != NULL ? pw->pw_name : NULL;
	for (int i = 0; i < 2; i++) {
		/* Both files are keyed by the user's name or uid, as
		 * newuidmap and newgidmap read them. */
		int rc = find_range(files[i], name, (uint32_t)uid, &base[i], &count[i]);
		if (rc < 0) {
			snprintf(err, errlen, "--ids range: %s: %s", files[i], strerror(errno));
			return -1;
		}
		if (rc == 0) {
			snprintf(err, errlen,
			         "--ids range: %s has no entry for %s (uid %u): add one "
			         "(usermod --add-subuids/--add-subgids) or use --ids one",
			         files[i], name != NULL ? name : "the caller", (unsigned)uid);
			return -1;
		}
		if (count[i] > SBX_IDS_MAX_COUNT)
			count[i] = SBX_IDS_MAX_COUNT;
	}
	if (sbx_idmap_build(&ids->uid, uin, (uint32_t)uid, base[0], count[0]) < 0 ||
	    sbx_idmap_build(&ids->gid, gin, (uint32_t)gid, base[1], count[1]) < 0) {
		snprintf(err, errlen, "--ids range: the subordinate range overflows");
		return -1;
	}
	ids->helper = true;
	return 0;
}

/* "in out count" for each line, one line each (/proc) or all on one line
 * separated by spaces (newuidmap's arguments). */
static void
map_text(const struct sbx_idmap *m, char sep, char *buf, size_t size)
{
	size_t off = 0;

	buf[0] = '\0';
	for (size_t i = 0; i < m->n && off < size; i++) {
		int n = snprintf(buf + off, size - off, "%u %u %u%c", (unsigned)m->line[i].inside,
		                 (unsigned)m->line[i].outside, (unsigned)m->line[i].count, sep);
		if (n < 0)
			break;
		off += (size_t)n;
	}
}

static int
write_map(pid_t pid, const char *file, const struct sbx_idmap *m, char *err, size_t errlen)
{
	char path[64], text[128];
	int fd;
	ssize_t n;

	snprintf(path, sizeof(path), "/proc/%d/%s", (int)pid, file);
	map_text(m, '\n', text, sizeof(text));
	fd = open(path, O_WRONLY | O_CLOEXEC);
	n = fd >= 0 ? write(fd, text, strlen(text)) : -1;
	if (n < 0 || (size_t)n != strlen(text)) {
		snprintf(err, errlen, "--ids range: %s: %s", path, strerror(errno));
		fd_close(&fd);
		return -1;
	}
	fd_close(&fd);
	return 0;
}

/* newuidmap PID in out count...; 0, or -1 + reason. */
static int
run_helper(const char *tool, pid_t pid, const struct sbx_idmap *m, char *err, size_t errlen)
{
	char pidbuf[16], num[SBX_IDS_MAX_LINES * 3][16], path[64];
	char *argv[2 + SBX_IDS_MAX_LINES * 3 + 1];
	size_t argc = 0;
	pid_t child;
	int st, rc;

	snprintf(path, sizeof(path), "/usr/bin/%s", tool);
	snprintf(pidbuf, sizeof(pidbuf), "%d", (int)pid);
	argv[argc++] = path;
	argv[argc++] = pidbuf;
	for (size_t i = 0; i < m->n; i++) {
		uint32_t v[3] = {m->line[i].inside, m->line[i].outside, m->line[i].count};
		for (size_t k = 0; k < 3; k++) {
			snprintf(num[i * 3 + k], sizeof(num[0]), "%u", (unsigned)v[k]);
			argv[argc++] = num[i * 3 + k];
		}
	}
	argv[argc] = NULL;
	rc = posix_spawn(&child, path, NULL, NULL, argv, environ);
	if (rc != 0) {
		snprintf(err, errlen, "--ids range: %s: %s (install uidmap, or use --ids one)",
		         path, strerror(rc));
		return -1;
	}
	while (waitpid(child, &st, 0) < 0)
		if (errno != EINTR) {
			snprintf(err, errlen, "--ids range: wait for %s: %s", tool,
			         strerror(errno));
			return -1;
		}
	if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
		snprintf(err, errlen, "--ids range: %s failed (status %d): see its message above",
		         tool, WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st));
		return -1;
	}
	return 0;
}

int
sbx_ids_apply(const struct sbx_ids *ids, pid_t pid, char *err, size_t errlen)
{
	if (ids->mode != SBX_IDS_RANGE)
		return 0;
	if (ids->helper)
		return run_helper("newuidmap", pid, &ids->uid, err, errlen) < 0 ||
		                       run_helper("newgidmap", pid, &ids->gid, err, errlen) < 0
		               ? -1
		               : 0;
	return write_map(pid, "uid_map", &ids->uid, err, errlen) < 0 ||
	                       write_map(pid, "gid_map", &ids->gid, err, errlen) < 0
	               ? -1
	               : 0;
}
