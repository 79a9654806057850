//! Commit-reveal of validator weights: when an epoch's weights may be committed, revealed and paid out,
//! and what a commitment is.
//!
//! A weight vector that is public while others may still set theirs can be copied: a lazy validator
//! waits for the honest ones, submits their consensus and earns full agreement without judging anything.
//! Subtensor closes this with commit-reveal; so does iota-rs. For a complete epoch, completed at block
//! `c`, with the run config's `scoring_window` `W` and `reveal_window` `R` (blocks):
//!
//! | blocks | window | what the pallet accepts |
//! |---|---|---|
//! | `[c, c + W)` | [`WeightsWindow::Commit`] | `commit_weights(epoch, commitment)`: a hash, nothing readable |
//! | `[c + W, c + W + R)` | [`WeightsWindow::Reveal`] | `reveal_weights(epoch, weights, salt, version)` matching the commit |
//! | from `c + W + R` | [`WeightsWindow::Closed`] | `finalize_epoch(epoch)` (or the block hook) |
//!
//! No reveal can happen before every commit is final, so a vector committed in the window was chosen
//! without seeing anyone's. Only revealed vectors count for consensus and for the validators' share; a
//! validator that commits and never reveals earns nothing for the epoch. Both the pallet and the validator
//! daemon call these functions, so they agree on every block boundary.

use crate::{ContentHash, Epoch, WeightValue};
use codec::Encode;

/// Where an epoch's weights stand at some block (module docs).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum WeightsWindow {
	/// Validators commit hashes of their weight vectors.
	Commit,
	/// Validators reveal the committed vectors.
	Reveal,
	/// Both windows have passed: the epoch can be finalized.
	Closed,
}

/// The window of an epoch completed at block `completed_at`, at block `now` (all in blocks; saturating,
/// so an epoch completed near `u64::MAX` stays in its commit window). A `now` before `completed_at`
/// counts as the commit window: callers check completion themselves.
pub fn weights_window(
	completed_at: u64,
	scoring_window: u64,
	reveal_window: u64,
	now: u64,
) -> WeightsWindow {
	let reveal_from = commit_window_end(completed_at, scoring_window);
	if now < reveal_from {
		WeightsWindow::Commit
	} else if now < reveal_from.saturating_add(reveal_window) {
		WeightsWindow::Reveal
	} else {
		WeightsWindow::Closed
	}
}

/// First block outside the commit window of an epoch completed at `completed_at` (its reveal window's
/// first block): `completed_at + scoring_window` (blocks; saturating). Weights committed at or after it
/// are refused, so a validator that cannot judge an epoch before it earns only verdicts.
pub fn commit_window_end(completed_at: u64, scoring_window: u64) -> u64 {
	completed_at.saturating_add(scoring_window)
}

/// First block at which an epoch completed at `completed_at` can be finalized: after its commit and
/// reveal windows (blocks; saturating).
pub fn finalizable_at(completed_at: u64, scoring_window: u64, reveal_window: u64) -> u64 {
	commit_window_end(completed_at, scoring_window).saturating_add(reveal_window)
}

/// The commitment to a weight vector: BLAKE3 of the SCALE encoding of `(epoch, validator, weights,
/// salt)`. Binding the epoch and the validator's own account means a commitment cannot be replayed for
/// another epoch or copied by another validator; the 32-byte salt (secret until the reveal) means the
/// vector cannot be guessed from the hash by trying likely vectors. `A` is the chain's account id.
pub fn weights_commitment<A: Encode>(
	epoch: Epoch,
	validator: &A,
	weights: &[(A, WeightValue)],
	salt: &[u8; 32],
) -> ContentHash {
	ContentHash::of(&(epoch, validator, weights, salt).encode())
}

#[cfg(test)]
mod tests {
	use super::*;

	#[test]
	fn windows_follow_each_other_without_gap_or_overlap() {
		let w = |now| weights_window(100, 30, 10, now);
		assert_eq!(w(100), WeightsWindow::Commit);
		assert_eq!(w(129), WeightsWindow::Commit);
		assert_eq!(w(130), WeightsWindow::Reveal);
		assert_eq!(w(139), WeightsWindow::Reveal);
		assert_eq!(w(140), WeightsWindow::Closed);
		assert_eq!(finalizable_at(100, 30, 10), 140);
		// The commit window ends where the reveal window starts.
		assert_eq!(commit_window_end(100, 30), 130);
		assert_eq!(w(commit_window_end(100, 30) - 1), WeightsWindow::Commit);
		assert_eq!(commit_window_end(u64::MAX - 1, 30), u64::MAX);
		assert_eq!(weights_window(u64::MAX - 1, 30, 10, u64::MAX - 1), WeightsWindow::Commit);
		assert_eq!(finalizable_at(u64::MAX - 1, 30, 10), u64::MAX);
	}

	#[test]
	fn a_commitment_binds_epoch_validator_weights_and_salt() {
		let weights = [(1u64, 10u16), (2, 20)];
		let base = weights_commitment(3, &7u64, &weights, &[1; 32]);
		assert_eq!(base, weights_commitment(3, &7u64, &weights, &[1; 32]));
		assert_ne!(base, weights_commitment(4, &7u64, &weights, &[1; 32]));
		assert_ne!(base, weights_commitment(3, &8u64, &weights, &[1; 32]));
		assert_ne!(base, weights_commitment(3, &7u64, &[(1, 10), (2, 21)], &[1; 32]));
		assert_ne!(base, weights_commitment(3, &7u64, &weights, &[2; 32]));
	}
}
