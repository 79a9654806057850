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

echo "== workspace tests (CARGO_TARGET_DIR=$CARGO_TARGET_DIR)"
cargo test --workspace --locked

echo "== chain core with benchmarks and try-runtime checks"
cargo test --locked -p iota-primitives -p pallet-iota --features runtime-benchmarks,try-runtime

echo "== chain core builds no_std for the WASM runtime"
cargo check --locked -p iota-primitives -p pallet-iota --no-default-features --target wasm32v1-none

echo "== clippy (chain core, warnings are errors)"
cargo clippy --locked -p iota-primitives -p pallet-iota --all-targets -- -D warnings
