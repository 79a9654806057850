//! The rule for accepting a merge submission and a reduced shard: what the orchestrator checks at
//! `iota_submitGradient` / `iota_submitShard` before it records anything, and what every reducer would
//! refuse later. One function each, so a vector that passes here can never stall a merge round in a
//! reducer ([`crate::merge::reduce_shard`] refuses exactly the same defects).

use iota_primitives::ContentHash;

use crate::chunks::{chunk_count, chunk_hashes};
use crate::f32le;

/// Why a merge submission or a reduced shard is refused. Each variant maps to its own RPC error code
/// (`iota_rpc::ErrorCode::{ShapeMismatch, HashMismatch, NonFinite}`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refused {
	/// The object does not hold `4·P` bytes (shards: `4·(end − start)`).
	#[error("{got} bytes, expected {expected} ({elems} little-endian f32)")]
	Length {
		/// Bytes expected.
		expected: u64,
		/// Bytes received.
		got: u64,
		/// Elements expected.
		elems: u64,
	},
	/// The submission lists the wrong number of chunk hashes for `P`.
	#[error("{got} chunk hashes, expected {expected} for {param_count} elements")]
	ChunkCount {
		/// `chunk_count(P)`.
		expected: usize,
		/// Listed.
		got: usize,
		/// `P`.
		param_count: u64,
	},
	/// A chunk's bytes do not hash to the listed chunk hash.
	#[error("chunk {chunk} does not hash to the listed chunk hash")]
	ChunkHash {
		/// Index of the first bad chunk.
		chunk: usize,
	},
	/// A value is NaN or ±Inf.
	#[error("non-finite value at element {index}")]
	NonFinite {
		/// Element index of the first one.
		index: u64,
	},
}

/// Checks the shape of a submission before its bytes are read: `listed` chunk hashes for a
/// `param_count`-element vector of `size` bytes.
///
/// # Errors
/// [`Refused::Length`], [`Refused::ChunkCount`].
pub fn check_submission_shape(size: u64, listed: usize, param_count: u64) -> Result<(), Refused> {
	let expected = param_count.saturating_mul(4);
	if size != expected {
		return Err(Refused::Length { expected, got: size, elems: param_count });
	}
	let want = chunk_count(param_count);
	if listed != want {
		return Err(Refused::ChunkCount { expected: want, got: listed, param_count });
	}
	Ok(())
}

/// Accepts a merge submission: `bytes` is `P` little-endian f32, `listed` its chunk hashes
/// ([`chunk_hashes`]) and every value finite. Checked in that order, so the error names the first
/// defect.
///
/// # Errors
/// [`Refused::Length`], [`Refused::ChunkCount`], [`Refused::ChunkHash`], [`Refused::NonFinite`].
pub fn accept_submission(
	bytes: &[u8],
	listed: &[ContentHash],
	param_count: u64,
) -> Result<(), Refused> {
	check_submission_shape(bytes.len() as u64, listed.len(), param_count)?;
	if let Some(chunk) = chunk_hashes(bytes).iter().zip(listed).position(|(a, b)| a != b) {
		return Err(Refused::ChunkHash { chunk });
	}
	if let Some(index) = f32le::first_non_finite(bytes) {
		return Err(Refused::NonFinite { index: index as u64 });
	}
	Ok(())
}

/// Accepts a reduced shard of element range `[start, end)`: `4·(end − start)` bytes, every value
/// finite (its hash is the uploader's claim, compared with the other copy's by the orchestrator).
///
/// # Errors
/// [`Refused::Length`], [`Refused::NonFinite`] (index within the whole vector).
pub fn accept_shard(bytes: &[u8], range: [u64; 2]) -> Result<(), Refused> {
	let elems = range[1].saturating_sub(range[0]);
	let expected = elems.saturating_mul(4);
	if bytes.len() as u64 != expected {
		return Err(Refused::Length { expected, got: bytes.len() as u64, elems });
	}
	if let Some(i) = f32le::first_non_finite(bytes) {
		return Err(Refused::NonFinite { index: range[0] + i as u64 });
	}
	Ok(())
}

#[cfg(test)]
mod tests {
	use proptest::prelude::*;

	use super::*;
	use crate::merge::{reduce_shard, SpanInput};

	fn vector(p: usize) -> Vec<u8> {
		f32le::to_bytes(&(0..p).map(|i| (i as f32).sin()).collect::<Vec<_>>())
	}

	#[test]
	fn an_honest_submission_is_accepted() {
		let b = vector(5_000);
		assert_eq!(accept_submission(&b, &chunk_hashes(&b), 5_000), Ok(()));
	}

	#[test]
	fn each_defect_is_refused_with_its_own_reason() {
		let p = 5_000u64;
		let b = vector(p as usize);
		let h = chunk_hashes(&b);
		assert!(matches!(
			accept_submission(&b[..b.len() - 4], &h, p),
			Err(Refused::Length { expected: 20_000, got: 19_996, .. })
		));
		assert!(matches!(accept_submission(&b, &h[1..], p), Err(Refused::ChunkCount { .. })));
		let mut flipped = b.clone();
		flipped[4 * 2_000] ^= 1;
		assert_eq!(accept_submission(&flipped, &h, p), Err(Refused::ChunkHash { chunk: 1 }));
		// A NaN with its chunk hashes recomputed: only the finiteness rule catches it.
		let mut nan = b.clone();
		nan[4 * 4_321..4 * 4_322].copy_from_slice(&f32::NAN.to_le_bytes());
		assert_eq!(
			accept_submission(&nan, &chunk_hashes(&nan), p),
			Err(Refused::NonFinite { index: 4_321 })
		);
		let mut inf = b.clone();
		inf[..4].copy_from_slice(&f32::INFINITY.to_le_bytes());
		assert_eq!(
			accept_submission(&inf, &chunk_hashes(&inf), p),
			Err(Refused::NonFinite { index: 0 })
		);
	}

	#[test]
	fn shards_need_their_length_and_finite_values() {
		let b = f32le::to_bytes(&[1.0, 2.0]);
		assert_eq!(accept_shard(&b, [10, 12]), Ok(()));
		assert!(matches!(accept_shard(&b, [10, 13]), Err(Refused::Length { .. })));
		let nan = f32le::to_bytes(&[1.0, f32::NAN]);
		assert_eq!(accept_shard(&nan, [10, 12]), Err(Refused::NonFinite { index: 11 }));
	}

	proptest! {
		/// Whatever a submitter does to one element, the acceptance rule and the reducers agree: an
		/// accepted submission always reduces, a refused one would have been refused by a reducer.
		#[test]
		fn accepted_submissions_always_reduce(
			p in 1u64..3_000,
			at in 0u64..3_000,
			bits in any::<u32>(),
		) {
			let at = at % p;
			let mut b = vector(p as usize);
			b[(4 * at) as usize..(4 * at + 4) as usize].copy_from_slice(&bits.to_le_bytes());
			let h = chunk_hashes(&b);
			let accepted = accept_submission(&b, &h, p).is_ok();
			let reduced =
				reduce_shard(&[SpanInput { samples: 1, chunk_hashes: &h, span: &b }], 0, p, p).is_ok();
			prop_assert_eq!(accepted, reduced);
			prop_assert_eq!(accepted, f32::from_bits(bits).is_finite());
		}
	}
}
