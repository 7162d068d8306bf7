/* Placeholder until its issue lands: refuses, never pretends. */
#include <stdio.h>

#include "cli/cmd.h"

int
cmd_proxy(int argc, char **argv)
{
	(void)argc;
	(void)argv;
	fprintf(stderr, "airlock: 'proxy' is not built yet\n");
	return 125;
}
