/* Fuzz the canonical path (inspect/path.h) and the glob matcher. The first
 * byte chooses allow_encoded_slash and splits the rest into a glob and a
 * target. Properties, any of which failing aborts:
 *  - a canonical path starts with '/', holds no "//", no "." or ".."
 *    segment, no ';', and only the bytes a path may hold;
 *  - it is its own canonical form (idempotent), and so is its query;
 *  - read with its encoded slashes decoded, as some servers route, it
 *    still has no "." or ".." segment and no empty one;
 *  - it is no longer than the input;
 *  - a glob inspect_glob_check accepts matches without crashing, the
 *    glob of every path ("/" and "**") matches every canonical path, and a canonical path taken as a glob
 *    (when accepted) matches itself. */
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "inspect/path.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static struct inspect_target a, b;

static void
check_canonical(const char *p)
{
	size_t n = strlen(p);

	if (n == 0 || p[0] != '/' || strstr(p, "//") != NULL || strchr(p, ';') != NULL)
		abort();
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)p[i];

		if (c <= 0x20 || c >= 0x7f || strchr("\\\"<>^`{|}#?", c) != NULL)
			abort();
	}
	/* dot segments: "/./", "/../", or at the end */
	if (strstr(p, "/./") != NULL || strstr(p, "/../") != NULL)
		abort();
	if ((n >= 2 && strcmp(p + n - 2, "/.") == 0) || (n >= 3 && strcmp(p + n - 3, "/..") == 0))
		abort();
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	bool slash_ok;
	size_t split, glen, tlen;
	char *glob, *target;

	if (size < 2)
		return 0;
	slash_ok = (data[0] & 1) != 0;
	split = 1 + (size_t)(data[0] >> 1) % (size - 1);
	glen = split - 1;
	tlen = size - split;
	glob = malloc(glen + 1);
	target = malloc(tlen ? tlen : 1); /* exact size: ASan sees any over-read */
	memcpy(glob, data + 1, glen);
	glob[glen] = '\0';
	memcpy(target, data + split, tlen);

	if (inspect_path_canon(target, tlen, slash_ok, &a, NULL) == INSPECT_PATH_OK) {
		size_t plen = strlen(a.path);

		check_canonical(a.path);
		if (slash_ok) {
			/* Decode %2F and %5C as a server that routes on the
			 * decoded path would: still canonical. */
			char dec[INSPECT_TARGET_MAX + 1];
			size_t o = 0;

			for (size_t i = 0; a.path[i] != '\0'; i++) {
				if (a.path[i] == '%' && (strncmp(a.path + i, "%2F", 3) == 0 ||
				                         strncmp(a.path + i, "%5C", 3) == 0)) {
					dec[o++] = '/';
					i += 2;
				} else {
					dec[o++] = a.path[i];
				}
			}
			dec[o] = '\0';
			check_canonical(dec);
		}
		if (plen > tlen + 1 || strlen(a.query) > tlen)
			abort();
		if (inspect_path_canon(a.path, plen, slash_ok, &b, NULL) != INSPECT_PATH_OK ||
		    strcmp(a.path, b.path) != 0)
			abort();
		if (a.has_query) {
			size_t qlen = strlen(a.query);
			char *again = malloc(qlen + 2);

			again[0] = '/';
			again[1] = '?';
			memcpy(again + 2, a.query, qlen);
			if (inspect_path_canon(again, qlen + 2, slash_ok, &b, NULL) != INSPECT_PATH_OK ||
			    strcmp(a.query, b.query) != 0)
				abort();
			free(again);
		}
		if (!inspect_glob_match("/**", a.path))
			abort();
		if (inspect_glob_check(a.path, NULL) == NULL && !inspect_glob_match(a.path, a.path))
			abort();
		if (strnlen(glob, glen) == glen && inspect_glob_check(glob, NULL) == NULL)
			(void)inspect_glob_match(glob, a.path);
	}
	free(glob);
	free(target);
	return 0;
}
