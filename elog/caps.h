/* Caps on the input bytes of each egress-log field (docs/log.md, "Strings:
 * escaping and caps"), shared by the writer (elog.c) and the memory of
 * repeated events (agg.c). Sandbox-controlled fields are capped hardest;
 * the sum of the worst cases, escaped (x6), stays under ELOG_LINE_MAX. */
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
#define ELOG_CAP_COMMAND 8192 /* all command words together */
#define ELOG_CAP_WORDS   512  /* command words (each costs at least 3 bytes) */
#define ELOG_CAP_TEXT    255  /* policy, selftest */

#endif
