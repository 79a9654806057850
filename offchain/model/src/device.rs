//! The compute device a process runs its stages on, as its operators name it: `cpu`, `cuda` or
//! `cuda:N` (the `--device` option of `iota-miner`, `iota-validator`, `iota-train` and
//! `bench-throughput`: one parser, so every binary accepts the same names).
//!
//! Only the forward and backward passes run on the device: the AdamW inner step, the outer step and
//! every hash are the CPU's plain f32 code over flat vectors copied off the device
//! ([`Stage::flat_params`](crate::Stage::flat_params)), so a CUDA replica and a CPU replica given the
//! same gradient end bit-identical (docs/design.md §9).

use std::fmt;
use std::str::FromStr;

use candle_core::Device;

/// A compute device by name. Parse with [`FromStr`] (`cpu`, `cuda` = `cuda:0`, `cuda:N`); open with
/// [`DeviceSpec::open`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum DeviceSpec {
	/// The CPU (candle's CPU backend, threads from `RAYON_NUM_THREADS`).
	#[default]
	Cpu,
	/// CUDA device `N` (candle's CUDA backend; needs a build with the `cuda` feature).
	Cuda(usize),
}

/// Why a device name was refused or a device could not be opened.
#[derive(Debug, thiserror::Error)]
pub enum DeviceError {
	/// Not `cpu`, `cuda` or `cuda:N`.
	#[error("unknown device {0:?}: expected cpu, cuda or cuda:N")]
	Unknown(String),
	/// A CUDA device was asked for from a build without the `cuda` feature.
	#[error(
		"device {0} needs a build with the `cuda` feature (e.g. cargo build --features iota-model/cuda, \
		 with nvcc from scripts/setup.sh and scripts/cuda-env.sh)"
	)]
	NoCudaSupport(DeviceSpec),
	/// Candle could not open the device (no driver, no such ordinal, ...).
	#[error("opening {device}: {source}")]
	Open {
		/// The device asked for.
		device: DeviceSpec,
		/// Candle's error.
		source: candle_core::Error,
	},
}

impl FromStr for DeviceSpec {
	type Err = DeviceError;

	fn from_str(s: &str) -> Result<Self, Self::Err> {
		let t = s.trim().to_ascii_lowercase();
		match t.as_str() {
			"cpu" => Ok(DeviceSpec::Cpu),
			"cuda" | "gpu" => Ok(DeviceSpec::Cuda(0)),
			_ => t
				.strip_prefix("cuda:")
				.and_then(|n| n.parse::<usize>().ok())
				.map(DeviceSpec::Cuda)
				.ok_or_else(|| DeviceError::Unknown(s.to_string())),
		}
	}
}

impl fmt::Display for DeviceSpec {
	fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
		match self {
			DeviceSpec::Cpu => f.write_str("cpu"),
			DeviceSpec::Cuda(n) => write!(f, "cuda:{n}"),
		}
	}
}

impl DeviceSpec {
	/// Whether this build can open CUDA devices (the `cuda` feature).
	pub const CUDA_BUILT: bool = cfg!(feature = "cuda");

	/// Open the device.
	///
	/// # Errors
	/// [`DeviceError::NoCudaSupport`] for a CUDA device in a build without the `cuda` feature;
	/// [`DeviceError::Open`] when candle cannot open it (no driver or no such device).
	pub fn open(self) -> Result<Device, DeviceError> {
		match self {
			DeviceSpec::Cpu => Ok(Device::Cpu),
			DeviceSpec::Cuda(n) => {
				if !Self::CUDA_BUILT {
					return Err(DeviceError::NoCudaSupport(self));
				}
				Device::new_cuda(n).map_err(|source| DeviceError::Open { device: self, source })
			},
		}
	}
}

#[cfg(test)]
mod tests {
	use super::*;

	#[test]
	fn names_parse_and_print_back() {
		for (name, spec) in [
			("cpu", DeviceSpec::Cpu),
			("CPU", DeviceSpec::Cpu),
			("cuda", DeviceSpec::Cuda(0)),
			("gpu", DeviceSpec::Cuda(0)),
			("cuda:0", DeviceSpec::Cuda(0)),
			(" cuda:3 ", DeviceSpec::Cuda(3)),
		] {
			assert_eq!(name.parse::<DeviceSpec>().unwrap(), spec, "{name}");
			assert_eq!(spec.to_string().parse::<DeviceSpec>().unwrap(), spec);
		}
	}

	#[test]
	fn bad_names_are_refused() {
		for name in ["", "cuda:", "cuda:-1", "cuda:x", "metal", "cuda0", "cpu:0"] {
			let err = name.parse::<DeviceSpec>().unwrap_err();
			assert!(matches!(err, DeviceError::Unknown(_)), "{name}: {err}");
		}
	}

	#[test]
	fn cpu_opens_and_cuda_needs_the_feature() {
		assert!(DeviceSpec::Cpu.open().unwrap().is_cpu());
		let got = DeviceSpec::Cuda(0).open();
		if DeviceSpec::CUDA_BUILT {
			// With the feature, a machine without a GPU gets a typed open error, one with a GPU a device.
			assert!(
				matches!(got, Ok(ref d) if d.is_cuda())
					|| matches!(got, Err(DeviceError::Open { .. }))
			);
		} else {
			assert!(matches!(got, Err(DeviceError::NoCudaSupport(DeviceSpec::Cuda(0)))));
		}
	}
}
