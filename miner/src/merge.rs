//! The butterfly merge's arithmetic (DESIGN §6, brief decisions 5–8), pure: bytes in, vectors or typed
//! errors out, no I/O.
//!
//! - [`submission_bytes`] / [`chunk_hashes`]: a miner's gradient submission object (`P` little-endian
//!   f32, the **sum** over its micro-batches) and the BLAKE3 of each
//!   [`gradient_chunk_elems`]`(P)`-element chunk, which lets a reducer check a ranged read.
//! - [`reduce_shard`]: one shard `[start, end)` of the weighted mean from the chunk-aligned span
//!   ([`chunk_span`]) of each of the `n` submissions: every chunk is checked against the submission's
//!   `chunk_hashes` before a value is used, then
//!   `out[j] = ((Σ_i x_i[j] as f64, in the listed order) / (Σ_i samples_i) as f64) as f32`.
//!   Every reducer of the shard, on any machine, gets the same bits.
//! - [`assemble_mean`]: the mean gradient from the reduced shards (each checked against its hash),
//!   concatenated in shard order; the ranges must tile `0..P` exactly.
//!
//! Nothing here accepts NaN/Inf: a submission or shard holding one is refused
//! ([`MergeError::NonFinite`]), and a sum that overflows f32 when rounded is refused too.

use iota_primitives::ContentHash;
use iota_rpc::types::gradient_chunk_elems;

pub use iota_rpc::types::{chunk_hashes, chunk_span};

/// Why merge input was refused. Every variant names what was expected and what came.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum MergeError {
	/// No submissions to reduce.
	#[error("no submissions to reduce")]
	NoSubmissions,
	/// The submissions' sample counts sum to zero.
	#[error("the submissions hold zero samples in total")]
	ZeroSamples,
	/// A shard range is empty, reversed or past `P`.
	#[error("range [{start}, {end}) is not a non-empty range within 0..{param_count}")]
	BadRange {
		/// First element.
		start: u64,
		/// Last element (exclusive).
		end: u64,
		/// `P`.
		param_count: u64,
	},
	/// A submission's span has the wrong number of bytes for its range.
	#[error("submission {index}: span of {got} bytes, expected {expected} (chunk-aligned span of the range)")]
	SpanLength {
		/// Position of the submission in the list.
		index: usize,
		/// Bytes expected.
		expected: u64,
		/// Bytes received.
		got: u64,
	},
	/// A submission lists the wrong number of chunk hashes for `P`.
	#[error(
		"submission {index}: {got} chunk hashes, expected {expected} for {param_count} elements"
	)]
	ChunkCount {
		/// Position of the submission in the list.
		index: usize,
		/// `chunk_count(P)`.
		expected: usize,
		/// Listed.
		got: usize,
		/// `P`.
		param_count: u64,
	},
	/// A chunk's bytes do not hash to the listed chunk hash.
	#[error("submission {index}: chunk {chunk} hashes to {got}, the submission lists {expected}")]
	ChunkHash {
		/// Position of the submission in the list.
		index: usize,
		/// Chunk index in the whole submission.
		chunk: usize,
		/// Listed hash.
		expected: ContentHash,
		/// Hash of the bytes read.
		got: ContentHash,
	},
	/// A reduced shard's bytes do not hash to the hash it was published with.
	#[error("shard {shard}: bytes hash to {got}, expected {expected}")]
	ShardHash {
		/// Shard index.
		shard: u32,
		/// Published hash.
		expected: ContentHash,
		/// Hash of the bytes.
		got: ContentHash,
	},
	/// A reduced shard has the wrong byte length for its range.
	#[error("shard {shard}: {got} bytes, expected {expected} for its range")]
	ShardLength {
		/// Shard index.
		shard: u32,
		/// `4 · (end − start)`.
		expected: u64,
		/// Bytes received.
		got: u64,
	},
	/// The shards' ranges do not tile `0..P` in order.
	#[error(
		"shards do not tile 0..{param_count}: shard {shard} starts at {start}, expected {expected}"
	)]
	NotTiling {
		/// `P`.
		param_count: u64,
		/// The first shard out of place (its position in the list).
		shard: usize,
		/// Its start (or `P` for the missing tail).
		start: u64,
		/// Where it should start.
		expected: u64,
	},
	/// A value is NaN or ±Inf (in a submission, a shard, a gradient to upload, or the rounded mean).
	#[error("{what}: non-finite value at element {index}")]
	NonFinite {
		/// Which vector.
		what: String,
		/// Element index (within the whole vector of `P`).
		index: u64,
	},
	/// A byte buffer is not a whole number of f32 values.
	#[error("{what}: {len} bytes is not a multiple of 4")]
	NotF32 {
		/// Which buffer.
		what: String,
		/// Its length.
		len: usize,
	},
}

/// One submission as a reducer sees it: its sample count, its listed chunk hashes, and the bytes of
/// the chunk-aligned span ([`chunk_span`]) around the shard's range, read with an HTTP `Range` GET.
#[derive(Clone, Copy, Debug)]
pub struct SpanInput<'a> {
	/// Micro-batches the submission accumulated (its weight).
	pub samples: u32,
	/// [`chunk_hashes`] of the whole submission (`chunk_count(P)` entries).
	pub chunk_hashes: &'a [ContentHash],
	/// The span's bytes.
	pub span: &'a [u8],
}

/// A reduced shard as published: its index, element range `[start, end)`, hash and bytes.
#[derive(Clone, Copy, Debug)]
pub struct ShardInput<'a> {
	/// Shard index (for errors).
	pub shard: u32,
	/// Element range `[start, end)`.
	pub range: [u64; 2],
	/// BLAKE3 the shard was published with.
	pub hash: &'a ContentHash,
	/// The shard object (`end − start` little-endian f32).
	pub bytes: &'a [u8],
}

fn f32_at(bytes: &[u8], i: usize) -> f32 {
	f32::from_le_bytes([bytes[4 * i], bytes[4 * i + 1], bytes[4 * i + 2], bytes[4 * i + 3]])
}

/// The submission object for a summed gradient: `P` little-endian f32 (decision 5).
///
/// # Errors
/// [`MergeError::NonFinite`]: a miner never uploads NaN/Inf.
pub fn submission_bytes(sum: &[f32]) -> Result<Vec<u8>, MergeError> {
	if let Some(index) = sum.iter().position(|x| !x.is_finite()) {
		return Err(MergeError::NonFinite {
			what: "gradient to upload".into(),
			index: index as u64,
		});
	}
	Ok(sum.iter().flat_map(|x| x.to_le_bytes()).collect())
}

/// Number of chunk hashes a submission of `param_count` elements lists.
pub fn chunk_count(param_count: u64) -> usize {
	iota_rpc::types::chunk_count(param_count)
}

/// Reduce shard `[start, end)` from the chunk-aligned spans of `inputs` (in the submissions' listed
/// order; the order is part of the result's bits). Returns `end − start` values.
///
/// # Errors
/// [`MergeError::NoSubmissions`], [`MergeError::ZeroSamples`], [`MergeError::BadRange`],
/// [`MergeError::ChunkCount`], [`MergeError::SpanLength`], [`MergeError::ChunkHash`] (checked for every
/// chunk of every span before any value is used), [`MergeError::NonFinite`] for NaN/Inf in a submission
/// or a mean that rounds to ±Inf in f32.
pub fn reduce_shard(
	inputs: &[SpanInput<'_>],
	start: u64,
	end: u64,
	param_count: u64,
) -> Result<Vec<f32>, MergeError> {
	reduce_shard_chunked(inputs, start, end, param_count, gradient_chunk_elems(param_count))
}

/// [`chunk_span`] for another chunk size (`chunk_elems` f32 per hashed chunk).
pub fn chunk_span_with(
	start: u64,
	end: u64,
	param_count: u64,
	chunk_elems: u64,
) -> (usize, std::ops::Range<u64>) {
	let first = start / chunk_elems;
	let last_end = end.div_ceil(chunk_elems).saturating_mul(chunk_elems).min(param_count);
	(first as usize, first * chunk_elems * 4..last_end * 4)
}

/// [`chunk_hashes`] for another chunk size.
pub fn chunk_hashes_with(bytes: &[u8], chunk_elems: u64) -> Vec<ContentHash> {
	bytes.chunks((chunk_elems * 4) as usize).map(ContentHash::of).collect()
}

/// [`reduce_shard`] with hashed chunks of `chunk_elems` elements instead of the protocol's
/// [`gradient_chunk_elems`]: the same reduction, for studying the chunk size (`bench-merge
/// --chunk-elems`). Miners use [`reduce_shard`].
///
/// # Errors
/// As [`reduce_shard`]; [`MergeError::BadRange`] for `chunk_elems = 0`.
pub fn reduce_shard_chunked(
	inputs: &[SpanInput<'_>],
	start: u64,
	end: u64,
	param_count: u64,
	chunk_elems: u64,
) -> Result<Vec<f32>, MergeError> {
	if inputs.is_empty() {
		return Err(MergeError::NoSubmissions);
	}
	if start >= end || end > param_count || chunk_elems == 0 {
		return Err(MergeError::BadRange { start, end, param_count });
	}
	let total: u64 = inputs.iter().map(|s| u64::from(s.samples)).sum();
	if total == 0 {
		return Err(MergeError::ZeroSamples);
	}
	let (first_chunk, bytes) = chunk_span_with(start, end, param_count, chunk_elems);
	let span_len = bytes.end - bytes.start;
	let chunk_bytes = (chunk_elems * 4) as usize;
	let expected = param_count.div_ceil(chunk_elems) as usize;
	for (index, s) in inputs.iter().enumerate() {
		if s.chunk_hashes.len() != expected {
			return Err(MergeError::ChunkCount {
				index,
				expected,
				got: s.chunk_hashes.len(),
				param_count,
			});
		}
		if s.span.len() as u64 != span_len {
			return Err(MergeError::SpanLength {
				index,
				expected: span_len,
				got: s.span.len() as u64,
			});
		}
		for (k, chunk) in s.span.chunks(chunk_bytes).enumerate() {
			let got = ContentHash::of(chunk);
			let listed = &s.chunk_hashes[first_chunk + k];
			if &got != listed {
				return Err(MergeError::ChunkHash {
					index,
					chunk: first_chunk + k,
					expected: *listed,
					got,
				});
			}
		}
	}
	// Element j of the shard sits at (start - span_start) + j in each span.
	let offset = (start - bytes.start / 4) as usize;
	let n = (end - start) as usize;
	let mut acc = vec![0f64; n];
	for s in inputs {
		for (j, a) in acc.iter_mut().enumerate() {
			let x = f32_at(s.span, offset + j);
			if !x.is_finite() {
				return Err(MergeError::NonFinite {
					what: "gradient submission".into(),
					index: start + j as u64,
				});
			}
			*a += x as f64;
		}
	}
	let denom = total as f64;
	let mut out = Vec::with_capacity(n);
	for (j, a) in acc.into_iter().enumerate() {
		let v = (a / denom) as f32;
		if !v.is_finite() {
			return Err(MergeError::NonFinite {
				what: "reduced mean".into(),
				index: start + j as u64,
			});
		}
		out.push(v);
	}
	Ok(out)
}

/// Little-endian f32 bytes of a reduced shard (what a reducer uploads) and their BLAKE3.
pub fn shard_bytes(values: &[f32]) -> (Vec<u8>, ContentHash) {
	let bytes: Vec<u8> = values.iter().flat_map(|x| x.to_le_bytes()).collect();
	let hash = ContentHash::of(&bytes);
	(bytes, hash)
}

/// The mean gradient (`P` values) from the reduced shards in shard order: every shard's bytes must
/// hash to its published hash and have `4 · (end − start)` bytes, the ranges must tile `0..P`
/// exactly, and no value may be NaN/Inf.
///
/// # Errors
/// [`MergeError::NotTiling`], [`MergeError::BadRange`], [`MergeError::ShardLength`],
/// [`MergeError::ShardHash`], [`MergeError::NonFinite`].
pub fn assemble_mean(shards: &[ShardInput<'_>], param_count: u64) -> Result<Vec<f32>, MergeError> {
	let mut next = 0u64;
	for (pos, s) in shards.iter().enumerate() {
		let [start, end] = s.range;
		if start != next {
			return Err(MergeError::NotTiling { param_count, shard: pos, start, expected: next });
		}
		if start >= end || end > param_count {
			return Err(MergeError::BadRange { start, end, param_count });
		}
		next = end;
	}
	if next != param_count {
		return Err(MergeError::NotTiling {
			param_count,
			shard: shards.len(),
			start: param_count,
			expected: next,
		});
	}
	let mut mean = Vec::with_capacity(param_count as usize);
	for s in shards {
		let [start, end] = s.range;
		let expected = 4 * (end - start);
		if s.bytes.len() as u64 != expected {
			return Err(MergeError::ShardLength {
				shard: s.shard,
				expected,
				got: s.bytes.len() as u64,
			});
		}
		let got = ContentHash::of(s.bytes);
		if &got != s.hash {
			return Err(MergeError::ShardHash { shard: s.shard, expected: *s.hash, got });
		}
		for i in 0..(end - start) as usize {
			let v = f32_at(s.bytes, i);
			if !v.is_finite() {
				return Err(MergeError::NonFinite {
					what: format!("reduced shard {}", s.shard),
					index: start + i as u64,
				});
			}
			mean.push(v);
		}
	}
	Ok(mean)
}

/// Decode a whole little-endian f32 buffer, refusing NaN/Inf.
///
/// # Errors
/// [`MergeError::NotF32`], [`MergeError::NonFinite`].
pub fn decode_f32(what: &str, bytes: &[u8]) -> Result<Vec<f32>, MergeError> {
	if !bytes.len().is_multiple_of(4) {
		return Err(MergeError::NotF32 { what: what.into(), len: bytes.len() });
	}
	let v: Vec<f32> = (0..bytes.len() / 4).map(|i| f32_at(bytes, i)).collect();
	if let Some(index) = v.iter().position(|x| !x.is_finite()) {
		return Err(MergeError::NonFinite { what: what.into(), index: index as u64 });
	}
	Ok(v)
}

#[cfg(test)]
mod tests {
	use super::*;

	fn sub(values: &[f32]) -> (Vec<u8>, Vec<ContentHash>) {
		let b = submission_bytes(values).unwrap();
		let h = chunk_hashes(&b);
		(b, h)
	}

	#[test]
	fn chunk_span_with_the_protocol_size_is_the_protocol_span() {
		for p in [100u64, 70_000, 3 * 1_024 * 1_024, 3_156_480] {
			let c = gradient_chunk_elems(p);
			for (s, e) in [(0, 10), (c + 5, c + 6), (c - 1, c + 1), (p - 7, p)] {
				assert_eq!(
					chunk_span_with(s.min(p), e.min(p), p, c),
					chunk_span(s.min(p), e.min(p), p)
				);
			}
		}
		assert_eq!(
			chunk_hashes_with(&[1u8; 4 * 70_000], gradient_chunk_elems(70_000)),
			chunk_hashes(&[1u8; 4 * 70_000])
		);
		assert_eq!(chunk_span_with(5, 9, 100, 4), (1, 16..48));
	}

	#[test]
	fn single_chunk_reduce_is_the_weighted_mean() {
		let (a, ha) = sub(&[1.0, 2.0, 3.0]);
		let (b, hb) = sub(&[3.0, 6.0, 9.0]);
		let inputs = [
			SpanInput { samples: 1, chunk_hashes: &ha, span: &a },
			SpanInput { samples: 3, chunk_hashes: &hb, span: &b },
		];
		assert_eq!(reduce_shard(&inputs, 0, 3, 3).unwrap(), vec![1.0, 2.0, 3.0]);
		assert_eq!(reduce_shard(&inputs, 1, 2, 3).unwrap(), vec![2.0]);
	}

	#[test]
	fn bad_ranges_and_empty_inputs_are_refused() {
		let (a, ha) = sub(&[1.0, 2.0]);
		let one = [SpanInput { samples: 1, chunk_hashes: &ha, span: &a }];
		assert_eq!(reduce_shard(&[], 0, 1, 2), Err(MergeError::NoSubmissions));
		assert!(matches!(reduce_shard(&one, 1, 1, 2), Err(MergeError::BadRange { .. })));
		assert!(matches!(reduce_shard(&one, 0, 3, 2), Err(MergeError::BadRange { .. })));
		let zero = [SpanInput { samples: 0, chunk_hashes: &ha, span: &a }];
		assert_eq!(reduce_shard(&zero, 0, 2, 2), Err(MergeError::ZeroSamples));
	}

	#[test]
	fn decode_f32_refuses_ragged_and_non_finite() {
		assert_eq!(decode_f32("x", &[0; 8]).unwrap(), vec![0.0, 0.0]);
		assert!(matches!(decode_f32("x", &[0; 7]), Err(MergeError::NotF32 { len: 7, .. })));
		let nan: Vec<u8> = [0.0f32, f32::NAN].iter().flat_map(|x| x.to_le_bytes()).collect();
		assert!(matches!(decode_f32("x", &nan), Err(MergeError::NonFinite { index: 1, .. })));
		assert!(matches!(
			submission_bytes(&[f32::INFINITY]),
			Err(MergeError::NonFinite { index: 0, .. })
		));
	}
}
