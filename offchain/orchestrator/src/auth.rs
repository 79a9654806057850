//! Request authentication (docs/design.md §7): the signature and timestamp window of every signed request
//! ([`iota_rpc::Signed::verify`]), nonces never reused per account while their timestamp is inside the
//! window ([`NonceBook`]), and the caller's role and stage from chain state, as of the best block the driver acts on ([`Registry`]).

use std::collections::HashMap;

use iota_rpc::{AccountId, AuthError, ErrorCode};

use crate::state::Refusal;

/// A miner's standing on chain, as far as the orchestrator cares.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MinerStanding {
	/// Works.
	Active,
	/// Asked to leave; works until its stage's next merge.
	Leaving,
	/// Out of its stage (unbonding): refused.
	Unbonding,
}

/// Who is registered, as of the best block the chain driver acts on (finalized state at start-up; refreshed by [`crate::chain`]).
#[derive(Clone, Debug, Default)]
pub struct Registry {
	/// Miners: stage and standing.
	pub miners: HashMap<[u8; 32], (u16, MinerStanding)>,
	/// Validators: whether active.
	pub validators: HashMap<[u8; 32], bool>,
}

impl Registry {
	/// The stage of an Active or Leaving miner; `stage`, when given, must be it.
	///
	/// Errors: `NotRegistered` (unknown account), `WrongRole` (a validator, or an unbonding miner),
	/// `WrongStage`.
	pub fn miner(&self, who: &AccountId, stage: Option<u16>) -> Result<u16, Refusal> {
		match self.miners.get(&who.0) {
			Some((_, MinerStanding::Unbonding)) => {
				Err(Refusal::new(ErrorCode::WrongRole, format!("miner {who} has left its stage")))
			},
			Some((s, _)) => match stage {
				Some(asked) if asked != *s => Err(Refusal::new(
					ErrorCode::WrongStage,
					format!("{who} holds stage {s}, not {asked}"),
				)),
				_ => Ok(*s),
			},
			None if self.validators.contains_key(&who.0) => Err(Refusal::new(
				ErrorCode::WrongRole,
				format!("{who} is a validator, not a miner"),
			)),
			None => Err(Refusal::new(
				ErrorCode::NotRegistered,
				format!("{who} is not registered on chain"),
			)),
		}
	}

	/// That `who` is an Active validator.
	///
	/// Errors: `NotRegistered`, `WrongRole` (a miner, or an unbonding validator).
	pub fn validator(&self, who: &AccountId) -> Result<(), Refusal> {
		match self.validators.get(&who.0) {
			Some(true) => Ok(()),
			Some(false) => {
				Err(Refusal::new(ErrorCode::WrongRole, format!("validator {who} is unbonding")))
			},
			None if self.miners.contains_key(&who.0) => Err(Refusal::new(
				ErrorCode::WrongRole,
				format!("{who} is a miner, not a validator"),
			)),
			None => Err(Refusal::new(
				ErrorCode::NotRegistered,
				format!("{who} is not registered on chain"),
			)),
		}
	}
}

/// The refusal for an envelope error.
pub fn auth_refusal(e: AuthError) -> Refusal {
	let code = match e {
		AuthError::BadSignature { .. } | AuthError::Encoding(_) => ErrorCode::BadSignature,
		AuthError::StaleTimestamp { .. } => ErrorCode::StaleTimestamp,
	};
	Refusal::new(code, e.to_string())
}

/// Nonces seen per account, with their request timestamps (ms). A nonce is refused while an equal one of
/// the same account is recorded; entries whose timestamp left the window are pruned (a request that old
/// is refused as stale before its nonce is looked at).
#[derive(Debug, Default)]
pub struct NonceBook {
	seen: HashMap<([u8; 32], u64), u64>,
	window_ms: u64,
	last_prune_ms: u64,
}

impl NonceBook {
	/// An empty book for a window of `window_ms`.
	pub fn new(window_ms: u64) -> Self {
		Self { seen: HashMap::new(), window_ms, last_prune_ms: 0 }
	}

	/// Whether `(account, nonce)` may be used.
	///
	/// Errors: `NonceReused`.
	pub fn check(&self, account: &AccountId, nonce: u64) -> Result<(), Refusal> {
		if self.seen.contains_key(&(account.0, nonce)) {
			return Err(Refusal::new(
				ErrorCode::NonceReused,
				format!("nonce {nonce} was already used by {account}"),
			));
		}
		Ok(())
	}

	/// Records a used nonce; prunes expired entries at most once per second of `now_ms`.
	pub fn insert(&mut self, account: [u8; 32], nonce: u64, timestamp_ms: u64, now_ms: u64) {
		self.seen.insert((account, nonce), timestamp_ms);
		if now_ms >= self.last_prune_ms + 1000 {
			self.prune(now_ms);
		}
	}

	/// Drops entries whose timestamp is more than the window before `now_ms`.
	pub fn prune(&mut self, now_ms: u64) {
		let cutoff = now_ms.saturating_sub(self.window_ms);
		self.seen.retain(|_, ts| *ts >= cutoff);
		self.last_prune_ms = now_ms;
	}

	/// Entries held.
	pub fn len(&self) -> usize {
		self.seen.len()
	}

	/// Whether the book is empty.
	pub fn is_empty(&self) -> bool {
		self.seen.is_empty()
	}
}

#[cfg(test)]
mod tests {
	use super::*;

	fn acc(i: u8) -> AccountId {
		AccountId::from([i; 32])
	}

	#[test]
	fn nonces_are_refused_inside_the_window_and_pruned_after() {
		let mut b = NonceBook::new(30_000);
		b.check(&acc(1), 7).unwrap();
		b.insert(acc(1).0, 7, 100_000, 100_000);
		assert_eq!(b.check(&acc(1), 7).unwrap_err().code, ErrorCode::NonceReused);
		b.check(&acc(2), 7).unwrap();
		b.check(&acc(1), 8).unwrap();
		b.prune(130_000);
		assert_eq!(b.len(), 1, "still inside the window");
		b.prune(130_001);
		assert!(b.is_empty());
	}

	#[test]
	fn roles_and_stages() {
		let mut r = Registry::default();
		r.miners.insert(acc(1).0, (2, MinerStanding::Active));
		r.miners.insert(acc(2).0, (0, MinerStanding::Leaving));
		r.miners.insert(acc(3).0, (0, MinerStanding::Unbonding));
		r.validators.insert(acc(4).0, true);
		r.validators.insert(acc(5).0, false);
		assert_eq!(r.miner(&acc(1), Some(2)), Ok(2));
		assert_eq!(r.miner(&acc(1), Some(1)).unwrap_err().code, ErrorCode::WrongStage);
		assert_eq!(r.miner(&acc(2), None), Ok(0));
		assert_eq!(r.miner(&acc(3), None).unwrap_err().code, ErrorCode::WrongRole);
		assert_eq!(r.miner(&acc(4), None).unwrap_err().code, ErrorCode::WrongRole);
		assert_eq!(r.miner(&acc(9), None).unwrap_err().code, ErrorCode::NotRegistered);
		r.validator(&acc(4)).unwrap();
		assert_eq!(r.validator(&acc(5)).unwrap_err().code, ErrorCode::WrongRole);
		assert_eq!(r.validator(&acc(1)).unwrap_err().code, ErrorCode::WrongRole);
		assert_eq!(r.validator(&acc(9)).unwrap_err().code, ErrorCode::NotRegistered);
	}
}
