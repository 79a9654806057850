//! The element encodings of a wire message's `data` tensor (activations and gradients crossing a cut),
//! named in the run spec. The codec itself is `iota-model`'s `wire` module.

use serde::{Deserialize, Serialize};

/// An encoding name that is not one of `f32`, `bf16`, `u8`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown encoding {0:?}, expected f32, bf16 or u8")]
pub struct UnknownEncoding(pub String);

/// How the `data` tensor is stored.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Encoding {
	/// Exact f32 (4 bytes/element): for tests and audits.
	F32,
	/// bf16 (2 bytes/element): the uncompressed wire baseline.
	Bf16,
	/// Per-row uint8 with f32 scale and offset per row (1 byte/element + 8 bytes/row).
	U8,
}

impl Encoding {
	/// Name used in the message metadata and on command lines.
	pub fn as_str(&self) -> &'static str {
		match self {
			Encoding::F32 => "f32",
			Encoding::Bf16 => "bf16",
			Encoding::U8 => "u8",
		}
	}

	/// Parse [`as_str`](Self::as_str) names.
	///
	/// # Errors
	/// [`UnknownEncoding`] for an unknown name.
	pub fn parse(s: &str) -> Result<Self, UnknownEncoding> {
		match s {
			"f32" => Ok(Encoding::F32),
			"bf16" => Ok(Encoding::Bf16),
			"u8" => Ok(Encoding::U8),
			o => Err(UnknownEncoding(o.to_string())),
		}
	}

	/// Bytes per element of `data`.
	pub fn bytes_per_element(&self) -> usize {
		match self {
			Encoding::F32 => 4,
			Encoding::Bf16 => 2,
			Encoding::U8 => 1,
		}
	}
}

/// Bytes allowed for a wire message's header (safetensors JSON header and metadata).
pub const WIRE_HEADER_BYTES: u64 = 64 * 1024;

/// The largest wire message of a boundary tensor of shape `[B, T, w]` (bytes): the f32 payload, plus
/// the per-row scale and offset of uint8 quantisation, plus [`WIRE_HEADER_BYTES`]. Every encoding fits
/// (f32 is the largest payload); the orchestrator refuses a larger upload and every reader a larger
/// download, by this one rule.
pub fn max_wire_bytes(shape: [u64; 3]) -> u64 {
	let [b, t, w] = shape;
	b.saturating_mul(t)
		.saturating_mul(w)
		.saturating_mul(4)
		.saturating_add(b.saturating_mul(t).saturating_mul(8))
		.saturating_add(WIRE_HEADER_BYTES)
}

#[cfg(test)]
mod tests {
	use super::*;

	#[test]
	fn names_round_trip_and_the_size_bound_covers_every_encoding() {
		for e in [Encoding::F32, Encoding::Bf16, Encoding::U8] {
			assert_eq!(Encoding::parse(e.as_str()), Ok(e));
		}
		assert!(Encoding::parse("fp8").is_err());
		let [b, t, w] = [4u64, 32, 80];
		let max = max_wire_bytes([b, t, w]);
		assert_eq!(max, 4 * b * t * w + 8 * b * t + WIRE_HEADER_BYTES);
		// u8: one byte per element plus scale and offset per row; f32: four bytes per element.
		assert!(b * t * w + 8 * b * t <= max && 4 * b * t * w <= max);
		assert_eq!(max_wire_bytes([u64::MAX, 2, 2]), u64::MAX);
	}
}
