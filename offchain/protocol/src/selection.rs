//! Seeded selections a validator makes and anyone can recompute from the epoch seed: which work items
//! of a miner are spot-checked, and which reduced shards of a stage are audited. Each draw is a
//! partial Fisher–Yates over a candidate list with [`SeededRng::below`] (unbiased), from a stream of
//! its own domain and context.

use iota_primitives::{Seed, SeededRng};

/// Domain of the spot-check draw.
pub const SPOT_CHECK_DOMAIN: &str = "iota-rs spot-check v1";
/// Domain of the shard-audit draw.
pub const SHARD_AUDIT_DOMAIN: &str = "iota-rs shard audit v1";
/// Agreeing shards recomputed per stage and epoch (besides every shard whose copies disagreed).
pub const SAMPLED_SHARDS: usize = 2;

/// Moves `k.min(pool.len())` uniformly drawn elements of `pool` to its front, in draw order (partial
/// Fisher–Yates), and returns that prefix.
pub fn draw<'a, T>(rng: &mut SeededRng, pool: &'a mut [T], k: usize) -> &'a [T] {
	let k = k.min(pool.len());
	for i in 0..k {
		let j = i + rng.below((pool.len() - i) as u64) as usize;
		pool.swap(i, j);
	}
	&pool[..k]
}

/// The kind of a spot-checked work item (its byte in the draw's context).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum CheckKind {
	/// A forward pass (the activation a stage uploaded).
	Forward = 0,
	/// A backward pass of a middle stage (the input gradient it uploaded).
	Backward = 1,
}

/// The spot checks of one (miner, stage, kind) in `epoch`: `k` of the `candidates` (indices of the
/// pathway-log records in which the miner did that work), drawn from
/// `SeededRng(`[`SPOT_CHECK_DOMAIN`]`, epoch_seed, epoch u32 LE ‖ stage u16 LE ‖ account 32 B ‖ kind)`.
pub fn spot_checks(
	epoch_seed: &Seed,
	epoch: u32,
	stage: u16,
	account: &[u8; 32],
	kind: CheckKind,
	mut candidates: Vec<usize>,
	k: usize,
) -> Vec<usize> {
	let mut ctx = Vec::with_capacity(39);
	ctx.extend_from_slice(&epoch.to_le_bytes());
	ctx.extend_from_slice(&stage.to_le_bytes());
	ctx.extend_from_slice(account);
	ctx.push(kind as u8);
	let mut rng = SeededRng::new(SPOT_CHECK_DOMAIN, epoch_seed, &ctx);
	draw(&mut rng, &mut candidates, k).to_vec()
}

/// The agreeing shards of `stage` audited in `epoch`: [`SAMPLED_SHARDS`] of `agreeing` (shard
/// indices whose two copies matched), drawn from
/// `SeededRng(`[`SHARD_AUDIT_DOMAIN`]`, epoch_seed, epoch u32 LE ‖ stage u16 LE)`. Shards whose copies
/// disagreed are always audited besides these.
pub fn audited_shards(
	epoch_seed: &Seed,
	epoch: u32,
	stage: u16,
	mut agreeing: Vec<u32>,
) -> Vec<u32> {
	let mut ctx = epoch.to_le_bytes().to_vec();
	ctx.extend_from_slice(&stage.to_le_bytes());
	let mut rng = SeededRng::new(SHARD_AUDIT_DOMAIN, epoch_seed, &ctx);
	draw(&mut rng, &mut agreeing, SAMPLED_SHARDS).to_vec()
}

#[cfg(test)]
mod tests {
	use super::*;

	#[test]
	fn draws_are_distinct_seeded_and_bounded() {
		let picks = spot_checks(&[1; 32], 3, 1, &[9; 32], CheckKind::Forward, (0..10).collect(), 4);
		assert_eq!(picks.len(), 4);
		let set: std::collections::BTreeSet<_> = picks.iter().collect();
		assert_eq!(set.len(), 4);
		assert_eq!(
			picks,
			spot_checks(&[1; 32], 3, 1, &[9; 32], CheckKind::Forward, (0..10).collect(), 4)
		);
		assert_ne!(
			picks,
			spot_checks(&[1; 32], 3, 1, &[9; 32], CheckKind::Backward, (0..10).collect(), 4)
		);
		assert_eq!(spot_checks(&[1; 32], 0, 0, &[0; 32], CheckKind::Forward, vec![7], 3), vec![7]);
		assert_eq!(audited_shards(&[2; 32], 0, 0, vec![5, 6, 7]).len(), SAMPLED_SHARDS);
		assert!(audited_shards(&[2; 32], 0, 0, vec![]).is_empty());
	}

	#[test]
	fn every_candidate_can_be_drawn() {
		let mut seen = [false; 6];
		for s in 0..64u8 {
			for i in audited_shards(&[s; 32], 1, 2, (0..6).collect()) {
				seen[i as usize] = true;
			}
		}
		assert!(seen.iter().all(|x| *x));
	}
}
