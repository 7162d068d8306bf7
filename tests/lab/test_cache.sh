#!/usr/bin/env bash
# Caches that persist (docs/run.md, Caches): pip in a venv (the README's
# headline, as written for Debian 12, where a bare `pip install` meets
# PEP 668), npm, and Debian 12's cargo (1.65: the git index on github.com,
# so the crates and github presets), each run twice under its preset with the same
# --cache DIR. The first run fetches from the lab's registries; the second
# installs the same package into a fresh place and the registries' access
# logs show no package fetched: npm asks nothing at all; pip still
# revalidates the index page (it sends max-age=0 for index pages on
# purpose, to see new releases), which the server answers 304, no body.
# A run without --cache shares nothing. With AIRLOCK_TEST_USER, pip's
# story again rootless.
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/lib.sh"
need_prog npm
lab_start
P=$SOURCE_ROOT/policies
CACHE=$LAB/cache
# The lab's client environment turns pip's cache off and points npm's
# elsewhere; --cache must decide both here.
filtered=()
for e in "${LAB_ENV[@]}"; do
	case $e in PIP_NO_CACHE_DIR=* | npm_config_cache=*) ;; *) filtered+=("$e") ;; esac
done
LAB_ENV=("${filtered[@]}")

requests() { # the access log lines of host $1 so far
	cat "$LAB_LOG/$1.access.log" 2>/dev/null | wc -l
}

# --- the README's headline: pip in a venv --------------------------------
# Made outside airlock, as the README says, with Debian's python3.
in_lab /usr/bin/python3 -m venv "$LAB_WORK/.venv" || fail "python3 -m venv"
if airlock_lab pypi -- /usr/bin/python3 -m pip install -q labpkg >"$LAB_WORK/pep668.out" 2>&1; then
	echo "note: this Debian's pip installs system-wide without a venv" >&2
else
	grep -q externally-managed-environment "$LAB_WORK/pep668.out" ||
		fail "bare pip failed for another reason than PEP 668: $(tail -n 3 "$LAB_WORK/pep668.out")"
fi
airlock_lab pypi --cache "$CACHE" -- .venv/bin/pip install -q labpkg ||
	fail "first run: airlock run -p pypi -- .venv/bin/pip install labpkg"
expect_eq "labpkg imports from the venv" "hello from labpkg" \
	"$("$LAB_WORK/.venv/bin/python" -c 'import labpkg; print(labpkg.hello())')"
[ "$(requests files.pythonhosted.org)" -ge 1 ] || fail "first run: no wheel fetched (is the test sound?)"
[ -n "$(find "$CACHE/pip" -type f 2>/dev/null | head -n 1)" ] || fail "first run: pip left nothing in $CACHE/pip"
before_index=$(requests pypi.org) before_files=$(requests files.pythonhosted.org)
in_lab "$LAB_WORK/.venv/bin/pip" uninstall -q -y labpkg || fail "pip uninstall"
airlock_lab pypi --cache "$CACHE" -- .venv/bin/pip install -q labpkg ||
	fail "second run: pip install labpkg from the cache"
expect_eq "labpkg imports again" "hello from labpkg" \
	"$("$LAB_WORK/.venv/bin/python" -c 'import labpkg; print(labpkg.hello())')"
# Only revalidations of the index page: no body, nothing downloaded.
new_index=$(tail -n +"$((before_index + 1))" "$LAB_LOG/pypi.org.access.log")
[ -z "$(grep -v '"GET /simple/labpkg/ HTTP/1.1" 304$' <<<"$new_index" | grep .)" ] ||
	fail "second pip run: pypi.org sent more than a 304 for the index page: $new_index"
expect_eq "second pip run: requests to files.pythonhosted.org" "$before_files" "$(requests files.pythonhosted.org)"

# Without --cache the same install fetches again: the cache was the reason.
in_lab "$LAB_WORK/.venv/bin/pip" uninstall -q -y labpkg || fail "pip uninstall"
airlock_lab pypi -- .venv/bin/pip install -q labpkg || fail "pip install without --cache"
[ "$(requests files.pythonhosted.org)" -gt "$before_files" ] ||
	fail "a run without --cache was served from somewhere: no wheel fetched"

# --- cargo (Debian's, /usr/bin/cargo) ---------------------------------------
CARGO=/usr/bin/cargo
[ -x "$CARGO" ] || skip "Debian's cargo is not installed (scripts/setup.sh installs it)"
printf 'version: 1\nname: crates-debian12\ninclude: [crates, github]\n' >"$LAB_WORK/crates.yaml"
proj=$LAB_WORK/cproj
mkdir -p "$proj/src"
printf '[package]\nname = "cproj"\nversion = "0.1.0"\nedition = "2018"\n\n[dependencies]\nlabcrate = "1"\n' \
	>"$proj/Cargo.toml"
printf 'fn main() {\n    println!("{}", labcrate::hello());\n}\n' >"$proj/src/main.rs"
for n in 1 2; do
	before_git=$(requests github.com) before_dl=$(requests static.crates.io)
	# (cargo also asks api.github.com whether the index changed, a
	# shortcut it takes for GitHub; refused, it fetches with git.)
	# A clean build each time, with the lock file the first one wrote (as
	# a project commits it).
	rm -rf "$proj/target"
	airlock_lab "$LAB_WORK/crates.yaml" --cache "$CACHE" --env CARGO_HTTP_CAINFO="$LAB_CA" \
		--env CARGO_TERM_COLOR=never -- "$CARGO" run -q --manifest-path "$proj/Cargo.toml" \
		>"$LAB_WORK/cargo$n.out" 2>"$LAB_WORK/cargo$n.err" ||
		fail "cargo run $n: $(tail -n 5 "$LAB_WORK/cargo$n.err")"
	expect_eq "cargo run $n: the program using labcrate" "hello from labcrate" \
		"$(tail -n 1 "$LAB_WORK/cargo$n.out")"
	if [ "$n" = 1 ]; then
		[ "$(requests github.com)" -gt "$before_git" ] && [ "$(requests static.crates.io)" -gt "$before_dl" ] ||
			fail "cargo run 1: no index fetch or no crate download (is the test sound?)"
	else
		expect_eq "second cargo run: requests to github.com (the index)" "$before_git" "$(requests github.com)"
		expect_eq "second cargo run: requests to static.crates.io" "$before_dl" "$(requests static.crates.io)"
	fi
done
[ -n "$(find "$CACHE/cargo/registry/cache" -name 'labcrate-1.0.0.crate' 2>/dev/null)" ] ||
	fail "cargo left no labcrate-1.0.0.crate in $CACHE/cargo/registry/cache"

# --- npm -------------------------------------------------------------------
for n in 1 2; do
	mkdir -p "$LAB_WORK/npm$n"
	before=$(requests registry.npmjs.org)
	airlock_lab npm --cache "$CACHE" -- npm install --no-save --prefix "$LAB_WORK/npm$n" labnpm ||
		fail "npm run $n: npm install labnpm"
	expect_eq "npm run $n: labnpm runs" "hello from labnpm" \
		"$(node -e 'console.log(require(process.argv[1])())' "$LAB_WORK/npm$n/node_modules/labnpm")"
	after=$(requests registry.npmjs.org)
	if [ "$n" = 1 ]; then
		[ "$after" -ge 2 ] || fail "npm run 1: packument and tarball not fetched (is the test sound?)"
	else
		expect_eq "second npm run: requests to registry.npmjs.org" "$before" "$after"
	fi
done
[ -d "$CACHE/npm/_cacache" ] || fail "npm left no _cacache in $CACHE/npm"

# --- rootless: the same pip story as AIRLOCK_TEST_USER ------------------------
if [ -n "${AIRLOCK_TEST_USER:-}" ] && id "$AIRLOCK_TEST_USER" >/dev/null 2>&1; then
	user=$AIRLOCK_TEST_USER
	# The build tree and the source's presets may be unreadable to the user.
	mkdir -p "$LAB_WORK/bin" "$LAB_WORK/policies" "$LAB/ucache"
	install -m 755 "$AIRLOCK" "$LAB_WORK/bin/airlock"
	cp "$P/pypi.yaml" "$LAB_WORK/policies/"
	chown "$user:" "$LAB/ucache"
	rm -rf "$LAB_WORK/.venv"
	in_lab_as "$user" /usr/bin/python3 -m venv "$LAB_WORK/.venv" || fail "rootless: python3 -m venv"
	for n in 1 2; do
		before=$(requests files.pythonhosted.org)
		(AIRLOCK=$LAB_WORK/bin/airlock
			airlock_lab_as "$user" "$LAB_WORK/policies/pypi.yaml" --cache "$LAB/ucache/c" -- \
				.venv/bin/pip install -q labpkg) || fail "rootless pip run $n"
		expect_eq "rootless pip run $n: labpkg imports" "hello from labpkg" \
			"$("$LAB_WORK/.venv/bin/python" -c 'import labpkg; print(labpkg.hello())')"
		if [ "$n" = 1 ]; then
			[ "$(requests files.pythonhosted.org)" -gt "$before" ] || fail "rootless pip run 1: no wheel fetched"
			in_lab_as "$user" "$LAB_WORK/.venv/bin/pip" uninstall -q -y labpkg || fail "rootless: pip uninstall"
		else
			expect_eq "rootless second pip run: requests to files.pythonhosted.org" "$before" \
				"$(requests files.pythonhosted.org)"
		fi
	done
	expect_eq "rootless: the cache belongs to the user" "$user" "$(stat -c %U "$LAB/ucache/c/pip")"
	echo "cache: rootless pip as $user: second run fetched no wheel"
fi

/usr/bin/python3 "$TESTS_DIR/lab/check_log.py" "$LOGF" || fail "the egress log does not match docs/log.md"
echo "cache: pip in a venv, cargo and npm, second run with --cache: no request to the registries"
