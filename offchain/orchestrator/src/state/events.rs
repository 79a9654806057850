//! The event log: every accepted change as an [`Event`], and [`State::apply`], which folds one in.
//! Live requests and a replay after a restart go through the same `apply`.

use super::*;

/// Whether a lease is a forward or a backward pass.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum WorkKind {
	/// Forward (at the tail: forward, loss and backward at once).
	Forward,
	/// Backward.
	Backward,
}

/// One work item handed to one miner.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Lease {
	/// Lease id (never reused).
	pub id: LeaseId,
	/// Holder.
	pub miner: AccountId,
	/// Stage.
	pub stage: u16,
	/// Epoch of the sample.
	pub epoch: u32,
	/// Sample id.
	pub sample: u64,
	/// Forward or backward.
	pub kind: WorkKind,
	/// Granted at, ms since the Unix epoch.
	pub granted_ms: u64,
	/// Deadline, ms since the Unix epoch.
	pub expires_at_ms: u64,
	/// The key the result must be uploaded to (`None`: the head's backward, or a single-stage forward).
	pub output_key: Option<String>,
	/// A recomputation of a pass whose miner restarted (`StageState::recompute`): it counts for the
	/// merge and leaves the sample's records as the other stages used them.
	#[serde(default)]
	pub recompute: bool,
}

/// One accepted state change. Persisted as JSON before the request is acknowledged and replayed through
/// [`State::apply`] on restart.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum Event {
	/// A lease was granted (`fresh`: the head issued a new sample id).
	LeaseGranted {
		/// The lease.
		lease: Lease,
		/// Whether the head issued a new sample.
		fresh: bool,
	},
	/// A lease was completed with its (verified) output.
	LeaseCompleted {
		/// Lease id.
		lease: LeaseId,
		/// The verified output (`None` only where the lease has no output key).
		output: Option<Obj>,
		/// When.
		now_ms: u64,
		/// Local mode: the inner step of the state the pass ran at (0 in sync mode).
		#[serde(default)]
		inner_step: u32,
	},
	/// Local mode: a miner reported the hash of its replica state after `step` inner steps.
	InnerStepReported {
		/// Stage.
		stage: u16,
		/// Epoch.
		epoch: u32,
		/// The miner.
		miner: AccountId,
		/// Inner steps applied (state index).
		step: u32,
		/// BLAKE3 of the state ([`iota_protocol::optim::inner_state_hash`]).
		state_hash: ContentHash,
	},
	/// The tail reported the loss of a lease's sample.
	LossReported {
		/// Lease id.
		lease: LeaseId,
		/// Mean cross-entropy, nats.
		loss: f32,
	},
	/// A miner process presented its session ([`iota_rpc::types::GetWork::session`]). Another session
	/// than the account's last is a restart: its leases are released at once, the backward items of
	/// its forwards go to anyone, and its accepted passes of the stage's epoch that reached no merge
	/// submission are re-listed for recomputation (sync mode, stage still training) or counted as lost.
	/// The replaced session is retired: a request of it is refused from then on
	/// ([`State::check_session`](crate::state::State::check_session)).
	SessionStarted {
		/// The miner.
		miner: AccountId,
		/// Its stage.
		stage: u16,
		/// The new session.
		session: u64,
		/// When, ms since the Unix epoch.
		now_ms: u64,
	},
	/// Sync mode: a miner of a stage not yet merging fell silent holding accepted passes of the stage's
	/// epoch that reached no merge submission: no lease, no request for a lease's length
	/// ([`State::gone_miners`]). Its passes are re-listed for recomputation (stage training) or counted
	/// lost (uploads open) as for a restart, and it takes no more work in the epoch
	/// ([`iota_rpc::types::IdleReason::Forfeited`]).
	MinerGone {
		/// The miner.
		miner: AccountId,
		/// Its stage.
		stage: u16,
		/// The stage's epoch whose passes it forfeits.
		epoch: u32,
		/// When, ms since the Unix epoch.
		now_ms: u64,
	},
	/// A miner handed a lease back; the item is re-listed.
	LeaseReleased {
		/// Lease id.
		lease: LeaseId,
	},
	/// A lease passed its deadline; the item is re-listed.
	LeaseExpired {
		/// Lease id.
		lease: LeaseId,
	},
	/// A gradient submission was accepted (phase `WeightsUploading`, or `Training` with the quota done).
	GradientAccepted {
		/// Stage.
		stage: u16,
		/// Epoch.
		epoch: u32,
		/// Merge round.
		round: u32,
		/// Submitter.
		miner: AccountId,
		/// The object (`P` f32).
		object: Obj,
		/// Chunk hashes of the object.
		chunk_hashes: Vec<ContentHash>,
		/// Micro-batches summed.
		samples: u32,
	},
	/// A gradient submission was refused once read from the bucket (the protocol's acceptance rule): kept
	/// in the epoch's audit record as evidence against its sender (at most
	/// [`iota_rpc::types::MAX_REFUSED_VECTORS_PER_MINER`] per miner and stage). Changes nothing else.
	GradientRefused {
		/// Stage.
		stage: u16,
		/// Epoch.
		epoch: u32,
		/// Merge round.
		round: u32,
		/// Submitter.
		miner: AccountId,
		/// The object.
		object: Obj,
		/// Chunk hashes it listed.
		chunk_hashes: Vec<ContentHash>,
		/// Micro-batches it claimed.
		samples: u32,
		/// The refusal.
		reason: String,
	},
	/// A reduced shard copy was accepted.
	ShardAccepted {
		/// Stage.
		stage: u16,
		/// Epoch.
		epoch: u32,
		/// Round.
		round: u32,
		/// Shard index.
		shard: u32,
		/// Reducer.
		miner: AccountId,
		/// The copy.
		object: Obj,
	},
	/// A shard whose copies disagreed was resolved by the orchestrator's own recomputation.
	ShardResolved {
		/// Stage.
		stage: u16,
		/// Epoch.
		epoch: u32,
		/// Round.
		round: u32,
		/// Shard index.
		shard: u32,
		/// The correct shard object.
		object: Obj,
	},
	/// A replica attested its stage state after the step.
	StateAttested {
		/// Stage.
		stage: u16,
		/// Epoch.
		epoch: u32,
		/// Replica.
		miner: AccountId,
		/// BLAKE3 of its stage state.
		state_hash: ContentHash,
		/// The checkpoint it uploaded, if it was the one asked.
		checkpoint: Option<Obj>,
	},
	/// The chain's view of a stage changed (at the best block the driver acts on).
	ChainStage {
		/// Stage.
		stage: u16,
		/// Its epoch.
		epoch: u32,
		/// Its phase.
		phase: Phase,
		/// Its merge round.
		round: u32,
		/// Members (active or leaving), in chain order.
		members: Vec<AccountId>,
		/// Finalized block.
		block: u32,
		/// When the orchestrator saw it.
		now_ms: u64,
	},
	/// An extrinsic the orchestrator submitted was seen in a best block (or refused there). The time it
	/// waited is the chain wait of every stage it carried a call for ([`StageTime::chain_wait_ms`]),
	/// except the stages in `released`, which went on at [`Event::ChainPredicted`] and were charged there.
	ChainWait {
		/// (stage, epoch) of each call it carried.
		calls: Vec<(u16, u32)>,
		/// When it was submitted, ms since the Unix epoch.
		submitted_ms: u64,
		/// When its inclusion was seen, ms since the Unix epoch.
		included_ms: u64,
		/// Stages whose change was predicted when the pool accepted the extrinsic.
		#[serde(default)]
		released: Vec<u16>,
	},
	/// The driver's prediction of a stage's chain view once an extrinsic of its the node's pool accepted
	/// is dispatched (docs/design.md §3: the chain records the run, it does not pace it). Applied like
	/// [`Event::ChainStage`], so the stage goes on without waiting for the block; the chain's own view
	/// confirms it at inclusion, or [`Event::ChainReverted`] undoes a commit that never landed.
	ChainPredicted {
		/// Stage.
		stage: u16,
		/// Its predicted epoch.
		epoch: u32,
		/// Its predicted phase.
		phase: Phase,
		/// Its predicted merge round.
		round: u32,
		/// Its predicted members (a commit drops the leaving ones).
		members: Vec<AccountId>,
		/// How long the stage waited for the call: from when it became due (else from its submission)
		/// to the pool's acceptance, ms (its [`StageTime::chain_wait_ms`]).
		waited_ms: u64,
		/// When, ms since the Unix epoch.
		now_ms: u64,
	},
	/// A predicted commit did not land and can no longer (the chain moved the stage on by a deadline, or
	/// refused the call): the stage goes back to the chain's view of it. Leases of the later epoch are void
	/// and its queued items dropped; the replicas that went on resynchronise from the chain.
	ChainReverted {
		/// Stage.
		stage: u16,
		/// The chain's epoch of the stage.
		epoch: u32,
		/// Its phase.
		phase: Phase,
		/// Its round.
		round: u32,
		/// Its members.
		members: Vec<AccountId>,
		/// When, ms since the Unix epoch.
		now_ms: u64,
	},
	/// The chain's seed of an epoch is known; the merge plan of (stage, epoch, round) follows from it.
	MergeSeed {
		/// Stage.
		stage: u16,
		/// Epoch.
		epoch: u32,
		/// Round.
		round: u32,
		/// `EpochSeeds(epoch)`.
		epoch_seed: [u8; 32],
	},
	/// Local mode: the seed of an epoch's inner-step challenges
	/// ([`iota_protocol::selection::challenge_seed`]) is known; every miner's challenged steps follow.
	ChallengeSeed {
		/// Epoch.
		epoch: u32,
		/// The seed.
		seed: [u8; 32],
	},
	/// The pathway log of an epoch was written.
	PathwayWritten {
		/// Epoch.
		epoch: u32,
		/// The log object.
		object: Obj,
	},
	/// The merged model of an epoch was evaluated on the run's held-out rows (`crate::eval`).
	HeldOutEvaluated {
		/// Epoch whose merge produced the model.
		epoch: u32,
		/// Mean next-token loss, nats.
		loss: f32,
	},
}

impl State {
	/// Fold one accepted event into the state. Total: an event that no longer applies (a lease already
	/// gone, a stale epoch) is ignored, so replaying a log is always possible.
	pub fn apply(&mut self, ev: &Event) {
		match ev {
			Event::LeaseGranted { lease, fresh } => {
				self.clock_ms = self.clock_ms.max(lease.granted_ms);
				self.apply_grant(lease, *fresh)
			},
			Event::LeaseCompleted { lease, output, now_ms, inner_step } => {
				self.clock_ms = self.clock_ms.max(*now_ms);
				self.apply_complete(*lease, output.clone(), *now_ms, *inner_step)
			},
			Event::InnerStepReported { stage, epoch, miner, step, state_hash } => {
				self.apply_inner_report(*stage, *epoch, miner, *step, *state_hash)
			},
			Event::LossReported { lease, loss } => {
				if let Some(l) = self.leases.get(lease) {
					let sample = l.sample;
					if let Some(s) = self.samples.get_mut(&sample) {
						s.pending_loss = Some((*lease, *loss));
					}
				}
			},
			Event::SessionStarted { miner, stage, session, now_ms } => {
				self.clock_ms = self.clock_ms.max(*now_ms);
				self.apply_session(miner, *stage, *session, *now_ms)
			},
			Event::MinerGone { miner, stage, epoch, now_ms } => {
				self.clock_ms = self.clock_ms.max(*now_ms);
				self.apply_gone(miner, *stage, *epoch)
			},
			Event::LeaseReleased { lease } => self.relist(*lease, false, false),
			Event::LeaseExpired { lease } => self.relist(*lease, true, true),
			Event::GradientAccepted {
				stage,
				epoch,
				round,
				miner,
				object,
				chunk_hashes,
				samples,
			} => {
				if let Some(st) = self.stages.get_mut(usize::from(*stage)) {
					if st.epoch == *epoch && st.merge.round == *round {
						let sub = Submission {
							object: object.clone(),
							chunk_hashes: chunk_hashes.clone(),
							samples: *samples,
						};
						st.merge.submissions.insert(miner.0, (miner.clone(), sub));
					}
				}
				self.close_trail(*stage, *epoch, miner);
			},
			Event::GradientRefused {
				stage,
				epoch,
				round,
				miner,
				object,
				chunk_hashes,
				samples,
				reason,
			} => {
				let audit = self.audits.entry(*epoch).or_default();
				let kept = audit.refused.iter().filter(|r| r.0 == *stage && &r.2 == miner).count();
				if kept < iota_rpc::types::MAX_REFUSED_VECTORS_PER_MINER {
					let sub = Submission {
						object: object.clone(),
						chunk_hashes: chunk_hashes.clone(),
						samples: *samples,
					};
					audit.refused.push((*stage, *round, miner.clone(), sub, reason.clone()));
				}
			},
			Event::ShardAccepted { stage, epoch, round, shard, miner, object } => self.apply_shard(
				*stage,
				*epoch,
				*round,
				*shard,
				CopyRec { miner: miner.clone(), object: object.clone() },
			),
			Event::ShardResolved { stage, epoch, round, shard, object } => {
				if let Some(st) = self.stages.get_mut(usize::from(*stage)) {
					if st.epoch == *epoch
						&& st.merge.round == *round
						&& st.merge.disputed.remove(shard)
					{
						st.merge.present.insert(*shard, object.clone());
					}
				}
			},
			Event::StateAttested { stage, epoch, miner, state_hash, checkpoint } => {
				if let Some(st) = self.stages.get_mut(usize::from(*stage)) {
					if st.epoch == *epoch {
						st.merge.attested.insert(miner.0, *state_hash);
						if checkpoint.is_some() {
							st.merge.checkpoint = checkpoint.clone();
						}
					}
				}
			},
			Event::ChainStage { stage, epoch, phase, round, members, block: _, now_ms } => {
				self.clock_ms = self.clock_ms.max(*now_ms);
				self.apply_chain_stage(*stage, *epoch, *phase, *round, members.clone(), *now_ms)
			},
			Event::ChainWait { calls, submitted_ms, included_ms, released } => {
				self.clock_ms = self.clock_ms.max(*included_ms);
				self.apply_chain_wait(calls, included_ms.saturating_sub(*submitted_ms), released);
			},
			Event::ChainPredicted { stage, epoch, phase, round, members, waited_ms, now_ms } => {
				self.clock_ms = self.clock_ms.max(*now_ms);
				if let Some(st) = self.stages.get_mut(usize::from(*stage)) {
					if st.epoch <= *epoch {
						st.clock.chain_wait(*waited_ms, st.phase == Phase::Training);
					}
				}
				self.apply_chain_stage(*stage, *epoch, *phase, *round, members.clone(), *now_ms)
			},
			Event::ChainReverted { stage, epoch, phase, round, members, now_ms } => {
				self.clock_ms = self.clock_ms.max(*now_ms);
				self.revert_stage(*stage, *epoch, *phase, *round, members.clone(), *now_ms)
			},
			Event::MergeSeed { stage, epoch, round, epoch_seed } => {
				self.seeds.insert(*epoch, *epoch_seed);
				self.make_plan(*stage, *epoch, *round, epoch_seed);
			},
			Event::ChallengeSeed { epoch, seed } => self.apply_challenge_seed(*epoch, *seed),
			Event::PathwayWritten { epoch, object } => {
				self.audits.entry(*epoch).or_default().pathway_log = Some(object.clone());
				self.drop_trails_if_done(*epoch);
				// The records are in the log now; the samples of the epoch leave memory (in local
				// mode once its challenges are drawn too).
				self.drop_samples_if_done(*epoch);
			},
			Event::HeldOutEvaluated { epoch, loss } => {
				self.heldout.insert(*epoch, *loss);
				while self.heldout.len() > MAX_SUMMARIES {
					self.heldout.pop_first();
				}
				if let Some(s) = self.summaries.iter_mut().find(|s| s.epoch == *epoch) {
					s.heldout_loss = Some(*loss);
				}
			},
		}
	}

	pub(super) fn apply_grant(&mut self, lease: &Lease, fresh: bool) {
		let s = usize::from(lease.stage);
		let stages = usize::from(self.cfg.stages);
		self.next_lease = self.next_lease.max(lease.id + 1);
		if let Some(st) = self.stages.get_mut(s) {
			match lease.kind {
				_ if lease.recompute => {
					st.recompute.remove(&lease.sample);
				},
				WorkKind::Forward => {
					st.forward_queue.remove(&lease.sample);
				},
				WorkKind::Backward => {
					st.backward_queue.remove(&lease.sample);
				},
			}
		}
		if fresh {
			if self.head_issued.0 != lease.epoch {
				self.head_issued = (lease.epoch, 0);
			}
			self.head_issued.1 += 1;
			self.samples.entry(lease.sample).or_insert_with(|| SampleState {
				epoch: lease.epoch,
				forward: vec![None; stages],
				backward: vec![None; stages],
				..Default::default()
			});
			let audit = self.audits.entry(lease.epoch).or_default();
			audit.started_ms.get_or_insert(lease.granted_ms);
		}
		if let Some(st) = self.stages.get_mut(s) {
			if st.epoch == lease.epoch && st.phase == Phase::Training {
				st.clock.lease_out(lease.granted_ms);
			}
		}
		let m = self.miner_mut(&lease.miner, lease.stage);
		m.last_seen_ms = m.last_seen_ms.max(lease.granted_ms);
		self.leases.insert(lease.id, lease.clone());
	}

	pub(super) fn apply_complete(
		&mut self,
		id: LeaseId,
		output: Option<Obj>,
		now_ms: u64,
		inner_step: u32,
	) {
		let Some(l) = self.leases.remove(&id) else { return };
		if l.recompute {
			return self.apply_recomputed(&l, output, now_ms);
		}
		self.apply_pass_step(&l, inner_step);
		let quota = self.cfg.backward_quota;
		if let Some(st) = self.stages.get_mut(usize::from(l.stage)) {
			if st.epoch == l.epoch {
				st.clock.lease_in(now_ms);
			}
		}
		let tail = self.tail();
		let s = usize::from(l.stage);
		let tps = self.cfg.tokens_per_sample;
		self.count_pass(&l, output.as_ref(), now_ms);
		if self.is_backward(&l) && self.stages.get(s).is_some_and(|st| st.epoch == l.epoch) {
			*self.accepted.entry((l.epoch, l.stage, l.miner.0)).or_default() += 1;
		}
		let local = self.local_mode();
		let stages = usize::from(self.cfg.stages);
		let Some(sample) = self.samples.get_mut(&l.sample) else { return };
		if local {
			sample.forward_steps.resize(stages, 0);
			sample.backward_steps.resize(stages, 0);
		}
		let backward_at;
		let next;
		match l.kind {
			WorkKind::Forward => {
				sample.forward[s] = Some((l.miner.clone(), output.clone()));
				if let Some(x) = sample.forward_steps.get_mut(s) {
					*x = inner_step;
				}
				if l.stage == tail {
					if let Some(x) = sample.backward_steps.get_mut(s) {
						*x = inner_step;
					}
					if let Some((lid, loss)) = sample.pending_loss.take() {
						if lid == id {
							sample.loss = Some(loss);
						}
					}
					sample.backward[s] = Some((l.miner.clone(), output));
					backward_at = Some(l.stage);
					next = l.stage.checked_sub(1).map(|p| (p, WorkKind::Backward));
				} else {
					backward_at = None;
					next = Some((l.stage + 1, WorkKind::Forward));
				}
			},
			WorkKind::Backward => {
				sample.backward[s] = Some((l.miner.clone(), output));
				if let Some(x) = sample.backward_steps.get_mut(s) {
					*x = inner_step;
				}
				backward_at = Some(l.stage);
				next = l.stage.checked_sub(1).map(|p| (p, WorkKind::Backward));
			},
		}
		let complete = sample.complete();
		let loss = sample.loss;
		if let Some(b) = backward_at {
			if let Some(st) = self.stages.get_mut(usize::from(b)) {
				if st.epoch == l.epoch {
					st.backward_done += 1;
					if st.backward_done >= quota && st.clock.quota_ms.is_none() {
						st.clock.quota_ms = Some(now_ms);
					}
				}
			}
		}
		if let Some((to, kind)) = next {
			if let Some(st) = self.stages.get_mut(usize::from(to)) {
				// Items of an epoch the target stage has left are dropped (a timed-out phase moved on).
				if st.epoch <= l.epoch {
					match kind {
						WorkKind::Forward => {
							st.forward_queue.insert(l.sample);
						},
						WorkKind::Backward => {
							st.backward_queue.insert(l.sample, BackwardItem { open: false });
						},
					}
				}
			}
		}
		if complete {
			self.tokens_trained += tps;
			self.recent.push_back((now_ms, tps));
			while self.recent.front().is_some_and(|(t, _)| t.saturating_add(60_000) < now_ms) {
				self.recent.pop_front();
			}
			let audit = self.audits.entry(l.epoch).or_default();
			audit.completed += 1;
			if let Some(loss) = loss {
				audit.loss_sum += f64::from(loss);
				audit.losses += 1;
				self.last_loss = Some(loss);
			}
		}
	}

	/// Takes lease `id` back and re-lists its item (`open`: a backward item goes to anyone, not to the
	/// forward's miner). `expired`: it passed its deadline (counted against its holder).
	/// A completed pass of lease `l` (output `output`, at `now_ms`): its wire bytes and its miner's
	/// activity counters.
	pub(super) fn count_pass(&mut self, l: &Lease, output: Option<&Obj>, now_ms: u64) {
		let wire = output.map_or(0, |o| o.size);
		self.wire_bytes += wire;
		self.audits.entry(l.epoch).or_default().wire_bytes += wire;
		let m = self.miner_mut(&l.miner, l.stage);
		m.last_seen_ms = m.last_seen_ms.max(now_ms);
		if m.epoch != l.epoch {
			m.epoch = l.epoch;
			m.samples_epoch = 0;
		}
		m.samples_epoch += 1;
		m.samples_total += 1;
	}

	pub(super) fn relist(&mut self, id: LeaseId, expired: bool, open: bool) {
		let Some(l) = self.leases.remove(&id) else { return };
		if expired {
			self.leases_expired_total += 1;
			let m = self.miner_mut(&l.miner, l.stage);
			m.leases_expired += 1;
		}
		self.expired.insert(id, l.miner.clone());
		// A release carries no time: the latest the state has seen stands for it.
		let back_ms = if expired {
			l.expires_at_ms.min(self.clock_ms.max(l.granted_ms))
		} else {
			self.clock_ms
		};
		if let Some(st) = self.stages.get_mut(usize::from(l.stage)) {
			if st.epoch == l.epoch {
				st.clock.lease_in(back_ms);
			}
		}
		if let Some(sample) = self.samples.get_mut(&l.sample) {
			if sample.pending_loss.is_some_and(|(lid, _)| lid == id) {
				sample.pending_loss = None;
			}
		}
		let Some(st) = self.stages.get_mut(usize::from(l.stage)) else { return };
		if st.epoch != l.epoch {
			return;
		}
		match l.kind {
			_ if l.recompute => {
				st.recompute.insert(l.sample);
			},
			WorkKind::Forward => {
				st.forward_queue.insert(l.sample);
			},
			WorkKind::Backward => {
				st.backward_queue.insert(l.sample, BackwardItem { open });
			},
		}
	}

	pub(super) fn apply_shard(
		&mut self,
		stage: u16,
		epoch: u32,
		round: u32,
		shard: u32,
		copy: CopyRec,
	) {
		let Some(st) = self.stages.get_mut(usize::from(stage)) else { return };
		if st.epoch != epoch || st.merge.round != round {
			return;
		}
		let Some(plan) = &st.merge.plan else { return };
		let Some(desc) = plan.shards.get(shard as usize) else { return };
		let range = [desc.start, desc.end];
		let single = plan.members.len() == 1;
		let copies = st.merge.copies.entry(shard).or_default();
		copies.push(copy.clone());
		let audit = self.audits.entry(epoch).or_default();
		audit.copies.push((stage, round, shard, range, copy.clone()));
		if single {
			st.merge.present.insert(shard, copy.object);
		} else if copies.len() == 2 {
			if copies[0].object.hash == copies[1].object.hash {
				st.merge.present.insert(shard, copies[0].object.clone());
			} else {
				st.merge.disputed.insert(shard);
				audit.mismatches.push((stage, round, shard, range, copies.clone()));
			}
		}
	}

	pub(super) fn make_plan(&mut self, stage: u16, epoch: u32, round: u32, epoch_seed: &[u8; 32]) {
		let p = self.cfg.param_counts.get(usize::from(stage)).copied().unwrap_or(0);
		let Some(st) = self.stages.get_mut(usize::from(stage)) else { return };
		if st.epoch != epoch
			|| st.merge.round != round
			|| st.phase != Phase::Merging
			|| st.merge.plan.is_some()
		{
			return;
		}
		let members: Vec<AccountId> =
			st.merge.submissions.values().map(|(a, _)| a.clone()).collect();
		// No plan without members or with a vector shorter than the shard count (the round restarts).
		if let Ok(plan) = iota_protocol::merge_plan(stage, epoch, round, epoch_seed, members, p) {
			st.merge.plan = Some(plan);
		}
	}

	pub(super) fn apply_chain_stage(
		&mut self,
		stage: u16,
		epoch: u32,
		phase: Phase,
		round: u32,
		members: Vec<AccountId>,
		now_ms: u64,
	) {
		let stages = self.cfg.stages;
		let Some(st) = self.stages.get_mut(usize::from(stage)) else { return };
		if epoch < st.epoch {
			// An older view (the state went on at a predicted commit): members stay the predicted ones.
			return;
		}
		st.members = members;
		if epoch > st.epoch {
			// The merge of `st.epoch` was committed.
			let old = st.epoch;
			let hash = {
				let mut h = st.merge.attested.values();
				h.next().copied()
			};
			let merge_ms = st.merge_started_ms.map_or(0, |t| now_ms.saturating_sub(t));
			let subs: Vec<_> = st
				.merge
				.submissions
				.values()
				.map(|(a, s)| (stage, st.merge.round, a.clone(), s.clone()))
				.collect();
			let time =
				st.clock.finish(stage, now_ms, self.audits.get(&old).and_then(|a| a.started_ms));
			let training_end = st.clock.training_end_ms();
			st.epoch = epoch;
			st.phase = phase;
			st.round = round;
			st.backward_done = 0;
			st.merge = MergeState { round, ..Default::default() };
			st.merge_started_ms = None;
			st.forward_queue
				.retain(|n| *n / u64::from(self.cfg.backward_quota.max(1)) >= u64::from(epoch));
			let q = u64::from(self.cfg.backward_quota.max(1));
			st.backward_queue.retain(|n, _| *n / q >= u64::from(epoch));
			st.recompute.clear();
			if let Some(h) = hash {
				self.committed.insert((stage, old), h);
			}
			// The committed epoch's counts stay while a revert of the commit is possible.
			self.accepted.retain(|k, _| k.1 != stage || k.0 >= old);
			let audit = self.audits.entry(old).or_default();
			audit.merge_ms += merge_ms;
			audit.submissions.extend(subs);
			audit.stage_times.retain(|t| t.stage != stage);
			audit.stage_times.push(time);
			audit.stage_times.sort_by_key(|t| t.stage);
			audit.training_end_ms = audit.training_end_ms.max(training_end);
			// Leases of the left epoch are void.
			let stale: Vec<LeaseId> = self
				.leases
				.values()
				.filter(|l| l.stage == stage && l.epoch < epoch)
				.map(|l| l.id)
				.collect();
			for id in stale {
				if let Some(l) = self.leases.remove(&id) {
					self.expired.insert(id, l.miner);
				}
			}
			let open = self.leases.values().filter(|l| l.stage == stage && l.epoch == epoch).count()
				as u32;
			if let Some(st) = self.stages.get_mut(usize::from(stage)) {
				st.clock = StageClock::entered(now_ms, open);
			}
			self.maybe_complete_epochs(stages, now_ms);
			return;
		}
		if round != st.merge.round {
			// A timed-out merge restarted: a fresh round with fresh submissions.
			st.merge = MergeState { round, ..Default::default() };
		}
		if phase != Phase::Training && st.merge_started_ms.is_none() {
			st.merge_started_ms = Some(now_ms);
		}
		if phase != Phase::Training {
			st.clock.left_training(now_ms);
		}
		st.phase = phase;
		st.round = round;
		if phase == Phase::Merging && st.merge.plan.is_none() {
			if let Some(seed) = self.seeds.get(&epoch).copied() {
				self.make_plan(stage, epoch, round, &seed);
			}
		}
	}

	/// A stage whose state is ahead of the chain (a predicted commit that will not land) goes back to the
	/// chain's view: [`Event::ChainReverted`].
	pub(super) fn revert_stage(
		&mut self,
		stage: u16,
		epoch: u32,
		phase: Phase,
		round: u32,
		members: Vec<AccountId>,
		now_ms: u64,
	) {
		let q = u64::from(self.cfg.backward_quota.max(1));
		let Some(current) = self.stages.get(usize::from(stage)).map(|s| s.epoch) else { return };
		if epoch >= current {
			return self.apply_chain_stage(stage, epoch, phase, round, members, now_ms);
		}
		// The later epochs never started at this stage. At the head they never started anywhere: their
		// samples are forgotten at every stage, with their items and leases, and issued again when the
		// head gets there, so those epochs still reach their quota. Elsewhere the stage's leases of them
		// go back to its queues (while it still is in that epoch), to be served when it gets there again.
		let later = |n: u64| n / q > u64::from(epoch);
		let head = stage == 0;
		// Local mode: the trails of those epochs describe trajectories that will be trained again.
		self.inner.retain(|k, _| k.0 <= epoch || (!head && k.1 != stage));
		self.accepted.retain(|k, _| k.0 <= epoch || (!head && k.1 != stage));
		let stale: Vec<LeaseId> = self
			.leases
			.values()
			.filter(|l| (head || l.stage == stage) && later(l.sample))
			.map(|l| l.id)
			.collect();
		if head {
			for id in stale {
				if let Some(l) = self.leases.remove(&id) {
					self.expired.insert(id, l.miner);
				}
			}
			self.samples.retain(|n, _| !later(*n));
			if self.head_issued.0 > epoch {
				self.head_issued = (epoch, self.cfg.backward_quota);
			}
			for st in self.stages.iter_mut() {
				st.forward_queue.retain(|n| !later(*n));
				st.backward_queue.retain(|n, _| !later(*n));
				st.recompute.retain(|n| !later(*n));
			}
		} else {
			for id in stale {
				self.relist(id, false, false);
			}
		}
		self.committed.retain(|(s, e), _| *s != stage || *e < epoch);
		let Some(st) = self.stages.get_mut(usize::from(stage)) else { return };
		st.epoch = epoch;
		st.phase = phase;
		st.round = round;
		st.members = members;
		st.backward_done = 0;
		st.recompute.clear();
		st.merge = MergeState { round, ..Default::default() };
		st.merge_started_ms = (phase != Phase::Training).then_some(now_ms);
		st.clock = StageClock::entered(now_ms, 0);
		if phase != Phase::Training {
			st.clock.left_training(now_ms);
		}
		if phase == Phase::Merging {
			if let Some(seed) = self.seeds.get(&epoch).copied() {
				self.make_plan(stage, epoch, round, &seed);
			}
		}
	}

	pub(super) fn apply_chain_wait(
		&mut self,
		calls: &[(u16, u32)],
		waited_ms: u64,
		released: &[u16],
	) {
		let mut epochs = BTreeSet::new();
		let mut stages = BTreeSet::new();
		for &(stage, epoch) in calls {
			epochs.insert(epoch);
			if !stages.insert((stage, epoch)) || released.contains(&stage) {
				continue;
			}
			if let Some(st) = self.stages.get_mut(usize::from(stage)) {
				if st.epoch == epoch {
					st.clock.chain_wait(waited_ms, st.phase == Phase::Training);
				}
			}
		}
		for e in epochs {
			self.audits.entry(e).or_default().extrinsics += 1;
		}
	}

	pub(super) fn maybe_complete_epochs(&mut self, stages: u16, now_ms: u64) {
		let min_epoch = (0..usize::from(stages)).map(|s| self.stages[s].epoch).min().unwrap_or(0);
		let done_through = self.summaries.back().map(|s| s.epoch + 1).unwrap_or(0);
		for e in done_through..min_epoch {
			let previous_end = e
				.checked_sub(1)
				.and_then(|p| self.audits.get(&p))
				.and_then(|p| p.training_end_ms);
			let a = self.audits.entry(e).or_default();
			let started = a.started_ms.unwrap_or(now_ms);
			let tokens = u64::from(a.completed) * self.cfg.tokens_per_sample;
			let cumulative = self.summaries.back().map_or(0, |s| s.tokens_cumulative) + tokens;
			let summary = EpochSummary {
				epoch: e,
				loss: if a.losses > 0 {
					(a.loss_sum / f64::from(a.losses)) as f32
				} else {
					f32::NAN
				},
				samples: a.completed,
				tokens,
				tokens_cumulative: cumulative,
				wire_bytes: a.wire_bytes,
				started_ms: started,
				completed_ms: now_ms,
				merge_ms: a.merge_ms,
				stages: a.stage_times.clone(),
				quota_to_start_ms: previous_end.map(|end| started.saturating_sub(end)),
				extrinsics: a.extrinsics,
				heldout_loss: self.heldout.get(&e).copied(),
				recomputed: a.recomputed,
				lost: a.lost,
			};
			self.summaries.push_back(summary);
			if self.summaries.len() > MAX_SUMMARIES {
				self.summaries.pop_front();
			}
		}
	}
}
