#!/usr/bin/env bash
# Idempotent set-up of a fresh machine: Rust targets and components the
# workspace needs. Safe to run again; does nothing that is already done.
set -euo pipefail

if ! command -v cargo >/dev/null 2>&1; then
	echo "cargo not found: install Rust with rustup (https://rustup.rs) first" >&2
	exit 1
fi

have_target() { rustup target list --installed | grep -qx "$1"; }
have_component() { rustup component list --installed | grep -q "^$1"; }

# substrate-wasm-builder prefers wasm32v1-none on Rust >= 1.84 (DESIGN §8).
for t in wasm32v1-none wasm32-unknown-unknown; do
	have_target "$t" || rustup target add "$t"
done
for c in rust-src clippy; do
	have_component "$c" || rustup component add "$c"
done
