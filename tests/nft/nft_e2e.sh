#!/usr/bin/env bash
# Runs nft_e2e (the kernel-facing checks of nft/) as the current user and,
# when root and AIRLOCK_TEST_USER names an account, again as that user: the
# sandbox must work rootless, through a user namespace.
. "$(dirname "$0")/../lib.sh"

NFT_E2E=${NFT_E2E:?NFT_E2E must name the nft_e2e binary}
BENCH_RUNS=${NFT_E2E_BENCH:-50}

run() {
	local rc=0
	"$@" --bench "$BENCH_RUNS" || rc=$?
	case $rc in
	0) ;;
	77) skip "nft_e2e cannot create a user + network namespace here" ;;
	*) fail "nft_e2e failed (exit $rc) as $(id -un)" ;;
	esac
}

run "$NFT_E2E"

if [ "$(id -u)" -eq 0 ] && [ -n "${AIRLOCK_TEST_USER:-}" ]; then
	id "$AIRLOCK_TEST_USER" >/dev/null 2>&1 ||
		fail "AIRLOCK_TEST_USER=$AIRLOCK_TEST_USER does not exist"
	# The build directory may be unreadable for that user: run a copy.
	scratch_dir
	cp "$NFT_E2E" "$SCRATCH/nft_e2e"
	chmod 755 "$SCRATCH/nft_e2e"
	echo "--- again as $AIRLOCK_TEST_USER"
	rc=0
	setpriv --reuid="$AIRLOCK_TEST_USER" --regid="$(id -g "$AIRLOCK_TEST_USER")" \
		--init-groups "$SCRATCH/nft_e2e" --bench "$BENCH_RUNS" || rc=$?
	case $rc in
	0) ;;
	77) skip "nft_e2e cannot create a user namespace as $AIRLOCK_TEST_USER" ;;
	*) fail "nft_e2e failed (exit $rc) as $AIRLOCK_TEST_USER" ;;
	esac
fi
