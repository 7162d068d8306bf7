/* Upstream resolver addresses: /etc/resolv.conf's nameserver lines and the
 * --dns-upstream flag. Run once at start-up, before the event loop, so
 * getaddrinfo with AI_NUMERICHOST (never a lookup) is fine here; it is used
 * for its scope-id handling ("fe80::1%eth0"). */
#include "dns/dns.h"

#include "common/log.h"
#include "common/util.h"

#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>

#define RESOLV_LINE_MAX 1024

/* A numeric address (no port) into out with port. 0 or -1. */
static int
numeric_addr(const char *s, uint16_t port, struct sockaddr_storage *out)
{
	struct addrinfo hints = {
	        .ai_flags = AI_NUMERICHOST | AI_NUMERICSERV,
	        .ai_family = AF_UNSPEC,
	        .ai_socktype = SOCK_DGRAM,
	};
	struct addrinfo *res = NULL;
	char portstr[8];

	snprintf(portstr, sizeof(portstr), "%u", (unsigned)port);
	if (getaddrinfo(s, portstr, &hints, &res) != 0 || res == NULL)
		return -1;
	if (res->ai_addrlen > sizeof(*out) ||
	    (res->ai_family != AF_INET && res->ai_family != AF_INET6)) {
		freeaddrinfo(res);
		return -1;
	}
	memset(out, 0, sizeof(*out));
	memcpy(out, res->ai_addr, res->ai_addrlen);
	freeaddrinfo(res);
	return 0;
}

int
dns_upstream_from_resolv_conf(const char *path, struct sockaddr_storage *out, size_t max)
{
	FILE *f = fopen(path, "re");
	char line[RESOLV_LINE_MAX];
	size_t n = 0;
	unsigned lineno = 0;

	if (f == NULL) {
		log_warn("dns: cannot read %s", path);
		return -1;
	}
	while (fgets(line, sizeof(line), f) != NULL) {
		char *p = line, *word, *end;

		lineno++;
		if (strchr(line, '\n') == NULL && !feof(f)) {
			int ch;

			/* An overlong line: skip the rest of it. */
			while ((ch = fgetc(f)) != EOF && ch != '\n')
				;
			continue;
		}
		while (*p == ' ' || *p == '\t')
			p++;
		if (strncmp(p, "nameserver", 10) != 0 || (p[10] != ' ' && p[10] != '\t'))
			continue;
		p += 10;
		while (*p == ' ' || *p == '\t')
			p++;
		word = p;
		while (*p != '\0' && *p != ' ' && *p != '\t' && *p != '\n' && *p != '#' &&
		       *p != ';')
			p++;
		end = p;
		*end = '\0';
		if (*word == '\0')
			continue;
		if (n >= max)
			break;
		if (numeric_addr(word, 53, &out[n]) != 0) {
			log_warnx("dns: %s:%u: '%s' is not an IP address; ignored", path, lineno,
			          word);
			continue;
		}
		n++;
	}
	fclose(f);
	return (int)n;
}

int
dns_upstream_parse(const char *s, struct sockaddr_storage *out)
{
	char host[INET6_ADDRSTRLEN + 64];
	const char *colon;
	uint64_t port = 53;
	size_t hlen;

	if (s == NULL || *s == '\0')
		return -1;
	if (s[0] == '[') {
		const char *close = strchr(s, ']');

		if (close == NULL)
			return -1;
		hlen = (size_t)(close - s - 1);
		if (close[1] == ':') {
			if (parse_uint(close + 2, 1, 65535, &port) != 0)
				return -1;
		} else if (close[1] != '\0') {
			return -1;
		}
		s++;
	} else if ((colon = strchr(s, ':')) != NULL && strchr(colon + 1, ':') == NULL) {
		/* Exactly one colon: IPv4 with a port. */
		hlen = (size_t)(colon - s);
		if (parse_uint(colon + 1, 1, 65535, &port) != 0)
			return -1;
	} else {
		hlen = strlen(s); /* bare IPv4 or bare IPv6 */
	}
	if (hlen == 0 || hlen >= sizeof(host))
		return -1;
	memcpy(host, s, hlen);
	host[hlen] = '\0';
	return numeric_addr(host, (uint16_t)port, out);
}
