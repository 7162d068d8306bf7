/* Placeholder until its issue lands: refuses, never pretends. */
#include <stdio.h>

#include "cli/cmd.h"

int
cmd_selftest(int argc, char **argv)
{
	(void)argc;
	(void)argv;
	fprintf(stderr, "airlock: 'selftest' is not built yet\n");
	return 125;
}
