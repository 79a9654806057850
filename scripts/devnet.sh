#!/usr/bin/env bash
# The main job (README): one command that sets up a fresh machine, builds what is missing, and runs a
# whole local training network on 127.0.0.1 (dev node, orchestrator with the embedded S3 server,
# 3 stages x 2 miners, 2 validators) on the real corpus, then writes runs/<id>/report.md.
#
#   ./scripts/devnet.sh                 # default run (about 10 minutes of training on 2 cores, up to 4.5 for the validators, about 4 for the single-process baseline)
#   ./scripts/devnet.sh --epochs 2      # smoke run
#   ./scripts/devnet.sh --help          # every option (also settable as IOTA_* environment variables)
set -euo pipefail
cd "$(dirname "$0")/.."
for a in "$@"; do
	if [[ "$a" == "-h" || "$a" == "--help" || "$a" == "-V" || "$a" == "--version" ]]; then HELP_ONLY=1; fi
done
if [[ -z "${HELP_ONLY:-}" ]]; then
	./scripts/setup.sh
	./scripts/fetch-data.sh
fi
# shellcheck source=scripts/env.sh
source scripts/env.sh
# iota-node embeds the runtime's WASM blob: build with the WASM step on (as scripts/test.sh does), so
# both scripts share one build.
unset SKIP_WASM_BUILD
echo "devnet: building the workspace's binaries (iota-node, iota-orchestrator, iota-miner, iota-validator, iota-devnet; incremental) ..."
# --workspace, not -p: the same feature set as scripts/test.sh, so the two share every compiled crate.
cargo build --locked --workspace --bins
exec "$CARGO_TARGET_DIR/debug/iota-devnet" --bin-dir "$CARGO_TARGET_DIR/debug" "$@"
