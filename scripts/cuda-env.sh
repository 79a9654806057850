# Sourced (after scripts/env.sh) by builds of the `cuda` feature: the nvcc 13.0 toolchain that
# scripts/setup.sh installs into .cuda/ (NVIDIA's PyPI wheels; no GPU needed to compile).
# CUDA_COMPUTE_CAP picks the GPU architecture candle's kernels are compiled for (90: H100/H200).
_iota_cuda="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)/.cuda/nvidia/cu13"
if [ ! -x "$_iota_cuda/bin/nvcc" ]; then
	echo "cuda-env.sh: no nvcc in $_iota_cuda; run ./scripts/setup.sh first" >&2
	return 1
fi
export CUDA_ROOT="$_iota_cuda" CUDA_PATH="$_iota_cuda"
export CUDA_COMPUTE_CAP="${CUDA_COMPUTE_CAP:-90}"
case ":$PATH:" in *":$_iota_cuda/bin:"*) ;; *) export PATH="$_iota_cuda/bin:$PATH" ;; esac
unset _iota_cuda
