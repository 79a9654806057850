#!/usr/bin/env bash
# The project's test command (README): set up what a fresh machine lacks, then
# run every test of the workspace. CI (.ci/run) calls exactly this script.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup.sh
# Real corpus for iota-model tests (idempotent: skips when present).
./scripts/fetch-data.sh
# shellcheck source=scripts/env.sh
source scripts/env.sh
# The chain steps below run iota-node, which embeds the runtime's WASM blob; building it for the whole run
# keeps iota-runtime from being rebuilt between the workspace tests and the node tests.
unset SKIP_WASM_BUILD

echo "== workspace tests (CARGO_TARGET_DIR=$CARGO_TARGET_DIR)"
cargo test --workspace --locked

echo "== chain core with benchmarks and try-runtime checks"
cargo test --locked -p iota-primitives -p pallet-iota --features runtime-benchmarks,try-runtime

echo "== chain core builds no_std for the WASM runtime"
cargo check --locked -p iota-primitives -p pallet-iota --no-default-features --target wasm32v1-none

echo "== clippy (chain core, model, storage; warnings are errors)"
cargo clippy --locked -p iota-primitives -p pallet-iota -p iota-model -p iota-storage --all-targets -- -D warnings

echo "== chain: iota-node (debug, with its WASM runtime)"
cargo build --locked -p iota-node

echo "== chain: node integration test (iota-node --dev driven through iota-chain)"
cargo test --locked -p iota-chain --test node -- --ignored

echo "== chain: zombienet smoke test (3-node local testnet)"
IOTA_NODE_BIN="$CARGO_TARGET_DIR/debug/iota-node" ./scripts/zombienet.sh
