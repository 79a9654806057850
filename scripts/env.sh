# Sourced by the scripts: one cargo target directory outside the checkout, so a
# fresh clone on the same machine (CI) reuses the build.
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/iota-rs/target}"
mkdir -p "$CARGO_TARGET_DIR"
# Pallet and off-chain tests never need the WASM runtime.
export SKIP_WASM_BUILD="${SKIP_WASM_BUILD:-1}"
