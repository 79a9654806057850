//! The rule for accepting a merge submission and a reduced shard: what the orchestrator checks at
//! `iota_submitGradient` / `iota_submitShard` before it records anything, and what every reducer would
//! refuse later. One function each, so a vector that passes here can never stall a merge round in a
//! reducer ([`crate::merge::reduce_shard`] refuses exactly the same defects).

use iota_primitives::ContentHash;

use crate::chunks::{chunk_count, chunk_hashes, gradient_chunk_elems, submission_len};
use crate::codec::{CodecError, MergeCodec};

/// Why a merge submission or a reduced shard is refused. Each variant maps to its own RPC error code
/// (`iota_rpc::ErrorCode::{ShapeMismatch, HashMismatch, NonFinite, Invalid}`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refused {
	/// The object does not hold the encoded length of its elements in the run's merge codec
	/// ([`MergeCodec::encoded_len`]; `4·P` bytes in `f32`).
	#[error("{got} bytes, expected {expected} ({elems} elements)")]
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
	/// A value (or a chunk's scale, or a decoded value) is NaN or ±Inf.
	#[error("non-finite value at element {index}")]
	NonFinite {
		/// Element index of the first one.
		index: u64,
	},
	/// A chunk is not a valid encoding in the run's codec (negative scale, top-k indices out of order).
	#[error("chunk {chunk}: {reason}")]
	Malformed {
		/// Chunk index.
		chunk: u64,
		/// What is wrong.
		reason: String,
	},
}

impl Refused {
	/// The refusal for a decode error of elements starting at `offset`.
	fn of(e: CodecError, offset: u64) -> Self {
		match e {
			CodecError::Length { expected, got, elems, .. } => {
				Refused::Length { expected, got, elems }
			},
			CodecError::NonFinite { index } => Refused::NonFinite { index: offset + index },
			CodecError::Malformed { chunk, reason } => Refused::Malformed { chunk, reason },
		}
	}
}

/// Checks the shape of a submission before its bytes are read: `listed` chunk hashes for a
/// `param_count`-element vector of `size` bytes in `codec`.
///
/// # Errors
/// [`Refused::Length`], [`Refused::ChunkCount`].
pub fn check_submission_shape(
	codec: MergeCodec,
	size: u64,
	listed: usize,
	param_count: u64,
) -> Result<(), Refused> {
	let expected = submission_len(codec, param_count);
	if size != expected {
		return Err(Refused::Length { expected, got: size, elems: param_count });
	}
	let want = chunk_count(param_count);
	if listed != want {
		return Err(Refused::ChunkCount { expected: want, got: listed, param_count });
	}
	Ok(())
}

/// Accepts a merge submission: `bytes` is a `P`-element vector in `codec`, `listed` its chunk hashes
/// ([`chunk_hashes`]) and it decodes to finite values. Checked in that order, so the error names the
/// first defect.
///
/// # Errors
/// [`Refused::Length`], [`Refused::ChunkCount`], [`Refused::ChunkHash`], [`Refused::NonFinite`],
/// [`Refused::Malformed`].
pub fn accept_submission(
	codec: MergeCodec,
	bytes: &[u8],
	listed: &[ContentHash],
	param_count: u64,
) -> Result<(), Refused> {
	check_submission_shape(codec, bytes.len() as u64, listed.len(), param_count)?;
	if let Some(chunk) = chunk_hashes(codec, bytes, param_count)
		.iter()
		.zip(listed)
		.position(|(a, b)| a != b)
	{
		return Err(Refused::ChunkHash { chunk });
	}
	codec
		.decode(bytes, param_count, gradient_chunk_elems(param_count))
		.map_err(|e| Refused::of(e, 0))?;
	Ok(())
}

/// Accepts a reduced shard of element range `[start, end)` of a `param_count`-element vector: the
/// encoding of its `end − start` elements in the shard codec of `codec` ([`MergeCodec::shard_codec`],
/// chunks of [`gradient_chunk_elems`]`(P)` from the shard's start), decoding to finite values (its hash
/// is the uploader's claim, compared with the other copy's by the orchestrator).
///
/// # Errors
/// [`Refused::Length`], [`Refused::NonFinite`] (index within the whole vector), [`Refused::Malformed`].
pub fn accept_shard(
	codec: MergeCodec,
	bytes: &[u8],
	range: [u64; 2],
	param_count: u64,
) -> Result<(), Refused> {
	let elems = range[1].saturating_sub(range[0]);
	codec
		.shard_codec()
		.decode(bytes, elems, gradient_chunk_elems(param_count))
		.map_err(|e| Refused::of(e, range[0]))?;
	Ok(())
}

#[cfg(test)]
mod tests {
	use proptest::prelude::*;

	use super::*;
	use crate::f32le;
	use crate::merge::{reduce_shard, SpanInput};

	const F: MergeCodec = MergeCodec::F32;

	fn values(p: usize) -> Vec<f32> {
		(0..p).map(|i| (i as f32).sin()).collect()
	}

	fn vector(p: usize) -> Vec<u8> {
		f32le::to_bytes(&values(p))
	}

	#[test]
	fn an_honest_submission_is_accepted() {
		let b = vector(5_000);
		assert_eq!(accept_submission(F, &b, &chunk_hashes(F, &b, 5_000), 5_000), Ok(()));
		for codec in [MergeCodec::Int8, MergeCodec::TopK { per_mille: 16 }] {
			let b = codec.encode(&values(5_000), gradient_chunk_elems(5_000)).unwrap();
			assert_eq!(
				accept_submission(codec, &b, &chunk_hashes(codec, &b, 5_000), 5_000),
				Ok(()),
				"{codec}"
			);
			// The same bytes are not an f32 submission.
			assert!(matches!(
				accept_submission(F, &b, &chunk_hashes(codec, &b, 5_000), 5_000),
				Err(Refused::Length { .. })
			));
		}
	}

	#[test]
	fn each_defect_is_refused_with_its_own_reason() {
		let p = 5_000u64;
		let b = vector(p as usize);
		let h = chunk_hashes(F, &b, p);
		assert!(matches!(
			accept_submission(F, &b[..b.len() - 4], &h, p),
			Err(Refused::Length { expected: 20_000, got: 19_996, .. })
		));
		assert!(matches!(accept_submission(F, &b, &h[1..], p), Err(Refused::ChunkCount { .. })));
		let mut flipped = b.clone();
		flipped[4 * 2_000] ^= 1;
		assert_eq!(accept_submission(F, &flipped, &h, p), Err(Refused::ChunkHash { chunk: 1 }));
		// A NaN with its chunk hashes recomputed: only the finiteness rule catches it.
		let mut nan = b.clone();
		nan[4 * 4_321..4 * 4_322].copy_from_slice(&f32::NAN.to_le_bytes());
		assert_eq!(
			accept_submission(F, &nan, &chunk_hashes(F, &nan, p), p),
			Err(Refused::NonFinite { index: 4_321 })
		);
		let mut inf = b.clone();
		inf[..4].copy_from_slice(&f32::INFINITY.to_le_bytes());
		assert_eq!(
			accept_submission(F, &inf, &chunk_hashes(F, &inf, p), p),
			Err(Refused::NonFinite { index: 0 })
		);
		// int8: a NaN scale in chunk 2 (elements 2 048..), a negative scale in chunk 1.
		let i8c = MergeCodec::Int8;
		let c = gradient_chunk_elems(p);
		let q = i8c.encode(&values(p as usize), c).unwrap();
		let block = i8c.chunk_bytes(c) as usize;
		let mut nan = q.clone();
		nan[2 * block..2 * block + 4].copy_from_slice(&f32::NAN.to_le_bytes());
		assert_eq!(
			accept_submission(i8c, &nan, &chunk_hashes(i8c, &nan, p), p),
			Err(Refused::NonFinite { index: 2 * c })
		);
		let mut neg = q.clone();
		neg[block..block + 4].copy_from_slice(&(-0.5f32).to_le_bytes());
		assert!(matches!(
			accept_submission(i8c, &neg, &chunk_hashes(i8c, &neg, p), p),
			Err(Refused::Malformed { chunk: 1, .. })
		));
	}

	#[test]
	fn shards_need_their_length_and_finite_values() {
		let b = f32le::to_bytes(&[1.0, 2.0]);
		assert_eq!(accept_shard(F, &b, [10, 12], 100), Ok(()));
		assert!(matches!(accept_shard(F, &b, [10, 13], 100), Err(Refused::Length { .. })));
		let nan = f32le::to_bytes(&[1.0, f32::NAN]);
		assert_eq!(accept_shard(F, &nan, [10, 12], 100), Err(Refused::NonFinite { index: 11 }));
		// Shards of a top-k run travel as int8.
		let t = MergeCodec::TopK { per_mille: 16 };
		let q = MergeCodec::Int8.encode(&[1.0, 2.0], gradient_chunk_elems(100)).unwrap();
		assert_eq!(accept_shard(t, &q, [10, 12], 100), Ok(()));
		assert!(matches!(accept_shard(t, &b, [10, 12], 100), Err(Refused::Length { .. })));
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
			let h = chunk_hashes(F, &b, p);
			let accepted = accept_submission(F, &b, &h, p).is_ok();
			let reduced =
				reduce_shard(F, &[SpanInput { samples: 1, chunk_hashes: &h, span: &b }], 0, p, p).is_ok();
			prop_assert_eq!(accepted, reduced);
			prop_assert_eq!(accepted, f32::from_bits(bits).is_finite());
		}

		/// The same for compressed submissions, whatever byte is overwritten.
		#[test]
		fn accepted_compressed_submissions_always_reduce(
			p in 1u64..3_000,
			at in 0usize..10_000,
			byte in any::<u8>(),
			topk in any::<bool>(),
		) {
			let codec = if topk { MergeCodec::TopK { per_mille: 50 } } else { MergeCodec::Int8 };
			let mut b = codec.encode(&values(p as usize), gradient_chunk_elems(p)).unwrap();
			let at = at % b.len();
			b[at] = byte;
			let h = chunk_hashes(codec, &b, p);
			let accepted = accept_submission(codec, &b, &h, p).is_ok();
			let reduced = reduce_shard(
				codec,
				&[SpanInput { samples: 1, chunk_hashes: &h, span: &b }],
				0,
				p,
				p,
			)
			.is_ok();
			prop_assert_eq!(accepted, reduced);
		}
	}
}
