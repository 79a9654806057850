//! What a local-mode miner keeps to answer inner-step challenges (docs/design.md §10): per epoch, the
//! state it began with and the mean gradient of every inner step, on disk. Any reported state `k` is
//! then rebuilt exactly by replaying `k` steps ([`iota_protocol::optim::InnerState::step`], plain f32 in
//! a fixed order), so the miner needs `12·P + 8` bytes for the start and `4·P` bytes per inner step
//! instead of a full `12·P`-byte state per step.
//!
//! Which epochs are kept is the miner's call ([`InnerLog::begin`]): the one being trained and every
//! earlier one whose challenges are still to be answered. Those come once the epoch has completed and
//! its block is final, which is a matter of blocks, not epochs: with short epochs and a lagging chain
//! many epochs can wait (a rule of "the last few epochs" gave up on reveals that were still due).
//!
//! The log outlives a crash of its process: a miner restarted in the same run ([`InnerLog::open`]) finds
//! the epochs its earlier process kept and answers their challenges, the epoch it was training included
//! (the orchestrator ended that trail at the restart and the validators still challenge it). Files are
//! written under a temporary name and renamed, so a kill mid-write leaves no partial step behind.
//!
//! The disk used is bounded: [`InnerLog::new`]'s `max_bytes` over every epoch kept. A new epoch makes
//! room by dropping the oldest waiting ones; an inner step that would pass the bound is not kept, and
//! nor is any later one of its epoch. States that cannot be rebuilt leave their challenges unanswered
//! (a `Fail`, the miner's choice of disk against risk).

use std::collections::BTreeMap;
use std::path::PathBuf;

use iota_protocol::optim::{InnerState, StepOptions};

use crate::error::{MinerError, Result};

/// One epoch's kept trajectory.
#[derive(Debug)]
struct Trail {
	/// Inner steps whose mean gradient is on disk (steps `0..kept`).
	kept: u32,
	/// An inner step was dropped by the bound: nothing after it is kept.
	truncated: bool,
	/// Bytes on disk.
	bytes: u64,
	/// Left by an earlier process of the miner ([`InnerLog::open`]): kept to answer its challenges, never
	/// written to again.
	reopened: bool,
}

/// The file naming the run a log folder belongs to.
const RUN_FILE: &str = "run";

/// The per-epoch trajectories of one stage replica (module docs).
#[derive(Debug)]
pub struct InnerLog {
	dir: PathBuf,
	max_bytes: u64,
	epochs: BTreeMap<u32, Trail>,
	/// Opened for a run ([`InnerLog::open`]): the folder outlives the process while it keeps an epoch.
	/// A log made with [`InnerLog::new`] takes its folder with it.
	persistent: bool,
}

fn io_err(what: &str, path: &std::path::Path, e: std::io::Error) -> MinerError {
	MinerError::BadInput(format!("inner-step log: {what} {}: {e}", path.display()))
}

impl InnerLog {
	/// A log under `dir` (created; files of earlier runs in it are removed) using at most `max_bytes`.
	///
	/// # Errors
	/// [`MinerError::BadInput`] if the directory cannot be created or cleared.
	pub fn new(dir: PathBuf, max_bytes: u64) -> Result<Self> {
		if dir.exists() {
			std::fs::remove_dir_all(&dir).map_err(|e| io_err("clearing", &dir, e))?;
		}
		std::fs::create_dir_all(&dir).map_err(|e| io_err("creating", &dir, e))?;
		Ok(InnerLog { dir, max_bytes, epochs: BTreeMap::new(), persistent: false })
	}

	/// The log in `dir` of run `run`, using at most `max_bytes`, and the epochs an earlier process of the
	/// miner left there (ascending): a folder of the same run keeps every epoch whose start and first `k`
	/// steps are whole (anything after a partial file is removed), oldest dropped first past the bound;
	/// any other folder is cleared as [`new`](Self::new) does.
	///
	/// # Errors
	/// [`MinerError::BadInput`] if the directory cannot be read, created or cleared.
	pub fn open(dir: PathBuf, max_bytes: u64, run: &str) -> Result<(Self, Vec<u32>)> {
		let same_run = std::fs::read_to_string(dir.join(RUN_FILE)).is_ok_and(|r| r == run);
		if !same_run {
			let mut log = Self::new(dir, max_bytes)?;
			log.persistent = true;
			let path = log.dir.join(RUN_FILE);
			std::fs::write(&path, run).map_err(|e| io_err("writing", &path, e))?;
			return Ok((log, Vec::new()));
		}
		let mut log = InnerLog { dir, max_bytes, epochs: BTreeMap::new(), persistent: true };
		let entries = std::fs::read_dir(&log.dir).map_err(|e| io_err("reading", &log.dir, e))?;
		let mut starts = Vec::new();
		let mut files = Vec::new();
		for entry in entries.flatten() {
			let name = entry.file_name().to_string_lossy().into_owned();
			if let Some(e) = name.strip_prefix('e').and_then(|n| n.strip_suffix("-start.bin")) {
				if let Ok(e) = e.parse::<u32>() {
					starts.push(e);
				}
			}
			if name != RUN_FILE {
				files.push(entry.path());
			}
		}
		let size = |p: &std::path::Path| std::fs::metadata(p).map(|m| m.len()).ok();
		for epoch in starts {
			let Some(start) = size(&log.start_path(epoch)) else { continue };
			if start < 8 || (start - 8) % 12 != 0 {
				continue;
			}
			let p = (start - 8) / 12;
			let mut kept = 0u32;
			while size(&log.grad_path(epoch, kept)) == Some(4 * p) {
				kept += 1;
			}
			let bytes = start + 4 * p * u64::from(kept);
			log.epochs.insert(epoch, Trail { kept, truncated: true, bytes, reopened: true });
		}
		// Whatever no kept epoch names (partial writes, steps after a gap) goes.
		let mut named: std::collections::BTreeSet<PathBuf> = std::collections::BTreeSet::new();
		for (e, t) in &log.epochs {
			named.insert(log.start_path(*e));
			named.extend((0..t.kept).map(|k| log.grad_path(*e, k)));
		}
		for f in files.into_iter().filter(|f| !named.contains(f)) {
			let _ = std::fs::remove_file(f);
		}
		while log.bytes() > log.max_bytes {
			let Some(&oldest) = log.epochs.keys().next() else { break };
			log.forget(oldest);
		}
		let epochs: Vec<u32> = log.epochs.keys().copied().collect();
		if !epochs.is_empty() {
			tracing::info!(
				?epochs,
				bytes = log.bytes(),
				"inner-step log: epochs of an earlier process kept for their challenges"
			);
		}
		Ok((log, epochs))
	}

	/// Writes `bytes` to `path` whole or not at all (a temporary file renamed).
	fn write_whole(path: &std::path::Path, bytes: &[u8]) -> std::io::Result<()> {
		let tmp = path.with_extension("tmp");
		std::fs::write(&tmp, bytes)?;
		std::fs::rename(&tmp, path)
	}

	fn start_path(&self, epoch: u32) -> PathBuf {
		self.dir.join(format!("e{epoch}-start.bin"))
	}

	fn grad_path(&self, epoch: u32, step: u32) -> PathBuf {
		// The one name of a step's file (`record` spells it too, under a borrow of its trail).
		self.dir.join(format!("e{epoch}-g{step}.f32"))
	}

	/// Bytes on disk over every kept epoch.
	pub fn bytes(&self) -> u64 {
		self.epochs.values().map(|t| t.bytes).sum()
	}

	/// Whether `epoch`'s trajectory is kept (not dropped for room or by [`begin`](Self::begin)).
	pub fn keeps(&self, epoch: u32) -> bool {
		self.epochs.contains_key(&epoch)
	}

	/// Epoch `epoch` begins at `start`: keep it and, of the epochs before it, those `waiting` names
	/// (their challenges are still to be answered); drop every other one. An epoch an earlier process
	/// left ([`open`](Self::open)) is kept as it is, `epoch` included: that trail is the one the
	/// orchestrator holds and challenges (the miner sits the rest of the epoch out). When the bound leaves no room
	/// for the new start, the oldest waiting epochs are dropped first (their challenges then go
	/// unanswered: the newest epochs are the ones whose reveals are still most likely to be asked).
	///
	/// # Errors
	/// [`MinerError::BadInput`] for a failed write. The epoch is then not kept (its challenges go
	/// unanswered); training goes on.
	pub fn begin(
		&mut self,
		epoch: u32,
		start: &InnerState,
		waiting: &dyn Fn(u32) -> bool,
	) -> Result<()> {
		let old: Vec<u32> = self
			.epochs
			.iter()
			.filter(|(e, t)| if **e >= epoch { !t.reopened } else { !waiting(**e) })
			.map(|(e, _)| *e)
			.collect();
		for e in old {
			self.forget(e);
		}
		if self.epochs.get(&epoch).is_some_and(|t| t.reopened) {
			return Ok(());
		}
		let bytes = start.to_bytes();
		let len = bytes.len() as u64;
		while self.bytes() + len > self.max_bytes {
			let Some(&oldest) = self.epochs.keys().next() else { break };
			tracing::warn!(
				epoch = oldest,
				"inner-step log full: an epoch waiting for its challenges is dropped"
			);
			self.forget(oldest);
		}
		if self.bytes() + len > self.max_bytes {
			tracing::warn!(
				epoch,
				bytes = len,
				max = self.max_bytes,
				"inner-step log full: epoch not kept"
			);
			return Ok(());
		}
		let path = self.start_path(epoch);
		Self::write_whole(&path, &bytes).map_err(|e| io_err("writing", &path, e))?;
		self.epochs
			.insert(epoch, Trail { kept: 0, truncated: false, bytes: len, reopened: false });
		Ok(())
	}

	/// Inner step `step` of `epoch` applies `mean_grad` (the mean before clipping, as the step takes it).
	///
	/// # Errors
	/// [`MinerError::BadInput`] for a failed write (the epoch's later steps are then not kept).
	pub fn record(&mut self, epoch: u32, step: u32, mean_grad: &[f32]) -> Result<()> {
		let total = self.bytes();
		let max = self.max_bytes;
		let Some(t) = self.epochs.get_mut(&epoch) else { return Ok(()) };
		if t.truncated || t.kept != step {
			t.truncated = true;
			return Ok(());
		}
		let len = 4 * mean_grad.len() as u64;
		if total + len > max {
			t.truncated = true;
			tracing::warn!(
				epoch,
				step,
				max,
				"inner-step log full: later states of the epoch cannot be revealed"
			);
			return Ok(());
		}
		let path = self.dir.join(format!("e{epoch}-g{step}.f32"));
		if let Err(e) = Self::write_whole(&path, &iota_protocol::f32le::as_bytes(mean_grad)) {
			t.truncated = true;
			return Err(io_err("writing", &path, e));
		}
		t.kept += 1;
		t.bytes += len;
		Ok(())
	}

	/// The states after `k` inner steps of `epoch` for every `k` of `ks` (ascending, as a
	/// [`BTreeSet`](std::collections::BTreeSet) gives them), rebuilt from the kept start by one replay of
	/// `max(ks)` steps with the stage's `decay` mask, the epoch's step options and the model's
	/// `total_params`. One replay serves every challenged step of an epoch: replaying from the start for
	/// each state took up to `Σ k` steps instead of `max k` (the devnet's reveals took 10-20 s each so).
	///
	/// # Errors
	/// [`MinerError::BadInput`] when a state is not kept (another epoch, past the bound) or a file
	/// cannot be read; [`MinerError::Model`] if a replayed step is refused.
	pub fn states_at(
		&self,
		epoch: u32,
		ks: &std::collections::BTreeSet<u32>,
		decay: &[bool],
		opts: &StepOptions,
		total_params: usize,
	) -> Result<BTreeMap<u32, InnerState>> {
		let t = self.epochs.get(&epoch).ok_or_else(|| {
			MinerError::BadInput(format!("epoch {epoch}'s inner steps are not kept"))
		})?;
		let Some(&last) = ks.last() else { return Ok(BTreeMap::new()) };
		if last > t.kept {
			return Err(MinerError::BadInput(format!(
				"state {last} of epoch {epoch} is past the {} inner steps kept",
				t.kept
			)));
		}
		let p = decay.len();
		let path = self.start_path(epoch);
		let bytes = std::fs::read(&path).map_err(|e| io_err("reading", &path, e))?;
		let mut s = InnerState::from_bytes(&bytes, p).map_err(iota_model::Error::from)?;
		let mut out = BTreeMap::new();
		for i in 0..=last {
			if ks.contains(&i) {
				out.insert(i, s.clone());
			}
			if i == last {
				break;
			}
			let path = self.grad_path(epoch, i);
			let bytes = std::fs::read(&path).map_err(|e| io_err("reading", &path, e))?;
			let g = iota_protocol::f32le::from_bytes(&bytes)
				.map_err(|e| MinerError::BadInput(format!("{}: {e}", path.display())))?;
			s.step(&g, decay, opts, total_params).map_err(iota_model::Error::from)?;
		}
		Ok(out)
	}

	fn forget(&mut self, epoch: u32) {
		if let Some(t) = self.epochs.remove(&epoch) {
			let _ = std::fs::remove_file(self.start_path(epoch));
			for i in 0..t.kept {
				let _ = std::fs::remove_file(self.grad_path(epoch, i));
			}
		}
	}
}

/// At exit the folder of an [`InnerLog::open`]ed log goes only when it keeps no epoch: one that does
/// may still be challenged, and a miner restarted in the same run answers from it. A log made with
/// [`InnerLog::new`] takes its folder with it.
impl Drop for InnerLog {
	fn drop(&mut self) {
		if !self.persistent || self.epochs.is_empty() {
			let _ = std::fs::remove_dir_all(&self.dir);
		}
	}
}

#[cfg(test)]
mod tests {
	use super::*;
	use iota_protocol::optim::AdamState;

	fn state(p: usize) -> InnerState {
		InnerState { weights: (0..p).map(|i| i as f32 * 0.01).collect(), adam: AdamState::new(p) }
	}

	#[test]
	fn replay_rebuilds_every_kept_state_bit_for_bit_within_the_bound() {
		let p = 64;
		let dir = std::env::temp_dir().join(format!("iota-inner-test-{}", std::process::id()));
		// Room for the start and two steps only.
		let mut log = InnerLog::new(dir.clone(), (8 + 12 * p + 2 * 4 * p) as u64).unwrap();
		let decay = vec![true; p];
		let opts = StepOptions::default();
		let mut live = state(p);
		log.begin(3, &live, &|_| false).unwrap();
		let mut hashes = vec![live.hash()];
		for k in 0..3u32 {
			let g: Vec<f32> = (0..p).map(|i| ((i as u32 + k) as f32).sin()).collect();
			log.record(3, k, &g).unwrap();
			live.step(&g, &decay, &opts, 4 * p).unwrap();
			hashes.push(live.hash());
		}
		let at = |e: u32, ks: &[u32]| {
			log.states_at(e, &ks.iter().copied().collect(), &decay, &opts, 4 * p)
		};
		let all = at(3, &[0, 1, 2]).unwrap();
		assert_eq!(all.len(), 3);
		for (k, s) in &all {
			assert_eq!(s.hash(), hashes[*k as usize], "state {k}");
		}
		assert_eq!(at(3, &[2]).unwrap()[&2].hash(), hashes[2], "a state alone");
		assert!(at(3, &[]).unwrap().is_empty());
		assert!(at(3, &[0, 3]).is_err(), "the third step passed the bound");
		assert!(at(2, &[0]).is_err(), "another epoch");
		assert!(log.bytes() <= (8 + 12 * p + 2 * 4 * p) as u64);
		// Full: a new epoch drops the oldest waiting one to make room.
		log.begin(4, &live, &|w| w == 3).unwrap();
		assert!(!log.keeps(3) && log.keeps(4), "the waiting epoch made room");
		assert!(log.bytes() <= (8 + 12 * p + 2 * 4 * p) as u64);
		drop(log);
		assert!(!dir.exists(), "a log made with `new` takes its folder with it");

		// With room, later epochs keep an epoch while it waits for its challenges, however many go by;
		// once it no longer waits the next epoch drops it.
		let mut log = InnerLog::new(dir.clone(), 1 << 20).unwrap();
		log.begin(3, &live, &|_| false).unwrap();
		log.record(3, 0, &vec![0.5; p]).unwrap();
		for e in 4..20 {
			log.begin(e, &live, &|w| w == 3).unwrap();
			assert!(log.keeps(3), "kept in epoch {e}");
		}
		assert!(log.states_at(3, &[1].into(), &decay, &opts, 4 * p).is_ok());
		log.begin(20, &live, &|_| false).unwrap();
		assert!(!log.keeps(3) && !log.keeps(19) && log.keeps(20));
		assert!(log.states_at(3, &[0].into(), &decay, &opts, 4 * p).is_err());
		drop(log);
		assert!(!dir.exists(), "the log's files go with it");
	}

	#[test]
	fn a_restarted_miner_finds_what_its_earlier_process_kept_and_replays_it() {
		let p = 32;
		let dir = std::env::temp_dir().join(format!("iota-inner-reopen-{}", std::process::id()));
		let decay = vec![true; p];
		let opts = StepOptions::default();
		let (mut log, found) = InnerLog::open(dir.clone(), 1 << 20, "run-a").unwrap();
		assert!(found.is_empty(), "a fresh folder");
		let mut live = state(p);
		let mut hashes = Vec::new();
		for e in [4u32, 5] {
			log.begin(e, &live, &|w| w == 4).unwrap();
			hashes.push(vec![live.hash()]);
			for k in 0..3u32 {
				let g: Vec<f32> = (0..p).map(|i| ((i as u32 * 3 + k + e) as f32).cos()).collect();
				log.record(e, k, &g).unwrap();
				live.step(&g, &decay, &opts, 4 * p).unwrap();
				hashes.last_mut().unwrap().push(live.hash());
			}
		}
		// Killed (no drop runs), with step 2 of epoch 5 half written and a stray temporary file.
		std::mem::forget(log);
		let g2 = dir.join("e5-g2.f32");
		let whole = std::fs::read(&g2).unwrap();
		std::fs::write(&g2, &whole[..whole.len() / 2]).unwrap();
		std::fs::write(dir.join("e5-g3.tmp"), b"partial").unwrap();

		let (mut log, found) = InnerLog::open(dir.clone(), 1 << 20, "run-a").unwrap();
		assert_eq!(found, vec![4, 5]);
		let at = |log: &InnerLog, e: u32, ks: &[u32]| {
			log.states_at(e, &ks.iter().copied().collect(), &decay, &opts, 4 * p)
		};
		for (i, e) in [4u32, 5].into_iter().enumerate() {
			let whole_steps: &[u32] = if e == 4 { &[0, 1, 2, 3] } else { &[0, 1, 2] };
			for (k, s) in at(&log, e, whole_steps).unwrap() {
				assert_eq!(s.hash(), hashes[i][k as usize], "epoch {e} state {k}");
			}
		}
		assert!(at(&log, 5, &[3]).is_err(), "the step after the partial write is gone");
		assert!(!g2.exists() && !dir.join("e5-g3.tmp").exists(), "partial files removed");
		// The epoch it was training (5) is kept as it was: no new start, no more steps.
		log.begin(5, &state(p), &|_| true).unwrap();
		log.record(5, 2, &vec![1.0; p]).unwrap();
		assert_eq!(at(&log, 5, &[2]).unwrap()[&2].hash(), hashes[1][2]);
		assert!(at(&log, 5, &[3]).is_err());
		// The next epoch drops what no longer waits for its challenges.
		log.begin(6, &live, &|w| w == 5).unwrap();
		assert!(!log.keeps(4) && log.keeps(5) && log.keeps(6));
		drop(log);
		assert!(dir.exists(), "an opened log that keeps epochs stays for a restarted miner");
		// Another run's miner clears the folder.
		let (log, found) = InnerLog::open(dir.clone(), 1 << 20, "run-b").unwrap();
		assert!(found.is_empty() && !log.keeps(5));
		drop(log);
		assert!(!dir.exists());
	}
}
