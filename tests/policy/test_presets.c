/* Every shipped preset (the .yaml files in policies/, listed at run time) loads, by
 * path and by its preset name, with a sha256 and no errors. The directory
 * comes from argv[1] (meson passes the source tree's policies/). */
#include <dirent.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "policy/policy.h"

static const char *preset_dir;

static void
test_every_preset_loads(void **state)
{
	DIR *d = opendir(preset_dir);
	struct dirent *de;
	size_t n = 0;

	(void)state;
	if (d == NULL)
		fail_msg("cannot open %s", preset_dir);
	assert_int_equal(policy_add_preset_dir(preset_dir), 0);
	while ((de = readdir(d)) != NULL) {
		size_t l = strlen(de->d_name);
		char path[4096], name[256];
		struct policy_diag diag = {0};
		struct policy *p, *q;

		if (l <= 5 || strcmp(de->d_name + l - 5, ".yaml") != 0)
			continue;
		snprintf(path, sizeof(path), "%s/%s", preset_dir, de->d_name);
		p = policy_load(path, &diag);
		for (size_t i = 0; i < diag.n_lines; i++)
			fprintf(stderr, "%s\n", diag.lines[i]);
		if (p == NULL)
			fail_msg("preset %s does not load", path);
		assert_int_equal(strlen(policy_sha256(p)), 64);
		policy_diag_clear(&diag);

		/* by name, through the preset search */
		snprintf(name, sizeof(name), "%.*s", (int)(l - 5), de->d_name);
		q = policy_load(name, &diag);
		if (q == NULL)
			fail_msg("preset '%s' does not load by name", name);
		assert_string_equal(policy_sha256(p), policy_sha256(q));
		policy_free(q);
		policy_free(p);
		policy_diag_clear(&diag);
		n++;
	}
	closedir(d);
	if (n == 0)
		fail_msg("no presets (*.yaml) in %s: nothing was tested", preset_dir);
	printf("%zu presets load\n", n);
}

int
main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test(test_every_preset_loads),
	};

	if (argc != 2) {
		fprintf(stderr, "usage: test_presets POLICY_DIR\n");
		return 2;
	}
	preset_dir = argv[1];
	return cmocka_run_group_tests(tests, NULL, NULL);
}
