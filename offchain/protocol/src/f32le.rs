//! The wire and storage encoding of flat f32 vectors: little-endian IEEE-754, 4 bytes per element, no
//! header. Gradient submissions, reduced shards, merge vectors and checkpoints' flat state all use it.

/// Why a byte buffer is not a flat f32 vector.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{len} bytes is not a multiple of 4 (f32 little-endian)")]
pub struct NotF32 {
	/// Length of the buffer, in bytes.
	pub len: usize,
}

/// `values` as little-endian f32 bytes (`4 · values.len()` bytes), borrowed where the machine is
/// little-endian (x86-64, aarch64: its f32s already are these bytes) and copied otherwise. Hashing a
/// replica state (`12·P` bytes after every inner step) or writing a gradient then needs no copy.
pub fn as_bytes(values: &[f32]) -> std::borrow::Cow<'_, [u8]> {
	#[cfg(target_endian = "little")]
	{
		std::borrow::Cow::Borrowed(bytemuck::cast_slice(values))
	}
	#[cfg(not(target_endian = "little"))]
	{
		let mut out = Vec::with_capacity(values.len() * 4);
		for v in values {
			out.extend_from_slice(&v.to_le_bytes());
		}
		std::borrow::Cow::Owned(out)
	}
}

/// `values` as little-endian f32 bytes (`4 · values.len()` bytes).
pub fn to_bytes(values: &[f32]) -> Vec<u8> {
	as_bytes(values).into_owned()
}

/// Appends `values` to `out` as little-endian f32 bytes.
pub fn extend(out: &mut Vec<u8>, values: &[f32]) {
	out.extend_from_slice(&as_bytes(values));
}

/// Element `i` of a little-endian f32 buffer.
///
/// # Panics
/// If `bytes` holds fewer than `i + 1` elements; callers check the length first.
pub fn at(bytes: &[u8], i: usize) -> f32 {
	let o = 4 * i;
	f32::from_le_bytes([bytes[o], bytes[o + 1], bytes[o + 2], bytes[o + 3]])
}

/// The f32 values of a little-endian buffer (`bytes.len() / 4` elements).
///
/// # Errors
/// [`NotF32`] when the length is not a multiple of 4.
pub fn from_bytes(bytes: &[u8]) -> Result<Vec<f32>, NotF32> {
	if !bytes.len().is_multiple_of(4) {
		return Err(NotF32 { len: bytes.len() });
	}
	Ok(bytes
		.chunks_exact(4)
		.map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
		.collect())
}

/// Index of the first NaN or ±Inf of a little-endian f32 buffer (whole elements only), if any.
pub fn first_non_finite(bytes: &[u8]) -> Option<usize> {
	bytes
		.chunks_exact(4)
		.position(|b| !f32::from_le_bytes([b[0], b[1], b[2], b[3]]).is_finite())
}

#[cfg(test)]
mod tests {
	use super::*;

	#[test]
	fn round_trip_and_ragged_buffers() {
		let v = [1.5f32, -0.0, f32::MIN_POSITIVE, 3.0e38];
		let b = to_bytes(&v);
		assert_eq!(b.len(), 16);
		assert_eq!(from_bytes(&b).unwrap(), v);
		assert_eq!(at(&b, 3), 3.0e38);
		assert_eq!(from_bytes(&[0; 7]), Err(NotF32 { len: 7 }));
		assert_eq!(first_non_finite(&b), None);
		assert_eq!(first_non_finite(&to_bytes(&[0.0, 1.0, f32::NEG_INFINITY])), Some(2));
		// Borrowed or copied, the bytes are each value's little-endian encoding in order.
		let le: Vec<u8> = v.iter().flat_map(|x| x.to_le_bytes()).collect();
		assert_eq!(&*as_bytes(&v), &le[..]);
		let mut out = vec![9u8];
		extend(&mut out, &v);
		assert_eq!((out[0], &out[1..]), (9, &le[..]));
	}
}
