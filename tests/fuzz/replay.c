/* Replays fuzz inputs without libFuzzer: every file named on the command
 * line, or every file inside a named directory, goes once through
 * LLVMFuzzerTestOneInput. Under ASan/UBSan this is the regression test for
 * everything the fuzzers ever found. */
#include <dirent.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int
replay_file(const char *path)
{
	FILE *f = fopen(path, "rb");
	uint8_t *buf = NULL;
	long len;

	if (f == NULL) {
		fprintf(stderr, "replay: %s: %s\n", path, strerror(errno));
		return -1;
	}
	if (fseek(f, 0, SEEK_END) != 0 || (len = ftell(f)) < 0 ||
	    fseek(f, 0, SEEK_SET) != 0) {
		fprintf(stderr, "replay: %s: cannot size\n", path);
		fclose(f);
		return -1;
	}
	/* An exact-size heap copy so ASan sees reads past the end. */
	buf = malloc(len > 0 ? (size_t)len : 1);
	if (buf == NULL || fread(buf, 1, (size_t)len, f) != (size_t)len) {
		fprintf(stderr, "replay: %s: cannot read\n", path);
		free(buf);
		fclose(f);
		return -1;
	}
	fclose(f);
	LLVMFuzzerTestOneInput(buf, (size_t)len);
	free(buf);
	return 0;
}

int
main(int argc, char **argv)
{
	size_t n = 0;

	for (int i = 1; i < argc; i++) {
		struct stat st;
		DIR *d;
		struct dirent *de;

		if (stat(argv[i], &st) != 0) {
			fprintf(stderr, "replay: %s: %s\n", argv[i], strerror(errno));
			return 1;
		}
		if (!S_ISDIR(st.st_mode)) {
			if (replay_file(argv[i]) != 0)
				return 1;
			n++;
			continue;
		}
		if ((d = opendir(argv[i])) == NULL) {
			fprintf(stderr, "replay: %s: %s\n", argv[i], strerror(errno));
			return 1;
		}
		while ((de = readdir(d)) != NULL) {
			char path[4096];

			if (de->d_name[0] == '.')
				continue;
			snprintf(path, sizeof(path), "%s/%s", argv[i], de->d_name);
			if (replay_file(path) != 0) {
				closedir(d);
				return 1;
			}
			n++;
		}
		closedir(d);
	}
	if (n == 0) {
		fprintf(stderr, "replay: no inputs found; an empty corpus tests nothing\n");
		return 1;
	}
	printf("replayed %zu inputs\n", n);
	return 0;
}
