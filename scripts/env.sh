# Sourced by the scripts: one cargo target directory outside the checkout, so a
# fresh clone on the same machine (CI) reuses the build.
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/iota-rs/target}"
mkdir -p "$CARGO_TARGET_DIR"
# Pallet and off-chain tests never need the WASM runtime.
export SKIP_WASM_BUILD="${SKIP_WASM_BUILD:-1}"
# Only read when the runtime's WASM is built (run cargo with `env -u SKIP_WASM_BUILD`: the builder skips
# whenever the variable is set at all, even empty): find Cargo.lock from the outside target directory,
# and build a compact release blob (docs/design.md §9).
export WASM_BUILD_WORKSPACE_HINT="${WASM_BUILD_WORKSPACE_HINT:-$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)}"
export WASM_BUILD_TYPE="${WASM_BUILD_TYPE:-release}"
