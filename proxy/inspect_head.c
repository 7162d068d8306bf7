/* One request head on an inspected connection (proxy/inspect_head.h). */
#include "proxy/inspect_head.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/types.h>

/* The sentence, kept printable and free of '"' and '\' (it lands in a
 * quoted Proxy-Status parameter): anything else becomes '?'. */
static void refuse(struct inspect_head_result *r, enum verdict_reason why, const char *fmt, ...)
        __attribute__((format(printf, 3, 4)));

static void
refuse(struct inspect_head_result *r, enum verdict_reason why, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(r->why, sizeof(r->why), fmt, ap);
	va_end(ap);
	for (char *c = r->why; *c != '\0'; c++)
		if ((unsigned char)*c < 0x20 || (unsigned char)*c >= 0x7f || *c == '"' || *c == '\\')
			*c = '?';
	r->reason = why;
	r->close = true;
}

static const char *
rule_reason_text(enum inspect_reason r)
{
	switch (r) {
	case INSPECT_R_DENY_RULE:
		return "a deny rule";
	case INSPECT_R_ONLY_PATHS:
		return "only_paths";
	case INSPECT_R_ALLOW_RULE:
		return "an allow rule";
	case INSPECT_R_ACCESS:
		return "access";
	case INSPECT_R_NO_RULE:
		break;
	}
	return "no rule allows it";
}

/* Host: exactly one, naming the connection's name (and its port, when it
 * gives one). 0, or -1 with the refusal in r. */
static int
check_authority(const char *name, uint16_t port, const char *buf, const struct http_head *h,
                struct inspect_head_result *r)
{
	int i = http_find_header(buf, h, "host", 0);
	struct http_authority a;
	const struct http_header *hd;

	if (i < 0) {
		refuse(r, VR_BAD_REQUEST, "no Host field");
		return -1;
	}
	if (http_find_header(buf, h, "host", (size_t)i + 1) >= 0) {
		refuse(r, VR_BAD_REQUEST, "more than one Host field");
		return -1;
	}
	hd = &h->headers[i];
	if (http_parse_authority(buf + hd->value.off, hd->value.len, false, port, &a) != 0) {
		refuse(r, VR_BAD_REQUEST, "Host is not a host[:port]");
		return -1;
	}
	if (a.ip_literal || !verdict_same_name(a.host, name) || (a.has_port && a.port != port)) {
		refuse(r, VR_NAME_CHANGED,
		       "connection decided for %s port %u carries a request for Host %.*s", name,
		       (unsigned)port, (int)(hd->value.len > 120 ? 120 : hd->value.len),
		       buf + hd->value.off);
		return -1;
	}
	return 0;
}

ssize_t
inspect_head_decide(const struct policy_inspect *pi, const char *name, uint16_t port,
                    const char *buf, const struct http_head *h, struct inspect_head_result *res,
                    char *out, size_t outlen)
{
	char host[HTTP_HOST_MAX + 8];
	const char *field;
	size_t mlen = h->method.len, at = 0, plen, qlen;
	enum inspect_path_err pe;
	ssize_t n;

	memset(res, 0, sizeof(*res));
	if (mlen >= sizeof(res->method))
		mlen = sizeof(res->method) - 1;
	memcpy(res->method, buf + h->method.off, mlen);
	res->method_bit = inspect_method_bit(buf + h->method.off, h->method.len);
	res->rule.reason = INSPECT_R_NO_RULE;

	if (check_authority(name, port, buf, h, res) != 0)
		return 0;
	/* The head sent gains a Via: it must still be one a server (and
	 * this parser) takes. */
	if (h->n_headers >= HTTP_MAX_HEADERS) {
		refuse(res, VR_HEAD_TOO_LARGE, "%zu fields; at most %d on an inspected connection",
		       h->n_headers, HTTP_MAX_HEADERS - 1);
		return 0;
	}
	/* The bytes after an upgrade could not be inspected. */
	if (http_find_header(buf, h, "upgrade", 0) >= 0) {
		refuse(res, VR_UPGRADE, "Upgrade on an inspected connection (what follows it could "
		                        "not be inspected)");
		return 0;
	}
	if ((field = http_connection_framing(buf, h)) != NULL) {
		refuse(res, VR_FRAMING, HTTP_CONNECTION_FRAMING_WHY, field);
		return 0;
	}
	if (http_request_framing(buf, h, &res->framing, &res->length) != 0) {
		refuse(res, VR_FRAMING, "the body's length is ambiguous or malformed");
		return 0;
	}
	pe = inspect_path_canon(buf + h->target.off, h->target.len, false, &res->target, &at);
	if (pe != INSPECT_PATH_OK) {
		refuse(res, VR_BAD_PATH, "request target: %s (byte %zu)", inspect_path_err_text(pe),
		       at + 1);
		return 0;
	}
	inspect_decide(&pi->http, res->method_bit, res->target.path, &res->rule);
	if (!res->rule.allow) {
		refuse(res, VR_REQUEST_DENIED, "%s %.*s: refused by %s%s%s", res->method, 160,
		       res->target.path, rule_reason_text(res->rule.reason),
		       res->rule.where != NULL ? " at " : "",
		       res->rule.where != NULL ? res->rule.where : "");
		return 0;
	}
	if (pi->max_request_body != 0 && res->framing == HTTP_BODY_LENGTH &&
	    res->length > pi->max_request_body) {
		refuse(res, VR_BODY_TOO_LARGE,
		       "Content-Length %llu is over max_request_body %llu (rule %s)",
		       (unsigned long long)res->length, (unsigned long long)pi->max_request_body,
		       pi->where);
		return 0;
	}
	if (pi->max_request_body != 0 && res->framing == HTTP_BODY_CHUNKED) {
		refuse(res, VR_LENGTH_REQUIRED,
		       "a chunked body, and max_request_body (rule %s) needs its length first: "
		       "send Content-Length",
		       pi->where);
		return 0;
	}
	/* The canonical bytes are what was checked and what goes. */
	plen = strlen(res->target.path);
	qlen = res->target.has_query ? 1 + strlen(res->target.query) : 0;
	{
		char target[2 * INSPECT_TARGET_MAX + 2];

		memcpy(target, res->target.path, plen);
		if (qlen > 0) {
			target[plen] = '?';
			memcpy(target + plen + 1, res->target.query, qlen - 1);
		}
		if (port == 443)
			snprintf(host, sizeof(host), "%s", name);
		else
			snprintf(host, sizeof(host), "%s:%u", name, (unsigned)port);
		n = http_rewrite_request(buf, h, target, plen + qlen, host, out, outlen);
	}
	if (n < 0) {
		refuse(res, VR_HEAD_TOO_LARGE, "the rewritten head does not fit");
		return -1;
	}
	return n;
}

static const char *
status_text(int status)
{
	switch (status) {
	case 400:
		return "Bad Request";
	case 403:
		return "Forbidden";
	case 411:
		return "Length Required";
	case 413:
		return "Content Too Large";
	case 421:
		return "Misdirected Request";
	case 431:
		return "Request Header Fields Too Large";
	}
	return "Error";
}

ssize_t
inspect_head_refusal(const struct inspect_head_result *res, const char *name, char *out,
                     size_t outlen)
{
	int status = verdict_reason_status(res->reason);
	char body[INSPECT_HEAD_WHY_MAX + HTTP_HOST_MAX + 32];
	int bl, n;

	if (status == 0)
		status = 400;
	bl = snprintf(body, sizeof(body), "airlock: %s: %s\n", name, res->why);
	if (bl < 0 || (size_t)bl >= sizeof(body))
		return -1;
	n = snprintf(out, outlen,
	             "HTTP/1.1 %d %s\r\n"
	             "Content-Type: text/plain; charset=utf-8\r\n"
	             "Content-Length: %d\r\n"
	             "Proxy-Status: airlock; error=%s; details=\"%s: %s\"\r\n"
	             "%s\r\n%s",
	             status, status_text(status), bl, verdict_reason_error(res->reason),
	             verdict_reason_token(res->reason), res->why,
	             res->close ? "Connection: close\r\n" : "", body);
	if (n < 0 || (size_t)n >= outlen)
		return -1;
	return n;
}
