//! The butterfly plan of a merge round (docs/design.md "Merge"): who reduces which shard, and which
//! replica uploads the full checkpoint. Recomputable by anyone from chain state: the epoch seed, the
//! stage, epoch and round, and the round's submitters.

use codec::Encode;
use iota_primitives::{
	butterfly_shards, derive_seed, ButterflyError, Seed, SeededRng, ShardDescriptor,
};

/// Domain of the round's butterfly seed (derived from the epoch seed).
pub const BUTTERFLY_DOMAIN: &str = "iota-rs butterfly v1";
/// Domain of the checkpoint-replica draw (from the round's butterfly seed).
pub const CHECKPOINT_REPLICA_DOMAIN: &str = "iota-rs checkpoint replica v2";

/// The plan of one merge round of one stage.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MergePlan<A> {
	/// Merge round (restarts of the same epoch's merge count up).
	pub round: u32,
	/// The round's butterfly seed: `derive_seed(BUTTERFLY_DOMAIN, epoch_seed, (stage, epoch, round))`.
	pub seed: Seed,
	/// Members: the round's submitters, sorted ascending (account bytes) and deduplicated; a
	/// member's position in this list is its butterfly position.
	pub members: Vec<A>,
	/// The shard table (`n(n−1)/2` shards tiling `0..P`, each owned by one pair of positions).
	pub shards: Vec<ShardDescriptor>,
	/// Merge vector length `P` (f32 elements).
	pub param_count: u64,
	/// The replica asked to upload the full checkpoint after the outer step.
	pub checkpoint_by: A,
}

/// The plan of round `round` of `stage`'s merge of `epoch`: members sorted and deduplicated, seed
/// `derive_seed(`[`BUTTERFLY_DOMAIN`]`, epoch_seed, (stage, epoch, round).encode())`, shards
/// `butterfly_shards(n, P, seed)`, checkpoint replica
/// `members[SeededRng(`[`CHECKPOINT_REPLICA_DOMAIN`]`, seed, []).below(n)]` (unbiased).
///
/// # Errors
/// [`ButterflyError`] from the shard table: no members, too many, or a vector shorter than the shard
/// count.
pub fn merge_plan<A: Ord + Clone>(
	stage: u16,
	epoch: u32,
	round: u32,
	epoch_seed: &Seed,
	mut members: Vec<A>,
	param_count: u64,
) -> Result<MergePlan<A>, ButterflyError> {
	members.sort();
	members.dedup();
	let seed = derive_seed(BUTTERFLY_DOMAIN, epoch_seed, &(stage, epoch, round).encode());
	let n = u32::try_from(members.len()).map_err(|_| ButterflyError::TooManyMembers)?;
	let shards = butterfly_shards(n, param_count, &seed)?;
	let pick = SeededRng::new(CHECKPOINT_REPLICA_DOMAIN, &seed, &[]).below(u64::from(n)) as usize;
	let checkpoint_by = members.get(pick).cloned().ok_or(ButterflyError::NoMembers)?;
	Ok(MergePlan { round, seed, members, shards, param_count, checkpoint_by })
}

/// The merge whose checkpoint holds the weights every replica of a stage trains with (and a validator
/// recomputes with) during `epoch`: the merge of `epoch − 1`; `None` at epoch 0, which starts from the
/// seeded initialisation. The checkpoint is used only if its state hashes to that manifest's attested
/// state hash.
pub fn weights_merge_epoch(epoch: u32) -> Option<u32> {
	epoch.checked_sub(1)
}

#[cfg(test)]
mod tests {
	use super::*;

	#[test]
	fn plan_is_order_independent_and_tiles_the_vector() {
		let a = merge_plan(1, 4, 0, &[7; 32], vec![[3u8; 32], [1; 32], [2; 32], [1; 32]], 1_000)
			.unwrap();
		let b = merge_plan(1, 4, 0, &[7; 32], vec![[2u8; 32], [3; 32], [1; 32]], 1_000).unwrap();
		assert_eq!(a, b);
		assert_eq!(a.members, vec![[1; 32], [2; 32], [3; 32]]);
		assert_eq!(a.shards.len(), 3);
		assert_eq!(a.shards.iter().map(|s| s.len()).sum::<u64>(), 1_000);
		let next_round = merge_plan(1, 4, 1, &[7; 32], a.members.clone(), 1_000).unwrap();
		assert_ne!(next_round.seed, a.seed);
	}

	#[test]
	fn every_member_is_drawn_for_the_checkpoint_over_many_seeds() {
		let members: Vec<[u8; 32]> = (0..5u8).map(|i| [i; 32]).collect();
		let mut seen = std::collections::BTreeSet::new();
		for s in 0..64u8 {
			seen.insert(merge_plan(0, 0, 0, &[s; 32], members.clone(), 100).unwrap().checkpoint_by);
		}
		assert_eq!(seen.len(), 5);
	}

	#[test]
	fn an_epoch_trains_on_the_previous_merge() {
		assert_eq!(weights_merge_epoch(0), None);
		assert_eq!(weights_merge_epoch(5), Some(4));
	}

	#[test]
	fn no_members_is_an_error() {
		assert!(merge_plan::<[u8; 32]>(0, 0, 0, &[0; 32], vec![], 10).is_err());
	}
}
