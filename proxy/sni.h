/* A pure, bounded reader of the TLS ClientHello's server_name (SNI).
 *
 * The transparent proxy calls it on the bytes peeked so far; the ClientHello
 * may be fragmented over several TLS records and the records over any TCP
 * segments, so the answer is "need more" until the whole ClientHello is in.
 * Nothing here allocates; the input is never trusted. */
#ifndef AIRLOCK_PROXY_SNI_H
#define AIRLOCK_PROXY_SNI_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Largest ClientHello (handshake message, header included) accepted. Real
 * ones are below 2 KiB even with post-quantum key shares. */
#define SNI_MAX_HELLO 16384
/* Most bytes of records that can carry such a ClientHello (headers of one
 * record per byte in the worst, 1-byte-fragment case are not worth serving:
 * the caller stops peeking here). */
#define SNI_MAX_INPUT (SNI_MAX_HELLO + 4096)
/* Longest DNS name plus the NUL. */
#define SNI_NAME_MAX 256

enum sni_result {
	SNI_FOUND = 0,  /* name holds the host_name */
	SNI_INCOMPLETE, /* TLS so far; peek more bytes */
	SNI_NO_NAME,    /* a complete ClientHello without a server_name */
	SNI_NOT_TLS,    /* the first bytes are not a TLS handshake record */
	SNI_MALFORMED,  /* TLS, but broken, oversized or a bad host_name */
	SNI_MANY_NAMES, /* server_name lists more than one name: name and second */
};

/* What a ClientHello says about the server it wants. */
struct sni_hello {
	/* SNI_FOUND: the host_name (1..253 printable ASCII bytes, as sent);
	 * SNI_MANY_NAMES: the first entry's; "" otherwise. */
	char name[SNI_NAME_MAX];
	/* SNI_MANY_NAMES: the second entry, non-printable bytes as '?', for
	 * the log's reason ("" if it is empty). */
	char second[SNI_NAME_MAX];
	/* The hello carries encrypted_client_hello (0xfe0d, RFC 9849) or the
	 * draft encrypted_server_name (0xffce): the name the server acts on
	 * may be an encrypted inner one, and name only the outer, public one.
	 * Set for every complete hello (SNI_FOUND, SNI_NO_NAME,
	 * SNI_MANY_NAMES). */
	bool ech;
	/* Complete hellos: bytes of buf up to the end of the record that
	 * completes the ClientHello (where the client's next bytes start). */
	size_t len;
};

/* Parse buf[0..len) as the start of a TLS connection. Every extension of
 * a complete ClientHello is walked: server_name must be a list of one
 * host_name (more than one entry is SNI_MANY_NAMES: RFC 6066 allows one
 * name of a type and servers disagree on which of several counts); a
 * second server_name or encrypted_client_hello extension, an entry of
 * another name type, or bytes after the list are SNI_MALFORMED. */
enum sni_result sni_parse(const uint8_t *buf, size_t len, struct sni_hello *out);

/* Short stable text for logs: "found", "incomplete", ... */
const char *sni_result_str(enum sni_result r);

/* The 7-byte fatal TLS alert (access_denied) sent before closing a refused
 * TLS connection, so the client fails at once with a clear message. */
extern const uint8_t sni_alert_access_denied[7];

#endif
