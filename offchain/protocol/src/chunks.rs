//! Hashed chunks of a merge vector: the rule that lets a reducer check a ranged read.
//!
//! Shard reducers read only their element ranges of each submission (so per-miner traffic stays flat in
//! `n`, docs/design.md "Merge"); a whole-object hash cannot check a ranged read, so a submission also
//! lists the BLAKE3 of every chunk of [`gradient_chunk_elems`]`(P)` elements, and a reducer reads the
//! chunk-aligned span around its range ([`chunk_span`]) and checks each chunk before using it.

use iota_primitives::ContentHash;

use crate::codec::{MergeCodec, Span};

/// Fewest elements (f32) per hashed chunk of a submission (4 KiB).
pub const MIN_GRADIENT_CHUNK_ELEMS: u64 = 1_024;
/// Most elements (f32) per hashed chunk of a submission (256 KiB).
pub const MAX_GRADIENT_CHUNK_ELEMS: u64 = 65_536;

/// Elements per hashed chunk of a `param_count`-element submission:
/// `clamp(next_pow2(ceil(P / 1024)), 1 024, 65 536)`, so a submission lists at most ~1 024 chunk hashes
/// up to `P` = 64 Mi and chunks stay at most 1/1 024 of `P` below that.
///
/// A fixed 65 536-element chunk made the aligned span larger than the shard itself from `n = 8` on a
/// 3 M-parameter stage (shards of `P / 28` elements), and the download per miner grew with `n`
/// (measured with `bench-merge`: 5.0 → 9.1 P-vectors from n = 2 to 16); a chunk of at most `P / 1 024`
/// keeps the alignment overhead under ~2·n(n−1)/1 024 of a P-vector.
pub fn gradient_chunk_elems(param_count: u64) -> u64 {
	param_count
		.div_ceil(1_024)
		.checked_next_power_of_two()
		.unwrap_or(MAX_GRADIENT_CHUNK_ELEMS)
		.clamp(MIN_GRADIENT_CHUNK_ELEMS, MAX_GRADIENT_CHUNK_ELEMS)
}

/// Number of chunk hashes a `param_count`-element submission lists.
pub fn chunk_count(param_count: u64) -> usize {
	param_count.div_ceil(gradient_chunk_elems(param_count)) as usize
}

/// Bytes of a whole `param_count`-element merge submission in `codec` (`4·P` in `f32`).
pub fn submission_len(codec: MergeCodec, param_count: u64) -> u64 {
	codec.encoded_len(param_count, gradient_chunk_elems(param_count))
}

/// Bytes of a reduced shard of `elems` elements of a `param_count`-element vector: the shard codec of
/// `codec` ([`MergeCodec::shard_codec`]) in chunks of [`gradient_chunk_elems`]`(P)` from the shard's
/// start (`4·elems` in `f32`).
pub fn shard_len(codec: MergeCodec, elems: u64, param_count: u64) -> u64 {
	codec.shard_codec().encoded_len(elems, gradient_chunk_elems(param_count))
}

/// BLAKE3 of each encoded [`gradient_chunk_elems`]`(P)`-element chunk of a `param_count`-element
/// merge vector's bytes in `codec` ([`MergeCodec::chunk_hashes`]; the last chunk may be shorter).
pub fn chunk_hashes(codec: MergeCodec, bytes: &[u8], param_count: u64) -> Vec<ContentHash> {
	codec.chunk_hashes(bytes, param_count, gradient_chunk_elems(param_count))
}

/// The chunks covering element range `[start, end)` of a `param_count`-element submission in `codec`:
/// the first chunk's index, the byte range to read (aligned to chunk boundaries, clipped to the
/// vector) and the elements it holds.
pub fn chunk_span(codec: MergeCodec, start: u64, end: u64, param_count: u64) -> Span {
	chunk_span_with(codec, start, end, param_count, gradient_chunk_elems(param_count))
}

/// [`chunk_span`] for another chunk size (`chunk_elems` per hashed chunk, > 0); for studying the chunk
/// size (`bench-merge --chunk-elems`). The protocol uses [`chunk_span`].
pub fn chunk_span_with(
	codec: MergeCodec,
	start: u64,
	end: u64,
	param_count: u64,
	chunk_elems: u64,
) -> Span {
	codec.span(start, end, param_count, chunk_elems)
}

/// [`chunk_hashes`] for another chunk size (`chunk_elems` per chunk, > 0).
pub fn chunk_hashes_with(
	codec: MergeCodec,
	bytes: &[u8],
	param_count: u64,
	chunk_elems: u64,
) -> Vec<ContentHash> {
	codec.chunk_hashes(bytes, param_count, chunk_elems)
}

#[cfg(test)]
mod tests {
	use super::*;

	#[test]
	fn chunk_size_steps_in_powers_of_two_within_bounds() {
		assert_eq!(gradient_chunk_elems(0), MIN_GRADIENT_CHUNK_ELEMS);
		assert_eq!(gradient_chunk_elems(1_024 * 1_024), 1_024);
		assert_eq!(gradient_chunk_elems(1_024 * 1_024 + 1), 2_048);
		assert_eq!(gradient_chunk_elems(u64::MAX), MAX_GRADIENT_CHUNK_ELEMS);
		assert_eq!(chunk_count(3_000), 3);
		assert_eq!(chunk_hashes(MergeCodec::F32, &[0u8; 4 * 3_000], 3_000).len(), 3);
	}

	#[test]
	fn span_is_chunk_aligned_and_clipped() {
		let f = MergeCodec::F32;
		let span = |s, e, p, c| {
			let sp = chunk_span_with(f, s, e, p, c);
			(sp.first_chunk, sp.bytes)
		};
		assert_eq!(span(5, 9, 100, 4), (1, 16..48));
		assert_eq!(span(95, 100, 100, 8), (11, 352..400));
		assert_eq!(chunk_span_with(MergeCodec::Int8, 5, 9, 100, 4).bytes, 8..24);
		for p in [100u64, 70_000, 3 * 1_024 * 1_024, 3_156_480] {
			let c = gradient_chunk_elems(p);
			for (s, e) in [(0, 10), (c + 5, c + 6), (c - 1, c + 1), (p - 7, p)] {
				let (s, e) = (s.min(p), e.min(p));
				assert_eq!(chunk_span_with(f, s, e, p, c), chunk_span(f, s, e, p));
			}
		}
	}
}
