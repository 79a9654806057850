//! Deterministic randomness from a 32-byte chain seed.
//!
//! Every draw is BLAKE3 in key-derivation mode over (domain, seed, context) read as an extendable output,
//! so the same inputs give the same stream on every machine and different purposes never share draws.

/// A 32-byte seed taken from chain state (the pallet's per-epoch seed, docs/design.md §7).
pub type Seed = [u8; 32];

/// A deterministic stream of `u64`s from (domain, seed, context).
pub struct SeededRng {
	reader: blake3::OutputReader,
}

impl SeededRng {
	/// Start a stream. `domain` names the decision (e.g. `"iota-rs butterfly v1"`), `context` the
	/// instance (stage, epoch, ...): both separate streams that must not correlate.
	pub fn new(domain: &str, seed: &Seed, context: &[u8]) -> Self {
		let mut hasher = blake3::Hasher::new_derive_key(domain);
		hasher.update(seed);
		hasher.update(context);
		Self { reader: hasher.finalize_xof() }
	}

	/// Next 64 uniform bits.
	pub fn next_u64(&mut self) -> u64 {
		let mut bytes = [0u8; 8];
		self.reader.fill(&mut bytes);
		u64::from_le_bytes(bytes)
	}

	/// A uniform draw from `[0, n)` without modulo bias (rejection below `2^64 mod n`); 0 when `n == 0`.
	pub fn below(&mut self, n: u64) -> u64 {
		if n == 0 {
			return 0;
		}
		let threshold = n.wrapping_neg().checked_rem(n).unwrap_or(0);
		loop {
			let x = self.next_u64();
			if x >= threshold {
				return x.checked_rem(n).unwrap_or(0);
			}
		}
	}
}

/// Derive a new 32-byte seed for one purpose from a base seed, e.g. the butterfly seed of (epoch, stage,
/// round) from the epoch seed.
pub fn derive_seed(domain: &str, seed: &Seed, context: &[u8]) -> Seed {
	let mut out = [0u8; 32];
	SeededRng::new(domain, seed, context).reader.fill(&mut out);
	out
}
