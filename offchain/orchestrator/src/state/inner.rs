//! Local mode's inner-step trail (docs/design.md §10): the state hashes each miner reports after its inner
//! steps, and the inner step every accepted pass ran at. The pathway log carries both, so a validator
//! can challenge any inner step after the epoch and check it by recomputation.
//!
//! Rules (each a refusal of the request, never a change of state):
//! - reports of (epoch, stage, miner) come in order: state 0 (what the epoch began with), then one per
//!   inner step; state `k + 1` only after `accumulate` backward passes ran at state `k` (at least one
//!   for the last step, flushed once the merge's uploads are open); repeating a reported hash is
//!   accepted and records nothing, another hash for a reported step is refused;
//! - a pass names the state it ran at: one already reported, never earlier than a pass the miner
//!   submitted before, and at most `accumulate` backward passes (tail forwards included) per state;
//! - the pseudo-gradient is accepted only once the state after the last backward pass is reported (its
//!   weight, as in sync mode, at most the backward passes accepted: [`State::check_gradient`]); after it
//!   the trail is closed.

use iota_protocol::selection::INNER_CHALLENGES;

use super::*;

/// One challenged inner step of a trail.
#[derive(Clone, Debug, PartialEq)]
pub struct Challenge {
	/// `k`: the step from state `k` to state `k + 1`.
	pub step: u32,
	/// `(j, reported hash of state j)` for every state the challenge reveals, ascending
	/// ([`PathwayLog::revealed_states`]: `k`, `k + 1` and the earlier states its passes' forwards ran at).
	pub states: Vec<(u32, ContentHash)>,
}

/// Epochs of challenges (and seeds) kept before the newest seeded one.
const KEPT_CHALLENGE_EPOCHS: u32 = 4;

/// One miner's inner steps at one stage in one epoch.
#[derive(Clone, Debug, PartialEq)]
pub struct InnerTrail {
	/// The miner.
	pub miner: AccountId,
	/// `hashes[k]`: the reported hash of its state after `k` inner steps.
	pub hashes: Vec<ContentHash>,
	/// The latest state an accepted pass ran at.
	pub last_step: u32,
	/// Backward passes accepted at `last_step`.
	pub backwards_at_last: u32,
	/// The pseudo-gradient was accepted, or the miner restarted: no more reports or passes.
	pub closed: bool,
	/// Closed by the miner's restart ([`Event::SessionStarted`]): its later process waits for the
	/// next epoch.
	pub restarted: bool,
}

/// Key of a trail: (epoch, stage, account bytes).
pub(super) type TrailKey = (u32, u16, [u8; 32]);

impl State {
	/// Whether the run trains in local mode (passes carry inner steps).
	pub fn local_mode(&self) -> bool {
		self.cfg.accumulate.is_some()
	}

	/// The trail of `miner` at `stage` in `epoch`, if it reported anything.
	pub fn inner_trail(&self, epoch: u32, stage: u16, miner: &AccountId) -> Option<&InnerTrail> {
		self.inner.get(&(epoch, stage, miner.0))
	}

	/// Check `iota_reportInnerStep`: `Ok(Some(event))` records the report, `Ok(None)` is a repeat of a
	/// reported hash (nothing to record).
	///
	/// Errors: `WrongPhase` (sync mode; the stage is not in `epoch`; the trail is closed by the
	/// pseudo-gradient); `Invalid` (a step out of order, a step without a backward pass at the state
	/// before it or with fewer than `accumulate` before the merge, another hash for a reported step).
	pub fn check_inner_report(
		&self,
		miner: &AccountId,
		stage: u16,
		epoch: u32,
		step: u32,
		state_hash: ContentHash,
	) -> Result<Option<Event>, Refusal> {
		if !self.local_mode() {
			return refuse(ErrorCode::WrongPhase, "sync mode has no inner steps to report");
		}
		let st = self
			.stages
			.get(usize::from(stage))
			.ok_or_else(|| Refusal::new(ErrorCode::WrongStage, format!("no stage {stage}")))?;
		if st.epoch != epoch {
			return refuse(
				ErrorCode::WrongPhase,
				format!("stage {stage} is in epoch {}, not {epoch}", st.epoch),
			);
		}
		let trail = self.inner_trail(epoch, stage, miner);
		if trail.is_some_and(|t| t.restarted) {
			return refuse(
				ErrorCode::WrongPhase,
				format!("your inner-step trail of epoch {epoch} ended with your restart"),
			);
		}
		if trail.is_some_and(|t| t.closed) {
			return refuse(
				ErrorCode::WrongPhase,
				format!("your pseudo-gradient of epoch {epoch} is in; its states are fixed"),
			);
		}
		let hashes = trail.map_or(&[][..], |t| &t.hashes[..]);
		match hashes.get(step as usize) {
			Some(h) if *h == state_hash => return Ok(None),
			Some(h) => {
				return refuse(
					ErrorCode::Invalid,
					format!("inner step {step} was reported with another hash ({h})"),
				)
			},
			None if step as usize != hashes.len() => {
				return refuse(
					ErrorCode::Invalid,
					format!("inner step {step} out of order: {} states reported", hashes.len()),
				)
			},
			None => {},
		}
		if step > 0 && !trail.is_some_and(|t| t.last_step + 1 == step && t.backwards_at_last > 0) {
			return refuse(
				ErrorCode::Invalid,
				format!("inner step {step}: no backward pass ran at state {}", step - 1),
			);
		}
		// An inner step takes `accumulate` backward passes; only the last one, flushed when the merge
		// begins (uploads open), may take fewer.
		let accumulate = self.cfg.accumulate.unwrap_or(1);
		if step > 0
			&& trail.is_some_and(|t| t.backwards_at_last < accumulate)
			&& !self.uploads_open(st)
		{
			return refuse(
				ErrorCode::Invalid,
				format!(
					"inner step {step} took fewer than {accumulate} backward passes before the merge"
				),
			);
		}
		Ok(Some(Event::InnerStepReported { stage, epoch, miner: miner.clone(), step, state_hash }))
	}

	/// The inner-step part of `iota_submitActivation`'s check for lease `l`.
	///
	/// Errors: `Invalid` (sync mode: a step other than 0; local mode: a state not reported, earlier than
	/// a pass already submitted, more than `accumulate` backward passes at one state, a closed trail).
	pub(super) fn check_pass_step(&self, l: &Lease, inner_step: u32) -> Result<(), Refusal> {
		let Some(accumulate) = self.cfg.accumulate else {
			if inner_step != 0 {
				return refuse(ErrorCode::Invalid, "sync mode: a pass's inner step is 0");
			}
			return Ok(());
		};
		let trail = self.inner_trail(l.epoch, l.stage, &l.miner);
		let reported = trail.map_or(0, |t| t.hashes.len());
		if inner_step as usize >= reported {
			return refuse(
				ErrorCode::Invalid,
				format!("report the state of inner step {inner_step} first ({reported} reported)"),
			);
		}
		let Some(t) = trail else { return Ok(()) };
		if t.restarted {
			return refuse(
				ErrorCode::WrongPhase,
				"your inner-step trail of this epoch ended with your restart; wait for the next epoch",
			);
		}
		if t.closed {
			return refuse(ErrorCode::Invalid, "your pseudo-gradient of this epoch is already in");
		}
		if inner_step < t.last_step {
			return refuse(
				ErrorCode::Invalid,
				format!("inner step {inner_step} is before {}, of a pass already in", t.last_step),
			);
		}
		if self.is_backward(l) && inner_step == t.last_step && t.backwards_at_last >= accumulate {
			return refuse(
				ErrorCode::Invalid,
				format!("{accumulate} backward passes already ran at inner step {inner_step}"),
			);
		}
		Ok(())
	}

	/// Local mode's part of `iota_submitGradient`'s check: the trail covers every accepted backward
	/// pass of the miner (its weight is bounded in [`State::check_gradient`], as in sync mode).
	///
	/// Errors: `Invalid` (no states reported, the state after the last backward pass not reported).
	pub(super) fn check_trail_complete(
		&self,
		miner: &AccountId,
		stage: u16,
		epoch: u32,
	) -> Result<(), Refusal> {
		if !self.local_mode() {
			return Ok(());
		}
		let Some(t) = self.inner_trail(epoch, stage, miner) else {
			return refuse(ErrorCode::Invalid, "no inner-step states reported this epoch");
		};
		let need = t.last_step as usize + 1 + usize::from(t.backwards_at_last > 0);
		if t.hashes.len() < need {
			return refuse(
				ErrorCode::Invalid,
				format!("report the state after inner step {} first", t.last_step),
			);
		}
		Ok(())
	}

	/// Whether lease `l`'s pass feeds the miner's parameter gradient (a backward, or the tail's forward).
	pub(super) fn is_backward(&self, l: &Lease) -> bool {
		l.kind == WorkKind::Backward || l.stage == self.tail()
	}

	pub(super) fn apply_inner_report(
		&mut self,
		stage: u16,
		epoch: u32,
		miner: &AccountId,
		step: u32,
		state_hash: ContentHash,
	) {
		let t = self.inner.entry((epoch, stage, miner.0)).or_insert_with(|| InnerTrail {
			miner: miner.clone(),
			hashes: Vec::new(),
			last_step: 0,
			backwards_at_last: 0,
			closed: false,
			restarted: false,
		});
		if t.hashes.len() == step as usize && !t.closed {
			t.hashes.push(state_hash);
		}
	}

	/// An accepted pass of lease `l` ran at `inner_step` (local mode).
	pub(super) fn apply_pass_step(&mut self, l: &Lease, inner_step: u32) {
		if !self.local_mode() {
			return;
		}
		let backward = self.is_backward(l);
		let Some(t) = self.inner.get_mut(&(l.epoch, l.stage, l.miner.0)) else { return };
		if inner_step > t.last_step {
			t.last_step = inner_step;
			t.backwards_at_last = 0;
		}
		if backward {
			t.backwards_at_last += 1;
		}
	}

	/// The pseudo-gradient of (epoch, stage, miner) was accepted: its trail is closed.
	pub(super) fn close_trail(&mut self, stage: u16, epoch: u32, miner: &AccountId) {
		if let Some(t) = self.inner.get_mut(&(epoch, stage, miner.0)) {
			t.closed = true;
		}
	}

	/// The pathway log's `inner_states` of `epoch`: every trail, sorted by stage then account.
	pub(super) fn inner_states(&self, epoch: u32) -> Vec<iota_rpc::InnerStates> {
		self.inner
			.range((epoch, 0, [0; 32])..=(epoch, u16::MAX, [u8::MAX; 32]))
			.map(|((_, stage, _), t)| iota_rpc::InnerStates {
				stage: *stage,
				miner: t.miner.clone(),
				hashes: t.hashes.clone(),
			})
			.collect()
	}

	/// Epochs whose challenge seed the driver should look for: local mode, trails kept, no seed yet,
	/// and every stage past the epoch (it can only have completed then).
	pub fn challenge_seeds_due(&self) -> Vec<u32> {
		if !self.local_mode() {
			return Vec::new();
		}
		let oldest = self.stages.iter().map(|s| s.epoch).min().unwrap_or(0);
		let epochs: BTreeSet<u32> = self.inner.keys().map(|k| k.0).collect();
		epochs
			.into_iter()
			.filter(|e| *e < oldest && !self.challenge_seeds.contains_key(e))
			.collect()
	}

	/// Epochs whose challenges are drawn (and kept), ascending.
	pub fn challenged_epochs(&self) -> Vec<u32> {
		self.challenge_seeds.keys().copied().collect()
	}

	/// The bucket keys of every state the challenges of `epoch` reveal (each once), in key order (what a
	/// clean-up of an epoch's reveals would delete; nothing deletes them yet, docs/design.md §10).
	pub fn revealed_keys(&self, epoch: u32) -> Vec<String> {
		let mut keys = BTreeSet::new();
		for ((_, stage, account), cs) in
			self.challenges.range((epoch, 0, [0; 32])..=(epoch, u16::MAX, [u8::MAX; 32]))
		{
			let me = miner_id(&AccountId::from(*account));
			for c in cs {
				for (j, _) in &c.states {
					keys.insert(keys::inner_state(
						&self.cfg.run,
						u64::from(epoch),
						u32::from(*stage),
						*j,
						&me,
					));
				}
			}
		}
		keys.into_iter().collect()
	}

	/// The challenged steps of `miner` at `stage` in `epoch` with the states each reveals: `Ok(None)`
	/// while the seed is unknown.
	///
	/// Errors: `WrongPhase` (sync mode), `Unknown` (no states of the miner there, or no longer kept).
	pub fn challenges_of(
		&self,
		miner: &AccountId,
		stage: u16,
		epoch: u32,
	) -> Result<Option<Vec<Challenge>>, Refusal> {
		if !self.local_mode() {
			return refuse(ErrorCode::WrongPhase, "sync mode has no inner-step challenges");
		}
		if let Some(c) = self.challenges.get(&(epoch, stage, miner.0)) {
			return Ok(Some(c.clone()));
		}
		if self.challenge_seeds.contains_key(&epoch)
			|| self.inner_trail(epoch, stage, miner).is_none()
		{
			return refuse(
				ErrorCode::Unknown,
				format!("no inner states of yours at stage {stage} in epoch {epoch} are kept"),
			);
		}
		Ok(None)
	}

	/// The challenge seed of `epoch` is known: draw every kept trail's challenges
	/// ([`iota_protocol::selection::inner_step_challenges`]: the last step and [`INNER_CHALLENGES`]
	/// drawn ones each), each revealing the states [`PathwayLog::revealed_states`] names (the epoch's
	/// samples are kept until then, [`drop_samples_if_done`](Self::drop_samples_if_done)).
	pub(super) fn apply_challenge_seed(&mut self, epoch: u32, seed: [u8; 32]) {
		self.challenge_seeds.insert(epoch, seed);
		let log = self.pathway_log(epoch);
		let drawn: Vec<(TrailKey, Vec<Challenge>)> = self
			.inner
			.range((epoch, 0, [0; 32])..=(epoch, u16::MAX, [u8::MAX; 32]))
			.map(|(key, t)| {
				let steps = iota_protocol::selection::inner_step_challenges(
					&seed,
					epoch,
					key.1,
					&key.2,
					t.hashes.len() as u32,
					INNER_CHALLENGES,
				);
				let c = steps
					.into_iter()
					.map(|k| Challenge {
						step: k,
						states: log
							.revealed_states(key.1, &t.miner, k)
							.into_iter()
							.filter_map(|j| Some((j, *t.hashes.get(j as usize)?)))
							.collect(),
					})
					.collect();
				(*key, c)
			})
			.collect();
		self.challenges.extend(drawn);
		// Challenges and seeds of the last few epochs only.
		let keep_from = epoch.saturating_sub(KEPT_CHALLENGE_EPOCHS);
		self.challenges.retain(|k, _| k.0 >= keep_from);
		self.challenge_seeds.retain(|e, _| *e >= keep_from);
		if self.audits.get(&epoch).is_some_and(|a| a.pathway_log.is_some()) {
			self.drop_trails(epoch);
		}
		self.drop_samples_if_done(epoch);
	}

	/// Forget the samples of `epoch` once they are in its written pathway log and, in local mode, its
	/// challenges are drawn (which read the passes of every challenged step from them). A sample still
	/// leased stays.
	pub(super) fn drop_samples_if_done(&mut self, epoch: u32) {
		let written = self.audits.get(&epoch).is_some_and(|a| a.pathway_log.is_some());
		if !written || (self.local_mode() && !self.challenge_seeds.contains_key(&epoch)) {
			return;
		}
		let q = u64::from(self.cfg.backward_quota);
		let (lo, hi) = (u64::from(epoch) * q, u64::from(epoch + 1) * q);
		let done: Vec<u64> = self.samples.range(lo..hi).map(|(k, _)| *k).collect();
		let busy: BTreeSet<u64> = self.leases.values().map(|l| l.sample).collect();
		for k in done {
			if !busy.contains(&k) {
				self.samples.remove(&k);
			}
		}
	}

	/// Forget the trails of `epoch` once they are in its pathway log and its challenges are drawn.
	pub(super) fn drop_trails_if_done(&mut self, epoch: u32) {
		if self.challenge_seeds.contains_key(&epoch) {
			self.drop_trails(epoch);
		}
	}

	/// Forget the trails of `epoch`.
	fn drop_trails(&mut self, epoch: u32) {
		let keys: Vec<TrailKey> = self
			.inner
			.range((epoch, 0, [0; 32])..=(epoch, u16::MAX, [u8::MAX; 32]))
			.map(|(k, _)| *k)
			.collect();
		for k in keys {
			self.inner.remove(&k);
		}
	}
}
