/* Several ids inside (`--ids range`, docs/run.md "Ids"): the caller's id
 * stays CMD's, and the rest of 0..count-1 inside maps to a subordinate
 * range on the host, so tools that switch users (apt's _apt, dpkg's
 * chown to root:adm) find real ids. Root maps the host's own 0-65535;
 * others need an /etc/subuid and /etc/subgid entry and newuidmap/newgidmap
 * (Debian's uidmap). The parsing and the map are pure
 * code (tests/sandbox/test_ids.c). */
#ifndef AIRLOCK_SANDBOX_IDS_H
#define AIRLOCK_SANDBOX_IDS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define SBX_IDS_MAX_COUNT 65536u /* ids inside at most: 0..65535 */
#define SBX_IDS_MAX_LINES 3

enum sbx_ids_mode {
	SBX_IDS_ONE = 0, /* the caller's id alone (the default) */
	SBX_IDS_RANGE,   /* the caller's id and a subordinate range */
};

struct sbx_idline {
	uint32_t inside, outside, count;
};

/* One of the two maps, uid or gid, of a range. */
struct sbx_idmap {
	struct sbx_idline line[SBX_IDS_MAX_LINES];
	size_t n;
};

struct sbx_ids {
	enum sbx_ids_mode mode;
	bool helper; /* written by newuidmap/newgidmap (not root) */
	struct sbx_idmap uid, gid;
};

/* "one" or "range"; 0, or -1 for anything else. */
int sbx_ids_mode_parse(const char *s, enum sbx_ids_mode *mode);

/* The first entry of an /etc/subuid-style text (NUL-terminated) for user
 * name or for the decimal id: its start and count (count > 0). 1 when
 * found, 0 when not; malformed lines are skipped, as shadow's tools do. */
int sbx_subid_find(const char *text, const char *name, uint32_t id, uint32_t *base,
                   uint32_t *count);

/* The map of inside id `inside` to host id `host`, and of every other id
 * in 0..count-1 (count at most SBX_IDS_MAX_COUNT) to base...; 0, or -1
 * when base + count overflows or count is 0. */
int sbx_idmap_build(struct sbx_idmap *m, uint32_t inside, uint32_t host, uint32_t base,
                    uint32_t count);

/* Choose the maps for mode: for the caller (uid, gid; both files looked
 * up by the user's name or uid, as shadow's tools do), CMD's
 * ids inside (uin, gin). subuid/subgid: the files' paths (NULL: /etc's).
 * 0, or -1 with a one-line reason that names what is missing. */
int sbx_ids_resolve(struct sbx_ids *ids, enum sbx_ids_mode mode, uid_t uid, gid_t gid, uint32_t uin,
                    uint32_t gin, const char *subuid, const char *subgid, char *err, size_t errlen);

/* The supervisor writes the maps of init (pid), just cloned: itself as
 * root, else through newuidmap/newgidmap. 0, or -1 + reason. */
int sbx_ids_apply(const struct sbx_ids *ids, pid_t pid, char *err, size_t errlen);

#endif
