/* Caps on each egress-log field (docs/log.md, "Strings: escaping and
 * caps"), shared by the writer (elog.c) and the memory of repeated events
 * (agg.c). The writer counts them in bytes written, escaped (elog/buf.h),
 * so the sum of the worst cases is the sum of the caps: every line it
 * writes stays under ELOG_WRITE_MAX (tests/elog/test_writer.c builds the
 * worst task-start and event lines). Sandbox-controlled fields are capped
 * hardest. */
#ifndef AIRLOCK_ELOG_CAPS_H
#define AIRLOCK_ELOG_CAPS_H

#define ELOG_CAP_NAME    255 /* host, sni */
#define ELOG_CAP_URL     2048
#define ELOG_CAP_SHORT   32  /* kind, verdict, method, qtype, rcode, proto, mode */
#define ELOG_CAP_ADDR    64  /* ip, orig_dst, one DNS answer */
#define ELOG_CAP_RULE    512 /* rule, reason */
#define ELOG_CAP_TASK    128
#define ELOG_CAP_ANSWERS 32   /* entries */
#define ELOG_CAP_ARG     1024 /* one command word */
/* all command words together, with their quotes and commas */
#define ELOG_CAP_COMMAND 8192
#define ELOG_CAP_WORDS   512 /* command words (each costs at least 3 bytes) */
#define ELOG_CAP_TEXT    255 /* policy, selftest, a label's value */
#define ELOG_CAP_LABELS  16  /* labels (as --label allows) */
/* Every line the writer makes is shorter: more would fail the log (a
 * line cut short is worse than none). Readers take up to ELOG_LINE_MAX. */
#define ELOG_WRITE_MAX 16384

#endif
