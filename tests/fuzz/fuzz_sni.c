/* Fuzz the ClientHello reader the way TCP delivers bytes: the input after
 * the first two bytes is offered as a growing prefix, cut at points drawn
 * from those two bytes. Every prefix must either ask for more or give the
 * same answer as the whole input: the same result, names, ECH flag and
 * length. Names must be what sni.h promises (printable, 1..253 bytes), and
 * a complete hello's length within the input. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "proxy/sni.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static enum sni_result
parse_copy(const uint8_t *data, size_t len, struct sni_hello *out)
{
	/* exact-size heap copy so ASan catches any read past len */
	uint8_t *copy = malloc(len ? len : 1);
	enum sni_result r;

	memcpy(copy, data, len);
	r = sni_parse(copy, len, out);
	free(copy);
	return r;
}

static void
check_name(const char *name, size_t lo, size_t hi)
{
	size_t l = strnlen(name, SNI_NAME_MAX);

	if (l < lo || l > hi)
		abort();
	for (size_t i = 0; i < l; i++)
		if ((unsigned char)name[i] <= 0x20 || (unsigned char)name[i] >= 0x7f)
			abort();
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct sni_hello whole_h, h;
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
	whole = parse_copy(data, size, &whole_h);
	for (off = 0; off < size;) {
		seed = seed * 1103515245u + 12345u;
		off += 1 + (seed >> 16) % 97;
		if (off > size)
			off = size;
		r = parse_copy(data, off, &h);
		if (r != SNI_INCOMPLETE) {
			if (r != whole || strcmp(h.name, whole_h.name) != 0 ||
			    strcmp(h.second, whole_h.second) != 0 || h.ech != whole_h.ech ||
			    h.len != whole_h.len)
				abort();
			break;
		}
	}
	switch (whole) {
	case SNI_FOUND:
		check_name(whole_h.name, 1, 253);
		/* fall through */
	case SNI_NO_NAME:
		if (whole_h.len < 9 || whole_h.len > size || whole_h.second[0] != '\0')
			abort();
		break;
	case SNI_MANY_NAMES:
		check_name(whole_h.name, 1, 253);
		check_name(whole_h.second, 0, SNI_NAME_MAX - 1);
		if (whole_h.len < 9 || whole_h.len > size)
			abort();
		break;
	default:
		if (whole_h.len != 0)
			abort();
	}
	return 0;
}
