//! Content addressing: the BLAKE3 hash of an object's bytes.
//!
//! Every object is hashed when it is written and checked when it is read. The hash, not the key, is what
//! goes on chain (merge manifests) and into RPC messages, so a reader never has to trust the bucket.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// BLAKE3-256 hash of an object's full contents (32 bytes, shown as 64 lowercase hex digits).
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ContentHash([u8; 32]);

/// A string that is not 64 hex digits was given where a [`ContentHash`] was expected.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("expected a BLAKE3 hash as 64 hex digits, got {got:?}")]
pub struct ParseHashError {
    /// The rejected input (cut to 80 characters).
    pub got: String,
}

impl ContentHash {
    /// Hashes `data` (all of it) with BLAKE3.
    pub fn of(data: &[u8]) -> Self {
        Self(*blake3::hash(data).as_bytes())
    }

    /// Wraps raw hash bytes, for hashes that arrive from the chain or an RPC message.
    pub const fn from_bytes(bytes: [u8; 32]) -> Self {
        Self(bytes)
    }

    /// The 32 raw hash bytes.
    pub const fn as_bytes(&self) -> &[u8; 32] {
        &self.0
    }

    /// Lowercase hex, 64 characters.
    pub fn to_hex(&self) -> String {
        blake3::Hash::from_bytes(self.0).to_hex().to_string()
    }
}

impl From<blake3::Hash> for ContentHash {
    fn from(h: blake3::Hash) -> Self {
        Self(*h.as_bytes())
    }
}

/// The on-chain form (`iota_primitives::ContentHash`, SCALE-encoded in merge manifests): same 32 bytes.
impl From<iota_primitives::ContentHash> for ContentHash {
    fn from(h: iota_primitives::ContentHash) -> Self {
        Self(h.0)
    }
}

impl From<ContentHash> for iota_primitives::ContentHash {
    fn from(h: ContentHash) -> Self {
        iota_primitives::ContentHash(h.0)
    }
}

impl fmt::Display for ContentHash {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.to_hex())
    }
}

impl fmt::Debug for ContentHash {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "ContentHash({})", self.to_hex())
    }
}

impl FromStr for ContentHash {
    type Err = ParseHashError;

    /// Parses 64 hex digits (either case).
    ///
    /// # Errors
    /// [`ParseHashError`] for any other length or a non-hex character.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        blake3::Hash::from_hex(s)
            .map(Self::from)
            .map_err(|_| ParseHashError {
                got: s.chars().take(80).collect(),
            })
    }
}

impl Serialize for ContentHash {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.to_hex())
    }
}

impl<'de> Deserialize<'de> for ContentHash {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

/// Incremental hasher for objects that are written or read in pieces.
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
    fn hex_round_trip_and_known_value() {
        let h = ContentHash::of(b"");
        // BLAKE3 of the empty input (reference test vector).
        assert_eq!(
            h.to_hex(),
            "af1349b9f5f9a1a6a0404dea36dcc9499bcb25c9adc112b7cc9a93cae41f3262"
        );
        assert_eq!(h.to_hex().parse::<ContentHash>().unwrap(), h);
        assert_eq!(h.to_hex().to_uppercase().parse::<ContentHash>().unwrap(), h);
    }

    #[test]
    fn incremental_equals_one_shot() {
        let data: Vec<u8> = (0..100_000u32).map(|i| (i % 251) as u8).collect();
        let mut hs = Hasher::new();
        for c in data.chunks(777) {
            hs.update(c);
        }
        assert_eq!(hs.finalize(), ContentHash::of(&data));
    }

    #[test]
    fn same_hash_as_the_chain_type() {
        let data = b"activation bytes";
        let ours = ContentHash::of(data);
        let chain = iota_primitives::ContentHash::of(data);
        assert_eq!(iota_primitives::ContentHash::from(ours), chain);
        assert_eq!(ContentHash::from(chain), ours);
    }

    #[test]
    fn bad_hex_is_rejected() {
        assert!("abc".parse::<ContentHash>().is_err());
        let not_hex = "z".repeat(64);
        assert_eq!(not_hex.parse::<ContentHash>().unwrap_err().got, not_hex);
    }
}
