//! The validator's side of commit-reveal of weights ([`iota_primitives::weights`]): the vectors it has
//! committed to and must still reveal, kept on disk so a restart between the commit and the reveal
//! loses nothing.
//!
//! A commitment hides its vector behind a 32-byte random salt; without the salt the vector can never be
//! revealed, and the validator earns nothing for that epoch. So the salt and the vector are written to
//! disk (`<state dir>/<account>/weight-commits.json`, atomically: a temporary file renamed over the old
//! one) **before** the commit goes on chain. An entry whose commit then failed is removed again; an
//! entry that does not match the chain's commitment (replaced on chain by another process with this
//! key, or left from another chain) is dropped at reveal time, so a stale file can never block a commit
//! or reveal a wrong vector. The daemon decides what to commit from chain state, never from this file.
//!
//! Reveals run in their own task ([`Revealer`]), on their own timer, beside the daemon's judging: judging
//! one epoch can take longer than a whole reveal window (about 90 s for a local-mode `small` epoch on
//! two cores, against the dev preset's 20 blocks of 3 s), and a reveal that waited for it would miss its
//! window and forfeit the epoch's reward.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use iota_chain::{calls, AccountId, ContentHash, IotaClient, RunConfig, Signer, Wait};
use iota_primitives::{weights_window, WeightsWindow};
use rand::Rng;
use serde::{Deserialize, Serialize};

use crate::metrics::Metrics;

/// Why the commitment store failed.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
	/// Reading, writing or renaming the file failed.
	#[error("{path}: {source}")]
	Io {
		/// The file or folder.
		path: PathBuf,
		/// The I/O error.
		source: std::io::Error,
	},
	/// The file is not a commitment list (hand-edited, truncated by a full disk).
	#[error("{path}: not a weight-commitment file: {reason}")]
	Malformed {
		/// The file.
		path: PathBuf,
		/// What the parser said.
		reason: String,
	},
}

/// A weight vector this validator committed to for `epoch` and has not revealed yet.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Pending {
	/// The epoch the vector scores.
	pub epoch: u32,
	/// `(miner, weight)` pairs, miners as SS58 addresses.
	pub weights: Vec<(String, u16)>,
	/// The secret salt of the commitment (32 random bytes).
	pub salt: [u8; 32],
	/// The weights version key to reveal with.
	pub version: u64,
}

impl Pending {
	/// The vector with parsed accounts.
	///
	/// # Errors
	/// An entry's account is not an SS58 address (a hand-edited file): its text.
	pub fn weights(&self) -> Result<Vec<(AccountId, u16)>, String> {
		self.weights
			.iter()
			.map(|(a, w)| a.parse::<AccountId>().map(|a| (a, *w)).map_err(|_| a.clone()))
			.collect()
	}

	/// The commitment `validator` makes to this vector ([`iota_primitives::weights_commitment`]).
	///
	/// # Errors
	/// As [`Pending::weights`].
	pub fn commitment(&self, validator: &AccountId) -> Result<ContentHash, String> {
		Ok(iota_primitives::weights_commitment(self.epoch, validator, &self.weights()?, &self.salt))
	}
}

/// The validator's pending reveals, one per epoch, mirrored in a file.
#[derive(Debug)]
pub struct CommitStore {
	path: PathBuf,
	entries: BTreeMap<u32, Pending>,
}

impl CommitStore {
	/// Opens (or starts) the store of `account` under `dir`: the file
	/// `dir/<account SS58>/weight-commits.json`, created with its folders on the first write.
	///
	/// # Errors
	/// [`StoreError::Io`] when the file exists and cannot be read; [`StoreError::Malformed`] when it is
	/// not a commitment list (nothing is overwritten: the operator decides).
	pub fn open(dir: &Path, account: &AccountId) -> Result<Self, StoreError> {
		let path = dir.join(account.to_string()).join("weight-commits.json");
		let entries = match std::fs::read(&path) {
			Ok(bytes) => {
				let list: Vec<Pending> = serde_json::from_slice(&bytes).map_err(|e| {
					StoreError::Malformed { path: path.clone(), reason: e.to_string() }
				})?;
				list.into_iter().map(|p| (p.epoch, p)).collect()
			},
			Err(e) if e.kind() == std::io::ErrorKind::NotFound => BTreeMap::new(),
			Err(source) => return Err(StoreError::Io { path, source }),
		};
		Ok(Self { path, entries })
	}

	/// The file this store writes.
	pub fn path(&self) -> &Path {
		&self.path
	}

	/// A new entry for `weights` of `epoch` with a fresh random salt, not stored yet.
	pub fn prepare(epoch: u32, weights: &[(AccountId, u16)], version: u64) -> Pending {
		let mut salt = [0u8; 32];
		rand::rng().fill(&mut salt);
		Pending {
			epoch,
			weights: weights.iter().map(|(a, w)| (a.to_string(), *w)).collect(),
			salt,
			version,
		}
	}

	/// Stores `entry` (replacing the epoch's earlier one, which is returned) and writes the file.
	///
	/// # Errors
	/// [`StoreError::Io`]: the file could not be written; the store is unchanged.
	pub fn put(&mut self, entry: Pending) -> Result<Option<Pending>, StoreError> {
		let epoch = entry.epoch;
		let earlier = self.entries.insert(epoch, entry);
		if let Err(e) = self.write() {
			match earlier {
				Some(p) => self.entries.insert(epoch, p),
				None => self.entries.remove(&epoch),
			};
			return Err(e);
		}
		Ok(earlier)
	}

	/// Removes `entry` if it is still the stored one of its epoch (same salt: not replaced meanwhile by a
	/// new commit) and writes the file; whether it was removed.
	///
	/// # Errors
	/// As [`CommitStore::remove`].
	pub fn remove_entry(&mut self, entry: &Pending) -> Result<bool, StoreError> {
		if self.entries.get(&entry.epoch).is_some_and(|p| p.salt == entry.salt) {
			self.remove(entry.epoch)?;
			return Ok(true);
		}
		Ok(false)
	}

	/// Removes the entry of `epoch` (revealed, refused, or its window passed) and writes the file.
	///
	/// # Errors
	/// [`StoreError::Io`]: the file could not be written (the entry is gone from memory; a stale entry
	/// on disk is dropped at the next start, as it no longer matches the chain or its window passed).
	pub fn remove(&mut self, epoch: u32) -> Result<Option<Pending>, StoreError> {
		let removed = self.entries.remove(&epoch);
		if removed.is_some() {
			self.write()?;
		}
		Ok(removed)
	}

	/// Puts back `earlier` for `epoch` (or removes the epoch's entry when `None`): undoes a
	/// [`CommitStore::put`] whose commit did not reach the chain.
	///
	/// # Errors
	/// As [`CommitStore::put`].
	pub fn restore(&mut self, epoch: u32, earlier: Option<Pending>) -> Result<(), StoreError> {
		match earlier {
			Some(p) => self.put(p).map(|_| ()),
			None => self.remove(epoch).map(|_| ()),
		}
	}

	/// The pending entry of `epoch`, if any.
	pub fn get(&self, epoch: u32) -> Option<&Pending> {
		self.entries.get(&epoch)
	}

	/// Every pending entry, by epoch.
	pub fn pending(&self) -> Vec<Pending> {
		self.entries.values().cloned().collect()
	}

	fn write(&self) -> Result<(), StoreError> {
		let io = |source| StoreError::Io { path: self.path.clone(), source };
		if let Some(dir) = self.path.parent() {
			std::fs::create_dir_all(dir).map_err(io)?;
		}
		let list: Vec<&Pending> = self.entries.values().collect();
		let json = serde_json::to_vec_pretty(&list).map_err(|e| io(std::io::Error::other(e)))?;
		let tmp = self.path.with_extension("json.tmp");
		std::fs::write(&tmp, json).map_err(io)?;
		std::fs::rename(&tmp, &self.path).map_err(io)
	}
}

/// A [`CommitStore`] shared by the daemon (which commits) and its [`Revealer`]. The lock is never held
/// across an `await`.
#[derive(Clone, Debug)]
pub struct SharedStore(Arc<Mutex<CommitStore>>);

impl SharedStore {
	/// Shares `store`.
	pub fn new(store: CommitStore) -> Self {
		Self(Arc::new(Mutex::new(store)))
	}

	/// The store, locked (a panic elsewhere while it was held leaves it usable: every write is one
	/// atomic file rename).
	pub fn lock(&self) -> MutexGuard<'_, CommitStore> {
		self.0.lock().unwrap_or_else(PoisonError::into_inner)
	}
}

/// [`iota_primitives::weights_window`] of an epoch completed at block `completed_at`, at block `now`,
/// under the chain's run config: the one rule for when this validator may commit and reveal.
pub fn window_of(run: &RunConfig, completed_at: u32, now: u32) -> WeightsWindow {
	weights_window(
		completed_at.into(),
		run.scoring_window.into(),
		run.reveal_window.into(),
		now.into(),
	)
}

/// Where one stored commitment stands after [`Revealer::reveal`].
#[derive(Debug, PartialEq, Eq)]
pub enum Reveal {
	/// Its reveal window has not opened.
	NotYet,
	/// Revealed (now or earlier).
	Done,
	/// Never to be revealed, for the reason given.
	Dropped(String),
}

/// The reveal task: every `poll` it reveals each stored commitment whose reveal window is open at the
/// **best** block (the reveal executes there; on a busy node finality can lag the best block by more
/// than the whole window), and drops those whose window passed, whose epoch is not complete on this
/// chain, or that do not match the chain's commitment. It runs beside the daemon's judging
/// ([`crate::daemon::Daemon::run`] spawns it), so a long audit never holds a reveal back.
pub struct Revealer {
	chain: IotaClient,
	signer: Signer,
	commits: SharedStore,
	metrics: Metrics,
}

impl Revealer {
	/// A revealer signing with `signer` (the daemon's key: the client's nonce book is shared, so the
	/// two tasks never take one nonce).
	pub fn new(chain: IotaClient, signer: Signer, commits: SharedStore, metrics: Metrics) -> Self {
		Self { chain, signer, commits, metrics }
	}

	/// Runs forever: one [`Revealer::reveal_due`] every `poll`.
	pub async fn run(self, poll: Duration) {
		loop {
			match self.chain.run_config().await {
				Ok(Some(run)) => self.reveal_due(&run).await,
				Ok(None) => {},
				Err(e) => {
					self.metrics.error("chain");
					tracing::warn!(error = %e, "cannot read the run config; reveals wait");
				},
			}
			tokio::time::sleep(poll).await;
		}
	}

	/// One pass over the stored commitments (see [`Revealer`]); a revealed or dropped entry leaves the
	/// store, one a chain error held back stays for the next pass.
	pub async fn reveal_due(&self, run: &RunConfig) {
		let pending = self.commits.lock().pending();
		if pending.is_empty() {
			return;
		}
		// Every read of the pass at one best block: a commit included in the scoring window's last blocks
		// is not in finalized storage yet when the best block enters the reveal window, and reading it
		// there would drop a valid commitment (and with it the only copy of its salt).
		let (now, hash) = match self.chain.best_block().await {
			Ok(b) => b,
			Err(e) => {
				self.metrics.error("chain");
				tracing::warn!(error = %e, "cannot read the best block; reveals wait");
				return;
			},
		};
		let at = self.chain.at_block(hash);
		for p in pending {
			let epoch = p.epoch;
			let outcome = match self.reveal(&at, &p, run, now).await {
				Ok(outcome) => outcome,
				Err(e) => {
					self.metrics.error("chain");
					tracing::warn!(epoch, error = %e, "reveal not possible yet; retrying");
					continue;
				},
			};
			match outcome {
				Reveal::NotYet => continue,
				Reveal::Done => {},
				Reveal::Dropped(why) => {
					self.metrics.error("weights");
					tracing::warn!(epoch, reason = %why, "committed weights not revealed");
				},
			}
			if let Err(e) = self.commits.lock().remove_entry(&p) {
				self.metrics.error("weights");
				tracing::warn!(epoch, error = %e, "cannot update the commitment file");
			}
		}
	}

	/// One stored commitment's reveal step at best block `now`, reading chain state through `at` (the
	/// client pinned to that block). A commitment the chain does not hold yet is retried until the
	/// window closes (its commit may still be in the pool); one the chain holds with another value
	/// is dropped.
	///
	/// # Errors
	/// Chain reads or the extrinsic failed for a reason a later pass may not have (retried).
	pub async fn reveal(
		&self,
		at: &IotaClient,
		p: &Pending,
		run: &RunConfig,
		now: u32,
	) -> Result<Reveal, iota_chain::Error> {
		let (epoch, me) = (p.epoch, self.signer.account_id());
		let Some(completed_at) = at.epoch_completed_at(epoch).await? else {
			return Ok(Reveal::Dropped("the epoch is not complete on this chain".into()));
		};
		match window_of(run, completed_at, now) {
			WeightsWindow::Commit => return Ok(Reveal::NotYet),
			WeightsWindow::Closed => {
				return Ok(Reveal::Dropped("its reveal window passed".into()));
			},
			WeightsWindow::Reveal => {},
		}
		let w = match p.weights() {
			Ok(w) => w,
			Err(bad) => return Ok(Reveal::Dropped(format!("the stored vector names {bad:?}"))),
		};
		match at.weight_commit(epoch, &me).await? {
			None => return Ok(Reveal::NotYet),
			Some(c) if Some(c) != p.commitment(&me).ok() => {
				return Ok(Reveal::Dropped("it is not the chain's commitment".into()));
			},
			Some(_) => {},
		}
		let call = calls::reveal_weights(epoch, w.clone(), p.salt, p.version);
		match self.chain.submit_calls(&self.signer, vec![call], Wait::InBlock).await {
			Ok(_) => {
				self.metrics.revealed.inc();
				tracing::info!(epoch, miners = w.len(), "weights revealed");
				Ok(Reveal::Done)
			},
			Err(e) if e.pallet_error() == Some("AlreadyRevealed") => Ok(Reveal::Done),
			// Refusals a retry cannot change (a bad vector was committed, the epoch is finalized).
			Err(e) if e.pallet_error().is_some_and(|n| n != "NotRevealWindow") => {
				Ok(Reveal::Dropped(format!("the chain refused it: {e}")))
			},
			Err(e) => Err(e),
		}
	}
}

#[cfg(test)]
mod tests {
	use super::*;

	fn acc(b: u8) -> AccountId {
		AccountId::from([b; 32])
	}

	#[test]
	fn entries_survive_a_restart_and_keep_their_commitment() {
		let dir = tempfile::tempdir().unwrap();
		let me = acc(1);
		let w = vec![(acc(2), 3), (acc(3), 1)];
		let entry = CommitStore::prepare(4, &w, 1);
		let commitment = entry.commitment(&me).unwrap();
		assert_eq!(commitment, iota_primitives::weights_commitment(4, &me, &w, &entry.salt));
		{
			let mut store = CommitStore::open(dir.path(), &me).unwrap();
			assert!(store.pending().is_empty());
			assert_eq!(store.put(entry.clone()).unwrap(), None);
		}
		let mut store = CommitStore::open(dir.path(), &me).unwrap();
		assert_eq!(store.pending(), vec![entry.clone()]);
		assert_eq!(store.pending()[0].weights().unwrap(), w);
		assert_eq!(store.pending()[0].commitment(&me).unwrap(), commitment);
		// Another validator's store in the same folder is its own.
		assert!(CommitStore::open(dir.path(), &acc(9)).unwrap().pending().is_empty());
		assert_eq!(store.remove(4).unwrap(), Some(entry));
		assert!(CommitStore::open(dir.path(), &me).unwrap().pending().is_empty());
	}

	#[test]
	fn salts_are_fresh_and_a_failed_commit_is_undone() {
		let dir = tempfile::tempdir().unwrap();
		let me = acc(1);
		let w = vec![(acc(2), 1)];
		let (a, b) = (CommitStore::prepare(0, &w, 1), CommitStore::prepare(0, &w, 1));
		assert_ne!(a.salt, b.salt);
		assert_ne!(a.commitment(&me), b.commitment(&me));
		let mut store = CommitStore::open(dir.path(), &me).unwrap();
		store.put(a.clone()).unwrap();
		let earlier = store.put(b).unwrap();
		assert_eq!(earlier.as_ref(), Some(&a));
		store.restore(0, earlier).unwrap();
		assert_eq!(CommitStore::open(dir.path(), &me).unwrap().pending(), vec![a]);
		store.restore(0, None).unwrap();
		assert!(CommitStore::open(dir.path(), &me).unwrap().pending().is_empty());
	}

	#[test]
	fn a_reveal_removes_only_the_entry_it_revealed() {
		let dir = tempfile::tempdir().unwrap();
		let me = acc(1);
		let w = vec![(acc(2), 1)];
		let (old, new) = (CommitStore::prepare(3, &w, 1), CommitStore::prepare(3, &w, 1));
		let mut store = CommitStore::open(dir.path(), &me).unwrap();
		store.put(old.clone()).unwrap();
		// The daemon replaced the commitment while the revealer worked on the old one.
		store.put(new.clone()).unwrap();
		assert!(!store.remove_entry(&old).unwrap());
		assert_eq!(CommitStore::open(dir.path(), &me).unwrap().pending(), vec![new.clone()]);
		assert!(store.remove_entry(&new).unwrap());
		assert!(CommitStore::open(dir.path(), &me).unwrap().pending().is_empty());
		assert!(!store.remove_entry(&new).unwrap());
	}

	#[test]
	fn a_malformed_file_or_account_is_refused_by_name() {
		let dir = tempfile::tempdir().unwrap();
		let me = acc(1);
		let store = CommitStore::open(dir.path(), &me).unwrap();
		std::fs::create_dir_all(store.path().parent().unwrap()).unwrap();
		std::fs::write(store.path(), b"{not json").unwrap();
		let err = CommitStore::open(dir.path(), &me).unwrap_err();
		assert!(matches!(err, StoreError::Malformed { .. }), "{err}");
		let mut bad = CommitStore::prepare(0, &[(acc(2), 1)], 1);
		bad.weights[0].0 = "not-an-address".into();
		assert_eq!(bad.weights().unwrap_err(), "not-an-address");
	}
}
