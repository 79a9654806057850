//! Wire codec for activations and gradients crossing a cut.
//!
//! A message is a safetensors file (the format Hugging Face uses for weights: JSON header with
//! dtype, shape and byte offsets, then raw little-endian data) holding a tensor `data` of shape
//! `[B, T, w]`, plus for uint8 quantisation `scale` and `offset` `[B·T]` f32, and metadata
//! `iota.wire = "1"`, `iota.kind` (`activation` | `gradient`) and `iota.encoding`.
//!
//! Per-token uint8 quantisation (docs/design.md §5): each row `x` of `w` values is sent as
//! `q = round((x - min) / s)` with `s = (max - min) / 255`, and received as `q · s + min`, so each
//! element is off by at most `s / 2` (plus f32 rounding). The backward treats the quantiser as the
//! identity (straight-through): a receiver differentiates with respect to the dequantised tensor
//! and the gradient it returns is itself encoded the same way.

use std::collections::HashMap;

use candle_core::{DType, Device, Tensor};

use crate::error::{Error, Result};

pub use iota_protocol::encoding::{Encoding, UnknownEncoding};

/// What a message carries.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
	/// A forward activation.
	Activation,
	/// The gradient of an activation.
	Gradient,
}

impl Kind {
	fn as_str(&self) -> &'static str {
		match self {
			Kind::Activation => "activation",
			Kind::Gradient => "gradient",
		}
	}
}

/// What a receiver accepts: kind, shape (`None` = any size ≥ 1 in that dimension) and a size limit.
#[derive(Clone, Debug, PartialEq)]
pub struct Expect {
	/// Required kind.
	pub kind: Kind,
	/// Required shape; rank is always enforced.
	pub shape: Vec<Option<usize>>,
	/// Largest message accepted, in bytes.
	pub max_bytes: usize,
}

impl Expect {
	/// `[B?, T?, width]` of `kind`, at most `max_bytes`.
	pub fn btw(kind: Kind, width: usize, max_bytes: usize) -> Self {
		Expect { kind, shape: vec![None, None, Some(width)], max_bytes }
	}
}

fn le_f32(v: &[f32]) -> Vec<u8> {
	iota_protocol::f32le::to_bytes(v)
}

/// The f32 values of a tensor whose dtype the safetensors header declared F32.
fn read_f32(b: &[u8]) -> Result<Vec<f32>> {
	iota_protocol::f32le::from_bytes(b).map_err(|e| Error::Wire(format!("f32 tensor: {e}")))
}

/// Quantise rows of `width` values to uint8; returns `(q, scale, offset)`.
///
/// # Errors
/// [`Error::Length`] if `x.len()` is not a multiple of `width`; [`Error::NonFinite`] on NaN/Inf.
pub fn quantize_rows(x: &[f32], width: usize) -> Result<(Vec<u8>, Vec<f32>, Vec<f32>)> {
	if width == 0 || !x.len().is_multiple_of(width) {
		return Err(Error::Length {
			what: "quantised rows".into(),
			expected: x.len().next_multiple_of(width.max(1)),
			got: x.len(),
		});
	}
	if let Some(index) = x.iter().position(|v| !v.is_finite()) {
		return Err(Error::NonFinite { what: "tensor to quantise".into(), index });
	}
	let rows = x.len() / width;
	let (mut q, mut scale, mut offset) =
		(Vec::with_capacity(x.len()), Vec::with_capacity(rows), Vec::with_capacity(rows));
	for row in x.chunks_exact(width) {
		let lo = row.iter().copied().fold(f32::INFINITY, f32::min);
		let hi = row.iter().copied().fold(f32::NEG_INFINITY, f32::max);
		let s = (hi - lo) / 255.0;
		for &v in row {
			q.push(if s > 0.0 { ((v - lo) / s).round().clamp(0.0, 255.0) as u8 } else { 0 });
		}
		scale.push(s);
		offset.push(lo);
	}
	Ok((q, scale, offset))
}

/// Inverse of [`quantize_rows`]: `q · scale + offset` per row.
pub fn dequantize_rows(q: &[u8], scale: &[f32], offset: &[f32], width: usize) -> Vec<f32> {
	q.chunks_exact(width)
		.zip(scale.iter().zip(offset))
		.flat_map(|(row, (&s, &o))| row.iter().map(move |&v| v as f32 * s + o))
		.collect()
}

/// Encode `t` (`[B, T, w]` or any rank ≥ 1; rows are the last dim) as a wire message.
///
/// # Errors
/// [`Error::NonFinite`] if `t` holds NaN/Inf (nothing non-finite is ever sent); candle errors.
pub fn encode(t: &Tensor, kind: Kind, enc: Encoding) -> Result<Vec<u8>> {
	let shape = t.dims().to_vec();
	let width = *shape
		.last()
		.ok_or_else(|| Error::shape("tensor to encode", "rank ≥ 1", &shape))?;
	let x = t.flatten_all()?.to_dtype(DType::F32)?.to_vec1::<f32>()?;
	if let Some(index) = x.iter().position(|v| !v.is_finite()) {
		return Err(Error::NonFinite { what: format!("{} to encode", kind.as_str()), index });
	}
	let mut owned: Vec<(&str, safetensors::Dtype, Vec<usize>, Vec<u8>)> = Vec::new();
	match enc {
		Encoding::F32 => owned.push(("data", safetensors::Dtype::F32, shape, le_f32(&x))),
		Encoding::Bf16 => {
			let b: Vec<u8> =
				x.iter().flat_map(|&v| half::bf16::from_f32(v).to_le_bytes()).collect();
			owned.push(("data", safetensors::Dtype::BF16, shape, b));
		},
		Encoding::U8 => {
			let (q, s, o) = quantize_rows(&x, width)?;
			let rows = s.len();
			owned.push(("data", safetensors::Dtype::U8, shape, q));
			owned.push(("scale", safetensors::Dtype::F32, vec![rows], le_f32(&s)));
			owned.push(("offset", safetensors::Dtype::F32, vec![rows], le_f32(&o)));
		},
	}
	let views = owned
		.iter()
		.map(|(n, dt, s, d)| {
			safetensors::tensor::TensorView::new(*dt, s.clone(), d)
				.map(|v| (n.to_string(), v))
				.map_err(|e| Error::Wire(e.to_string()))
		})
		.collect::<Result<Vec<_>>>()?;
	let meta = HashMap::from([
		("iota.wire".to_string(), "1".to_string()),
		("iota.kind".to_string(), kind.as_str().to_string()),
		("iota.encoding".to_string(), enc.as_str().to_string()),
	]);
	safetensors::serialize(views, Some(meta)).map_err(|e| Error::Wire(e.to_string()))
}

/// A parsed, checked message (before conversion to a tensor).
#[derive(Clone, Debug, PartialEq)]
pub struct Decoded {
	/// Encoding of `data`.
	pub encoding: Encoding,
	/// Kind.
	pub kind: Kind,
	/// Shape of `data`.
	pub shape: Vec<usize>,
	/// Values, dequantised to f32 (row-major).
	pub values: Vec<f32>,
	/// Bytes of `data` alone (the payload).
	pub payload_bytes: usize,
	/// Bytes of the whole message.
	pub wire_bytes: usize,
}

fn parse(bytes: &[u8], max_bytes: usize) -> Result<Decoded> {
	if bytes.len() > max_bytes {
		return Err(Error::WireTooLarge { len: bytes.len(), limit: max_bytes });
	}
	let trunc = |e: safetensors::SafeTensorError| Error::WireTruncated {
		len: bytes.len(),
		reason: e.to_string(),
	};
	let st = safetensors::SafeTensors::deserialize(bytes).map_err(trunc)?;
	let (_, meta) = safetensors::SafeTensors::read_metadata(bytes).map_err(trunc)?;
	let meta = meta.metadata().clone().unwrap_or_default();
	if meta.get("iota.wire").map(String::as_str) != Some("1") {
		return Err(Error::Wire(format!(
			"not an iota-wire v1 message (iota.wire = {:?})",
			meta.get("iota.wire")
		)));
	}
	let kind = match meta.get("iota.kind").map(String::as_str) {
		Some("activation") => Kind::Activation,
		Some("gradient") => Kind::Gradient,
		o => {
			return Err(Error::Wire(format!(
				"unknown message kind {o:?}, expected activation or gradient"
			)))
		},
	};
	let encoding =
		Encoding::parse(meta.get("iota.encoding").map(String::as_str).unwrap_or("<missing>"))?;
	let data = st.tensor("data").map_err(|_| Error::Wire("tensor `data` missing".into()))?;
	let shape = data.shape().to_vec();
	let width = *shape.last().ok_or_else(|| Error::shape("wire data", "rank ≥ 1", &shape))?;
	if shape.contains(&0) {
		return Err(Error::shape("wire data", "no zero-sized dimension", &shape));
	}
	let want = match encoding {
		Encoding::F32 => safetensors::Dtype::F32,
		Encoding::Bf16 => safetensors::Dtype::BF16,
		Encoding::U8 => safetensors::Dtype::U8,
	};
	if data.dtype() != want {
		return Err(Error::DType {
			what: "wire data".into(),
			expected: format!("{want:?}"),
			got: format!("{:?}", data.dtype()),
		});
	}
	let raw = data.data();
	let values = match encoding {
		Encoding::F32 => read_f32(raw)?,
		Encoding::Bf16 => raw
			.chunks_exact(2)
			.map(|c| half::bf16::from_le_bytes([c[0], c[1]]).to_f32())
			.collect(),
		Encoding::U8 => {
			let rows = raw.len() / width;
			let side = |name: &str| -> Result<Vec<f32>> {
				let t = st
					.tensor(name)
					.map_err(|_| Error::Wire(format!("tensor `{name}` missing for u8 encoding")))?;
				if t.dtype() != safetensors::Dtype::F32 {
					return Err(Error::DType {
						what: format!("wire {name}"),
						expected: "F32".into(),
						got: format!("{:?}", t.dtype()),
					});
				}
				if t.shape() != [rows] {
					return Err(Error::shape(
						format!("wire {name}"),
						format!("[{rows}] (one per row)"),
						t.shape(),
					));
				}
				let v = read_f32(t.data())?;
				if let Some(index) = v.iter().position(|x| !x.is_finite()) {
					return Err(Error::NonFinite { what: format!("wire {name}"), index });
				}
				Ok(v)
			};
			let (s, o) = (side("scale")?, side("offset")?);
			if let Some(index) = s.iter().position(|&x| x < 0.0) {
				return Err(Error::Wire(format!("negative quantisation scale at row {index}")));
			}
			dequantize_rows(raw, &s, &o, width)
		},
	};
	if let Some(index) = values.iter().position(|v| !v.is_finite()) {
		return Err(Error::NonFinite { what: format!("received {}", kind.as_str()), index });
	}
	Ok(Decoded { encoding, kind, shape, values, payload_bytes: raw.len(), wire_bytes: bytes.len() })
}

/// Parse and check a message against `expect` without building a tensor.
///
/// # Errors
/// [`Error::WireTooLarge`], [`Error::WireTruncated`] (cut short or not safetensors),
/// [`Error::Wire`] (not ours, unknown kind/encoding, missing tensor), [`Error::DType`],
/// [`Error::Shape`], [`Error::NonFinite`], or [`Error::Wire`] for the wrong kind.
pub fn decode_checked(bytes: &[u8], expect: &Expect) -> Result<Decoded> {
	let d = parse(bytes, expect.max_bytes)?;
	if d.kind != expect.kind {
		return Err(Error::Wire(format!(
			"expected a {} message, got a {}",
			expect.kind.as_str(),
			d.kind.as_str()
		)));
	}
	let ok = d.shape.len() == expect.shape.len()
		&& d.shape.iter().zip(&expect.shape).all(|(&g, e)| e.is_none_or(|e| e == g));
	if !ok {
		let exp: Vec<String> =
			expect.shape.iter().map(|d| d.map_or("?".into(), |d| d.to_string())).collect();
		return Err(Error::shape(
			format!("received {}", d.kind.as_str()),
			format!("[{}]", exp.join(", ")),
			&d.shape,
		));
	}
	Ok(d)
}

/// Decode a message into a tensor of `dtype` on `device`, checked against `expect`.
///
/// # Errors
/// As [`decode_checked`].
pub fn decode(bytes: &[u8], expect: &Expect, dtype: DType, device: &Device) -> Result<Tensor> {
	let d = decode_checked(bytes, expect)?;
	Ok(Tensor::from_vec(d.values, d.shape, device)?.to_dtype(dtype)?)
}

/// Compression of one message versus the uncompressed bf16 activation `[B, T, d_model]`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Compression {
	/// Bytes of the bf16 baseline `B·T·d_model·2`.
	pub baseline_bytes: usize,
	/// Bytes of the `data` tensor alone.
	pub payload_bytes: usize,
	/// Bytes of the whole message (header, scales and offsets included).
	pub wire_bytes: usize,
	/// `baseline / payload`: width ratio × dtype ratio (64 × 2 = 128 for `d/b = 64` with uint8).
	pub payload_ratio: f64,
	/// `baseline / wire`: what the network actually saves.
	pub wire_ratio: f64,
}

/// Measure the compression of an encoded message against bf16 `[B, T, d_model]`, where `B·T`
/// is read from the message (its rows).
///
/// # Errors
/// As [`decode_checked`] (any kind and shape of rank ≥ 1 accepted).
pub fn compression(bytes: &[u8], d_model: usize) -> Result<Compression> {
	let d = parse(bytes, usize::MAX)?;
	let width = *d.shape.last().unwrap_or(&1);
	let rows = d.values.len() / width.max(1);
	let baseline_bytes = rows * d_model * 2;
	Ok(Compression {
		baseline_bytes,
		payload_bytes: d.payload_bytes,
		wire_bytes: d.wire_bytes,
		payload_ratio: baseline_bytes as f64 / d.payload_bytes as f64,
		wire_ratio: baseline_bytes as f64 / d.wire_bytes as f64,
	})
}
