/* `airlock log export --format ocsf`: the egress log as OCSF 1.1 events
 * (docs/log.md, "OCSF"), one JSON object per line, for the SIEMs and
 * security lakes that take OCSF (AWS Security Lake, Splunk, Sentinel).
 *
 * Each event line becomes one OCSF event of the Network Activity category:
 *   dns                        -> DNS Activity (4003), activity Response
 *   http                       -> HTTP Activity (4002), activity per method
 *   connect, tls, tcp, packet,
 *   and any newer kind         -> Network Activity (4001), Traffic or Refuse
 * task-start, task-end and log-budget lines carry no connection: they are
 * not events of these classes and are left out. The task id goes
 * in metadata.correlation_uid, the verdict in disposition_id and action_id,
 * the reason and rule (which OCSF has no field for) in unmapped.airlock. */
#include "elog/ocsf.h"

#include "config.h"
#include "elog/buf.h"
#include "elog/record.h"

#include <stdlib.h>
#include <string.h>

/* OCSF 1.1 numbers used below. */
enum {
	OCSF_CATEGORY_NETWORK = 4,
	OCSF_CLASS_NETWORK = 4001,
	OCSF_CLASS_HTTP = 4002,
	OCSF_CLASS_DNS = 4003,
	OCSF_NET_TRAFFIC = 6,
	OCSF_NET_REFUSE = 5,
	OCSF_DNS_RESPONSE = 2,
	OCSF_HTTP_OTHER = 99,
	OCSF_DISP_ALLOWED = 1,
	OCSF_DISP_BLOCKED = 2,
	OCSF_DISP_DETECTED = 15, /* audit mode: let through, would be blocked */
	OCSF_ACTION_ALLOWED = 1,
	OCSF_ACTION_DENIED = 2,
	OCSF_STATUS_SUCCESS = 1,
	OCSF_STATUS_FAILURE = 2,
	OCSF_SEV_INFO = 1,
	OCSF_SEV_LOW = 2,
	OCSF_DIR_OUTBOUND = 2,
};

/* The HTTP Activity's activity_id of a method (OCSF 1.1). */
static int
http_activity(const char *method)
{
	static const char *const m[] = {NULL,   "CONNECT", "DELETE", "GET",  "HEAD",
	                                "OPTIONS", "POST",  "PUT",    "TRACE"};

	for (int i = 1; method != NULL && i < (int)(sizeof(m) / sizeof(m[0])); i++)
		if (strcmp(m[i], method) == 0)
			return i;
	return OCSF_HTTP_OTHER;
}

static void
key(struct elog_buf *b, const char *k)
{
	elog_buf_putc(b, ',');
	elog_buf_json_str(b, k, SIZE_MAX);
	elog_buf_putc(b, ':');
}

static void
field_str(struct elog_buf *b, const char *k, const char *v)
{
	if (v == NULL)
		return;
	key(b, k);
	elog_buf_json_str(b, v, SIZE_MAX);
}

static void
field_u64(struct elog_buf *b, const char *k, uint64_t v)
{
	key(b, k);
	elog_buf_u64(b, v);
}

/* The destination: a name (host) and an address (ip), either may be
 * absent; a host that is an address literal is the ip. */
static void
endpoint(struct elog_buf *b, const struct elog_record *r)
{
	struct sockaddr_storage ss;
	const char *name = r->host, *ip = r->ip;

	if (name != NULL && elog_parse_addr(name, &ss)) {
		ip = ip != NULL ? ip : name;
		name = NULL;
	}
	key(b, "dst_endpoint");
	elog_buf_putc(b, '{');
	elog_buf_puts(b, "\"type_id\":0"); /* unknown device type */
	field_str(b, "hostname", name);
	field_str(b, "ip", ip);
	if (r->port >= 0)
		field_u64(b, "port", (uint64_t)r->port);
	elog_buf_putc(b, '}');
}

/* One event line as OCSF into b. */
static void
event(struct elog_buf *b, const struct elog_record *r)
{
	bool allow = r->verdict != NULL && strcmp(r->verdict, "allow") == 0;
	bool audit = r->verdict != NULL && strcmp(r->verdict, "audit-deny") == 0;
	bool dns = strcmp(r->kind, "dns") == 0, http = strcmp(r->kind, "http") == 0;
	int class_uid = dns ? OCSF_CLASS_DNS : http ? OCSF_CLASS_HTTP : OCSF_CLASS_NETWORK;
	int activity = dns    ? OCSF_DNS_RESPONSE
	               : http ? http_activity(r->method)
	               : allow || audit ? OCSF_NET_TRAFFIC
	                                : OCSF_NET_REFUSE;

	elog_buf_puts(b, "{\"class_uid\":");
	elog_buf_u64(b, (uint64_t)class_uid);
	field_u64(b, "category_uid", OCSF_CATEGORY_NETWORK);
	field_u64(b, "activity_id", (uint64_t)activity);
	field_u64(b, "type_uid", (uint64_t)class_uid * 100 + (uint64_t)activity);
	key(b, "time");
	elog_buf_i64(b, r->ts_ms);
	field_u64(b, "severity_id", allow ? OCSF_SEV_INFO : OCSF_SEV_LOW);
	field_u64(b, "status_id", allow || audit ? OCSF_STATUS_SUCCESS : OCSF_STATUS_FAILURE);
	field_u64(b, "disposition_id",
	          allow ? OCSF_DISP_ALLOWED : audit ? OCSF_DISP_DETECTED : OCSF_DISP_BLOCKED);
	field_u64(b, "action_id", allow || audit ? OCSF_ACTION_ALLOWED : OCSF_ACTION_DENIED);
	if (r->duration_ms > 0)
		field_u64(b, "duration", r->duration_ms);
	field_u64(b, "count", elog_record_events(r));

	key(b, "metadata");
	elog_buf_puts(b, "{\"version\":\"1.1.0\",\"product\":{\"name\":\"airlock\","
	                 "\"vendor_name\":\"airlock\",\"version\":\"" AIRLOCK_VERSION "\"}");
	field_str(b, "correlation_uid", r->task);
	field_str(b, "original_time", r->ts);
	if (r->has_seq)
		field_u64(b, "sequence", r->seq);
	elog_buf_putc(b, '}');

	/* A DNS event's destination would be the resolver, which is airlock's
	 * own listener: the name asked is the query's. */
	if (!dns)
		endpoint(b, r);
	key(b, "connection_info");
	elog_buf_puts(b, "{\"direction_id\":");
	elog_buf_u64(b, OCSF_DIR_OUTBOUND);
	field_str(b, "protocol_name",
	          r->proto != NULL                                    ? r->proto
	          : dns || strcmp(r->kind, "packet") == 0 ? NULL
	                                                  : "tcp");
	elog_buf_putc(b, '}');
	key(b, "traffic");
	elog_buf_puts(b, "{\"bytes_out\":");
	elog_buf_u64(b, r->bytes_up);
	field_u64(b, "bytes_in", r->bytes_down);
	if (r->packets > 0)
		field_u64(b, "packets", r->packets);
	elog_buf_putc(b, '}');

	if (dns) {
		key(b, "query");
		elog_buf_putc(b, '{');
		elog_buf_puts(b, "\"hostname\":");
		elog_buf_json_str(b, r->host != NULL ? r->host : "", SIZE_MAX);
		field_str(b, "type", r->qtype);
		elog_buf_putc(b, '}');
		field_str(b, "rcode", r->rcode);
	} else if (http) {
		key(b, "http_request");
		elog_buf_putc(b, '{');
		elog_buf_puts(b, "\"http_method\":");
		elog_buf_json_str(b, r->method != NULL ? r->method : "", SIZE_MAX);
		if (r->url != NULL) {
			key(b, "url");
			elog_buf_puts(b, "{\"url_string\":");
			elog_buf_json_str(b, r->url, SIZE_MAX);
			field_str(b, "hostname", r->host);
			elog_buf_putc(b, '}');
		}
		elog_buf_putc(b, '}');
	} else if (r->sni != NULL) {
		key(b, "tls");
		elog_buf_puts(b, "{\"sni\":");
		elog_buf_json_str(b, r->sni, SIZE_MAX);
		elog_buf_putc(b, '}');
	}
	field_str(b, "message", r->reason);

	key(b, "unmapped");
	elog_buf_puts(b, "{\"airlock\":{\"kind\":");
	elog_buf_json_str(b, r->kind, SIZE_MAX);
	field_str(b, "verdict", r->verdict);
	field_str(b, "rule", r->rule);
	field_str(b, "reason", r->reason);
	field_str(b, "orig_dst", r->orig_dst);
	elog_buf_puts(b, "}}}");
}

struct export {
	FILE *out;
	bool write_failed;
	/* One output line: an event's fields, each at most a log line's
	 * length, and the fixed parts. */
	char line[2 * ELOG_LINE_MAX];
};

static int
export_one(const struct elog_record *r, void *arg)
{
	struct export *x = arg;
	struct elog_buf b;

	if (r->type != ELOG_REC_EVENT)
		return 0;
	elog_buf_init(&b, x->line, sizeof(x->line));
	event(&b, r);
	if (b.overflow) {
		fprintf(stderr, "airlock: log export: %s:%llu: event too large to export, skipped\n",
		        r->file, (unsigned long long)r->lineno);
		return 0;
	}
	elog_buf_putc(&b, '\n');
	if (fwrite(b.data, 1, b.len, x->out) != b.len) {
		x->write_failed = true;
		return -1;
	}
	return 0;
}

int
elog_export_ocsf(char *const *files, int n_files, FILE *out)
{
	struct export *x = calloc(1, sizeof(*x)); /* 128 KiB: not on the stack */
	int rc;

	if (x == NULL) {
		fprintf(stderr, "airlock: log export: out of memory\n");
		return -1;
	}
	x->out = out;
	rc = elog_read_files(files, n_files, export_one, x);
	if (x->write_failed || fflush(out) != 0) {
		perror("airlock: log export: write");
		rc = -1;
	}
	free(x);
	return rc;
}
