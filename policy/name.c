/* DNS name normalisation, shared by the loader (host rules) and by the
 * proxy and DNS listener (names the sandbox sends). One function, so a
 * rule and a query can never be normalised differently. */
#include <string.h>

#include "policy/internal.h"
#include "policy/policy.h"

int
policy_name_normalize(const char *in, char *out, size_t outlen, const char **why)
{
	size_t len = strnlen(in, 256), label = 0;
	const char *reason = NULL;

	if (len > 0 && in[len - 1] == '.')
		len--;
	if (len == 0) {
		reason = "empty name";
		goto fail;
	}
	if (len > 253) {
		reason = "name longer than 253 characters";
		goto fail;
	}
	/* Non-ASCII anywhere gets the punycode advice, even when an earlier
	 * character is wrong too: it is the likelier fix. */
	for (size_t i = 0; i < len; i++) {
		if ((unsigned char)in[i] >= 0x80) {
			reason = "non-ASCII name; write it as punycode (xn--...)";
			goto fail;
		}
	}
	if (len + 1 > outlen) {
		reason = "name does not fit the output buffer";
		goto fail;
	}
	for (size_t i = 0; i < len; i++) {
		char c = in[i];

		if (c == '.') {
			if (label == 0) {
				reason = "empty label";
				goto fail;
			}
			if (out[i - 1] == '-')
				goto hyphen;
			label = 0;
			out[i] = c;
			continue;
		}
		if (c == '*') {
			reason = "'*' is only allowed as a whole leading label (*.example.com)";
			goto fail;
		}
		if (c >= 'A' && c <= 'Z')
			c = (char)(c - 'A' + 'a');
		else if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' ||
		           c == '_')) {
			reason = "character not allowed in a name (letters, digits, '-', '_' and "
			         "'.')";
			goto fail;
		}
		/* RFC 952/1123: a host name label neither starts nor ends
		 * with '-'. Refused for rules and requests alike, so such a
		 * name can never reach a wildcard rule. */
		if (c == '-' && label == 0)
			goto hyphen;
		if (++label > 63) {
			reason = "label longer than 63 characters";
			goto fail;
		}
		out[i] = c;
	}
	if (label == 0) {
		/* "a.." lost only one trailing dot. */
		reason = "empty label";
		goto fail;
	}
	if (out[len - 1] == '-')
		goto hyphen;
	out[len] = '\0';
	return 0;
hyphen:
	reason = "label starts or ends with a hyphen";
fail:
	if (why != NULL)
		*why = reason;
	if (outlen > 0)
		out[0] = '\0';
	return -1;
}

bool
policy_label_numeric(const char *s, size_t len)
{
	size_t i = 0;

	if (len == 0)
		return false;
	if (len >= 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X')) {
		/* "0x" alone is zero to inet_aton and to URL parsers. */
		for (i = 2; i < len; i++) {
			char c = s[i];

			if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') ||
			      (c >= 'A' && c <= 'F')))
				return false;
		}
		return true;
	}
	for (; i < len; i++)
		if (s[i] < '0' || s[i] > '9')
			return false;
	return true;
}
