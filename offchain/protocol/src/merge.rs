//! The butterfly merge's arithmetic (docs/design.md "Merge"), pure: bytes in, vectors or typed errors
//! out. Every reducer, the orchestrator resolving a dispute and every validator auditing a shard call
//! these functions, so a shard has exactly one correct value.
//!
//! - [`submission_bytes`]: a miner's merge vector as uploaded (`P` elements in the run's
//!   [`MergeCodec`]: the **sum** of its micro-batch gradients in sync mode), listed with its
//!   [`chunk_hashes`](crate::chunks::chunk_hashes).
//! - [`reduce_shard`]: one shard `[start, end)` of the weighted mean from the chunk-aligned span
//!   ([`chunk_span`](crate::chunks::chunk_span)) of each of the `n` submissions. Every chunk is checked
//!   against its submission's chunk hashes before a value is used, the spans are decoded
//!   ([`MergeCodec::decode`]), then
//!   `out[j] = ((Σ_i x_i[j] as f64, in the listed order) / (Σ_i samples_i) as f64) as f32`.
//!   The reduced shard travels in the codec's [`MergeCodec::shard_codec`] ([`shard_bytes`]).
//!   The listed order is the submissions' order in the round's record (ascending account bytes).
//! - [`assemble_mean`]: the mean vector from the reduced shards (each checked against its hash),
//!   concatenated in shard order; the ranges must tile `0..P` exactly.
//!
//! Nothing here accepts NaN/Inf: a submission or shard holding one is refused
//! ([`MergeError::NonFinite`]), and a mean that overflows f32 when rounded is refused too.

use iota_primitives::ContentHash;

use crate::chunks::{chunk_span_with, gradient_chunk_elems, shard_len};
use crate::codec::{CodecError, ErrorFeedback, MergeCodec};
use crate::f32le;

/// Why merge input was refused. Every variant names what was expected and what came.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum MergeError {
	/// No submissions to reduce.
	#[error("no submissions to reduce")]
	NoSubmissions,
	/// The submissions' sample counts sum to zero.
	#[error("the submissions hold zero samples in total")]
	ZeroSamples,
	/// A shard range is empty, reversed or past `P` (or the chunk size is 0).
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
	#[error(
		"submission {index}: span of {got} bytes, expected {expected} (chunk-aligned span of the range)"
	)]
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
	/// A value is NaN or ±Inf (in a submission, a shard, a vector to upload, or the rounded mean).
	#[error("{what}: non-finite value at element {index}")]
	NonFinite {
		/// Which vector.
		what: String,
		/// Element index (within the whole vector of `P`).
		index: u64,
	},
	/// A chunk of a submission or a shard is not a valid encoding in the run's codec.
	#[error("{what}: chunk {chunk}: {reason}")]
	Malformed {
		/// Which vector.
		what: String,
		/// Chunk index within the vector.
		chunk: u64,
		/// What is wrong.
		reason: String,
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
/// the chunk-aligned span around the shard's range, read with an HTTP `Range` GET.
#[derive(Clone, Copy, Debug)]
pub struct SpanInput<'a> {
	/// Micro-batches the submission accumulated (its weight in the mean).
	pub samples: u32,
	/// Chunk hashes of the whole submission (`chunk_count(P)` entries).
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
	/// The shard object (`end − start` elements in the run's shard codec, [`shard_bytes`]).
	pub bytes: &'a [u8],
}

impl MergeError {
	/// The error for a decode failure of `what`, whose elements start at `offset` of the whole vector
	/// and whose chunks at `first_chunk`.
	fn decode(what: &str, e: CodecError, offset: u64, first_chunk: u64) -> Self {
		match e {
			CodecError::NonFinite { index } => {
				MergeError::NonFinite { what: what.into(), index: offset + index }
			},
			CodecError::Malformed { chunk, reason } => {
				MergeError::Malformed { what: what.into(), chunk: first_chunk + chunk, reason }
			},
			CodecError::Length { expected, got, .. } => {
				MergeError::SpanLength { index: 0, expected, got }
			},
		}
	}
}

/// The submission object for a merge vector: `P` elements encoded in `codec` (chunks of
/// [`gradient_chunk_elems`]`(P)`). A submitter with a lossy codec encodes through its
/// [`ErrorFeedback`](crate::codec::ErrorFeedback) instead, which yields the same layout.
///
/// # Errors
/// [`MergeError::NonFinite`]: an honest miner never uploads NaN/Inf.
pub fn submission_bytes(codec: MergeCodec, sum: &[f32]) -> Result<Vec<u8>, MergeError> {
	encode_submission(codec, &ErrorFeedback::default(), sum).map(|(bytes, _)| bytes)
}

/// `sum` plus `feedback`'s residual encoded in `codec` in the submission's chunks, and the residual
/// it leaves.
fn encode_submission(
	codec: MergeCodec,
	feedback: &ErrorFeedback,
	sum: &[f32],
) -> Result<(Vec<u8>, ErrorFeedback), MergeError> {
	feedback
		.encode(codec, sum, gradient_chunk_elems(sum.len() as u64))
		.map_err(|e| MergeError::decode("vector to upload", e, 0, 0))
}

/// Whether a submitter in `training` carries `codec`'s rounding residual into its next submission
/// (error feedback). Yes for lossy codecs in sync mode and for top-k in local mode (DeMo, Peng et al.
/// 2024, and SparseLoCo keep it: top-k drops most of a vector); no for `f32` (nothing is lost) and for
/// `int8` in local mode, whose submission a validator compares with the miner's revealed delta
/// ([`pseudo_gradient_deviation`](crate::optim::pseudo_gradient_deviation)) and which cannot see a
/// residual carried from an earlier epoch: after an epoch of many samples, that residual alone can
/// exceed the check's tolerance on an honest miner's smaller vector.
pub fn carries_error_feedback(training: &crate::optim::Training, codec: MergeCodec) -> bool {
	match codec {
		MergeCodec::F32 => false,
		MergeCodec::Int8 => training.is_sync(),
		MergeCodec::TopK { .. } => true,
	}
}

/// [`submission_bytes`] of `sum` for a run in `training`, plus the residual `feedback` holds
/// ([`ErrorFeedback::encode`]) where [`carries_error_feedback`] says so: the bytes and the feedback to
/// keep once the submission is merged (`None`: the codec carries none in this mode, and `feedback` was
/// not read).
///
/// # Errors
/// [`MergeError::NonFinite`].
pub fn submission_with_feedback(
	training: &crate::optim::Training,
	codec: MergeCodec,
	feedback: &ErrorFeedback,
	sum: &[f32],
) -> Result<(Vec<u8>, Option<ErrorFeedback>), MergeError> {
	let carry = carries_error_feedback(training, codec);
	let none = ErrorFeedback::default();
	let (bytes, next) = encode_submission(codec, if carry { feedback } else { &none }, sum)?;
	Ok((bytes, carry.then_some(next)))
}

/// The chunk-aligned span of `[start, end)` cut out of a whole submission's bytes in `codec` (what a
/// ranged read of it returns): for callers that hold whole objects (the validator's audit).
///
/// # Errors
/// [`MergeError::BadRange`] when the range is empty or past `P`; [`MergeError::SpanLength`] when the
/// object is shorter than the span.
pub fn span_of(
	codec: MergeCodec,
	whole: &[u8],
	start: u64,
	end: u64,
	param_count: u64,
) -> Result<&[u8], MergeError> {
	if start >= end || end > param_count {
		return Err(MergeError::BadRange { start, end, param_count });
	}
	let r =
		chunk_span_with(codec, start, end, param_count, gradient_chunk_elems(param_count)).bytes;
	whole.get(r.start as usize..r.end as usize).ok_or(MergeError::SpanLength {
		index: 0,
		expected: r.end,
		got: whole.len() as u64,
	})
}

/// Reduce shard `[start, end)` from the chunk-aligned spans of `inputs` (submissions in `codec`, in
/// the submissions' listed order; the order is part of the result's bits). Returns `end − start`
/// values.
///
/// # Errors
/// [`MergeError::NoSubmissions`], [`MergeError::ZeroSamples`], [`MergeError::BadRange`],
/// [`MergeError::ChunkCount`], [`MergeError::SpanLength`], [`MergeError::ChunkHash`] (checked for
/// every chunk of every span before any value is used), [`MergeError::NonFinite`] for NaN/Inf in a
/// submission or a mean that rounds to ±Inf in f32, [`MergeError::Malformed`] for a chunk that is not
/// a valid encoding.
pub fn reduce_shard(
	codec: MergeCodec,
	inputs: &[SpanInput<'_>],
	start: u64,
	end: u64,
	param_count: u64,
) -> Result<Vec<f32>, MergeError> {
	reduce_shard_chunked(codec, inputs, start, end, param_count, gradient_chunk_elems(param_count))
}

/// The reduced shard `[start, end)` as a reducer uploads it: [`reduce_shard`] then [`shard_bytes`].
/// Every reducer, the orchestrator resolving a dispute and every validator auditing a copy call this,
/// so a shard has one correct byte string.
///
/// # Errors
/// As [`reduce_shard`].
pub fn reduce_shard_bytes(
	codec: MergeCodec,
	inputs: &[SpanInput<'_>],
	start: u64,
	end: u64,
	param_count: u64,
) -> Result<Vec<u8>, MergeError> {
	let values = reduce_shard(codec, inputs, start, end, param_count)?;
	Ok(shard_bytes(codec, &values, param_count)?.0)
}

/// [`reduce_shard`] with hashed chunks of `chunk_elems` elements instead of the protocol's
/// [`gradient_chunk_elems`]: the same reduction, for studying the chunk size (`bench-merge
/// --chunk-elems`). Reducers use [`reduce_shard`].
///
/// # Errors
/// As [`reduce_shard`]; [`MergeError::BadRange`] for `chunk_elems = 0`.
pub fn reduce_shard_chunked(
	codec: MergeCodec,
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
	let span = chunk_span_with(codec, start, end, param_count, chunk_elems);
	let span_len = span.bytes.end - span.bytes.start;
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
		let hashes = codec.chunk_hashes(s.span, span.elems, chunk_elems);
		for (k, got) in hashes.into_iter().enumerate() {
			let listed = &s.chunk_hashes[span.first_chunk + k];
			if &got != listed {
				return Err(MergeError::ChunkHash {
					index,
					chunk: span.first_chunk + k,
					expected: *listed,
					got,
				});
			}
		}
	}
	// Element j of the shard sits at (start - span.first_elem) + j of each decoded span.
	let offset = (start - span.first_elem) as usize;
	let n = (end - start) as usize;
	let mut acc = vec![0f64; n];
	for s in inputs {
		let values = codec.decode(s.span, span.elems, chunk_elems).map_err(|e| {
			MergeError::decode("merge submission", e, span.first_elem, span.first_chunk as u64)
		})?;
		for (a, x) in acc.iter_mut().zip(&values[offset..offset + n]) {
			*a += f64::from(*x);
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

/// A reduced shard of a `param_count`-element vector as a reducer uploads it: `values` in the
/// [`MergeCodec::shard_codec`] of `codec` (chunks of [`gradient_chunk_elems`]`(P)` from the shard's
/// start), and the BLAKE3 of those bytes.
///
/// # Errors
/// [`MergeError::NonFinite`] (the reduction never yields one).
pub fn shard_bytes(
	codec: MergeCodec,
	values: &[f32],
	param_count: u64,
) -> Result<(Vec<u8>, ContentHash), MergeError> {
	let bytes = codec
		.shard_codec()
		.encode(values, gradient_chunk_elems(param_count))
		.map_err(|e| MergeError::decode("reduced shard", e, 0, 0))?;
	let hash = ContentHash::of(&bytes);
	Ok((bytes, hash))
}

/// The mean vector (`P` values) from the reduced shards in shard order: every shard's bytes must hash
/// to its published hash and decode in the shard codec of `codec` ([`shard_bytes`]), the ranges must
/// tile `0..P` exactly, and no value may be NaN/Inf.
///
/// # Errors
/// [`MergeError::NotTiling`], [`MergeError::BadRange`], [`MergeError::ShardLength`],
/// [`MergeError::ShardHash`], [`MergeError::NonFinite`], [`MergeError::Malformed`].
pub fn assemble_mean(
	codec: MergeCodec,
	shards: &[ShardInput<'_>],
	param_count: u64,
) -> Result<Vec<f32>, MergeError> {
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
	let sc = codec.shard_codec();
	let chunk = gradient_chunk_elems(param_count);
	let mut mean = Vec::with_capacity(param_count as usize);
	for s in shards {
		let [start, end] = s.range;
		let expected = shard_len(codec, end - start, param_count);
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
		let values = sc
			.decode(s.bytes, end - start, chunk)
			.map_err(|e| MergeError::decode(&format!("reduced shard {}", s.shard), e, start, 0))?;
		mean.extend(values);
	}
	Ok(mean)
}

/// Decode a whole little-endian f32 buffer, refusing NaN/Inf.
///
/// # Errors
/// [`MergeError::NotF32`], [`MergeError::NonFinite`].
pub fn decode_f32(what: &str, bytes: &[u8]) -> Result<Vec<f32>, MergeError> {
	let v = f32le::from_bytes(bytes)
		.map_err(|e| MergeError::NotF32 { what: what.into(), len: e.len })?;
	if let Some(index) = v.iter().position(|x| !x.is_finite()) {
		return Err(MergeError::NonFinite { what: what.into(), index: index as u64 });
	}
	Ok(v)
}

#[cfg(test)]
mod tests {
	use super::*;
	use crate::chunks::{chunk_hashes, chunk_span};

	const F: MergeCodec = MergeCodec::F32;

	fn sub(values: &[f32]) -> (Vec<u8>, Vec<ContentHash>) {
		let b = submission_bytes(F, values).unwrap();
		let h = chunk_hashes(F, &b, values.len() as u64);
		(b, h)
	}

	#[test]
	fn single_chunk_reduce_is_the_weighted_mean() {
		let (a, ha) = sub(&[1.0, 2.0, 3.0]);
		let (b, hb) = sub(&[3.0, 6.0, 9.0]);
		let inputs = [
			SpanInput { samples: 1, chunk_hashes: &ha, span: &a },
			SpanInput { samples: 3, chunk_hashes: &hb, span: &b },
		];
		assert_eq!(reduce_shard(F, &inputs, 0, 3, 3).unwrap(), vec![1.0, 2.0, 3.0]);
		assert_eq!(reduce_shard(F, &inputs, 1, 2, 3).unwrap(), vec![2.0]);
	}

	#[test]
	fn a_span_cut_from_the_whole_object_reduces_like_a_ranged_read() {
		let p = 5_000u64;
		let x: Vec<f32> = (0..p).map(|i| i as f32 * 0.5).collect();
		let (a, ha) = sub(&x);
		let (start, end) = (1_500, 2_100);
		let r = chunk_span(F, start, end, p).bytes;
		let ranged = &a[r.start as usize..r.end as usize];
		assert_eq!(span_of(F, &a, start, end, p).unwrap(), ranged);
		let out = reduce_shard(
			F,
			&[SpanInput { samples: 2, chunk_hashes: &ha, span: ranged }],
			start,
			end,
			p,
		)
		.unwrap();
		assert_eq!(out[0], 750.0 / 2.0);
		assert!(matches!(span_of(F, &a[..100], start, end, p), Err(MergeError::SpanLength { .. })));
	}

	#[test]
	fn bad_ranges_empty_inputs_and_non_finite_values_are_refused() {
		let (a, ha) = sub(&[1.0, 2.0]);
		let one = [SpanInput { samples: 1, chunk_hashes: &ha, span: &a }];
		assert_eq!(reduce_shard(F, &[], 0, 1, 2), Err(MergeError::NoSubmissions));
		assert!(matches!(reduce_shard(F, &one, 1, 1, 2), Err(MergeError::BadRange { .. })));
		assert!(matches!(reduce_shard(F, &one, 0, 3, 2), Err(MergeError::BadRange { .. })));
		let zero = [SpanInput { samples: 0, chunk_hashes: &ha, span: &a }];
		assert_eq!(reduce_shard(F, &zero, 0, 2, 2), Err(MergeError::ZeroSamples));
		let nan = f32le::to_bytes(&[0.0, f32::NAN]);
		let hn = chunk_hashes(F, &nan, 2);
		let bad = [SpanInput { samples: 1, chunk_hashes: &hn, span: &nan }];
		assert!(matches!(
			reduce_shard(F, &bad, 0, 2, 2),
			Err(MergeError::NonFinite { index: 1, .. })
		));
		let big = f32le::to_bytes(&[f32::MAX, f32::MAX]);
		let hb = chunk_hashes(F, &big, 2);
		let two = [
			SpanInput { samples: 1, chunk_hashes: &hb, span: &big },
			SpanInput { samples: 0, chunk_hashes: &hb, span: &big },
		];
		assert!(matches!(reduce_shard(F, &two, 0, 2, 2), Err(MergeError::NonFinite { .. })));
	}

	#[test]
	fn assembly_checks_tiling_hashes_and_values() {
		let (b0, h0) = shard_bytes(F, &[1.0, 2.0], 3).unwrap();
		let (b1, h1) = shard_bytes(F, &[3.0], 3).unwrap();
		let ok = [
			ShardInput { shard: 0, range: [0, 2], hash: &h0, bytes: &b0 },
			ShardInput { shard: 1, range: [2, 3], hash: &h1, bytes: &b1 },
		];
		assert_eq!(assemble_mean(F, &ok, 3).unwrap(), vec![1.0, 2.0, 3.0]);
		assert!(matches!(assemble_mean(F, &ok[..1], 3), Err(MergeError::NotTiling { .. })));
		let wrong = [ok[0], ShardInput { hash: &h0, ..ok[1] }];
		assert!(matches!(assemble_mean(F, &wrong, 3), Err(MergeError::ShardHash { shard: 1, .. })));
	}

	#[test]
	fn compressed_submissions_reduce_to_the_mean_of_their_decoded_values() {
		let p = 5_000u64;
		let c = gradient_chunk_elems(p);
		for codec in [MergeCodec::Int8, MergeCodec::TopK { per_mille: 30 }] {
			let xs: Vec<Vec<f32>> = (0..3)
				.map(|k| (0..p).map(|i| ((i * (k + 2)) as f32 * 0.01).sin()).collect())
				.collect();
			let subs: Vec<(Vec<u8>, Vec<ContentHash>)> = xs
				.iter()
				.map(|x| {
					let b = submission_bytes(codec, x).unwrap();
					let h = chunk_hashes(codec, &b, p);
					(b, h)
				})
				.collect();
			let decoded: Vec<Vec<f32>> =
				subs.iter().map(|(b, _)| codec.decode(b, p, c).unwrap()).collect();
			let (start, end) = (1_000, 3_100);
			let inputs: Vec<SpanInput<'_>> = subs
				.iter()
				.zip([1u32, 2, 3])
				.map(|((b, h), n)| SpanInput {
					samples: n,
					chunk_hashes: h,
					span: span_of(codec, b, start, end, p).unwrap(),
				})
				.collect();
			let out = reduce_shard(codec, &inputs, start, end, p).unwrap();
			for (j, v) in out.iter().enumerate() {
				let i = start as usize + j;
				let want = (decoded.iter().map(|d| f64::from(d[i])).sum::<f64>() / 6.0) as f32;
				assert_eq!(*v, want, "{codec} element {i}");
			}
			// The shard travels as int8 and decodes to within half a quantisation step.
			let (bytes, hash) = shard_bytes(codec, &out, p).unwrap();
			assert!(bytes.len() < out.len() * 2);
			let shard =
				ShardInput { shard: 0, range: [0, end - start], hash: &hash, bytes: &bytes };
			let mean = assemble_mean(codec, &[shard], end - start).unwrap();
			let max = out.iter().fold(0f32, |m, x| m.max(x.abs()));
			assert!(out.iter().zip(&mean).all(|(a, b)| (a - b).abs() <= max / 254.0 * 1.001));
			// A flipped byte in a span is caught by its chunk hash before anything is decoded.
			let mut bad = inputs[1].span.to_vec();
			bad[7] ^= 0x40;
			let forged = [inputs[0], SpanInput { span: &bad, ..inputs[1] }];
			assert!(matches!(
				reduce_shard(codec, &forged, start, end, p),
				Err(MergeError::ChunkHash { index: 1, .. })
			));
		}
	}

	#[test]
	fn decode_f32_refuses_ragged_and_non_finite() {
		assert_eq!(decode_f32("x", &[0; 8]).unwrap(), vec![0.0, 0.0]);
		assert!(matches!(decode_f32("x", &[0; 7]), Err(MergeError::NotF32 { len: 7, .. })));
		let nan = f32le::to_bytes(&[0.0f32, f32::NAN]);
		assert!(matches!(decode_f32("x", &nan), Err(MergeError::NonFinite { index: 1, .. })));
		assert!(matches!(
			submission_bytes(F, &[f32::INFINITY]),
			Err(MergeError::NonFinite { index: 0, .. })
		));
	}
}
