//! The chain side (docs/design.md §3 step 6, §6): the registry and each stage's phase, epoch, round and members
//! from the **best block** the driver acts on; the phase driver that asks `advance_phase` when
//! [`iota_primitives::next_phase`] allows it and `commit_merge` when the state's
//! `CommitPlan` ([`crate::state::CommitPlan`]) is complete; merge seeds; shard disputes; pathway logs.
//!
//! One [`ChainDriver::step`] per best block (the newest one when several arrived during a step), and
//! again on the block at hand when a call becomes due or an extrinsic settles: settle the stages'
//! extrinsics, refresh the registry (on registry events, after skipped blocks, and every
//! [`REGISTRY_REFRESH_BLOCKS`] blocks), sync every settled stage into the state ([`Event::ChainStage`],
//! and [`Event::MergeSeed`] once a stage merges), resolve disputed shards, write due pathway logs, then
//! drive. Everything due in a step goes as **one** extrinsic (`batch_all` of every stage's phase change
//! and commit). The step returns once the node's pool accepted it: the calls' effect is recorded as the
//! stages' predicted chain view ([`Event::ChainPredicted`]) where the phase deadline is far enough
//! ([`PREDICT_MARGIN_BLOCKS`]), so the stage goes on at once, and a task awaits the block. A stage with
//! an extrinsic that the block the driver acts on does not hold yet is neither read nor driven, so a
//! prediction is never undone by an older block and nothing is sent twice. A refused or dropped extrinsic
//! leaves the chain's view to decide at the next step: phase changes are read back and sent anew, a
//! predicted commit is sent again while the chain keeps its stage merging (a lost send, as when the
//! node it went to dies, without limit; a refused one at most [`COMMIT_RESENDS`] times), else reverted
//! ([`Event::ChainReverted`]). Finality is left to the chain (no money moves here).

use std::collections::HashMap;
use std::sync::Arc;

use bytes::Bytes;
use iota_chain::{calls, BlockHash, IotaClient, IotaEvent, Signer, Wait};
use iota_primitives::{ContentHash, Phase, StageProgress, StageReport};
use iota_protocol::{chunk_span, SpanInput};
use iota_rpc::AccountId;
use iota_storage::{keys, ObjectStore};

use crate::auth::{MinerStanding, Registry};
use crate::server::Orchestrator;
use crate::state::{phase_changes, CommitPlan, CopyRec, Event, Obj, Submission};

/// Blocks between two full registry refreshes when no registry event came.
pub const REGISTRY_REFRESH_BLOCKS: u32 = 10;

/// Why a chain step failed (the daemon logs it and retries on the next block).
#[derive(Debug, thiserror::Error)]
pub enum ChainError {
	/// The chain client failed.
	#[error("chain: {0}")]
	Chain(#[from] iota_chain::Error),
	/// The object store failed.
	#[error("object store: {0}")]
	Storage(#[from] iota_storage::StorageError),
	/// The database failed.
	#[error("database: {0}")]
	Db(#[from] crate::db::DbError),
	/// The chain has no run config.
	#[error("the chain has no run config")]
	NoRunConfig,
	/// The submissions of a disputed shard could not be reduced (a chunk check or a non-finite value).
	#[error("recomputing shard {shard}: {source}")]
	Merge {
		/// Shard.
		shard: u32,
		/// Why the protocol's reduction refused.
		source: iota_protocol::MergeError,
	},
}

/// Drives the chain side of one orchestrator.
pub struct ChainDriver {
	client: IotaClient,
	signer: Signer,
	orch: Arc<Orchestrator>,
	stages: u16,
	last_registry: Option<u32>,
	/// Per stage: (epoch, block) at which its Training→WeightsUploading change was first due.
	quota_seen: HashMap<u16, (u32, u32)>,
	/// Per stage: the extrinsic carrying its call that is not yet settled ([`Flight`]).
	flights: Arc<std::sync::Mutex<HashMap<u16, Flight>>>,
	/// Per stage: its last predicted commit (epoch, call, times refused), kept until the chain holds it.
	commits: HashMap<u16, (u32, iota_chain::runtime::Call, u32)>,
	/// Per stage: the first block at which its state was seen ahead of the chain.
	ahead: HashMap<u16, u32>,
}

/// Where a stage's last extrinsic is: the driver neither reads that stage's chain view nor sends it
/// another call until the block the driver acts on holds it (or it failed), so a prediction is never
/// "corrected" by a block older than the call.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Flight {
	/// Accepted by the pool, in no best block yet.
	Pending,
	/// In the best block of this number (its dispatch succeeded).
	Included(u32),
	/// Refused by the chain: its dispatch failed in a block, or the pool found it invalid
	/// ([`iota_chain::Error::is_refusal`]), or the node turned the submission away (any error but a
	/// transport one); the number is the node's best block when the refusal came
	/// (at or after the block it came in). Like an inclusion, it is settled only by a step on a block of
	/// at least that number: a step on an older block (woken by the refusal while no new block came)
	/// would read the chain from before the refusal, and perhaps from before the commit that made a
	/// resend stale, and count a refusal that says nothing. Then the chain's view decides; a commit's
	/// refusal counts against [`COMMIT_RESENDS`].
	Refused(u32),
	/// Its fate unknown: dropped, its watch or connection lost (a node died under it). The chain's view
	/// decides; a commit lost this way is sent again without counting against [`COMMIT_RESENDS`].
	Lost,
}

/// Blocks that must remain before a stage's phase deadline for the driver to act on its own call's
/// predicted effect ([`Event::ChainPredicted`]) instead of waiting for the block: the chain's
/// `on_initialize` could otherwise move the stage by its deadline before the call lands.
pub const PREDICT_MARGIN_BLOCKS: u32 = 5;

/// Times a predicted commit the chain refused ([`Flight::Refused`]) is sent again; at its next refusal
/// the driver gives up on it and reverts the stage to the chain's view ([`Event::ChainReverted`]). A
/// send whose fate is unknown (lost with its node, or never delivered) does not count: it is sent again
/// for as long as the chain keeps the stage at the commit's epoch, merging or uploading
/// ([`resend_commit`]).
pub const COMMIT_RESENDS: u32 = 3;

/// One due call of a stage, with its predicted effect if the driver may act on it at once.
struct Due {
	stage: u16,
	epoch: u32,
	what: &'static str,
	call: iota_chain::runtime::Call,
	predicted: Option<Vec<Event>>,
}

/// Blocks the driver holds a stage's Training→WeightsUploading change back once its quota is done, while
/// the gradients (whose uploads open at the quota) come in, so that both phase changes go in one
/// extrinsic; past this it sends the first alone and the upload phase's own rule and deadline apply.
pub const UPLOAD_GRACE_BLOCKS: u32 = 3;

impl ChainDriver {
	/// A driver signing with the orchestrator key.
	pub fn new(client: IotaClient, signer: Signer, orch: Arc<Orchestrator>, stages: u16) -> Self {
		Self {
			client,
			signer,
			orch,
			stages,
			last_registry: None,
			quota_seen: HashMap::new(),
			flights: Arc::default(),
			commits: HashMap::new(),
			ahead: HashMap::new(),
		}
	}

	/// The chain client the driver reads and signs with.
	pub fn client(&self) -> &IotaClient {
		&self.client
	}

	/// Reads every miner and validator record (latest finalized state) into a [`Registry`].
	///
	/// # Errors
	/// [`ChainError::Chain`].
	pub async fn refresh_registry(&mut self, block: u32) -> Result<(), ChainError> {
		let chain = self.client.clone();
		self.refresh_registry_at(&chain, block).await
	}

	async fn refresh_registry_at(
		&mut self,
		chain: &IotaClient,
		block: u32,
	) -> Result<(), ChainError> {
		let mut r = Registry::default();
		for (who, info) in chain.miners().await? {
			let standing = match info.status {
				iota_chain::MinerStatus::Active => MinerStanding::Active,
				iota_chain::MinerStatus::Leaving => MinerStanding::Leaving,
				_ => MinerStanding::Unbonding,
			};
			r.miners.insert(who.0, (info.stage, standing));
		}
		for (who, info) in chain.validators().await? {
			r.validators
				.insert(who.0, matches!(info.status, iota_chain::ValidatorStatus::Active));
		}
		self.orch.set_registry(r);
		self.last_registry = Some(block);
		Ok(())
	}

	/// One step at best block `block` (hash `hash`); `skipped`: blocks arrived since the last step that
	/// this one acts past (their events unread, so the registry is refreshed) (module docs). A second step
	/// at the same block is safe: a stage whose extrinsic that block does not hold is left alone.
	///
	/// # Errors
	/// Any [`ChainError`]; the state stays consistent (each part records its own events).
	pub async fn step(
		&mut self,
		block: u32,
		hash: BlockHash,
		skipped: bool,
	) -> Result<(), ChainError> {
		self.orch.set_finalized(self.client.finalized_number().await?);
		let chain = self.client.at_block(hash);
		let events = chain.events_at(hash).await?;
		let registry_event = skipped
			|| events.iter().any(|e| {
				matches!(
					e,
					IotaEvent::MinerRegistered { .. }
						| IotaEvent::ValidatorRegistered { .. }
						| IotaEvent::MinerLeaving { .. }
						| IotaEvent::Unbonding { .. }
						| IotaEvent::MinerSlashed { .. }
						| IotaEvent::MergeCommitted { .. }
				)
			});
		if registry_event || self.last_registry.is_none_or(|b| block >= b + REGISTRY_REFRESH_BLOCKS)
		{
			self.refresh_registry_at(&chain, block).await?;
		}
		// Commits sent again go on their own, one extrinsic per stage, so a call the chain refuses never
		// takes another stage's calls down with it (`batch_all` is all or nothing) nor counts against
		// another stage's resends, and one stage's failed send does not keep the others' from going
		// (the first error fails the step).
		let mut resend = self.settle(&chain, block).await?;
		let mut failed = None;
		while !resend.is_empty() {
			let stage = resend[0].stage;
			let (own, rest): (Vec<Due>, Vec<Due>) =
				resend.into_iter().partition(|d| d.stage == stage);
			resend = rest;
			if let Err(e) = self.send(own).await {
				tracing::warn!(stage, error = %e, "sending a commit again");
				failed.get_or_insert(e);
			}
		}
		if let Some(e) = failed {
			return Err(e);
		}
		self.sync_at(&chain, block).await?;
		resolve_disputes(&self.orch).await?;
		// A pathway log is written once the chain holds the head's commit (a revert must find the
		// epoch's samples still there).
		if !self.unsettled(0, block) && !self.commits.contains_key(&0) {
			write_pathways(&self.orch).await?;
		}
		// Local mode: an epoch's inner-step challenges are drawn once its completion block is final.
		let mut seeds = Vec::new();
		for epoch in self.orch.with_state(|st| st.challenge_seeds_due()) {
			if let Some(seed) = chain.challenge_seed(epoch).await? {
				seeds.push(Event::ChallengeSeed { epoch, seed });
			}
		}
		if !seeds.is_empty() {
			self.orch.record(seeds)?;
		}
		self.drive(&chain, block).await
	}

	/// Whether `stage` has an extrinsic the block the driver acts on does not settle yet.
	fn unsettled(&self, stage: u16, block: u32) -> bool {
		let flights = self.flights.lock().unwrap_or_else(|e| e.into_inner());
		match flights.get(&stage) {
			Some(Flight::Pending) => true,
			Some(Flight::Included(b) | Flight::Refused(b)) => block < *b,
			Some(Flight::Lost) | None => false,
		}
	}

	/// Settles the flights `block` decides, and the stages whose state is ahead of the chain (a predicted
	/// commit that did not land): a commit the chain can still take is returned to be sent again
	/// ([`resend_commit`]), else the stage reverts to the chain's view ([`Event::ChainReverted`]).
	async fn settle(&mut self, chain: &IotaClient, block: u32) -> Result<Vec<Due>, ChainError> {
		let mut resend = Vec::new();
		let mut events = Vec::new();
		for s in 0..self.stages {
			if self.unsettled(s, block) {
				continue;
			}
			// Read before it is taken: a failed read below leaves it for the next step.
			let last = self.flights.lock().unwrap_or_else(|e| e.into_inner()).get(&s).copied();
			let st = chain.stage(s).await?;
			self.flights.lock().unwrap_or_else(|e| e.into_inner()).remove(&s);
			let ours = self.orch.with_state(|state| state.stage(s).map(|v| v.epoch));
			self.commits.retain(|stage, (epoch, _, _)| *stage != s || *epoch >= st.epoch);
			if ours.is_none_or(|e| e <= st.epoch) {
				self.ahead.remove(&s);
				continue;
			}
			// Ahead of the chain with no commit of ours known (the orchestrator restarted after a
			// prediction): the extrinsic may still be in the pool, so give it the margin's blocks while
			// the chain keeps the stage merging.
			let since = *self.ahead.entry(s).or_insert(block);
			if !self.commits.contains_key(&s)
				&& st.phase == Phase::Merging
				&& block < since.saturating_add(PREDICT_MARGIN_BLOCKS)
			{
				continue;
			}
			let decision = self
				.commits
				.get(&s)
				.map(|(epoch, _, sent)| resend_commit(last, *epoch, *sent, st.epoch, st.phase));
			match (decision, self.commits.get_mut(&s)) {
				(Some(Some(refused)), Some((_, call, sent))) => {
					*sent = refused;
					tracing::warn!(
						stage = s,
						epoch = st.epoch,
						phase = ?st.phase,
						refused = *sent,
						last = ?last,
						"a predicted commit is not on chain; sending it again"
					);
					let call = call.clone();
					if st.phase == Phase::WeightsUploading {
						// The chain restarted the round by its deadline before the commit landed. The
						// round the commit closes is complete and every replica attested it, so the driver
						// finishes it: the upload phase closes (every member accounted for), then the
						// commit, in one extrinsic.
						let members = chain.stage_members(s).await?.len() as u32;
						let report = StageReport { backward_done: 0, gradients_submitted: members };
						resend.push(Due {
							stage: s,
							epoch: st.epoch,
							what: "advance_phase (to finish a restarted round)",
							call: calls::advance_phase(s, st.epoch, report),
							predicted: None,
						});
					}
					resend.push(Due {
						stage: s,
						epoch: st.epoch,
						what: "commit_merge (again)",
						call,
						predicted: None,
					});
				},
				_ => {
					self.commits.remove(&s);
					self.ahead.remove(&s);
					tracing::error!(stage = s, chain_epoch = st.epoch, phase = ?st.phase, round = st.round, "a predicted commit did not land and cannot any more; the stage goes back to the chain's view, its replicas resynchronise");
					let members = stage_members(chain, s).await?;
					events.push(Event::ChainReverted {
						stage: s,
						epoch: st.epoch,
						phase: st.phase,
						round: st.round,
						members,
						now_ms: iota_rpc::signing::now_ms(),
					});
				},
			}
		}
		self.orch.record(events)?;
		Ok(resend)
	}

	/// Brings every stage's chain view (latest finalized state) into the state.
	///
	/// # Errors
	/// [`ChainError::Chain`], [`ChainError::Db`].
	pub async fn sync(&self, block: u32) -> Result<(), ChainError> {
		self.sync_at(&self.client, block).await
	}

	async fn sync_at(&self, chain: &IotaClient, block: u32) -> Result<(), ChainError> {
		let mut events = Vec::new();
		for s in 0..self.stages {
			if self.unsettled(s, block) {
				continue;
			}
			let st = chain.stage(s).await?;
			if self.orch.with_state(|state| state.stage(s).is_some_and(|v| v.epoch > st.epoch)) {
				// Ahead at a predicted commit: `settle` deals with it.
				continue;
			}
			let members = stage_members(chain, s).await?;
			let phase = st.phase;
			let same = self.orch.with_state(|state| {
				state.stage(s).is_some_and(|v| {
					v.epoch == st.epoch
						&& v.phase == phase
						&& v.round == st.round
						&& v.members == members
				})
			});
			if !same {
				events.push(Event::ChainStage {
					stage: s,
					epoch: st.epoch,
					phase,
					round: st.round,
					members,
					block,
					now_ms: iota_rpc::signing::now_ms(),
				});
			}
			if phase == Phase::Merging {
				let need = self
					.orch
					.with_state(|state| state.stage(s).is_none_or(|v| v.merge.plan.is_none()));
				if need {
					if let Some(seed) = chain.epoch_seed(st.epoch).await? {
						events.push(Event::MergeSeed {
							stage: s,
							epoch: st.epoch,
							round: st.round,
							epoch_seed: seed,
						});
					}
				}
			}
		}
		self.orch.record(events)?;
		Ok(())
	}

	/// Every stage's due call (its commit if the plan is complete, else its phase change if
	/// [`phase_changes`] allows one or two), as one extrinsic. A stage with an
	/// unsettled extrinsic, or whose state is ahead of the chain ([`ChainDriver::settle`]'s), is left alone.
	async fn drive(&mut self, chain: &IotaClient, block: u32) -> Result<(), ChainError> {
		let cfg = chain.run_config().await?.ok_or(ChainError::NoRunConfig)?;
		let timeout = cfg.phase_timeout;
		let mut due = Vec::new();
		for s in 0..self.stages {
			if self.unsettled(s, block) {
				continue;
			}
			let stage = chain.stage(s).await?;
			if self.orch.with_state(|st| st.stage(s).is_some_and(|v| v.epoch > stage.epoch)) {
				continue;
			}
			// Time enough before the phase's deadline that the call lands before `on_initialize` could
			// move the stage: the driver may act on its effect at once.
			let may_predict = block.saturating_add(PREDICT_MARGIN_BLOCKS)
				< stage.phase_since.saturating_add(timeout);
			let chain_members = stage_members(chain, s).await?;
			if let Some(plan) = self.orch.with_state(|st| st.commit_plan(s)) {
				tracing::info!(
					stage = plan.stage,
					epoch = plan.epoch,
					members = plan.members,
					samples = plan.samples,
					predicted = may_predict,
					"commit_merge"
				);
				let epoch = plan.epoch;
				let call = commit_call(plan);
				let predicted = (may_predict && stage.epoch == epoch).then(|| {
					// The commit's effect (`commit_merge`): the next epoch, Training, round 0, the
					// leaving members dropped.
					let leaving = self.orch.leaving_miners();
					let members =
						chain_members.iter().filter(|m| !leaving.contains(&m.0)).cloned().collect();
					vec![predicted_stage(s, epoch + 1, Phase::Training, 0, members)]
				});
				if predicted.is_some() {
					self.commits.insert(s, (epoch, call.clone(), 0));
				}
				due.push(Due { stage: s, epoch, what: "commit_merge", call, predicted });
				continue;
			}
			let report = self.orch.with_state(|st| st.report(s));
			let progress = StageProgress {
				phase: stage.phase,
				phase_since: u64::from(stage.phase_since),
				backward_quota: cfg.backward_quota,
				members: chain_members.len() as u32,
				report,
			};
			let Some((t, both)) = phase_changes(&progress, u64::from(block), u64::from(timeout))
			else {
				continue;
			};
			// Quota done but gradients still coming: hold the change back a few blocks so that both
			// changes go in one extrinsic (one wait for inclusion, not two).
			if progress.phase == Phase::Training && !t.timed_out && !both {
				let since = match self.quota_seen.get(&s) {
					Some(&(epoch, since)) if epoch == stage.epoch => since,
					_ => {
						self.quota_seen.insert(s, (stage.epoch, block));
						block
					},
				};
				if block < since.saturating_add(UPLOAD_GRACE_BLOCKS) {
					continue;
				}
			}
			let n = if both { 2 } else { 1 };
			let to = if both { Phase::Merging } else { t.to };
			// A timed-out change (a restarted round, a short upload phase) waits for its block: the
			// chain's rules, not the driver's, decide where it lands.
			let predicted = (may_predict && !t.timed_out).then(|| {
				let mut ev = vec![predicted_stage(s, stage.epoch, to, stage.round, chain_members)];
				if to == Phase::Merging {
					ev.push(Event::MergeSeed {
						stage: s,
						epoch: stage.epoch,
						round: stage.round,
						epoch_seed: [0; 32],
					});
				}
				ev
			});
			let predicted = match predicted {
				Some(mut ev) if to == Phase::Merging => {
					match chain.epoch_seed(stage.epoch).await? {
						Some(seed) => {
							if let Some(Event::MergeSeed { epoch_seed, .. }) = ev.last_mut() {
								*epoch_seed = seed;
							}
							Some(ev)
						},
						None => None,
					}
				},
				other => other,
			};
			tracing::info!(stage = s, epoch = stage.epoch, from = ?progress.phase, to = ?t.to, timed_out = t.timed_out, phase_changes = n, predicted = predicted.is_some(), ?report, "advance_phase");
			let calls: Vec<_> =
				(0..n).map(|_| calls::advance_phase(s, stage.epoch, report)).collect();
			for (i, call) in calls.into_iter().enumerate() {
				// The prediction goes with the first call of the stage (both are in one extrinsic).
				let predicted = if i == 0 { predicted.clone() } else { None };
				due.push(Due {
					stage: s,
					epoch: stage.epoch,
					what: "advance_phase",
					call,
					predicted,
				});
			}
		}
		self.send(due).await
	}

	/// Sends `due` as one extrinsic. Once the pool accepted it, the predicted effects are recorded (those
	/// stages go on at once, their wait from when the call became due charged); a task then waits for its
	/// inclusion, records it ([`Event::ChainWait`]) and settles the stages' flights. If the chain refuses
	/// the batch (one stale call reverts all of `batch_all`), the next steps read the chain again: the
	/// predicted phase changes are corrected by the chain's view and sent anew, and a commit is sent
	/// again or reverted ([`ChainDriver::settle`]).
	async fn send(&self, due: Vec<Due>) -> Result<(), ChainError> {
		if due.is_empty() {
			return Ok(());
		}
		let batch: Vec<_> = due.iter().map(|d| d.call.clone()).collect();
		let all: Vec<(u16, u32)> = due.iter().map(|d| (d.stage, d.epoch)).collect();
		let mut stages: Vec<u16> = all.iter().map(|(s, _)| *s).collect();
		stages.sort_unstable();
		stages.dedup();
		let submitted_ms = iota_rpc::signing::now_ms();
		let pending = match self.client.submit_calls_pooled(&self.signer, batch).await {
			Ok(Some(p)) => p,
			Ok(None) => return Ok(()),
			Err(e) => {
				// The node turned the submission away (not lost in transport): a refusal like any other.
				if !e.is_transport() {
					let best = self.client.best_number().await.unwrap_or(0);
					let mut flights = self.flights.lock().unwrap_or_else(|e| e.into_inner());
					for s in &stages {
						flights.insert(*s, Flight::Refused(best));
					}
				}
				return Err(e.into());
			},
		};
		{
			let mut flights = self.flights.lock().unwrap_or_else(|e| e.into_inner());
			for s in &stages {
				flights.insert(*s, Flight::Pending);
			}
		}
		let released_ms = iota_rpc::signing::now_ms();
		let mut released = Vec::new();
		let mut events = Vec::new();
		for d in due.iter() {
			let since = self.orch.take_due_since(d.stage).unwrap_or(submitted_ms).min(submitted_ms);
			if let Some(pred) = &d.predicted {
				released.push(d.stage);
				for mut ev in pred.clone() {
					if let Event::ChainPredicted { waited_ms, now_ms, .. } = &mut ev {
						*waited_ms = released_ms.saturating_sub(since);
						*now_ms = released_ms;
					}
					events.push(ev);
				}
			}
		}
		if let Err(e) = self.orch.record(events) {
			tracing::warn!(error = %e, "recording predicted chain views");
		}
		let (orch, flights, client) =
			(self.orch.clone(), self.flights.clone(), self.client.clone());
		let whats: Vec<&'static str> = due.iter().map(|d| d.what).collect();
		tokio::spawn(async move {
			let r = pending.wait(Wait::InBlock).await;
			if r.is_ok() || r.as_ref().is_err_and(iota_chain::Error::ran_in_block) {
				let ev = Event::ChainWait {
					calls: all,
					submitted_ms,
					included_ms: iota_rpc::signing::now_ms(),
					released,
				};
				if let Err(e) = orch.record(vec![ev]) {
					tracing::warn!(error = %e, "recording a chain wait");
				}
			}
			let settled = match &r {
				Ok(inc) => Flight::Included(inc.block_number),
				Err(e) if e.is_refusal() => {
					// The node's best block now is at or after the refusal's (0 if it cannot say:
					// then any step settles it, as before).
					let best = client.best_number().await.unwrap_or(0);
					tracing::warn!(?stages, calls = ?whats, error = %e, best, "extrinsic refused; the chain's view decides at a step on this block or a later one");
					Flight::Refused(best)
				},
				Err(e) => {
					tracing::warn!(?stages, calls = ?whats, error = %e, "extrinsic lost; the chain's view decides at the next step");
					Flight::Lost
				},
			};
			{
				let mut f = flights.lock().unwrap_or_else(|e| e.into_inner());
				for s in &stages {
					f.insert(*s, settled);
				}
			}
			orch.wake_driver();
		});
		Ok(())
	}
}

/// The members of `stage` in the chain state `chain` reads, in chain order.
async fn stage_members(chain: &IotaClient, stage: u16) -> Result<Vec<AccountId>, ChainError> {
	Ok(chain
		.stage_members(stage)
		.await?
		.into_iter()
		.map(|a| AccountId::from(a.0))
		.collect())
}

/// A [`Event::ChainPredicted`] of `stage` (its wait and time are filled in when the pool accepts the call).
fn predicted_stage(
	stage: u16,
	epoch: u32,
	phase: Phase,
	round: u32,
	members: Vec<AccountId>,
) -> Event {
	Event::ChainPredicted { stage, epoch, phase, round, members, waited_ms: 0, now_ms: 0 }
}

/// Whether a predicted commit of `commit_epoch` that the chain does not hold yet is sent again, given
/// how its last send ended (`last`), the refusals counted so far (`refused`) and the stage's chain view
/// (`chain_epoch`, `phase`): `Some(refusals counted after this one)` to send it again, `None` to give it
/// up (the driver reverts the stage). The chain takes it only at its epoch, merging or uploading. Only
/// the chain's refusals count ([`Flight::Refused`]): a send lost with its node (or never delivered) is
/// no verdict on the call, and is sent again without limit; the refusal after [`COMMIT_RESENDS`] resends
/// gives it up.
fn resend_commit(
	last: Option<Flight>,
	commit_epoch: u32,
	refused: u32,
	chain_epoch: u32,
	phase: Phase,
) -> Option<u32> {
	let takes =
		commit_epoch == chain_epoch && matches!(phase, Phase::Merging | Phase::WeightsUploading);
	let refused = refused + u32::from(matches!(last, Some(Flight::Refused(_))));
	(takes && refused <= COMMIT_RESENDS).then_some(refused)
}

/// The `commit_merge` call of a complete plan.
fn commit_call(plan: CommitPlan) -> iota_chain::runtime::Call {
	let obj = |o: &Obj| iota_chain::ObjectRef {
		key: iota_chain::BoundedVec(o.key.as_bytes().to_vec()),
		content_hash: o.hash,
	};
	let manifest = iota_chain::MergeManifest {
		members: plan.members,
		param_count: plan.param_count,
		samples: plan.samples,
		shards: iota_chain::BoundedVec(plan.shards.iter().map(obj).collect()),
		state_hash: plan.state_hash,
		checkpoint: plan.checkpoint.as_ref().map(obj),
	};
	calls::commit_merge(plan.stage, plan.epoch, manifest)
}

/// Recomputes every disputed shard of the current merge rounds from the submissions (docs/design.md §6) and
/// records the correct object: the copy whose hash matches the recomputation, or, when none does, the
/// orchestrator's own upload (`keys::run_report`). The mismatch itself stays in the epoch's audit record
/// for validators.
///
/// # Errors
/// [`ChainError::Storage`], [`ChainError::Merge`], [`ChainError::Db`].
pub async fn resolve_disputes(orch: &Orchestrator) -> Result<(), ChainError> {
	let stages = orch.with_state(|st| st.config().stages);
	for s in 0..stages {
		let (disputed, subs, run, codec) = orch.with_state(|st| {
			(st.disputed(s), st.submissions(s), st.config().run.clone(), st.config().merge_codec)
		});
		for (epoch, round, shard, range) in disputed {
			let p = orch.with_state(|st| {
				st.config().param_counts.get(usize::from(s)).copied().unwrap_or(0)
			});
			let bytes = reduce_shard(orch.store(), codec, &subs, shard, range, p).await?;
			let hash = ContentHash::of(&bytes);
			let copies: Vec<CopyRec> = orch.with_state(|st| st.copies(s, shard));
			let object = match copies.iter().find(|c| c.object.hash == hash) {
				Some(c) => c.object.clone(),
				None => {
					let name = keys::Id::new(format!("shard-s{s}-e{epoch}-r{round}-k{shard}"))
						.map_err(|_| ChainError::NoRunConfig)?;
					let r = orch
						.store()
						.put(&keys::run_report(&run, &name), Bytes::from(bytes))
						.await?;
					r
				},
			};
			tracing::warn!(
				stage = s,
				epoch,
				shard,
				"shard copies disagreed; resolved by recomputation"
			);
			orch.record(vec![Event::ShardResolved { stage: s, epoch, round, shard, object }])?;
		}
	}
	Ok(())
}

/// Writes the pathway log of every epoch whose head merge is committed, and records its hash.
///
/// # Errors
/// [`ChainError::Storage`], [`ChainError::Db`].
pub async fn write_pathways(orch: &Orchestrator) -> Result<(), ChainError> {
	for epoch in orch.with_state(|st| st.pathway_due()) {
		let (log, run) = orch.with_state(|st| (st.pathway_log(epoch), st.config().run.clone()));
		let r = orch
			.store()
			.put(&keys::pathway_log(&run, u64::from(epoch)), Bytes::from(log.to_bytes()))
			.await?;
		tracing::info!(epoch, records = log.records.len(), hash = %r.hash, "pathway log written");
		orch.record(vec![Event::PathwayWritten { epoch, object: r }])?;
	}
	Ok(())
}

/// Recomputes shard `[start, end)` bit-exactly as a reducer must: [`iota_protocol::reduce_shard`] over
/// the chunk-aligned span of each submission in `codec` (read with a ranged GET, every chunk checked),
/// in the submissions' listed order, as the bytes a reducer uploads ([`iota_protocol::reduce_shard_bytes`]).
///
/// # Errors
/// [`ChainError::Storage`], [`ChainError::Merge`] (a submission fails its chunk check or holds a
/// non-finite value; accepted submissions never do).
pub async fn reduce_shard(
	store: &ObjectStore,
	codec: iota_protocol::MergeCodec,
	subs: &[(AccountId, Submission)],
	shard: u32,
	range: [u64; 2],
	param_count: u64,
) -> Result<Vec<u8>, ChainError> {
	let [start, end] = range;
	let bytes = chunk_span(codec, start, end, param_count).bytes;
	let mut spans = Vec::with_capacity(subs.len());
	for (_, s) in subs {
		spans.push(store.get_range(&s.object.key, bytes.clone()).await?);
	}
	let inputs: Vec<SpanInput<'_>> = subs
		.iter()
		.zip(&spans)
		.map(|((_, s), span)| SpanInput { samples: s.samples, chunk_hashes: &s.chunk_hashes, span })
		.collect();
	iota_protocol::reduce_shard_bytes(codec, &inputs, start, end, param_count)
		.map_err(|source| ChainError::Merge { shard, source })
}

#[cfg(test)]
mod tests {
	use super::*;

	#[test]
	fn a_commit_is_given_up_only_at_the_refusal_after_its_resends() {
		let merging = |last, refused| resend_commit(last, 4, refused, 4, Phase::Merging);
		// Refusals count, one per send, up to COMMIT_RESENDS resends; the next refusal gives up.
		let mut refused = 0;
		for n in 1..=COMMIT_RESENDS {
			refused = merging(Some(Flight::Refused(9)), refused).expect("sent again");
			assert_eq!(refused, n);
		}
		assert_eq!(merging(Some(Flight::Refused(9)), refused), None);
		// A lost send (or none known) counts nothing, even after the last allowed refusal.
		assert_eq!(merging(Some(Flight::Lost), refused), Some(COMMIT_RESENDS));
		assert_eq!(merging(None, 0), Some(0));
		// An upload-phase restart of the round still takes it; another epoch or phase does not.
		assert_eq!(resend_commit(Some(Flight::Lost), 4, 0, 4, Phase::WeightsUploading), Some(0));
		assert_eq!(resend_commit(Some(Flight::Lost), 4, 0, 5, Phase::Merging), None);
		assert_eq!(resend_commit(Some(Flight::Lost), 4, 0, 4, Phase::Training), None);
	}
}
