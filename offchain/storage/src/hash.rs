//! Content addressing: the BLAKE3 hash of an object's bytes.
//!
//! Every object is hashed when it is written and checked when it is read. The hash, not the key, is what
//! goes on chain (merge manifests) and into RPC messages, so a reader never has to trust the bucket.
//! The type is the chain's own [`ContentHash`] from `iota-primitives` (SCALE: 32 raw bytes; serde and
//! `Display`/`FromStr`: 64 lowercase hex digits), so a hash read from chain storage, an RPC message or
//! this crate is one and the same value.

pub use iota_primitives::{ContentHash, ParseHashError};

/// Incremental BLAKE3 hasher for objects that are written or read in pieces.
#[derive(Default, Clone)]
pub struct Hasher(blake3::Hasher);

impl Hasher {
	/// A hasher with nothing fed yet.
	pub fn new() -> Self {
		Self::default()
	}

	/// Feeds the next bytes of the object.
	pub fn update(&mut self, data: &[u8]) {
		self.0.update(data);
	}

	/// The hash of everything fed so far.
	pub fn finalize(&self) -> ContentHash {
		self.0.finalize().into()
	}
}

#[cfg(test)]
mod tests {
	use super::*;

	#[test]
	fn known_value_and_hex_round_trip() {
		let h = ContentHash::of(b"");
		// BLAKE3 of the empty input (reference test vector).
		assert_eq!(h.to_hex(), "af1349b9f5f9a1a6a0404dea36dcc9499bcb25c9adc112b7cc9a93cae41f3262");
		assert_eq!(h.to_string().parse::<ContentHash>().unwrap(), h);
		assert!("abc".parse::<ContentHash>().is_err());
	}

	#[test]
	fn incremental_equals_one_shot() {
		let data: Vec<u8> = (0..100_000u32).map(|i| (i % 251) as u8).collect();
		let mut hs = Hasher::new();
		for c in data.chunks(777) {
			hs.update(c);
		}
		assert_eq!(hs.finalize(), ContentHash::of(&data));
		assert_eq!(Hasher::new().finalize(), ContentHash::of(b""));
	}
}
