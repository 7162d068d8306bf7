#!/usr/bin/env bash
# Hostile policy files: each gets exactly one clear error line and exit 1
# within a second: binary garbage, 10,000 nested '[', an alias bomb, a
# 100 MB file (sparse, made here, never committed), 10,000 ports in a rule.
. "$(dirname "$0")/../lib.sh"
scratch_dir

head -c 4096 "$AIRLOCK" >"$SCRATCH/binary.yaml"
python3 -c "print('[' * 10000)" >"$SCRATCH/deep.yaml"
cat >"$SCRATCH/bomb.yaml" <<'Y'
a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]
b: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a]
c: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b]
d: &d [*c,*c,*c,*c,*c,*c,*c,*c,*c]
e: &e [*d,*d,*d,*d,*d,*d,*d,*d,*d]
f: &f [*e,*e,*e,*e,*e,*e,*e,*e,*e]
g: &g [*f,*f,*f,*f,*f,*f,*f,*f,*f]
Y
truncate -s 100M "$SCRATCH/huge.yaml"
python3 -c "print('version: 1\nallow:\n  - host: a.test\n    ports: [' + ','.join(str(i % 65535 + 1) for i in range(10000)) + ']')" \
	>"$SCRATCH/ports.yaml"

check_one() { # NAME EXPECTED-REGEX
	local f="$SCRATCH/$1" st=0 t0 t1 err
	t0=$(date +%s%N)
	"$AIRLOCK" policy check "$f" >"$SCRATCH/out" 2>"$SCRATCH/err" || st=$?
	t1=$(date +%s%N)
	expect_eq "$1: exit" 1 "$st"
	err=$(cat "$SCRATCH/err")
	expect_eq "$1: error lines" 1 "$(wc -l <"$SCRATCH/err")"
	expect_match "$1: error text" "^$f:$2" "$err"
	[ $(( (t1 - t0) / 1000000 )) -lt 1000 ] || fail "$1: took $(( (t1 - t0) / 1000000 )) ms"
	echo "ok $1 ($(( (t1 - t0) / 1000000 )) ms): $err"
}

check_one binary.yaml '1:1: binary data \(NUL byte at offset [0-9]+\); expected a YAML text policy$'
check_one deep.yaml '1:9: nesting deeper than 8 levels; a policy needs 4$'
check_one bomb.yaml '1:4: YAML anchors \(&name\) are not allowed; write each value out$'
check_one huge.yaml '1:1: file is 104857600 bytes; policies are limited to 4194304 bytes \(4 MiB\), split it with include$'
check_one ports.yaml '4:12: ports: 10000 entries; at most 64 are allowed \(write a range like "8000-8999"\)$'
