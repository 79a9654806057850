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

echo "== formatting (.rustfmt.toml: polkadot-sdk's style)"
cargo fmt --all --check

# Every build below selects the whole workspace (--workspace), never a -p subset: cargo unifies a
# dependency's features over the packages it selects, so a -p build compiles hundreds of crates a second
# time with other features (measured with --unit-graph: about 1 100 extra units on a cold machine).
echo "== workspace: every binary (iota-node with its WASM runtime, the daemons), then every test"
cargo build --workspace --locked --bins
# (includes iota-fuzz's replay of every saved fuzz input in fuzz/corpus/: scripts/fuzz.sh fuzzes them)
echo "== workspace tests (CARGO_TARGET_DIR=$CARGO_TARGET_DIR)"
cargo test --workspace --locked

echo "== chain core with benchmarks and try-runtime checks"
cargo test --locked -p iota-primitives -p pallet-iota --features runtime-benchmarks,try-runtime

echo "== chain core builds no_std for the WASM runtime"
cargo check --locked -p iota-primitives -p pallet-iota --no-default-features --target wasm32v1-none

echo "== clippy (every crate but the node and runtime; warnings are errors)"
cargo clippy --locked --workspace --exclude iota-node --exclude iota-runtime --all-targets -- -D warnings
cargo clippy --locked --workspace --exclude iota-node --exclude iota-runtime --all-targets --features iota-miner/fault-injection -- -D warnings
# The `cuda` feature type-checked with nvcc 13.0 from NVIDIA's PyPI wheels (setup.sh put them in .cuda/; no GPU
# needed: candle's kernels compile to PTX for CUDA_COMPUTE_CAP=90), so a CUDA code path never rots unseen.
# Linking needs the CUDA libraries: scripts/device-check.sh does that for the GPU machine.
echo "== clippy with the cuda feature (iota-model, iota-miner, iota-validator; their CUDA tests included)"
(
	# shellcheck source=scripts/cuda-env.sh
	source scripts/cuda-env.sh
	cargo clippy --locked --workspace --exclude iota-node --exclude iota-runtime --all-targets \
		--features iota-model/cuda,iota-miner/cuda,iota-validator/cuda -- -D warnings
)

echo "== chain: zombienet smoke test (4-node local testnet, one node paused)"
IOTA_NODE_BIN="$CARGO_TARGET_DIR/debug/iota-node" ./scripts/zombienet.sh

echo "== daemons again, the miner with its test-only fault injection (for the cheating scenario)"
cargo build --workspace --locked --bins --features iota-miner/fault-injection

# The ignored tests are the ones that need the binaries (the node integration tests, iota-node driven
# through iota-chain, and the end-to-end scenarios in tests/) or root (the test-host harness and the
# scenarios on test hosts: network namespaces). They run in two lanes at once, each one test at a time:
# the light lane holds the tests that train nothing (a node, an orchestrator, scripted miners: mostly
# waiting for blocks) and the two short link-rate runs of the tiny preset, the main lane every other one. The light lane's tests are named exactly below
# (libtest's filters take names, not files), the main lane skips those very names.
LIGHT_LANE=(
	register_read_back_and_typed_errors
	batches_inclusion_waits_and_counted_nonces
	a_client_of_two_nodes_reads_through_the_second_when_the_first_dies
	bad_merge_vectors_are_refused_and_the_merge_completes_without_them
	signed_flow_expiry_refusals_and_a_full_epoch
	kill_9_mid_epoch_loses_nothing_and_the_epoch_completes
	a_bad_secret_uri_is_refused_at_start
	registers_with_its_stake_and_survives_a_missing_orchestrator
	hosts_reach_the_cloud_through_rate_limited_links_that_go_down_and_up_and_vanish_on_drop
	sync_mode_trains_over_100_mbit_links
	local_mode_trains_and_reveals_over_20_mbit_links
)
E2E=(cargo test --workspace --locked --features iota-miner/fault-injection)
echo "== node integration tests and end-to-end scenarios: real node, S3, orchestrator, miners, validators on 127.0.0.1 and on test hosts, in two lanes"
"${E2E[@]}" --no-run
LIGHT_LOG="$(mktemp)"
RAYON_NUM_THREADS=1 "${E2E[@]}" -- --ignored --test-threads 1 --exact "${LIGHT_LANE[@]}" > "$LIGHT_LOG" 2>&1 &
LIGHT_PID=$!
SKIPS=()
for t in "${LIGHT_LANE[@]}"; do SKIPS+=(--skip "$t"); done
main_rc=0
RAYON_NUM_THREADS=1 "${E2E[@]}" -- --ignored --test-threads 1 --exact "${SKIPS[@]}" || main_rc=$?
light_rc=0
wait "$LIGHT_PID" || light_rc=$?
echo "== the light lane's output"
cat "$LIGHT_LOG"
# Every name of the light lane passed there (a renamed test is not skipped by the main lane, so it runs
# there instead; this catches a name that matched nothing).
passed="$(grep -cE '^test .* \.\.\. ok$' "$LIGHT_LOG" || true)"
rm -f "$LIGHT_LOG"
[ "$main_rc" -eq 0 ] && [ "$light_rc" -eq 0 ] || { echo "end-to-end lanes failed (main $main_rc, light $light_rc)" >&2; exit 1; }
[ "$passed" -eq "${#LIGHT_LANE[@]}" ] || { echo "the light lane passed $passed tests, not ${#LIGHT_LANE[@]}: a name in LIGHT_LANE matches no test" >&2; exit 1; }

echo "== the main job, smoke size: ./scripts/devnet.sh --epochs 2"
SMOKE_RUNS="$(mktemp -d)"
./scripts/devnet.sh --epochs 2 --runs-dir "$SMOKE_RUNS" --finalize-wait-secs 0
test -s "$(ls -d "$SMOKE_RUNS"/*/)report.md"
grep -q '^epoch,tokens,loss,heldout_loss,baseline_loss,baseline_heldout_loss$' "$(ls -d "$SMOKE_RUNS"/*/)loss.csv"
# The single-process baseline on the same samples, beside the network's loss.
grep -q '^| epoch | tokens | training loss | baseline | ratio |' "$(ls -d "$SMOKE_RUNS"/*/)report.md"
# Commits and reveals of validator weights per epoch (commit-reveal, read from chain storage).
grep -q '^| epoch | committed | revealed | committed, not revealed |' "$(ls -d "$SMOKE_RUNS"/*/)report.md"
# The last epoch's merged model is exported beside the report (with the bottleneck: its modeling file).
test -s "$(ls -d "$SMOKE_RUNS"/*/)hf/model.safetensors"
test -s "$(ls -d "$SMOKE_RUNS"/*/)hf/modeling_iota.py"
test -s "$(ls -d "$SMOKE_RUNS"/*/)hf-reference.safetensors"
rm -rf "$SMOKE_RUNS"
