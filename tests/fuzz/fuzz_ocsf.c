/* Fuzz `airlock log export --format ocsf` (elog/ocsf.c) on a log file of
 * any bytes: the reader's records become OCSF events, and the fields they
 * carry are the task's words (a `client`, a `host`, a `url`), so the
 * conversion must not trust them. Properties checked, beyond "no crash,
 * no UB": every line written is one JSON object that the log's own
 * reader parses. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include "elog/json.h"
#include "elog/ocsf.h"

static struct elog_json J;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static int fd = -1, devnull = -1, saved = -1;
	static char path[64];
	char *files[1] = {path}, *out = NULL, why[160];
	size_t out_len = 0;
	FILE *f;

	if (fd < 0) {
		fd = memfd_create("fuzz-ocsf", MFD_CLOEXEC);
		if (fd < 0)
			abort();
		snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
		devnull = open("/dev/null", O_WRONLY | O_CLOEXEC);
		saved = dup(STDERR_FILENO);
		if (devnull < 0 || saved < 0)
			abort();
	}
	if (ftruncate(fd, 0) != 0 || pwrite(fd, data, size, 0) != (ssize_t)size)
		abort();
	f = open_memstream(&out, &out_len);
	if (f == NULL)
		abort();
	/* The reader's complaints about garbage lines go to stderr: not to
	 * the fuzzer's (a crash in here still leaves its artifact file). */
	fflush(stderr);
	if (dup2(devnull, STDERR_FILENO) < 0)
		abort();
	(void)elog_export_ocsf(files, 1, f);
	fflush(stderr);
	if (dup2(saved, STDERR_FILENO) < 0)
		abort();
	if (fclose(f) != 0)
		abort();
	for (char *line = out, *end = out + out_len; line < end;) {
		char *nl = memchr(line, '\n', (size_t)(end - line));

		if (nl == NULL || line[0] != '{' ||
		    elog_json_parse(&J, line, (size_t)(nl - line), why, sizeof(why)) != 0)
			abort();
		line = nl + 1;
	}
	free(out);
	return 0;
}
