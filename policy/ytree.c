/* libyaml events to a tree, refusing on the spot everything that makes a
 * YAML file expensive or ambiguous to read: anchors and aliases (the
 * "billion laughs" bomb), tags, nesting deeper than POLICY_MAX_DEPTH, more
 * than POLICY_MAX_NODES nodes, several documents, NUL in strings. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <yaml.h>

#include "policy/internal.h"
#include "policy/ytree.h"

static int
node_add(struct ytree *t, uint8_t type, const yaml_mark_t *m, uint32_t *out)
{
	struct ynode *n;

	if (t->n_nodes == t->cap_nodes) {
		uint32_t cap = t->cap_nodes ? t->cap_nodes * 2 : 64;
		struct ynode *nn = realloc(t->nodes, sizeof(*nn) * cap);

		if (nn == NULL)
			return -1;
		t->nodes = nn;
		t->cap_nodes = cap;
	}
	n = &t->nodes[t->n_nodes];
	memset(n, 0, sizeof(*n));
	n->type = type;
	n->line = (uint32_t)m->line + 1;
	n->col = (uint32_t)m->column + 1;
	n->child = YNODE_NONE;
	n->next = YNODE_NONE;
	*out = t->n_nodes++;
	return 0;
}

static int
str_add(struct ytree *t, const char *s, size_t len, uint32_t *off)
{
	if (t->cap_strs - t->n_strs < len + 1) {
		size_t cap = t->cap_strs ? t->cap_strs : 4096;
		char *ns;

		while (cap - t->n_strs < len + 1)
			cap *= 2;
		if ((ns = realloc(t->strs, cap)) == NULL)
			return -1;
		t->strs = ns;
		t->cap_strs = cap;
	}
	memcpy(t->strs + t->n_strs, s, len);
	t->strs[t->n_strs + len] = '\0';
	*off = (uint32_t)t->n_strs;
	t->n_strs += len + 1;
	return 0;
}

/* libyaml's own message for a reader error on binary input is accurate but
 * cryptic; say what the file looks like instead. */
static void
parser_error(const yaml_parser_t *ps, const unsigned char *data, size_t len, char *err,
             size_t errlen)
{
	const char *problem = ps->problem ? ps->problem : "malformed YAML";
	size_t line = ps->problem_mark.line + 1, col = ps->problem_mark.column + 1;

	if (ps->error == YAML_READER_ERROR) {
		/* The reader reports a byte offset, not a mark: count lines. */
		line = 1;
		col = 1;
		for (size_t i = 0; i < ps->problem_offset && i < len; i++) {
			if (data[i] == '\n') {
				line++;
				col = 1;
			} else {
				col++;
			}
		}
		snprintf(err, errlen,
		         "%zu:%zu: not a text file (%s at byte %zu); expected a YAML policy", line,
		         col, problem, ps->problem_offset);
		return;
	}
	/* The most common YAML mistake in a policy: an unquoted wildcard,
	 * which YAML reads as an alias. */
	if (ps->context != NULL && strcmp(ps->context, "while scanning an alias") == 0) {
		snprintf(err, errlen,
		         "%zu:%zu: invalid YAML: %s %s; quote wildcard hosts: host: "
		         "\"*.example.com\"",
		         line, col, problem, ps->context);
		return;
	}
	if (ps->context != NULL)
		snprintf(err, errlen,
		         "%zu:%zu: invalid YAML: %s %s; expected a YAML policy (docs/policy.md)",
		         line, col, problem, ps->context);
	else
		snprintf(err, errlen,
		         "%zu:%zu: invalid YAML: %s; expected a YAML policy (docs/policy.md)", line,
		         col, problem);
}

int
ytree_parse(struct ytree *t, const void *data, size_t len, char *err, size_t errlen)
{
	yaml_parser_t ps;
	yaml_event_t ev;
	uint32_t stack[POLICY_MAX_DEPTH + 1];
	uint32_t last[POLICY_MAX_DEPTH + 1];
	int depth = 0, docs = 0, rc = -1;
	bool done = false;

	if (!yaml_parser_initialize(&ps)) {
		snprintf(err, errlen, "1:1: out of memory starting the YAML parser");
		return -1;
	}
	yaml_parser_set_input_string(&ps, data, len);
	while (!done) {
		const yaml_mark_t *m;
		uint32_t id;
		uint8_t type;

		if (!yaml_parser_parse(&ps, &ev)) {
			parser_error(&ps, data, len, err, errlen);
			goto out;
		}
		m = &ev.start_mark;
		switch (ev.type) {
		case YAML_STREAM_END_EVENT:
			done = true;
			break;
		case YAML_DOCUMENT_START_EVENT:
			if (++docs > 1) {
				snprintf(err, errlen,
				         "%zu:%zu: a second YAML document; expected one policy per "
				         "file",
				         m->line + 1, m->column + 1);
				goto bad;
			}
			break;
		case YAML_ALIAS_EVENT:
			snprintf(err, errlen,
			         "%zu:%zu: YAML aliases (*name) are not allowed; write the value "
			         "out",
			         m->line + 1, m->column + 1);
			goto bad;
		case YAML_SCALAR_EVENT:
		case YAML_SEQUENCE_START_EVENT:
		case YAML_MAPPING_START_EVENT: {
			const yaml_char_t *anchor, *tag;

			if (ev.type == YAML_SCALAR_EVENT) {
				anchor = ev.data.scalar.anchor;
				tag = ev.data.scalar.tag;
				type = YNODE_SCALAR;
			} else if (ev.type == YAML_SEQUENCE_START_EVENT) {
				anchor = ev.data.sequence_start.anchor;
				tag = ev.data.sequence_start.tag;
				type = YNODE_SEQ;
			} else {
				anchor = ev.data.mapping_start.anchor;
				tag = ev.data.mapping_start.tag;
				type = YNODE_MAP;
			}
			if (anchor != NULL) {
				snprintf(err, errlen,
				         "%zu:%zu: YAML anchors (&name) are not allowed; write "
				         "each value out",
				         m->line + 1, m->column + 1);
				goto bad;
			}
			if (tag != NULL) {
				snprintf(err, errlen,
				         "%zu:%zu: YAML tags (!tag) are not allowed; expected "
				         "plain values",
				         m->line + 1, m->column + 1);
				goto bad;
			}
			if (t->n_nodes >= POLICY_MAX_NODES) {
				snprintf(err, errlen,
				         "%zu:%zu: more than %u YAML values in one file; split the "
				         "policy with include",
				         m->line + 1, m->column + 1, POLICY_MAX_NODES);
				goto bad;
			}
			if (node_add(t, type, m, &id) != 0)
				goto oom;
			if (type == YNODE_SCALAR) {
				struct ynode *n = &t->nodes[id];
				size_t sl = ev.data.scalar.length;

				if (memchr(ev.data.scalar.value, '\0', sl) != NULL) {
					snprintf(
					        err, errlen,
					        "%zu:%zu: NUL character in a string; expected text",
					        m->line + 1, m->column + 1);
					goto bad;
				}
				if (str_add(t, (const char *)ev.data.scalar.value, sl, &n->str) !=
				    0)
					goto oom;
				n->len = (uint32_t)sl;
				n->plain = ev.data.scalar.style == YAML_PLAIN_SCALAR_STYLE;
			}
			if (depth > 0) {
				struct ynode *parent = &t->nodes[stack[depth - 1]];

				if (parent->child == YNODE_NONE)
					parent->child = id;
				else
					t->nodes[last[depth - 1]].next = id;
				last[depth - 1] = id;
				parent->len++;
			}
			if (type != YNODE_SCALAR) {
				if (depth >= POLICY_MAX_DEPTH) {
					snprintf(err, errlen,
					         "%zu:%zu: nesting deeper than %d levels; a policy "
					         "needs 4",
					         m->line + 1, m->column + 1, POLICY_MAX_DEPTH);
					goto bad;
				}
				stack[depth++] = id;
			}
			break;
		}
		case YAML_SEQUENCE_END_EVENT:
		case YAML_MAPPING_END_EVENT:
			if (depth > 0)
				depth--;
			break;
		default:
			break;
		}
		yaml_event_delete(&ev);
	}
	rc = 0;
	goto out;
oom:
	snprintf(err, errlen, "%zu:%zu: out of memory reading the policy", ev.start_mark.line + 1,
	         ev.start_mark.column + 1);
bad:
	yaml_event_delete(&ev);
out:
	yaml_parser_delete(&ps);
	return rc;
}

void
ytree_free(struct ytree *t)
{
	free(t->nodes);
	free(t->strs);
	t->nodes = NULL;
	t->strs = NULL;
	t->n_nodes = t->cap_nodes = 0;
	t->n_strs = t->cap_strs = 0;
}
