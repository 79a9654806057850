//! Butterfly all-reduce shard assignment (docs/design.md §6, ref §4 fixed).
//!
//! `n` miners of a stage each submit a gradient vector of `p` elements. The vector is cut into
//! `K = n(n-1)/2` contiguous shards, one per unordered pair of miners; both members of a pair reduce the
//! same shard (weighted mean over all `n` submissions), so every shard is computed twice and the two
//! copies are compared by hash. Which pair gets which shard is a seeded shuffle, so a miner cannot choose
//! to reduce a shard it wants to falsify, and anyone holding the seed recomputes the same table.
//!
//! Shard `k` covers elements `[floor(k·p/K), floor((k+1)·p/K))`: sizes differ by at most one and the
//! shards tile `[0, p)` exactly. A stage with a single miner gets one shard `[0, p)` owned by `(0, 0)`.
//! Miners are named by their position in the stage's member list as the chain orders it.

use crate::seed::{Seed, SeededRng};
use alloc::vec::Vec;
use codec::{Decode, DecodeWithMemTracking, Encode, MaxEncodedLen};
use scale_info::TypeInfo;

/// Largest stage the butterfly is defined for (`K = 32 640` shards).
pub const MAX_BUTTERFLY_MEMBERS: u32 = 256;

/// One shard of the butterfly: a contiguous slice of the gradient vector and the pair that reduces it.
#[derive(
	Clone,
	Copy,
	PartialEq,
	Eq,
	Debug,
	Encode,
	Decode,
	DecodeWithMemTracking,
	MaxEncodedLen,
	TypeInfo,
)]
pub struct ShardDescriptor {
	/// Shard index `k` in `[0, K)`.
	pub index: u32,
	/// First element (inclusive), in gradient elements.
	pub start: u64,
	/// Last element (exclusive), in gradient elements.
	pub end: u64,
	/// Positions of the two owners in the member list, `owners.0 < owners.1` (both 0 when `n == 1`).
	pub owners: (u32, u32),
}

impl ShardDescriptor {
	/// Elements in the shard.
	pub fn len(&self) -> u64 {
		self.end.saturating_sub(self.start)
	}

	/// Whether the shard holds no elements.
	pub fn is_empty(&self) -> bool {
		self.len() == 0
	}

	/// Whether the member at `position` reduces this shard.
	pub fn is_owned_by(&self, position: u32) -> bool {
		self.owners.0 == position || self.owners.1 == position
	}
}

/// Why no shard table exists for the given sizes.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum ButterflyError {
	/// No miners submitted.
	NoMembers,
	/// More than [`MAX_BUTTERFLY_MEMBERS`] miners.
	TooManyMembers,
	/// The vector has fewer elements than there are shards, so some shard would be empty.
	VectorTooShort {
		/// Elements in the vector.
		len: u64,
		/// Shards required.
		shards: u32,
	},
}

/// Number of shards for `n` miners: `n(n-1)/2`, or 1 when `n == 1`.
///
/// Errors: [`ButterflyError::NoMembers`], [`ButterflyError::TooManyMembers`].
pub fn shard_count(n: u32) -> Result<u32, ButterflyError> {
	match n {
		0 => Err(ButterflyError::NoMembers),
		1 => Ok(1),
		n if n > MAX_BUTTERFLY_MEMBERS => Err(ButterflyError::TooManyMembers),
		// n ≤ 256, so the product fits easily; checked maths keeps the lint honest.
		n => Ok(n.saturating_mul(n.saturating_sub(1)) / 2),
	}
}

/// Element range `[start, end)` of shard `index` out of `shards` for a vector of `len` elements.
/// Returns `(len, len)` for an out-of-range index or zero shards.
pub fn shard_range(index: u32, shards: u32, len: u64) -> (u64, u64) {
	if shards == 0 || index >= shards {
		return (len, len);
	}
	let at = |k: u32| -> u64 {
		// k·len/K with k ≤ K, computed in u128 so it cannot overflow and is exact.
		let v = u128::from(k)
			.saturating_mul(u128::from(len))
			.checked_div(u128::from(shards))
			.unwrap_or(0);
		u64::try_from(v).unwrap_or(len)
	};
	(at(index), at(index.saturating_add(1)))
}

/// The full shard table for `n` miners, a gradient vector of `len` elements and a seed: `K` descriptors
/// in shard order, every unordered pair owning exactly one shard, the shards tiling `[0, len)`.
///
/// Errors: [`ButterflyError::NoMembers`], [`ButterflyError::TooManyMembers`],
/// [`ButterflyError::VectorTooShort`].
pub fn butterfly_shards(
	n: u32,
	len: u64,
	seed: &Seed,
) -> Result<Vec<ShardDescriptor>, ButterflyError> {
	let k = shard_count(n)?;
	if len < u64::from(k) {
		return Err(ButterflyError::VectorTooShort { len, shards: k });
	}
	let mut pairs: Vec<(u32, u32)> = if n == 1 {
		alloc::vec![(0, 0)]
	} else {
		(0..n).flat_map(|i| (i.saturating_add(1)..n).map(move |j| (i, j))).collect()
	};
	let mut context = [0u8; 12];
	context[..4].copy_from_slice(&n.to_le_bytes());
	context[4..].copy_from_slice(&len.to_le_bytes());
	let mut rng = SeededRng::new("iota-rs butterfly v1", seed, &context);
	// Fisher-Yates: swap position i with a uniform position in [0, i].
	for i in (1..pairs.len()).rev() {
		let j = usize::try_from(rng.below((i as u64).saturating_add(1))).unwrap_or(i);
		pairs.swap(i, j);
	}
	Ok(pairs
		.into_iter()
		.zip(0u32..)
		.map(|(owners, index)| {
			let (start, end) = shard_range(index, k, len);
			ShardDescriptor { index, start, end, owners }
		})
		.collect())
}

/// The shards the member at `position` reduces (`n - 1` of them for `n > 1`).
///
/// Errors: as [`butterfly_shards`].
pub fn shards_of(
	position: u32,
	n: u32,
	len: u64,
	seed: &Seed,
) -> Result<Vec<ShardDescriptor>, ButterflyError> {
	Ok(butterfly_shards(n, len, seed)?
		.into_iter()
		.filter(|s| s.is_owned_by(position))
		.collect())
}

#[cfg(test)]
mod tests {
	use super::*;

	#[test]
	fn counts() {
		assert_eq!(shard_count(0), Err(ButterflyError::NoMembers));
		assert_eq!(shard_count(1), Ok(1));
		assert_eq!(shard_count(2), Ok(1));
		assert_eq!(shard_count(3), Ok(3));
		assert_eq!(shard_count(6), Ok(15));
		assert_eq!(shard_count(256), Ok(32_640));
		assert_eq!(shard_count(257), Err(ButterflyError::TooManyMembers));
	}

	#[test]
	fn single_miner_owns_everything() {
		let t = butterfly_shards(1, 10, &[0; 32]).unwrap();
		assert_eq!(t, alloc::vec![ShardDescriptor { index: 0, start: 0, end: 10, owners: (0, 0) }]);
	}

	#[test]
	fn each_member_reduces_n_minus_one_shards_of_about_2p_over_n() {
		let (n, p) = (5u32, 1_000_000u64);
		for m in 0..n {
			let mine = shards_of(m, n, p, &[3; 32]).unwrap();
			assert_eq!(mine.len(), 4);
			let elems: u64 = mine.iter().map(|s| s.len()).sum();
			assert!(elems.abs_diff(2 * p / u64::from(n)) <= 4, "{elems}");
		}
	}

	#[test]
	fn too_short_vector_is_refused() {
		assert_eq!(
			butterfly_shards(4, 5, &[0; 32]),
			Err(ButterflyError::VectorTooShort { len: 5, shards: 6 })
		);
		assert!(butterfly_shards(4, 6, &[0; 32]).is_ok());
	}

	#[test]
	fn huge_vectors_do_not_overflow() {
		let t = butterfly_shards(3, u64::MAX, &[1; 32]).unwrap();
		assert_eq!(t[0].start, 0);
		assert_eq!(t[2].end, u64::MAX);
	}
}
