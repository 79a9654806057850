//! Merge bookkeeping per stage and round: gradient submissions, the plan, reduced shard copies,
//! state-hash attestations and the commit plan.

use super::*;

impl State {
	/// `stage`, if it is in `epoch`. Errors: `WrongStage` (no such stage), `Unknown` (another epoch).
	fn stage_in_epoch(&self, stage: u16, epoch: u32) -> Result<&StageState, Refusal> {
		let st = self
			.stages
			.get(usize::from(stage))
			.ok_or_else(|| Refusal::new(ErrorCode::WrongStage, format!("no stage {stage}")))?;
		if epoch != st.epoch {
			return refuse(
				ErrorCode::Unknown,
				format!("stage {stage} is in epoch {}, not {epoch}", st.epoch),
			);
		}
		Ok(st)
	}

	pub(super) fn merging_stage(
		&self,
		stage: u16,
		epoch: u32,
		phase: Phase,
	) -> Result<&StageState, Refusal> {
		let st = self.stage_in_epoch(stage, epoch)?;
		if st.phase != phase {
			return refuse(
				ErrorCode::WrongPhase,
				format!("stage {stage} is {:?}, not {phase:?}", st.phase),
			);
		}
		Ok(st)
	}

	/// The key a miner's gradient submission goes to.
	pub fn gradient_key(&self, stage: u16, epoch: u32, miner: &AccountId) -> String {
		keys::gradient_submission(
			&self.cfg.run,
			u64::from(epoch),
			u32::from(stage),
			&miner_id(miner),
		)
	}

	/// Whether `st` takes gradient submissions: in `WeightsUploading`, and already in `Training` once its
	/// backward quota is done (no pass of the epoch can come after it, and the round is the one the
	/// upload phase will have), so uploads overlap the wait for the phase change's inclusion.
	pub(super) fn uploads_open(&self, st: &StageState) -> bool {
		st.phase == Phase::WeightsUploading
			|| (st.phase == Phase::Training && st.backward_done >= self.cfg.backward_quota.max(1))
	}

	/// Backward passes (tail forwards included) of `miner` at `stage` the state accepted while the stage
	/// trained `epoch`: the most samples a merge submission of that miner may weigh (0 for unknown).
	pub fn accepted_passes(&self, epoch: u32, stage: u16, miner: &AccountId) -> u32 {
		self.accepted.get(&(epoch, stage, miner.0)).copied().unwrap_or(0)
	}

	/// Check `iota_submitGradient` (before the object is verified).
	///
	/// The submission's weight in the merge is its `samples`, which may not exceed the miner's
	/// [`State::accepted_passes`]: the recorded work bounds the weight, never the miner's word. Fewer is
	/// accepted at the claim (the vector then holds only those passes: an accepted pass whose answer the
	/// miner never got, or a restart that lost its accumulated gradient).
	///
	/// Errors: `WrongPhase` (uploads not open: [`State::uploads_open`]), `Unknown` epoch, `Invalid`
	/// (twice, zero samples, wrong key), `LeaseExpired` (its passes of the epoch were forfeited:
	/// [`State::gone_miners`]), `SampleCountMismatch` (more samples than accepted passes),
	/// `ShapeMismatch` (shape `[P]`, size `4·P`, chunk count).
	pub fn check_gradient(
		&self,
		miner: &AccountId,
		stage: u16,
		epoch: u32,
		t: &TensorRef,
		chunks: &[ContentHash],
		samples: u32,
	) -> Result<Event, Refusal> {
		let st = self.stage_in_epoch(stage, epoch)?;
		if !self.uploads_open(st) {
			return refuse(
				ErrorCode::WrongPhase,
				format!(
					"stage {stage} is {:?} with {} of {} backward passes: gradient uploads are not open",
					st.phase, st.backward_done, self.cfg.backward_quota
				),
			);
		}
		if st.merge.submissions.contains_key(&miner.0) {
			return refuse(
				ErrorCode::Invalid,
				format!("gradient of epoch {epoch} already submitted this round"),
			);
		}
		if self.gone_in(miner, epoch) {
			return refuse(
				ErrorCode::LeaseExpired,
				format!(
					"your passes of epoch {epoch} were forfeited when you fell silent for a lease's \
					 length (State::gone_miners)"
				),
			);
		}
		if samples == 0 {
			return refuse(ErrorCode::Invalid, "a gradient of zero samples");
		}
		let accepted = self.accepted_passes(epoch, stage, miner);
		if samples > accepted {
			return refuse(
				ErrorCode::SampleCountMismatch,
				format!(
					"a gradient of {samples} samples from a miner with {accepted} accepted backward \
					 passes at stage {stage} in epoch {epoch}"
				),
			);
		}
		self.check_trail_complete(miner, stage, epoch)?;
		let key = self.gradient_key(stage, epoch, miner);
		if t.key != key {
			return refuse(
				ErrorCode::Invalid,
				format!("gradient key {:?}, expected {key:?}", t.key),
			);
		}
		let p = self.param_count(stage);
		if t.shape != [p] {
			return refuse(
				ErrorCode::ShapeMismatch,
				format!("gradient shape {:?}, expected [{p}]", t.shape),
			);
		}
		iota_protocol::check_submission_shape(self.config().merge_codec, t.size, chunks.len(), p)
			.map_err(|e| Refusal::new(ErrorCode::ShapeMismatch, format!("gradient: {e}")))?;
		Ok(Event::GradientAccepted {
			stage,
			epoch,
			round: st.round,
			miner: miner.clone(),
			object: t.object(),
			chunk_hashes: chunks.to_vec(),
			samples,
		})
	}

	/// Merge vector length `P` of `stage` (f32 elements; 0 for a stage the run does not have).
	pub fn param_count(&self, stage: u16) -> u64 {
		self.cfg.param_counts.get(usize::from(stage)).copied().unwrap_or(0)
	}

	/// The merge plan of `stage` for `epoch`, if it is merging and the seed is known.
	///
	/// Errors: `WrongPhase`, `Unknown` epoch, `Unavailable` (seed not yet seen).
	pub fn plan_of(&self, stage: u16, epoch: u32) -> Result<&MergePlan, Refusal> {
		let st = self.merging_stage(stage, epoch, Phase::Merging)?;
		st.merge.plan.as_ref().ok_or_else(|| {
			Refusal::new(ErrorCode::Unavailable, "the merge plan waits for the epoch seed; retry")
		})
	}

	/// Submissions of the current round of `stage`, in butterfly order.
	pub fn submissions(&self, stage: u16) -> Vec<(AccountId, Submission)> {
		self.stages
			.get(usize::from(stage))
			.map(|s| s.merge.submissions.values().cloned().collect())
			.unwrap_or_default()
	}

	/// The key of a reduced shard copy.
	pub fn shard_key(&self, stage: u16, epoch: u32, shard: u32, miner: &AccountId) -> String {
		keys::reduced_shard(
			&self.cfg.run,
			u64::from(epoch),
			u32::from(stage),
			shard,
			&miner_id(miner),
		)
	}

	/// Check `iota_submitShard` (before the object is verified).
	///
	/// Errors: `WrongPhase`, `Unknown` (epoch, round or shard), `Invalid` (not the caller's shard, twice,
	/// wrong key), `ShapeMismatch`, `Unavailable` (no plan yet).
	pub fn check_shard(
		&self,
		miner: &AccountId,
		stage: u16,
		epoch: u32,
		round: u32,
		shard: u32,
		t: &TensorRef,
	) -> Result<Event, Refusal> {
		let plan = self.plan_of(stage, epoch)?;
		if round != plan.round {
			return refuse(
				ErrorCode::Unknown,
				format!("round {round}, the current round is {}", plan.round),
			);
		}
		let Some(desc) = plan.shards.get(shard as usize) else {
			return refuse(ErrorCode::Unknown, format!("shard {shard} of {}", plan.shards.len()));
		};
		let Some(pos) = plan.members.iter().position(|m| m == miner) else {
			return refuse(ErrorCode::Invalid, "not a member of this merge round");
		};
		if !desc.is_owned_by(pos as u32) {
			return refuse(ErrorCode::Invalid, format!("shard {shard} is not yours"));
		}
		let st = &self.stages[usize::from(stage)];
		if st.merge.copies.get(&shard).is_some_and(|c| c.iter().any(|c| &c.miner == miner)) {
			return refuse(ErrorCode::Invalid, format!("shard {shard} already submitted"));
		}
		let key = self.shard_key(stage, epoch, shard, miner);
		if t.key != key {
			return refuse(ErrorCode::Invalid, format!("shard key {:?}, expected {key:?}", t.key));
		}
		// A reduced shard travels in the codec's shard form (f32, or int8 for the lossy codecs).
		let len = desc.len();
		let bytes = iota_protocol::shard_len(self.cfg.merge_codec, len, self.param_count(stage));
		if t.shape != [len] || t.size != bytes {
			return refuse(
				ErrorCode::ShapeMismatch,
				format!(
					"shard shape {:?} / {} bytes, expected [{len}] / {bytes} bytes",
					t.shape, t.size
				),
			);
		}
		Ok(Event::ShardAccepted {
			stage,
			epoch,
			round,
			shard,
			miner: miner.clone(),
			object: t.object(),
		})
	}

	/// Disputed shards of `stage`'s current round: (epoch, round, shard, range).
	pub fn disputed(&self, stage: u16) -> Vec<(u32, u32, u32, [u64; 2])> {
		let Some(st) = self.stages.get(usize::from(stage)) else { return Vec::new() };
		let Some(plan) = &st.merge.plan else { return Vec::new() };
		st.merge
			.disputed
			.iter()
			.filter_map(|k| {
				plan.shards
					.get(*k as usize)
					.map(|d| (st.epoch, plan.round, *k, [d.start, d.end]))
			})
			.collect()
	}

	/// The copies of a shard in the current round.
	pub fn copies(&self, stage: u16, shard: u32) -> Vec<CopyRec> {
		self.stages
			.get(usize::from(stage))
			.and_then(|s| s.merge.copies.get(&shard).cloned())
			.unwrap_or_default()
	}

	/// Decide `iota_getManifest`.
	///
	/// Errors: `Unknown` epoch, `WrongStage`.
	pub fn manifest(
		&self,
		miner: &AccountId,
		stage: u16,
		epoch: u32,
	) -> Result<ManifestPlan, Refusal> {
		if let Some(h) = self.committed.get(&(stage, epoch)) {
			return Ok(ManifestPlan::Committed { state_hash: *h });
		}
		let st = self.stage_in_epoch(stage, epoch)?;
		let Some(plan) = (st.phase == Phase::Merging).then_some(st.merge.plan.as_ref()).flatten()
		else {
			return Ok(ManifestPlan::Reducing { present: 0, expected: 0 });
		};
		let expected = plan.shards.len() as u32;
		let present = st.merge.present.len() as u32;
		if present < expected {
			return Ok(ManifestPlan::Reducing { present, expected });
		}
		let shards = plan
			.shards
			.iter()
			.map(|d| (d.index, [d.start, d.end], st.merge.present[&d.index].clone()))
			.collect();
		let samples = st.merge.submissions.values().map(|(_, s)| s.samples).sum();
		let checkpoint_key = (&plan.checkpoint_by == miner).then(|| {
			keys::stage_checkpoint(
				&self.cfg.run,
				u64::from(epoch),
				u32::from(stage),
				&miner_id(miner),
			)
		});
		Ok(ManifestPlan::Ready { shards, samples, checkpoint_key })
	}

	/// Check `iota_submitStateHash` (before a checkpoint object is verified).
	///
	/// Errors: `WrongPhase` (not merging, or shards still missing), `Unknown` epoch, `Invalid` (twice, not a
	/// member, a checkpoint nobody asked for, or its wrong key).
	pub fn check_attest(
		&self,
		miner: &AccountId,
		stage: u16,
		epoch: u32,
		state_hash: ContentHash,
		checkpoint: Option<&TensorRef>,
	) -> Result<Event, Refusal> {
		let plan = self.plan_of(stage, epoch)?;
		let st = &self.stages[usize::from(stage)];
		if st.merge.present.len() < plan.shards.len() {
			return refuse(ErrorCode::WrongPhase, "the merge is still reducing");
		}
		if !plan.members.contains(miner) {
			return refuse(ErrorCode::Invalid, "not a member of this merge round");
		}
		if st.merge.attested.contains_key(&miner.0) {
			return refuse(ErrorCode::Invalid, "state hash already attested");
		}
		let asked = &plan.checkpoint_by == miner;
		let checkpoint = match (asked, checkpoint) {
			(false, Some(_)) => {
				return refuse(ErrorCode::Invalid, "no checkpoint was asked of this replica")
			},
			(true, None) => {
				return refuse(
					ErrorCode::Invalid,
					"this replica was asked for the stage checkpoint",
				)
			},
			(false, None) => None,
			(true, Some(t)) => {
				let key = keys::stage_checkpoint(
					&self.cfg.run,
					u64::from(epoch),
					u32::from(stage),
					&miner_id(miner),
				);
				if t.key != key {
					return refuse(
						ErrorCode::Invalid,
						format!("checkpoint key {:?}, expected {key:?}", t.key),
					);
				}
				Some(t.object())
			},
		};
		Ok(Event::StateAttested { stage, epoch, miner: miner.clone(), state_hash, checkpoint })
	}

	/// The manifest to commit, once every shard is present and every member attested the same hash (and
	/// the checkpoint is in).
	pub fn commit_plan(&self, stage: u16) -> Option<CommitPlan> {
		let st = self.stages.get(usize::from(stage))?;
		let plan = st.merge.plan.as_ref()?;
		if st.phase != Phase::Merging || st.merge.present.len() < plan.shards.len() {
			return None;
		}
		let mut hashes = plan.members.iter().map(|m| st.merge.attested.get(&m.0));
		let first = *hashes.next()??;
		if !hashes.all(|h| h == Some(&first)) {
			return None;
		}
		let checkpoint = st.merge.checkpoint.clone();
		checkpoint.as_ref()?;
		Some(CommitPlan {
			stage,
			epoch: st.epoch,
			members: plan.members.len() as u32,
			param_count: plan.param_count,
			samples: st.merge.submissions.values().map(|(_, s)| s.samples).sum(),
			shards: plan.shards.iter().map(|d| st.merge.present[&d.index].clone()).collect(),
			state_hash: first,
			checkpoint,
		})
	}

	/// Whether the work of `stage` makes a call due now, timeouts aside: its manifest can be committed, or
	/// [`phase_changes`] gives one the driver sends at once (members as the state last saw them on
	/// chain; in Training that is when both changes can go together). The server wakes the chain driver
	/// when this turns true, so the call goes out at once instead of at the next block.
	pub fn transition_due(&self, stage: u16) -> bool {
		let Some(st) = self.stages.get(usize::from(stage)) else { return false };
		if self.commit_plan(stage).is_some() {
			return true;
		}
		let progress = iota_primitives::StageProgress {
			phase: st.phase,
			phase_since: 0,
			backward_quota: self.cfg.backward_quota,
			members: st.members.len() as u32,
			report: self.report(stage),
		};
		phase_changes(&progress, 0, u64::MAX)
			.is_some_and(|(_, both)| st.phase != Phase::Training || both)
	}

	/// Whether replicas of `stage` attested different state hashes (a fault; the round times out).
	pub fn attest_conflict(&self, stage: u16) -> bool {
		self.stages.get(usize::from(stage)).is_some_and(|st| {
			let mut h = st.merge.attested.values();
			h.next().is_some_and(|f| h.any(|x| x != f))
		})
	}

	/// What the orchestrator reports to `advance_phase`.
	///
	/// In the merge phases `gradients_submitted` also counts the stage's members that ran no backward pass
	/// this epoch ([`State::accepted_passes`] is 0) and so have no gradient to submit (a miner that got
	/// no sample, e.g. on a loaded machine): the chain's rule waits for `gradients_submitted ≥ members`,
	/// and without them the stage would sit out the whole phase timeout. A member with accepted passes
	/// is waited for until it submits or the phase deadline passes, whenever the pathway log is written.
	pub fn report(&self, stage: u16) -> StageReport {
		let Some(s) = self.stages.get(usize::from(stage)) else { return StageReport::default() };
		let mut gradients_submitted = s.merge.submissions.len() as u32;
		if self.uploads_open(s) {
			// From the accepted-pass counts, which live until the stage's merge is committed (the
			// samples' records leave memory once the pathway log is written, possibly before).
			let worked: BTreeSet<[u8; 32]> = self
				.accepted
				.range((s.epoch, stage, [0; 32])..=(s.epoch, stage, [u8::MAX; 32]))
				.filter(|(_, n)| **n > 0)
				.map(|(k, _)| k.2)
				.collect();
			// Members count by the primitives' idle-member rule; a submitter that is no longer a
			// member (it left mid-merge) still counts, as its gradient is in the round.
			let outsiders = s
				.merge
				.submissions
				.keys()
				.filter(|k| !s.members.iter().any(|m| &m.0 == *k))
				.count() as u32;
			gradients_submitted = iota_primitives::gradients_accounted(
				s.members
					.iter()
					.map(|m| (worked.contains(&m.0), s.merge.submissions.contains_key(&m.0))),
			)
			.saturating_add(outsiders);
		}
		StageReport { backward_done: s.backward_done, gradients_submitted }
	}

	/// The epoch seed of `epoch`, if seen.
	pub fn seed(&self, epoch: u32) -> Option<[u8; 32]> {
		self.seeds.get(&epoch).copied()
	}
}

/// The phase change `progress` allows at block `now` (`iota_primitives::next_phase` with a `timeout` in
/// blocks), and whether the upload phase would end at once after it: from Training, with every gradient
/// already in (uploads open at the quota, [`State::uploads_open`]), Training → WeightsUploading → Merging
/// can go as two calls in one extrinsic. The chain driver and [`State::transition_due`] both decide by
/// this. `None` when no change is allowed.
pub fn phase_changes(
	progress: &iota_primitives::StageProgress,
	now: u64,
	timeout: u64,
) -> Option<(iota_primitives::Transition, bool)> {
	let t = iota_primitives::next_phase(progress, now, timeout).ok()?;
	let both = progress.phase == Phase::Training
		&& t.to == Phase::WeightsUploading
		&& iota_primitives::next_phase(
			&iota_primitives::StageProgress {
				phase: Phase::WeightsUploading,
				phase_since: now,
				..*progress
			},
			now,
			timeout,
		)
		.is_ok_and(|t2| t2.to == Phase::Merging && !t2.timed_out);
	Some((t, both))
}
