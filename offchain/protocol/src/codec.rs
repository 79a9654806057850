//! How a merge vector travels: its codec (`f32`, `int8` with per-chunk scales, or top-k with per-chunk
//! scales), chunk by chunk, so the hashed chunks of [`crate::chunks`] stay the unit of every ranged
//! read, hash check and decode (docs/design.md §6: "the compressed bytes are what is hashed").
//!
//! A vector of `n` elements is cut into chunks of `c` elements (the last one may be shorter; `c` is
//! [`gradient_chunk_elems`](crate::chunks::gradient_chunk_elems)`(P)` for a stage of `P` parameters).
//! Each chunk of `m ≤ c` elements encodes to a block of [`MergeCodec::chunk_bytes`]`(m)` bytes, which
//! depends only on the codec and `m`, so block `j` starts at byte `j · chunk_bytes(c)` and a reader
//! finds any element range without an index:
//!
//! | codec | block of `m` elements | bytes per element (`m = 4 096`) |
//! |---|---|---|
//! | [`MergeCodec::F32`] | `m` little-endian f32 | 4 |
//! | [`MergeCodec::Int8`] | scale `s` (f32 LE), then `m` i8 `q`; value `q · s` | 1.001 (4.0× less) |
//! | [`MergeCodec::TopK`] | scale `s` (f32 LE), `k` u16 LE indices (ascending, `< m`), `k` i8 `q` | `3k/m` + ε (k = ⌈m·‰/1000⌉; 16 ‰: 83× less) |
//!
//! Quantisation (both lossy codecs): `s = max|x| / 127` over the kept values, `q = round(x / s)`
//! clamped to `[-127, 127]` (Rust's `f32::round`, half away from zero), `q = 0` when `s = 0`; a decoded
//! value is `q as f32 · s`. Top-k keeps the `k` values of largest `|x|` per chunk (ties: lower index
//! first) and decodes the others as 0. Covenant-72B sends 1.56 % of entries at 2 bits; int8 per-chunk
//! scales follow INTELLECT-1's int8 all-reduce.
//!
//! Every step is plain f32 in a fixed order, so every party that encodes the same values gets the same
//! bytes (two reducers' copies of a shard compare by hash) and every party that decodes the same bytes
//! gets the same values (replicas stay bit-identical). A reduced shard (the mean of the submissions,
//! dense) travels with [`MergeCodec::shard_codec`]: `int8` for both lossy codecs, `f32` for `f32`.
//!
//! Lossy codecs keep what they dropped with [`ErrorFeedback`] (Karimireddy et al. 2019, "Error Feedback
//! Fixes SignSGD"; Covenant-72B and DeMo keep the residual locally): the residual is added to the next
//! vector before encoding, where [`carries_error_feedback`](crate::merge::carries_error_feedback) says
//! so (not for `int8` in local mode, whose vectors a validator judges without it).

use std::ops::Range;

use iota_primitives::ContentHash;
use serde::{Deserialize, Serialize};

/// Why bytes are not a valid encoding of a merge vector (or values cannot be encoded). Nothing is
/// decoded from a refused buffer.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CodecError {
	/// The buffer does not hold [`MergeCodec::encoded_len`] bytes.
	#[error("{got} bytes, expected {expected} for {elems} elements ({codec})")]
	Length {
		/// Bytes expected.
		expected: u64,
		/// Bytes received.
		got: u64,
		/// Elements the buffer should hold.
		elems: u64,
		/// The codec.
		codec: MergeCodec,
	},
	/// A value (or a decoded value, or a chunk's scale) is NaN or ±Inf.
	#[error("non-finite value at element {index}")]
	NonFinite {
		/// Element index (within the buffer's elements) of the first one; for a bad scale, the chunk's
		/// first element.
		index: u64,
	},
	/// A chunk's block is not a valid encoding (negative scale, top-k indices not ascending or out of
	/// the chunk).
	#[error("chunk {chunk}: {reason}")]
	Malformed {
		/// Chunk index within the buffer.
		chunk: u64,
		/// What is wrong.
		reason: String,
	},
}

/// The codec of a run's merge vectors (run spec `merge_codec`; docs/design.md §6).
///
/// Serialised as `"f32"`, `"int8"` or `{"top-k": {"per_mille": 16}}`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum MergeCodec {
	/// Little-endian f32, 4 bytes per element: exact (sync mode's reference).
	#[default]
	F32,
	/// One f32 scale per chunk and one i8 per element (4× less than f32).
	Int8,
	/// Per chunk the `⌈m · per_mille / 1000⌉` entries of largest magnitude (at least 1), as u16 index
	/// and i8 value with one f32 scale; the rest decode as 0. With [`ErrorFeedback`] at the submitter.
	TopK {
		/// Entries kept per thousand, `1 ..= 1000`.
		per_mille: u16,
	},
}

impl std::fmt::Display for MergeCodec {
	fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
		match self {
			MergeCodec::F32 => write!(f, "f32"),
			MergeCodec::Int8 => write!(f, "int8"),
			MergeCodec::TopK { per_mille } => write!(f, "topk:{per_mille}"),
		}
	}
}

impl std::str::FromStr for MergeCodec {
	type Err = String;
	/// `f32`, `int8` or `topk:<per mille>` (for example `topk:16`, 1.6 % of the entries).
	fn from_str(s: &str) -> Result<Self, String> {
		let c = match s {
			"f32" => MergeCodec::F32,
			"int8" => MergeCodec::Int8,
			other => match other.strip_prefix("topk:").map(str::parse::<u16>) {
				Some(Ok(per_mille)) => MergeCodec::TopK { per_mille },
				_ => {
					return Err(format!(
						"unknown merge codec {s:?}; expected f32, int8 or topk:<per mille>"
					))
				},
			},
		};
		c.validate()?;
		Ok(c)
	}
}

/// Largest chunk a top-k block can index (its indices are u16).
pub const MAX_TOPK_CHUNK_ELEMS: u64 = 1 << 16;

/// Where an element range sits in an encoded buffer: the chunks that cover it and their bytes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Span {
	/// Index of the first chunk covering the range.
	pub first_chunk: usize,
	/// Bytes of the covering chunks (what a ranged read fetches).
	pub bytes: Range<u64>,
	/// Element index of the span's first element (`first_chunk · c`).
	pub first_elem: u64,
	/// Elements the span holds (whole chunks, the last one clipped to the buffer's length).
	pub elems: u64,
}

impl MergeCodec {
	/// Whether this is the exact f32 codec (serde skips it, so a spec without the field keeps its hash).
	pub fn is_f32(&self) -> bool {
		*self == MergeCodec::F32
	}

	/// Whether decoding loses information.
	pub fn is_lossy(&self) -> bool {
		!self.is_f32()
	}

	/// Checks the codec's parameters.
	///
	/// # Errors
	/// A message when top-k's `per_mille` is outside `1 ..= 1000`.
	pub fn validate(&self) -> Result<(), String> {
		match self {
			MergeCodec::TopK { per_mille } if !(1..=1000).contains(per_mille) => {
				Err(format!("top-k per_mille must be in 1..=1000, got {per_mille}"))
			},
			_ => Ok(()),
		}
	}

	/// The codec of a reduced shard (a dense mean): `int8` for the lossy codecs, `f32` for `f32`.
	pub fn shard_codec(&self) -> MergeCodec {
		if self.is_f32() {
			MergeCodec::F32
		} else {
			MergeCodec::Int8
		}
	}

	/// Entries a top-k block of `m` elements keeps: `clamp(⌈m · per_mille / 1000⌉, 1, m)`; `m` for the
	/// other codecs.
	pub fn kept(&self, m: u64) -> u64 {
		match self {
			MergeCodec::TopK { per_mille } => {
				(m * u64::from(*per_mille)).div_ceil(1000).clamp(1, m.max(1)).min(m)
			},
			_ => m,
		}
	}

	/// Bytes of one encoded chunk of `m` elements (`0` for `m = 0`).
	pub fn chunk_bytes(&self, m: u64) -> u64 {
		if m == 0 {
			return 0;
		}
		match self {
			MergeCodec::F32 => 4 * m,
			MergeCodec::Int8 => 4 + m,
			MergeCodec::TopK { .. } => 4 + 3 * self.kept(m),
		}
	}

	/// Bytes of an `elems`-element vector in chunks of `chunk` elements.
	pub fn encoded_len(&self, elems: u64, chunk: u64) -> u64 {
		let c = chunk.max(1);
		let full = elems / c;
		full.saturating_mul(self.chunk_bytes(c))
			.saturating_add(self.chunk_bytes(elems % c))
	}

	/// Byte ranges of the chunks of an `elems`-element encoded vector, in order.
	fn blocks(&self, elems: u64, chunk: u64) -> impl Iterator<Item = (u64, Range<u64>)> + '_ {
		let c = chunk.max(1);
		let full = self.chunk_bytes(c);
		(0..elems.div_ceil(c)).map(move |j| {
			let m = c.min(elems - j * c);
			let start = j * full;
			(m, start..start + self.chunk_bytes(m))
		})
	}

	/// The chunks covering element range `[start, end)` of an `elems`-element vector (chunks of `chunk`
	/// elements), clipped to the vector. The caller checks `start < end ≤ elems`.
	pub fn span(&self, start: u64, end: u64, elems: u64, chunk: u64) -> Span {
		let c = chunk.max(1);
		let first = start / c;
		let last = end.div_ceil(c).min(elems.div_ceil(c));
		let first_elem = first * c;
		let end_elem = (last * c).min(elems);
		let full = self.chunk_bytes(c);
		let bytes_start = first * full;
		let bytes_end = if end_elem == elems { self.encoded_len(elems, c) } else { last * full };
		Span {
			first_chunk: first as usize,
			bytes: bytes_start..bytes_end.max(bytes_start),
			first_elem,
			elems: end_elem.saturating_sub(first_elem),
		}
	}

	/// BLAKE3 of each encoded chunk of an `elems`-element vector (chunks of `chunk` elements); a buffer
	/// of the wrong length hashes whatever blocks it holds (acceptance checks the length first).
	pub fn chunk_hashes(&self, bytes: &[u8], elems: u64, chunk: u64) -> Vec<ContentHash> {
		self.blocks(elems, chunk)
			.map(|(_, r)| {
				let end = (r.end as usize).min(bytes.len());
				ContentHash::of(&bytes[(r.start as usize).min(end)..end])
			})
			.collect()
	}

	/// Encodes `values` in chunks of `chunk` elements.
	///
	/// # Errors
	/// [`CodecError::NonFinite`] for NaN/Inf (an honest party never encodes one);
	/// [`CodecError::Malformed`] for a top-k chunk over [`MAX_TOPK_CHUNK_ELEMS`].
	pub fn encode(&self, values: &[f32], chunk: u64) -> Result<Vec<u8>, CodecError> {
		if let Some(i) = values.iter().position(|x| !x.is_finite()) {
			return Err(CodecError::NonFinite { index: i as u64 });
		}
		let c = chunk.max(1) as usize;
		if matches!(self, MergeCodec::TopK { .. }) && c as u64 > MAX_TOPK_CHUNK_ELEMS {
			return Err(CodecError::Malformed {
				chunk: 0,
				reason: format!(
					"top-k chunks hold at most {MAX_TOPK_CHUNK_ELEMS} elements, got {c}"
				),
			});
		}
		let mut out = Vec::with_capacity(self.encoded_len(values.len() as u64, c as u64) as usize);
		for x in values.chunks(c) {
			match self {
				MergeCodec::F32 => crate::f32le::extend(&mut out, x),
				MergeCodec::Int8 => {
					let s = scale_of(x.iter().copied());
					out.extend_from_slice(&s.to_le_bytes());
					out.extend(x.iter().map(|&v| quantize(v, s) as u8));
				},
				MergeCodec::TopK { .. } => {
					let keep = top_k(x, self.kept(x.len() as u64) as usize);
					let s = scale_of(keep.iter().map(|&i| x[i]));
					out.extend_from_slice(&s.to_le_bytes());
					for &i in &keep {
						out.extend_from_slice(&(i as u16).to_le_bytes());
					}
					out.extend(keep.iter().map(|&i| quantize(x[i], s) as u8));
				},
			}
		}
		Ok(out)
	}

	/// Decodes an `elems`-element vector in chunks of `chunk` elements.
	///
	/// # Errors
	/// [`CodecError::Length`] when `bytes` is not [`encoded_len`](Self::encoded_len) long;
	/// [`CodecError::NonFinite`] for a NaN/Inf f32, a non-finite scale or a decoded value that overflows;
	/// [`CodecError::Malformed`] for a negative scale or top-k indices that are not strictly ascending
	/// within the chunk.
	pub fn decode(&self, bytes: &[u8], elems: u64, chunk: u64) -> Result<Vec<f32>, CodecError> {
		let expected = self.encoded_len(elems, chunk);
		if bytes.len() as u64 != expected {
			return Err(CodecError::Length {
				expected,
				got: bytes.len() as u64,
				elems,
				codec: *self,
			});
		}
		let c = chunk.max(1);
		let mut out = Vec::with_capacity(elems as usize);
		for (j, (m, r)) in self.blocks(elems, c).enumerate() {
			let b = &bytes[r.start as usize..r.end as usize];
			let base = j as u64 * c;
			let m = m as usize;
			match self {
				MergeCodec::F32 => {
					for (k, w) in b.chunks_exact(4).enumerate() {
						let v = f32::from_le_bytes([w[0], w[1], w[2], w[3]]);
						if !v.is_finite() {
							return Err(CodecError::NonFinite { index: base + k as u64 });
						}
						out.push(v);
					}
				},
				MergeCodec::Int8 => {
					let s = read_scale(b, j as u64, base)?;
					for (k, &q) in b[4..].iter().enumerate() {
						out.push(dequantize(q as i8, s, base + k as u64)?);
					}
				},
				MergeCodec::TopK { .. } => {
					let s = read_scale(b, j as u64, base)?;
					let k = (b.len() - 4) / 3;
					let (idx, qs) = b[4..].split_at(2 * k);
					let from = out.len();
					out.resize(from + m, 0.0);
					let mut prev: Option<usize> = None;
					for (w, &q) in idx.chunks_exact(2).zip(qs) {
						let i = u16::from_le_bytes([w[0], w[1]]) as usize;
						if i >= m || prev.is_some_and(|p| i <= p) {
							return Err(CodecError::Malformed {
								chunk: j as u64,
								reason: format!(
									"top-k index {i} after {prev:?} (indices must ascend within 0..{m})"
								),
							});
						}
						prev = Some(i);
						out[from + i] = dequantize(q as i8, s, base + i as u64)?;
					}
				},
			}
		}
		Ok(out)
	}
}

/// `max|x| / 127` (0 for an empty or all-zero set).
fn scale_of(xs: impl Iterator<Item = f32>) -> f32 {
	xs.fold(0f32, |m, x| m.max(x.abs())) / 127.0
}

fn quantize(x: f32, s: f32) -> i8 {
	if s == 0.0 {
		return 0;
	}
	(x / s).round().clamp(-127.0, 127.0) as i8
}

fn read_scale(block: &[u8], chunk: u64, base: u64) -> Result<f32, CodecError> {
	let s = f32::from_le_bytes([block[0], block[1], block[2], block[3]]);
	if !s.is_finite() {
		return Err(CodecError::NonFinite { index: base });
	}
	if s < 0.0 {
		return Err(CodecError::Malformed { chunk, reason: format!("negative scale {s}") });
	}
	Ok(s)
}

fn dequantize(q: i8, s: f32, index: u64) -> Result<f32, CodecError> {
	let v = f32::from(q) * s;
	if !v.is_finite() {
		return Err(CodecError::NonFinite { index });
	}
	Ok(v)
}

/// Indices of the `k` entries of largest `|x|` (ties: lower index first), ascending.
fn top_k(x: &[f32], k: usize) -> Vec<usize> {
	let mut idx: Vec<usize> = (0..x.len()).collect();
	if k < idx.len() {
		// A total order (magnitude down, index up): the selection is the same on every machine.
		let key = |&i: &usize| (std::cmp::Reverse(x[i].abs().to_bits()), i);
		idx.select_nth_unstable_by_key(k, key);
		idx.truncate(k);
	}
	idx.sort_unstable();
	idx
}

/// The residual a lossy codec dropped, kept by the submitter and added to its next vector before
/// encoding where [`carries_error_feedback`](crate::merge::carries_error_feedback) says so (error
/// feedback; module docs). Never travels.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ErrorFeedback {
	/// `(x + previous residual) − decode(encode(x + previous residual))`, per element; empty until the
	/// first encode.
	pub residual: Vec<f32>,
}

impl ErrorFeedback {
	/// Encodes `x + residual` with `codec` in chunks of `chunk` elements; returns the bytes and the
	/// feedback to keep once they were delivered (what the encoding lost). The caller replaces its
	/// feedback only after the submission was accepted, so a retried upload does not count the
	/// residual twice. For [`MergeCodec::F32`] the residual stays zero.
	///
	/// # Errors
	/// As [`MergeCodec::encode`].
	pub fn encode(
		&self,
		codec: MergeCodec,
		x: &[f32],
		chunk: u64,
	) -> Result<(Vec<u8>, ErrorFeedback), CodecError> {
		if !codec.is_lossy() {
			// Nothing is dropped: no residual, and no decode on the hot path.
			return Ok((codec.encode(x, chunk)?, ErrorFeedback::default()));
		}
		let corrected: Vec<f32> = if self.residual.len() == x.len() {
			x.iter().zip(&self.residual).map(|(a, e)| a + e).collect()
		} else {
			x.to_vec()
		};
		let bytes = codec.encode(&corrected, chunk)?;
		let back = codec.decode(&bytes, x.len() as u64, chunk)?;
		let residual = corrected.iter().zip(&back).map(|(c, b)| c - b).collect();
		Ok((bytes, ErrorFeedback { residual }))
	}
}

#[cfg(test)]
mod tests {
	use proptest::prelude::*;

	use super::*;

	const CODECS: [MergeCodec; 4] = [
		MergeCodec::F32,
		MergeCodec::Int8,
		MergeCodec::TopK { per_mille: 16 },
		MergeCodec::TopK { per_mille: 1000 },
	];

	fn signal(n: usize) -> Vec<f32> {
		(0..n).map(|i| ((i as f32) * 0.37).sin() * (1.0 + (i % 7) as f32)).collect()
	}

	#[test]
	fn sizes_follow_the_table() {
		assert_eq!(MergeCodec::F32.encoded_len(10, 4), 40);
		assert_eq!(MergeCodec::Int8.encoded_len(10, 4), 3 * 4 + 10);
		let t = MergeCodec::TopK { per_mille: 250 };
		assert_eq!(t.kept(4), 1);
		assert_eq!(t.kept(2), 1);
		assert_eq!(t.encoded_len(10, 4), 2 * (4 + 3) + (4 + 3));
		let ratio = 4.0 * 4_096.0 / MergeCodec::TopK { per_mille: 16 }.chunk_bytes(4_096) as f64;
		assert!(ratio > 80.0, "{ratio}");
		assert!((4.0 * 4_096.0 / MergeCodec::Int8.chunk_bytes(4_096) as f64 - 4.0).abs() < 0.01);
	}

	#[test]
	fn f32_round_trips_exactly_and_int8_within_half_a_step() {
		let x = signal(5_000);
		for codec in CODECS {
			let b = codec.encode(&x, 1_024).unwrap();
			assert_eq!(b.len() as u64, codec.encoded_len(5_000, 1_024), "{codec}");
			let y = codec.decode(&b, 5_000, 1_024).unwrap();
			assert_eq!(y.len(), 5_000);
			match codec {
				MergeCodec::F32 => assert_eq!(x, y),
				MergeCodec::Int8 | MergeCodec::TopK { per_mille: 1000 } => {
					for (c, (xs, ys)) in x.chunks(1_024).zip(y.chunks(1_024)).enumerate() {
						let s = scale_of(xs.iter().copied());
						for (a, b) in xs.iter().zip(ys) {
							assert!(
								(a - b).abs() <= 0.5 * s * 1.0001,
								"{codec} chunk {c}: {a} {b}"
							);
						}
					}
				},
				MergeCodec::TopK { .. } => {
					let nz = y.iter().filter(|v| **v != 0.0).count();
					assert!(nz <= 5 * 17, "{nz} non-zero");
					// The largest entry of each chunk survives.
					for (xs, ys) in x.chunks(1_024).zip(y.chunks(1_024)) {
						let (i, _) = xs
							.iter()
							.enumerate()
							.max_by(|a, b| a.1.abs().total_cmp(&b.1.abs()))
							.unwrap();
						assert!((ys[i] - xs[i]).abs() <= xs[i].abs() / 254.0 * 1.0001);
					}
				},
			}
			assert_eq!(codec.encode(&y, 1_024).unwrap().len(), b.len());
		}
	}

	#[test]
	fn a_span_decodes_like_the_same_range_of_the_whole() {
		let x = signal(5_000);
		for codec in CODECS {
			let b = codec.encode(&x, 1_024).unwrap();
			let whole = codec.decode(&b, 5_000, 1_024).unwrap();
			let hashes = codec.chunk_hashes(&b, 5_000, 1_024);
			assert_eq!(hashes.len(), 5);
			for (s, e) in [(0, 1), (1_000, 1_100), (1_023, 1_025), (4_095, 5_000), (0, 5_000)] {
				let sp = codec.span(s, e, 5_000, 1_024);
				let part = &b[sp.bytes.start as usize..sp.bytes.end as usize];
				let dec = codec.decode(part, sp.elems, 1_024).unwrap();
				let off = (s - sp.first_elem) as usize;
				assert_eq!(&dec[off..off + (e - s) as usize], &whole[s as usize..e as usize]);
				let ph = codec.chunk_hashes(part, sp.elems, 1_024);
				assert_eq!(&ph[..], &hashes[sp.first_chunk..sp.first_chunk + ph.len()]);
			}
		}
	}

	#[test]
	fn malformed_buffers_are_refused_with_their_reason() {
		let x = signal(10);
		let int8 = MergeCodec::Int8;
		let b = int8.encode(&x, 4).unwrap();
		assert!(matches!(int8.decode(&b[1..], 10, 4), Err(CodecError::Length { .. })));
		let mut nan = b.clone();
		nan[8..12].copy_from_slice(&f32::NAN.to_le_bytes());
		assert_eq!(int8.decode(&nan, 10, 4), Err(CodecError::NonFinite { index: 4 }));
		let mut neg = b.clone();
		neg[..4].copy_from_slice(&(-1.0f32).to_le_bytes());
		assert!(matches!(int8.decode(&neg, 10, 4), Err(CodecError::Malformed { chunk: 0, .. })));
		let mut huge = b.clone();
		huge[..4].copy_from_slice(&f32::MAX.to_le_bytes());
		huge[4] = 100;
		assert_eq!(int8.decode(&huge, 10, 4), Err(CodecError::NonFinite { index: 0 }));
		let t = MergeCodec::TopK { per_mille: 500 };
		let b = t.encode(&x, 4).unwrap();
		// Chunk 0 keeps 2 indices: make them equal.
		let mut dup = b.clone();
		dup.copy_within(4..6, 6);
		assert!(matches!(t.decode(&dup, 10, 4), Err(CodecError::Malformed { chunk: 0, .. })));
		let mut out = b.clone();
		out[6..8].copy_from_slice(&9u16.to_le_bytes());
		assert!(matches!(t.decode(&out, 10, 4), Err(CodecError::Malformed { chunk: 0, .. })));
		assert_eq!(
			MergeCodec::F32.encode(&[1.0, f32::INFINITY], 4),
			Err(CodecError::NonFinite { index: 1 })
		);
	}

	#[test]
	fn the_bytes_are_the_documented_ones() {
		// One chunk of 4: s = 1/127, q = round(x / s): 127, -76.2 → -76, 31.75 → 32, 0.
		let x = [1.0f32, -0.6, 0.25, 0.0];
		let s = (1.0f32 / 127.0).to_le_bytes();
		let mut int8 = s.to_vec();
		int8.extend([127u8, (-76i8) as u8, 32, 0]);
		assert_eq!(MergeCodec::Int8.encode(&x, 4).unwrap(), int8);
		// Top-k 500 ‰ keeps 2 of 4: indices 0 and 1 (u16 LE), then their i8 values.
		let mut topk = s.to_vec();
		topk.extend([0, 0, 1, 0, 127, (-76i8) as u8]);
		assert_eq!(MergeCodec::TopK { per_mille: 500 }.encode(&x, 4).unwrap(), topk);
		assert_eq!(MergeCodec::F32.encode(&x, 4).unwrap(), crate::f32le::to_bytes(&x));
	}

	#[test]
	fn names_parse_and_bad_parameters_are_refused() {
		for c in CODECS {
			assert_eq!(c.to_string().parse::<MergeCodec>().unwrap(), c);
		}
		assert!("topk:0".parse::<MergeCodec>().is_err());
		assert!("topk:1001".parse::<MergeCodec>().is_err());
		assert!("bf16".parse::<MergeCodec>().is_err());
		assert_eq!(serde_json::to_string(&MergeCodec::Int8).unwrap(), "\"int8\"");
		let t: MergeCodec = serde_json::from_str(r#"{"top-k":{"per_mille":16}}"#).unwrap();
		assert_eq!(t, MergeCodec::TopK { per_mille: 16 });
		assert_eq!(MergeCodec::TopK { per_mille: 16 }.shard_codec(), MergeCodec::Int8);
	}

	#[test]
	fn error_feedback_delivers_what_was_dropped_later() {
		// A constant vector through 1 % top-k: each round sends a few entries; with the residual, the
		// sum of what was delivered approaches the sum of what was fed.
		let codec = MergeCodec::TopK { per_mille: 10 };
		let x = signal(1_000);
		let mut ef = ErrorFeedback::default();
		let mut delivered = vec![0f32; 1_000];
		let rounds = 1_000;
		for _ in 0..rounds {
			let (b, next) = ef.encode(codec, &x, 1_000).unwrap();
			ef = next;
			for (d, v) in delivered.iter_mut().zip(codec.decode(&b, 1_000, 1_000).unwrap()) {
				*d += v;
			}
		}
		// delivered + residual == rounds · x (up to f32 rounding).
		for ((d, e), v) in delivered.iter().zip(&ef.residual).zip(&x) {
			assert!((d + e - rounds as f32 * v).abs() < 1e-2 * rounds as f32, "{d} {e} {v}");
		}
		// What is still owed is a small part of what was fed; without the residual, the same ten
		// entries would be sent every round and 99 % of the entries never.
		let owed: f32 = ef.residual.iter().map(|e| e.abs()).sum::<f32>() / rounds as f32;
		let fed: f32 = x.iter().map(|v| v.abs()).sum();
		assert!(owed < 0.1 * fed, "owed {owed} of {fed} per round");
		let once = codec.decode(&codec.encode(&x, 1_000).unwrap(), 1_000, 1_000).unwrap();
		let plain: f32 = x.iter().zip(&once).map(|(a, b)| (a - b).abs()).sum();
		assert!(plain > 0.9 * fed, "{plain} of {fed}");
	}

	proptest! {
		/// Whatever bytes come, decoding either refuses them or returns finite values of the right
		/// length, and re-encoding honest values gives the same bytes every time.
		#[test]
		fn decoding_never_yields_a_non_finite_value(
			bytes in proptest::collection::vec(any::<u8>(), 0..200),
			elems in 0u64..60,
			codec_i in 0usize..4,
		) {
			let codec = CODECS[codec_i];
			if let Ok(v) = codec.decode(&bytes, elems, 16) {
				prop_assert_eq!(v.len() as u64, elems);
				prop_assert!(v.iter().all(|x| x.is_finite()));
			}
		}

	}
}
