/* A bounded output buffer and the escaping every egress-log string goes
 * through. Shared by the writer (elog.c) and the review commands, so the
 * JSON they emit and the text they show on a terminal are escaped the same
 * way. The storage is the caller's; nothing here allocates, and a write
 * that does not fit sets overflow instead of growing. */
#ifndef AIRLOCK_ELOG_BUF_H
#define AIRLOCK_ELOG_BUF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct elog_buf {
	char *data; /* borrowed storage of cap bytes */
	size_t len;
	size_t cap;
	bool overflow; /* some write did not fit; the content is incomplete */
};

void elog_buf_init(struct elog_buf *b, char *storage, size_t cap);
void elog_buf_put(struct elog_buf *b, const char *s, size_t n);
void elog_buf_puts(struct elog_buf *b, const char *s);
void elog_buf_putc(struct elog_buf *b, char c);
void elog_buf_u64(struct elog_buf *b, uint64_t v);
void elog_buf_i64(struct elog_buf *b, int64_t v);

/* Length of the well-formed UTF-8 sequence at s (1..4), or 0 when the bytes
 * at s are not one (overlong, surrogate, above U+10FFFF, cut short). */
size_t elog_utf8_len(const unsigned char *s, size_t n);

/* Append s as a quoted JSON string (RFC 8259): '"' and '\\' escaped,
 * control characters and DEL as \u00XX, every byte that is not part of a
 * well-formed UTF-8 sequence as \ufffd. At most cap bytes are written
 * between the quotes, counted escaped (a '"' costs 2, a control 6), never
 * cutting a UTF-8 sequence or an escape; returns true when s was cut.
 * SIZE_MAX: no cap. */
bool elog_buf_json_str(struct elog_buf *b, const char *s, size_t cap);

/* Append s for a terminal: printable ASCII and well-formed UTF-8 as is,
 * every other byte (controls, ESC, DEL, invalid UTF-8) as \xHH, so a
 * hostile name cannot move the cursor or recolour the screen. At most cap
 * bytes of s are taken (input bytes: the terminal line is not bounded),
 * never cutting a UTF-8 sequence; true when s was longer. */
bool elog_buf_safe_text(struct elog_buf *b, const char *s, size_t cap);

#endif
