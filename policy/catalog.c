/* The upload-sink catalog. Each entry is a concrete probe name rather than
 * a pattern: a policy admits the sink when the matcher itself says allow
 * for the probe on 443 or 80, so an exact rule, a wildcard over it
 * (*.amazonaws.com covers the S3 probes) and includes are all caught by
 * the same code that enforces the policy. For services where every user
 * gets a subdomain, the probe is a made-up subdomain of theirs. */
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>

#include "policy/catalog.h"
#include "policy/internal.h"

static const struct policy_sink sinks[] = {
        /* paste sites */
        {"pastebin.com", "paste site"},
        {"paste.ee", "paste site"},
        {"hastebin.com", "paste site"},
        {"dpaste.org", "paste site"},
        {"dpaste.com", "paste site"},
        {"termbin.com", "paste site"},
        {"ix.io", "paste site"},
        {"sprunge.us", "paste site"},
        {"paste.rs", "paste site"},
        {"rentry.co", "paste site"},
        {"controlc.com", "paste site"},
        {"justpaste.it", "paste site"},
        {"privatebin.net", "paste site"},
        /* gists and snippets */
        {"gist.github.com", "gist host"},
        {"gist.githubusercontent.com", "gist host"},
        {"snippets.gitlab.com", "snippet host"},
        /* file drops */
        {"transfer.sh", "anonymous file drop"},
        {"file.io", "anonymous file drop"},
        {"0x0.st", "anonymous file drop"},
        {"tmpfiles.org", "anonymous file drop"},
        {"temp.sh", "anonymous file drop"},
        {"oshi.at", "anonymous file drop"},
        {"catbox.moe", "anonymous file drop"},
        {"litterbox.catbox.moe", "anonymous file drop"},
        {"bashupload.com", "anonymous file drop"},
        /* webhook and request catchers */
        {"webhook.site", "webhook catcher"},
        {"requestbin.net", "webhook catcher"},
        {"example.requestcatcher.com", "webhook catcher"},
        {"example.m.pipedream.net", "webhook catcher"},
        {"example.free.beeceptor.com", "webhook catcher"},
        {"example.interact.sh", "webhook catcher (interactsh)"},
        {"example.oast.fun", "webhook catcher (interactsh)"},
        {"example.burpcollaborator.net", "webhook catcher"},
        {"hooks.slack.com", "chat webhook"},
        {"discord.com", "chat webhook (discord.com/api/webhooks)"},
        {"api.telegram.org", "chat bot API"},
        /* public object storage (anyone can create a bucket) */
        {"s3.amazonaws.com", "public object storage (S3)"},
        {"example-bucket.s3.amazonaws.com", "public object storage (S3)"},
        {"example-bucket.s3.us-east-1.amazonaws.com", "public object storage (S3)"},
        {"storage.googleapis.com", "public object storage (GCS)"},
        {"example.blob.core.windows.net", "public object storage (Azure Blob)"},
        {"example.r2.dev", "public object storage (Cloudflare R2)"},
        {"example.r2.cloudflarestorage.com", "public object storage (Cloudflare R2)"},
        {"example.digitaloceanspaces.com", "public object storage (DO Spaces)"},
        {"example.backblazeb2.com", "public object storage (Backblaze B2)"},
        /* tunnelling services */
        {"example.ngrok.io", "tunnelling service (ngrok)"},
        {"example.ngrok-free.app", "tunnelling service (ngrok)"},
        {"example.ngrok.app", "tunnelling service (ngrok)"},
        {"example.trycloudflare.com", "tunnelling service (Cloudflare quick tunnel)"},
        {"example.loca.lt", "tunnelling service (localtunnel)"},
        {"localtunnel.me", "tunnelling service (localtunnel)"},
        {"serveo.net", "tunnelling service (serveo)"},
        {"example.serveo.net", "tunnelling service (serveo)"},
        {"bore.pub", "tunnelling service (bore)"},
        {"example.localhost.run", "tunnelling service (localhost.run)"},
        {"example.lhr.life", "tunnelling service (localhost.run)"},
        {"example.pinggy.link", "tunnelling service (pinggy)"},
        {"example.tunnelmole.net", "tunnelling service (tunnelmole)"},
        {"example.devtunnels.ms", "tunnelling service (dev tunnels)"},
        /* DNS-over-HTTPS resolvers: a private DNS channel around the DNS
         * listener, and a tunnel in themselves */
        {"dns.google", "DNS-over-HTTPS resolver"},
        {"dns.google.com", "DNS-over-HTTPS resolver"},
        {"cloudflare-dns.com", "DNS-over-HTTPS resolver"},
        {"mozilla.cloudflare-dns.com", "DNS-over-HTTPS resolver"},
        {"one.one.one.one", "DNS-over-HTTPS resolver"},
        {"dns.quad9.net", "DNS-over-HTTPS resolver"},
        {"doh.opendns.com", "DNS-over-HTTPS resolver"},
        {"dns.adguard-dns.com", "DNS-over-HTTPS resolver"},
        {"dns.nextdns.io", "DNS-over-HTTPS resolver"},
        {"doh.mullvad.net", "DNS-over-HTTPS resolver"},
};

const struct policy_sink *
policy_catalog(size_t *n)
{
	*n = sizeof(sinks) / sizeof(sinks[0]);
	return sinks;
}

/* Well-known DoH resolvers by address, for cidr rules that cover them. */
static const struct {
	int family;
	unsigned char addr[16];
	const char *shown;
} doh_addrs[] = {
        {AF_INET, {1, 1, 1, 1}, "1.1.1.1"},
        {AF_INET, {8, 8, 8, 8}, "8.8.8.8"},
        {AF_INET, {9, 9, 9, 9}, "9.9.9.9"},
        {AF_INET6,
         {0x26, 0x06, 0x47, 0x00, 0x47, 0x00, 0, 0, 0, 0, 0, 0, 0, 0, 0x11, 0x11},
         "2606:4700:4700::1111"},
        {AF_INET6,
         {0x20, 0x01, 0x48, 0x60, 0x48, 0x60, 0, 0, 0, 0, 0, 0, 0, 0, 0x88, 0x88},
         "2001:4860:4860::8888"},
};

int
policy_catalog_check(const struct policy *p, struct policy_diag *diag)
{
	static const uint16_t ports[] = {443, 80};

	for (size_t i = 0; i < sizeof(sinks) / sizeof(sinks[0]); i++) {
		for (size_t k = 0; k < sizeof(ports) / sizeof(ports[0]); k++) {
			struct policy_verdict v;

			policy_match_host(p, sinks[i].probe, ports[k], &v);
			if (v.action != POLICY_ALLOW)
				continue;
			if (policy_diag_add(
			            &diag->warnings, &diag->n_warnings,
			            "%s: allows %s:%u, a %s that accepts uploads from anyone",
			            v.where, sinks[i].probe, ports[k], sinks[i].what) != 0)
				return -1;
			break;
		}
	}
	for (size_t i = 0; i < sizeof(doh_addrs) / sizeof(doh_addrs[0]); i++) {
		struct sockaddr_storage ss;
		struct policy_verdict v;

		memset(&ss, 0, sizeof(ss));
		if (doh_addrs[i].family == AF_INET) {
			struct sockaddr_in *sin = (struct sockaddr_in *)&ss;

			sin->sin_family = AF_INET;
			memcpy(&sin->sin_addr, doh_addrs[i].addr, 4);
		} else {
			struct sockaddr_in6 *sin6 = (struct sockaddr_in6 *)&ss;

			sin6->sin6_family = AF_INET6;
			memcpy(&sin6->sin6_addr, doh_addrs[i].addr, 16);
		}
		policy_match_addr(p, (const struct sockaddr *)&ss, 443, &v);
		if (v.action == POLICY_ALLOW &&
		    policy_diag_add(&diag->warnings, &diag->n_warnings,
		                    "%s: allows %s:443, a public DNS-over-HTTPS resolver (a way "
		                    "around the DNS listener)",
		                    v.where, doh_addrs[i].shown) != 0)
			return -1;
	}
	return 0;
}
