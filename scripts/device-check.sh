#!/usr/bin/env bash
# Issue 17's GPU check: built here (no GPU, no CUDA driver), run on a GPU machine that has no Rust.
#
#   ./scripts/device-check.sh build       here: builds the CUDA test and bench binaries, checks that
#                                         they load (with the link stubs, see below) and packs them
#                                         xz-compressed into .device-check/ (git-ignored, < 32 MiB)
#   ./scripts/device-check.sh run         on the GPU machine, from the repository root: runs them and
#                                         writes device-check.log and summary.txt into $OUT (or
#                                         .device-check/out); at most about 8 minutes
#
# With the device tool: run build here, then
#   run(command="bash scripts/device-check.sh run", carry=[".device-check"], timeout_s=540)
#
# What `run` does (each step under its own time limit, all output in device-check.log):
#   1. nvidia-smi (refuses a driver older than 580 or a GPU below compute capability 9.0), and where
#      each CUDA library the binaries need was found;
#   2. iota-model's CUDA tests (offchain/model/tests/cuda.rs): every stage of tiny and small on the GPU
#      against the CPU in f32 and bf16 (forward output, input gradient, parameter gradient: max abs and
#      relative error), chained GPU stages against the unsplit model and the CPU, and bit-identical
#      replicas after the CPU optimizer step;
#   3. iota-validator's CUDA test (validator/tests/cuda.rs): three GPU miners in a chained pass, every
#      item recomputed by a CPU validator with the daemon's functions and judged by its tolerances
#      under each wire encoding: honest passes, perturbed (the e2e cheater's perturb=0.5, and 1 % of
#      rms) fails;
#   4. bench-throughput: small on the GPU in f32 and bf16 against small on this machine's CPU, and one
#      stage of ref-1.5b on the GPU in bf16 with its MFU against 790 TFLOP/s (issue 17's H200 figure;
#      PEAK_TFLOPS=… for another). bf16 here is the bench's own choice: miners compute in f32 (the run
#      spec has no compute dtype yet).
#
# Linking: candle links cudarc with `dynamic-linking`, so the binaries need libcuda, libcublas,
# libcublasLt, libcurand and libnvrtc at link time. This machine has no driver and the build does not
# download cuBLAS (about 0.5 GB of wheels): `build` links against stub libraries it generates from the
# function names of cudarc's bindings (every function a no-op, under the real sonames libcuda.so.1,
# libcublas.so.13, libcublasLt.so.13, libcurand.so.10, libnvrtc.so.13), and against the real libcudart
# of the nvidia-cuda-runtime wheel (.cuda/). The stubs are never shipped: on the GPU machine `run` puts
# that machine's own libraries (its driver's libcuda, its Python environment's CUDA 13 wheels or
# /usr/local/cuda) on LD_LIBRARY_PATH, and refuses to start when one is missing.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT="$(pwd)"
DIR="$ROOT/.device-check"
LIMIT_BYTES=$((32 * 1024 * 1024)) # well under the device tool's 64 MiB carry limit
# The CUDA sonames the packed binaries load are read from their dynamic sections at build time
# (.device-check/needed: with the linker's --as-needed, NVRTC is not among them) and checked by `run`.

# --- build (here) -------------------------------------------------------------------------------------
make_stubs() {
	local stubs="$1" src
	src="$(cargo metadata --locked --format-version 1 --features iota-model/cuda | python3 -c '
import json, sys
pkgs = json.load(sys.stdin)["packages"]
print(next(p["manifest_path"] for p in pkgs if p["name"] == "cudarc" and p["version"].startswith("0.19.")))
')"
	src="$(dirname "$src")/src"
	rm -rf "$stubs" && mkdir -p "$stubs"
	# module of cudarc's bindings : library name : soname
	local lib module name soname
	for lib in driver:cuda:libcuda.so.1 cublas:cublas:libcublas.so.13 cublaslt:cublasLt:libcublasLt.so.13 \
		curand:curand:libcurand.so.10 nvrtc:nvrtc:libnvrtc.so.13; do
		IFS=: read -r module name soname <<<"$lib"
		grep -ohE '^\s*(pub )?fn [A-Za-z_][A-Za-z0-9_]*\(' "$src/$module/sys/"*.rs |
			sed -E 's/^\s*(pub )?fn ([A-Za-z0-9_]+)\(/\2/' | sort -u |
			awk '{ print "void " $1 "(void) {}" }' >"$stubs/$name.c"
		cc -shared -fPIC -o "$stubs/lib$name.so" -Wl,-soname,"$soname" "$stubs/$name.c"
		ln -sf "lib$name.so" "$stubs/$soname" # for the load check below
	done
	# libcudart is real (the runtime wheel has it, without the unversioned name the linker looks for).
	ln -sf "$CUDA_ROOT/lib/libcudart.so.13" "$stubs/libcudart.so"
}

# The executable cargo built for a target (from its JSON messages on stdin).
executable_of() {
	python3 -c '
import json, sys
name, kind = sys.argv[1], sys.argv[2]
for line in sys.stdin:
    try:
        m = json.loads(line)
    except ValueError:
        continue
    t = m.get("target") or {}
    if m.get("reason") == "compiler-artifact" and t.get("name") == name and kind in t.get("kind", []) and m.get("executable"):
        print(m["executable"])
' "$1" "$2" | tail -1
}

build() {
	# shellcheck source=scripts/env.sh
	source scripts/env.sh
	unset SKIP_WASM_BUILD
	[ -x .cuda/nvidia/cu13/bin/nvcc ] || ./scripts/setup.sh
	# shellcheck source=scripts/cuda-env.sh
	source scripts/cuda-env.sh
	local stubs="$CARGO_TARGET_DIR/cuda-link-stubs"
	make_stubs "$stubs"
	# gcc passes LIBRARY_PATH to the linker as search paths; cargo's fingerprints do not see it.
	export LIBRARY_PATH="$stubs${LIBRARY_PATH:+:$LIBRARY_PATH}"
	local features="iota-model/cuda,iota-validator/cuda"
	echo "== building the CUDA tests and bench-throughput (features $features, CUDA_COMPUTE_CAP=$CUDA_COMPUTE_CAP)"
	local tests bench model_test validator_test bench_bin
	tests="$(cargo test --locked --workspace --features "$features" --test cuda --no-run --message-format=json-render-diagnostics)"
	bench="$(cargo build --locked --workspace --features "$features" --bin bench-throughput --message-format=json-render-diagnostics)"
	# Both test targets are named `cuda`: told apart by their package's path.
	model_test="$(printf '%s\n' "$tests" | grep 'offchain/model' | executable_of cuda test)"
	validator_test="$(printf '%s\n' "$tests" | grep '/validator/' | executable_of cuda test)"
	bench_bin="$(printf '%s\n' "$bench" | executable_of bench-throughput bin)"
	for f in "$model_test" "$validator_test" "$bench_bin"; do
		[ -x "$f" ] || { echo "device-check: no executable built ($f)" >&2; exit 1; }
	done
	rm -rf "$DIR" && mkdir -p "$DIR/bin"
	cp "$model_test" "$DIR/bin/model-cuda-tests"
	cp "$validator_test" "$DIR/bin/validator-cuda-tests"
	cp "$bench_bin" "$DIR/bin/bench-throughput"
	strip "$DIR"/bin/*
	# Smoke test here: the binaries load (against the stubs) and list their tests; nothing calls CUDA.
	echo "== the built binaries load (stub libraries; no CUDA call is made)"
	LD_LIBRARY_PATH="$stubs:$CUDA_ROOT/lib" "$DIR/bin/model-cuda-tests" --list
	LD_LIBRARY_PATH="$stubs:$CUDA_ROOT/lib" "$DIR/bin/validator-cuda-tests" --list
	LD_LIBRARY_PATH="$stubs:$CUDA_ROOT/lib" "$DIR/bin/bench-throughput" --help >/dev/null
	readelf -d "$DIR"/bin/* | sed -nE 's/.*Shared library: \[(lib(cuda|cublas|cublasLt|curand|nvrtc|cudart)\.so[.0-9]*)\]/\1/p' |
		sort -u >"$DIR/needed"
	# libcublas loads libcublasLt at run time.
	grep -q '^libcublas\.so' "$DIR/needed" && echo "libcublasLt.so.13" >>"$DIR/needed"
	sort -u -o "$DIR/needed" "$DIR/needed"
	echo "== CUDA libraries the binaries need: $(tr '\n' ' ' <"$DIR/needed")"
	# xz: about a quarter of the size; `run` unpacks with Python's lzma (the GPU machine may lack xz).
	xz -6 -T2 "$DIR"/bin/*
	git rev-parse HEAD >"$DIR/commit"
	{
		echo "built $(date -u +%FT%TZ) from $(git rev-parse --short HEAD)$(git diff --quiet HEAD || echo ' (with uncommitted changes)')"
		echo "nvcc: $(nvcc --version | tail -1) · CUDA_COMPUTE_CAP=$CUDA_COMPUTE_CAP"
		echo "linked against: stubs of $(cd "$stubs" && ls lib*.so | grep -v cudart | tr '\n' ' ')· real libcudart.so.13 (nvidia-cuda-runtime wheel)"
	} >"$DIR/build-info.txt"
	local size
	size="$(du -sb "$DIR" | cut -f1)"
	echo "== packed $DIR: $((size / 1024 / 1024)) MiB"
	ls -l "$DIR/bin"
	if [ "$size" -gt "$LIMIT_BYTES" ]; then
		echo "device-check: $DIR is $size bytes, over the $LIMIT_BYTES limit" >&2
		exit 1
	fi
	# Building a package's integration tests builds its binaries too, and cargo copies them to
	# $CARGO_TARGET_DIR/debug: iota-validator, iota-train and the other iota-model binaries there are now
	# the CUDA-linked ones. Build the default ones again so nothing else picks those up.
	echo "== restoring the default (CPU) binaries in $CARGO_TARGET_DIR/debug"
	(unset LIBRARY_PATH && cargo build --locked --workspace --bins)
	echo "device-check: ready; run it on the GPU machine with: bash scripts/device-check.sh run (carry .device-check)"
}

# --- run (GPU machine) -----------------------------------------------------------------------------------
find_libs() {
	# Folders that may hold the CUDA 13 libraries: the Python environment's NVIDIA wheels, a toolkit, the
	# driver's folder.
	local dirs=() d
	if command -v python3 >/dev/null 2>&1; then
		while IFS= read -r d; do dirs+=("$d"); done < <(python3 -c '
import glob, os, site, sys
roots = set(site.getsitepackages() + [site.getusersitepackages()] + sys.path)
for r in sorted(p for p in roots if p and os.path.isdir(os.path.join(p, "nvidia"))):
    for d in sorted(glob.glob(os.path.join(r, "nvidia", "*", "lib")) + glob.glob(os.path.join(r, "nvidia", "cu13", "lib"))):
        print(d)
' 2>/dev/null | sort -u)
	fi
	local IFS_=$IFS
	IFS=: read -r -a ld <<<"${LD_LIBRARY_PATH:-}"
	IFS=$IFS_
	dirs+=("${ld[@]}" /usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib /usr/local/nvidia/lib64
		/usr/lib/x86_64-linux-gnu /usr/lib64 /lib/x86_64-linux-gnu)
	local found=() missing=() so hit
	for so in $(cat "$DIR/needed"); do
		hit=""
		for d in "${dirs[@]}"; do
			if [ -e "$d/$so" ]; then hit="$d"; break; fi
		done
		if [ -z "$hit" ] && command -v ldconfig >/dev/null 2>&1; then
			# the loader's cache (a container's driver libraries may sit anywhere)
			hit="$(ldconfig -p 2>/dev/null | awk -v so="$so" '!h && $1 == so { h = $NF } END { print h }' || true)"
			hit="${hit:+$(dirname "$hit")}"
		fi
		if [ -n "$hit" ]; then
			echo "  $so: $hit"
			case ":${LIBDIRS:-}:" in *":$hit:"*) ;; *) LIBDIRS="${LIBDIRS:+$LIBDIRS:}$hit" ;; esac
			found+=("$so")
		else
			echo "  $so: NOT FOUND (other versions: $(for d in "${dirs[@]}"; do ls "$d/${so%%.so*}.so"* 2>/dev/null; done | tr '\n' ' '))"
			missing+=("$so")
		fi
	done
	[ "${#missing[@]}" -eq 0 ] || {
		echo "device-check: missing ${missing[*]}: the binaries are built against CUDA 13 (nvcc 13.0)" >&2
		return 1
	}
}

step() {
	local name="$1" limit="$2"
	shift 2
	echo
	echo "== $name (limit ${limit}s): $*"
	local t0 rc
	t0="$(date +%s)"
	set +e
	timeout "$limit" "$@"
	rc=$?
	set -e
	[ "$rc" -eq 0 ] || FAILED=$((FAILED + 1))
	echo "== $name: rc $rc in $(($(date +%s) - t0)) s"
	echo "$name: rc $rc in $(($(date +%s) - t0)) s" >>"$SUMMARY"
}

run() {
	local out="${OUT:-$DIR/out}"
	mkdir -p "$out"
	SUMMARY="$out/summary.txt"
	: >"$SUMMARY"
	exec > >(tee "$out/device-check.log") 2>&1
	cat "$DIR/build-info.txt"
	echo "machine: $(uname -srm) · $(nproc) cores"
	if ! command -v nvidia-smi >/dev/null 2>&1; then
		echo "device-check: no nvidia-smi: is this a GPU machine?" >&2
		exit 1
	fi
	nvidia-smi
	# PTX from nvcc 13.0 and cuBLAS 13 need a driver of the R580 branch or later; the kernels are compiled
	# for compute capability 9.0 (they JIT to newer GPUs, not to older ones).
	local driver cap
	driver="$(nvidia-smi --query-gpu=driver_version --format=csv,noheader | head -1 | tr -d ' ')"
	cap="$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader | head -1 | tr -d ' ')"
	echo "driver $driver · compute capability $cap"
	if [ "${driver%%.*}" -lt 580 ] 2>/dev/null; then
		echo "device-check: driver $driver is older than 580, which CUDA 13 needs" >&2
		exit 1
	fi
	if [ "${cap%%.*}" -lt 9 ] 2>/dev/null; then
		echo "device-check: compute capability $cap is below 9.0, the kernels' target" >&2
		exit 1
	fi
	echo "== CUDA libraries"
	LIBDIRS=""
	find_libs
	export LD_LIBRARY_PATH="$LIBDIRS${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
	local bin
	bin="$(mktemp -d)"
	trap "rm -rf '$bin'" EXIT
	FAILED=0
	python3 - "$DIR/bin" "$bin" <<'PY'
import lzma, os, shutil, sys
src, dst = sys.argv[1], sys.argv[2]
for name in sorted(os.listdir(src)):
    if name.endswith(".xz"):
        out = os.path.join(dst, name[:-3])
        with lzma.open(os.path.join(src, name)) as f, open(out, "wb") as g:
            shutil.copyfileobj(f, g)
        os.chmod(out, 0o755)
PY
	step "iota-model CUDA tests" 120 "$bin/model-cuda-tests" --nocapture --test-threads 1
	step "iota-validator CUDA test (GPU miners, CPU validator)" 90 "$bin/validator-cuda-tests" --nocapture --test-threads 1
	step "bench-throughput small, GPU f32" 45 "$bin/bench-throughput" --preset small --device cuda --dtype f32 --batch 16 --seq-len 256 --steps 10
	step "bench-throughput small, GPU bf16" 45 "$bin/bench-throughput" --preset small --device cuda --dtype bf16 --batch 16 --seq-len 256 --steps 10
	step "bench-throughput small, CPU f32 (all cores)" 90 "$bin/bench-throughput" --preset small --device cpu --batch 16 --seq-len 256 --steps 3
	# MFU against issue 17's 790 TFLOP/s (PEAK_TFLOPS overrides it; NVIDIA's data sheet gives the H100 and
	# H200 SXM about 990 TFLOP/s of dense bf16, against which the MFU is 0.8 times the printed one).
	step "bench-throughput ref-1.5b stage 1, GPU bf16" 60 "$bin/bench-throughput" --preset ref-1.5b --stage 1 --device cuda --dtype bf16 --batch 8 --seq-len 1024 --steps 5 --peak-tflops "${PEAK_TFLOPS:-790}"
	echo
	echo "== summary"
	cat "$SUMMARY"
	grep -E "^(tiny|small) .*(stage [0-9]+:|chained)|honest ratio|tokens/s|MFU" "$out/device-check.log" >>"$SUMMARY" || true
	echo "device-check: $FAILED step(s) failed"
	[ "$FAILED" -eq 0 ]
}

case "${1:-}" in
	build) build ;;
	run) run ;;
	*)
		echo "usage: $0 build|run (see the comment at the top)" >&2
		exit 2
		;;
esac
