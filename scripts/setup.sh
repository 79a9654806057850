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

# substrate-wasm-builder prefers wasm32v1-none on Rust >= 1.84 (docs/design.md §8).
for t in wasm32v1-none wasm32-unknown-unknown; do
	have_target "$t" || rustup target add "$t"
done
for c in rust-src clippy rustfmt; do
	have_component "$c" || rustup component add "$c"
done

# C toolchain for -sys crates built for the WASM runtime (secp256k1-sys needs clang).
apt_install() {
	local sudo=""
	[ "$(id -u)" -eq 0 ] || sudo="sudo"
	$sudo apt-get install -y --no-install-recommends "$@" >/dev/null 2>&1 ||
		{ $sudo apt-get update >/dev/null && $sudo apt-get install -y --no-install-recommends "$@"; }
}
command -v clang >/dev/null 2>&1 || apt_install clang
# protoc for the node's networking crates (litep2p, sc-network build scripts).
command -v protoc >/dev/null 2>&1 || apt_install protobuf-compiler

# --- chain: zombienet smoke test (scripts/zombienet.sh installs @zombienet/cli with npm) ---
command -v npm >/dev/null 2>&1 || apt_install nodejs npm

# --- iota-dashboard: the browser test runs Debian's headless Chromium ---
command -v chromium >/dev/null 2>&1 || apt_install chromium

# --- iota-storage: moto S3 server and the AWS CLI for the storage conformance tests -------------
# A second S3 implementation nobody here wrote, and the client operators use on a devnet's
# bucket (offchain/storage/tests). Installed together into a project-local venv (.venv/,
# git-ignored). Best effort: if this fails those tests are skipped with a printed reason, and
# setup carries on.
MOTO_VERSION="5.2.5"
AWSCLI_VERSION="1.45.11"
moto_venv="$(cd "$(dirname "$0")/.." && pwd)/.venv"
if [ -x "$moto_venv/bin/moto_server" ] && [ -x "$moto_venv/bin/aws" ] \
	&& "$moto_venv/bin/python" -c "import moto, sys; sys.exit(moto.__version__ != '$MOTO_VERSION')" 2>/dev/null \
	&& "$moto_venv/bin/aws" --version 2>&1 | grep -q "^aws-cli/$AWSCLI_VERSION "; then
	: # already installed at the pinned versions
elif command -v python3 >/dev/null 2>&1; then
	if { [ -x "$moto_venv/bin/python" ] || python3 -m venv "$moto_venv"; } \
		&& "$moto_venv/bin/python" -m pip install --quiet --disable-pip-version-check \
			"moto[server]==$MOTO_VERSION" "awscli==$AWSCLI_VERSION"; then
		echo "moto $MOTO_VERSION and awscli $AWSCLI_VERSION installed in $moto_venv"
	else
		echo "WARNING: could not install moto[server]==$MOTO_VERSION and awscli==$AWSCLI_VERSION into $moto_venv; storage tests against them will be skipped" >&2
	fi
else
	echo "WARNING: python3 not found; storage tests against moto and the AWS CLI will be skipped" >&2
fi
# --- end iota-storage ----------------------------------------------------------------

# --- CUDA toolchain (no GPU needed): nvcc 13.0 from NVIDIA's PyPI wheels ------------------------
# Lets `scripts/test.sh` type-check the `cuda` feature (candle's kernels are compiled to PTX by nvcc in
# candle-kernels' build script) and `scripts/device-check.sh` build the GPU check. Installed with
# `pip --target` into .cuda/ (git-ignored); scripts/cuda-env.sh points CUDA_ROOT and PATH at it. The cu12
# wheels lack nvcc's driver, so these are the cu13 ones. Pinned versions; idempotent (a version stamp).
CUDA_WHEELS="nvidia-cuda-nvcc==13.0.88 nvidia-nvvm==13.0.88 nvidia-cuda-runtime==13.0.96 nvidia-cuda-crt==13.0.88 nvidia-cuda-cccl==13.0.85"
cuda_dir="$(cd "$(dirname "$0")/.." && pwd)/.cuda"
if [ -x "$cuda_dir/nvidia/cu13/bin/nvcc" ] && [ "$(cat "$cuda_dir/.wheels" 2>/dev/null)" = "$CUDA_WHEELS" ]; then
	: # already installed at the pinned versions
else
	command -v python3 >/dev/null 2>&1 || apt_install python3
	python3 -m pip --version >/dev/null 2>&1 || apt_install python3-pip
	rm -rf "$cuda_dir"
	# shellcheck disable=SC2086 # one word per wheel
	python3 -m pip install --quiet --disable-pip-version-check --no-deps --target "$cuda_dir" $CUDA_WHEELS
	"$cuda_dir/nvidia/cu13/bin/nvcc" --version >/dev/null
	echo "$CUDA_WHEELS" >"$cuda_dir/.wheels"
	echo "CUDA toolchain (nvcc 13.0) installed in $cuda_dir"
fi
# --- end CUDA toolchain --------------------------------------------------------------------------
