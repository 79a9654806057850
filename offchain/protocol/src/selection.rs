//! Seeded selections a validator makes and anyone can recompute from the epoch seed: which work items
//! of a miner are spot-checked, and which reduced shards of a stage are audited. Each draw is a
//! partial Fisher–Yates over a candidate list with [`SeededRng::below`] (unbiased), from a stream of
//! its own domain and context.

use iota_primitives::{Seed, SeededRng};

/// Domain of the spot-check draw.
pub const SPOT_CHECK_DOMAIN: &str = "iota-rs spot-check v1";
/// Domain of the shard-audit draw.
pub const SHARD_AUDIT_DOMAIN: &str = "iota-rs shard audit v1";
/// Domain of local mode's inner-step challenge draw (docs/design.md §10).
pub const INNER_STEP_DOMAIN: &str = "iota-rs inner-step challenge v1";
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

/// The context of a per-miner draw: `epoch u32 LE ‖ stage u16 LE ‖ account 32 B` (38 bytes, room for a
/// kind byte).
fn miner_context(epoch: u32, stage: u16, account: &[u8; 32]) -> Vec<u8> {
	let mut ctx = Vec::with_capacity(39);
	ctx.extend_from_slice(&epoch.to_le_bytes());
	ctx.extend_from_slice(&stage.to_le_bytes());
	ctx.extend_from_slice(account);
	ctx
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
	let mut ctx = miner_context(epoch, stage, account);
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

/// Inner steps of each miner (stage replica) challenged per epoch in local mode: the `k` of
/// [`inner_step_challenges`] the orchestrator asks reveals for and validators check.
pub const INNER_CHALLENGES: usize = 2;

/// Domain of the challenge seed.
pub const CHALLENGE_SEED_DOMAIN: &str = "iota-rs inner-step challenge seed v1";

/// The seed of epoch `epoch`'s inner-step challenges (docs/design.md §10): derived from the hash of the
/// block at which the epoch completed (`EpochCompletedAt(epoch)`, every stage committed; read once that
/// block is finalized), `derive_seed(`[`CHALLENGE_SEED_DOMAIN`]`, block_hash, epoch u32 LE)`. Every report
/// of the epoch is older than that block (a report is refused once its stage has left the epoch), so no
/// miner can know its challenges while it trains; the block's author could grind the hash, which the
/// devnet's trusted authorities do not.
pub fn challenge_seed(epoch: u32, completion_block_hash: &[u8; 32]) -> Seed {
	iota_primitives::derive_seed(CHALLENGE_SEED_DOMAIN, completion_block_hash, &epoch.to_le_bytes())
}

/// Local mode's challenges of one miner (docs/design.md §10): which of its inner steps of `epoch` at
/// `stage` it must reveal. A miner that reported `reported` state hashes (states 0..reported) took
/// `reported − 1` inner steps; step `k` is the move from state `k` to state `k + 1`. The **last** step
/// (`reported − 2`) is always challenged, because its state `k + 1` is the one the miner's
/// pseudo-gradient must come from ([`crate::optim::pseudo_gradient_deviation`]); besides it, `k` distinct
/// steps of the earlier ones (`0..reported − 2`, all of them when there are at most `k`) are drawn from
/// `SeededRng(`[`INNER_STEP_DOMAIN`]`, challenge_seed, epoch u32 LE ‖ stage u16 LE ‖ account 32 B)`.
/// Returned in order: the drawn steps in draw order, then the last. Nothing without two reported states.
/// `challenge_seed` must come from chain state drawn after every report of the epoch was made, so
/// no miner knows its drawn steps while it trains.
pub fn inner_step_challenges(
	challenge_seed: &Seed,
	epoch: u32,
	stage: u16,
	account: &[u8; 32],
	reported: u32,
	k: usize,
) -> Vec<u32> {
	let Some(last) = reported.checked_sub(2) else { return Vec::new() };
	let ctx = miner_context(epoch, stage, account);
	let mut rng = SeededRng::new(INNER_STEP_DOMAIN, challenge_seed, &ctx);
	let mut steps: Vec<u32> = (0..last).collect();
	let mut out = draw(&mut rng, &mut steps, k).to_vec();
	out.push(last);
	out
}

/// The last block at which a challenged miner's reveals of `epoch` count (docs/design.md §10): half
/// the scoring window after the epoch's completion block `completed_at` (the block whose hash seeds
/// the challenges), the same half a validator waits for the epoch's pathway log. A state not in the
/// bucket when a validator's finalized head has passed it is a `Fail`. Blocks; saturating.
pub fn reveal_deadline(completed_at: u32, scoring_window: u32) -> u32 {
	completed_at.saturating_add(scoring_window / 2)
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
	fn inner_step_challenges_are_seeded_distinct_steps_between_reported_states_and_the_last() {
		let c = inner_step_challenges(&[3; 32], 2, 1, &[7; 32], 6, 3);
		assert_eq!(c.len(), 4, "{c:?}: three drawn and the last");
		assert_eq!(c.last(), Some(&4), "the last step (states 4 and 5) is always asked");
		assert!(c[..3].iter().all(|&k| k < 4), "{c:?}: drawn among the earlier steps");
		assert_eq!(c.iter().collect::<std::collections::BTreeSet<_>>().len(), 4);
		assert_eq!(c, inner_step_challenges(&[3; 32], 2, 1, &[7; 32], 6, 3));
		assert_ne!(
			(0..8u8)
				.map(|s| inner_step_challenges(&[s; 32], 2, 1, &[7; 32], 40, 2))
				.collect::<Vec<_>>(),
			(0..8u8)
				.map(|s| inner_step_challenges(&[s; 32], 2, 1, &[8; 32], 40, 2))
				.collect::<Vec<_>>(),
			"another miner draws other steps"
		);
		// Every step is asked when k covers them; the last alone with two states; nothing with fewer.
		let mut all = inner_step_challenges(&[1; 32], 0, 0, &[0; 32], 4, 10);
		all.sort_unstable();
		assert_eq!(all, vec![0, 1, 2]);
		assert_eq!(inner_step_challenges(&[1; 32], 0, 0, &[0; 32], 2, 4), vec![0]);
		assert!(inner_step_challenges(&[1; 32], 0, 0, &[0; 32], 1, 4).is_empty());
		assert!(inner_step_challenges(&[1; 32], 0, 0, &[0; 32], 0, 4).is_empty());
		let mut seen = [false; 5];
		for s in 0..64u8 {
			for k in inner_step_challenges(&[s; 32], 1, 0, &[2; 32], 6, 1) {
				seen[k as usize] = true;
			}
		}
		assert!(seen.iter().all(|x| *x), "every step can be challenged");
	}

	#[test]
	fn reveals_are_due_half_a_scoring_window_after_the_completion_block() {
		assert_eq!(reveal_deadline(100, 90), 145);
		assert_eq!(reveal_deadline(100, 1), 100);
		assert_eq!(reveal_deadline(u32::MAX - 1, 90), u32::MAX);
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
