#!/usr/bin/env bash
# Fuzzes every decoder of network input and the orchestrator's State::apply (crate iota-fuzz, docs in
# fuzz/src/lib.rs) under libFuzzer: each target for SECONDS (default 120), starting from and adding to its
# corpus in fuzz/corpus/<target>/ (minimized afterwards), then prints the executions per target. A crash
# stops the script with the input under fuzz/libfuzzer/artifacts/<target>/; fix it, copy the input into
# the target's corpus, and `cargo test -p iota-fuzz` (part of scripts/test.sh) replays it from then on.
# The committed corpora keep the seeds and the 50 smallest inputs per target (the fuzzer's full corpora
# run to megabytes).
#
#   ./scripts/fuzz.sh          # every target, 120 s each
#   ./scripts/fuzz.sh 30 run_spec object_key
#
# Needs the nightly toolchain (installed on these machines) and cargo-fuzz (installed if missing). The
# harness builds in release without a sanitizer (the decoders are safe Rust: panics, overflows and
# runaway allocations are what is looked for; debug assertions on), outside the workspace, into its own
# target folder.
set -euo pipefail
cd "$(dirname "$0")/.."
SECS="${1:-120}"
shift || true
# shellcheck source=scripts/env.sh
source scripts/env.sh
command -v cargo-fuzz >/dev/null || cargo install cargo-fuzz --locked
rustup toolchain list | grep -q '^nightly' || rustup toolchain install nightly --profile minimal
export SKIP_WASM_BUILD=1
export CARGO_TARGET_DIR="${IOTA_FUZZ_TARGET_DIR:-$HOME/.cache/iota-rs/fuzz-target}"
# The harness resolves its dependencies as the workspace does.
[[ -f fuzz/libfuzzer/Cargo.lock ]] || cp Cargo.lock fuzz/libfuzzer/Cargo.lock
if [[ $# -gt 0 ]]; then targets=("$@"); else
	mapfile -t targets < <(ls fuzz/libfuzzer/fuzz_targets | sed 's/\.rs$//')
fi
FUZZ=(cargo +nightly fuzz)
OPTS=(--fuzz-dir fuzz/libfuzzer --sanitizer none --debug-assertions)
"${FUZZ[@]}" build "${OPTS[@]}"
summary=()
for t in "${targets[@]}"; do
	mkdir -p "fuzz/corpus/$t"
	log="$(mktemp)"
	echo "== $t: ${SECS} s"
	if ! "${FUZZ[@]}" run "${OPTS[@]}" "$t" "fuzz/corpus/$t" -- \
		-max_total_time="$SECS" -print_final_stats=1 -max_len=65536 -rss_limit_mb=4096 >"$log" 2>&1; then
		tail -40 "$log"
		echo "fuzz: $t crashed; the input is under fuzz/libfuzzer/artifacts/$t/" >&2
		exit 1
	fi
	runs="$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' | tail -1)"
	rm -f "$log"
	# Keep the corpus small: only inputs that add coverage.
	"${FUZZ[@]}" cmin "${OPTS[@]}" "$t" "fuzz/corpus/$t" >/dev/null 2>&1 || true
	summary+=("$t: ${runs:-?} executions, $(ls "fuzz/corpus/$t" | wc -l) corpus inputs, no crash")
done
printf '%s\n' "${summary[@]}"
