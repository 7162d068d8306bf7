/* Fuzz the ClientHello reader the way TCP delivers bytes: the input after
 * the first two bytes is offered as a growing prefix, cut at points drawn
 * from those two bytes. Every prefix must either ask for more or give the
 * same answer as the whole input. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "proxy/sni.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static enum sni_result
parse_copy(const uint8_t *data, size_t len, char *name)
{
	/* exact-size heap copy so ASan catches any read past len */
	uint8_t *copy = malloc(len ? len : 1);
	enum sni_result r;

	memcpy(copy, data, len);
	r = sni_parse(copy, len, name, SNI_NAME_MAX);
	free(copy);
	return r;
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char whole_name[SNI_NAME_MAX], name[SNI_NAME_MAX];
	enum sni_result whole, r;
	unsigned seed;
	size_t off;

	if (size < 2)
		return 0;
	seed = (unsigned)data[0] << 8 | data[1];
	data += 2;
	size -= 2;
	if (size > SNI_MAX_INPUT)
		size = SNI_MAX_INPUT;
	whole = parse_copy(data, size, whole_name);
	for (off = 0; off < size;) {
		seed = seed * 1103515245u + 12345u;
		off += 1 + (seed >> 16) % 97;
		if (off > size)
			off = size;
		r = parse_copy(data, off, name);
		if (r != SNI_INCOMPLETE) {
			if (r != whole)
				abort();
			if (r == SNI_FOUND && strcmp(name, whole_name) != 0)
				abort();
			break;
		}
	}
	if (whole == SNI_FOUND) {
		size_t l = strlen(whole_name);
		if (l == 0 || l > 253)
			abort();
	}
	return 0;
}
