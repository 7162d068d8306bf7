/* A policy file's YAML as a small tree with libyaml's marks on every node,
 * built from libyaml's event API with the loader's safety bounds applied
 * while parsing: no anchors, aliases or tags; bounded nesting and node
 * count; one document. Internal to policy/. */
#ifndef AIRLOCK_POLICY_YTREE_H
#define AIRLOCK_POLICY_YTREE_H

#include <stddef.h>
#include <stdint.h>

enum ynode_type {
	YNODE_SCALAR = 0,
	YNODE_SEQ,
	YNODE_MAP,
};

#define YNODE_NONE UINT32_MAX

struct ynode {
	uint8_t type;
	uint8_t plain;      /* scalar written without quotes */
	uint32_t line, col; /* 1-based */
	uint32_t str;       /* scalar: offset of its NUL-terminated text */
	uint32_t len;       /* scalar: length; seq/map: number of children */
	uint32_t child;     /* first child (maps: key, value, key, ...) */
	uint32_t next;      /* next sibling */
};

struct ytree {
	struct ynode *nodes;
	uint32_t n_nodes, cap_nodes;
	char *strs;
	size_t n_strs, cap_strs;
};

/* Parse data[0..len) into t. On failure returns -1 and writes one message
 * ("LINE:COLUMN: what; what was expected") into err; the tree is then
 * partial and only good for ytree_free. t must be zeroed on entry. */
int ytree_parse(struct ytree *t, const void *data, size_t len, char *err, size_t errlen);
void ytree_free(struct ytree *t);

/* A scalar's text; "" for a list or mapping (so a caller may compare a
 * key before checking its type). */
static inline const char *
ytree_str(const struct ytree *t, const struct ynode *n)
{
	return n->type == YNODE_SCALAR ? t->strs + n->str : "";
}

#endif
