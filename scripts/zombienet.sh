#!/usr/bin/env bash
# The iota-rs local testnet on zombienet's native provider (zombienet/local.toml: alice, bob, charlie and
# dave author with aura and finalize with grandpa, `--chain local`).
#
#   scripts/zombienet.sh          run the smoke test zombienet/smoke.zndsl (nodes up, finalized height
#                                 >= 5, a pallet-iota extrinsic included, polkadot.js reads pallet-iota's
#                                 object hashes as `contentHash`, dave paused and finality going on with
#                                 3 of 4); exits non-zero on failure
#   scripts/zombienet.sh spawn    start the network and keep it running (Ctrl-C stops it)
#
# Installs @zombienet/cli from npm into zombienet/node_modules (git-ignored) if it is missing, with the
# `toml` override from zombienet/package.json (docs/design.md §9); after that it runs offline. Uses $IOTA_NODE_BIN
# if set, else builds iota-node with its WASM runtime into the shared cargo target directory.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/env.sh
source scripts/env.sh

mode="${1:-test}"
zn=zombienet/node_modules/.bin/zombienet
if [ ! -x "$zn" ]; then
	command -v npm >/dev/null 2>&1 || { echo "npm not found: install Node.js (scripts/setup.sh does)" >&2; exit 1; }
	(cd zombienet && npm ci --no-audit --no-fund)
fi

if [ -z "${IOTA_NODE_BIN:-}" ]; then
	# substrate-wasm-builder skips the WASM build whenever SKIP_WASM_BUILD is set at all, even empty.
	# --workspace, not -p: the feature set scripts/test.sh and devnet.sh build, so all three share one build.
	env -u SKIP_WASM_BUILD cargo build --locked --workspace --bins
	IOTA_NODE_BIN="$CARGO_TARGET_DIR/debug/iota-node"
fi
[ -x "$IOTA_NODE_BIN" ] || { echo "no iota-node binary at $IOTA_NODE_BIN" >&2; exit 1; }

# zombienet finds `iota-node` (local.toml's default_command) on PATH.
bindir="$(mktemp -d)"
trap 'rm -rf "$bindir"' EXIT
ln -s "$(realpath "$IOTA_NODE_BIN")" "$bindir/iota-node"
export PATH="$bindir:$PATH"

case "$mode" in
	test) timeout "${ZOMBIENET_TIMEOUT:-900}" "$zn" --provider native test zombienet/smoke.zndsl ;;
	spawn) "$zn" --provider native spawn zombienet/local.toml ;;
	*) echo "usage: $0 [test|spawn]" >&2; exit 2 ;;
esac
