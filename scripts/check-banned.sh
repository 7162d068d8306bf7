#!/usr/bin/env bash
# Refuse functions that invite overflows or hidden state (STYLE.md).
set -euo pipefail
cd "$(dirname "$0")/.."
pattern='\b(sprintf|vsprintf|strcpy|strcat|strtok|atoi|atol|gets)[[:space:]]*\('
if hits=$(git ls-files '*.c' '*.h' | xargs grep -nE "$pattern" 2>/dev/null); then
	echo "banned functions (use snprintf, str_copy, strtok_r, parse_uint):"
	echo "$hits"
	exit 1
fi
echo "check-banned: clean"
