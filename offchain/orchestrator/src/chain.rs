//! The chain side (docs/design.md §3 step 6, §6): the registry and each stage's phase, epoch, round and members
//! from the **best block** the driver acts on; the phase driver that asks `advance_phase` when
//! [`iota_primitives::next_phase`] allows it and `commit_merge` when the state's
//! `CommitPlan` ([`crate::state::CommitPlan`]) is complete; merge seeds; shard disputes; pathway logs.
//!
//! One [`ChainDriver::step`] per best block (the newest one when several arrived during a step): refresh
//! the registry (on registry events, after skipped blocks, and every [`REGISTRY_REFRESH_BLOCKS`] blocks), sync every stage into
//! the state ([`Event::ChainStage`], and [`Event::MergeSeed`] once a stage merges), resolve disputed
//! shards, write due pathway logs, then drive. Everything due in a step goes as **one** extrinsic
//! (`batch_all` of every stage's phase change and commit) that waits for best-block inclusion only, so
//! the next step reads a block that holds it and never sends it twice; finality is left to the chain
//! (no money moves here). A batch the chain refuses is sent again call by call, so one stage's stale call
//! never holds back another's.

use std::collections::HashMap;
use std::sync::Arc;

use bytes::Bytes;
use iota_chain::{calls, BlockHash, IotaClient, IotaEvent, Signer, Wait};
use iota_primitives::{ContentHash, Phase, StageProgress};
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
}

/// Blocks the driver holds a stage's Training→WeightsUploading change back once its quota is done, while
/// the gradients (whose uploads open at the quota) come in, so that both phase changes go in one
/// extrinsic; past this it sends the first alone and the upload phase's own rule and deadline apply.
pub const UPLOAD_GRACE_BLOCKS: u32 = 3;

impl ChainDriver {
	/// A driver signing with the orchestrator key.
	pub fn new(client: IotaClient, signer: Signer, orch: Arc<Orchestrator>, stages: u16) -> Self {
		Self { client, signer, orch, stages, last_registry: None, quota_seen: HashMap::new() }
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
	/// this one acts past (their events unread, so the registry is refreshed) (module docs). Returns
	/// whether it submitted an extrinsic: a second step at the same block is safe only when the first sent
	/// none (it reads the same chain state, so it would send the same calls again).
	///
	/// # Errors
	/// Any [`ChainError`]; the state stays consistent (each part records its own events).
	pub async fn step(
		&mut self,
		block: u32,
		hash: BlockHash,
		skipped: bool,
	) -> Result<bool, ChainError> {
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
		self.sync_at(&chain, block).await?;
		resolve_disputes(&self.orch).await?;
		write_pathways(&self.orch).await?;
		self.drive(&chain, block).await
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
			let st = chain.stage(s).await?;
			let members: Vec<AccountId> = chain
				.stage_members(s)
				.await?
				.into_iter()
				.map(|a| AccountId::from(a.0))
				.collect();
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
	/// [`phase_changes`] allows one or two), sent as one extrinsic; whether there was any.
	async fn drive(&mut self, chain: &IotaClient, block: u32) -> Result<bool, ChainError> {
		let cfg = chain.run_config().await?.ok_or(ChainError::NoRunConfig)?;
		let mut due = Vec::new();
		for s in 0..self.stages {
			if let Some(plan) = self.orch.with_state(|st| st.commit_plan(s)) {
				tracing::info!(
					stage = plan.stage,
					epoch = plan.epoch,
					members = plan.members,
					samples = plan.samples,
					"commit_merge"
				);
				let epoch = plan.epoch;
				due.push((s, epoch, "commit_merge", commit_call(plan)));
				continue;
			}
			let stage = chain.stage(s).await?;
			let members = chain.stage_members(s).await?.len() as u32;
			let report = self.orch.with_state(|st| st.report(s));
			let progress = StageProgress {
				phase: stage.phase,
				phase_since: u64::from(stage.phase_since),
				backward_quota: cfg.backward_quota,
				members,
				report,
			};
			let (now, timeout) = (u64::from(block), u64::from(cfg.phase_timeout));
			let Some((t, both)) = phase_changes(&progress, now, timeout) else { continue };
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
			tracing::info!(stage = s, epoch = stage.epoch, from = ?progress.phase, to = ?t.to, timed_out = t.timed_out, phase_changes = n, ?report, "advance_phase");
			for _ in 0..n {
				due.push((
					s,
					stage.epoch,
					"advance_phase",
					calls::advance_phase(s, stage.epoch, report),
				));
			}
		}
		let sent = !due.is_empty();
		self.send(due).await?;
		Ok(sent)
	}

	/// Sends `due` ((stage, epoch, what, call) each) as one extrinsic and waits for its inclusion; if the
	/// chain refuses the batch (one stale call reverts all of `batch_all`), each call again on its own.
	/// Each extrinsic that reached a block is recorded as an [`Event::ChainWait`].
	async fn send(
		&self,
		due: Vec<(u16, u32, &'static str, iota_chain::runtime::Call)>,
	) -> Result<(), ChainError> {
		if due.is_empty() {
			return Ok(());
		}
		let batch: Vec<_> = due.iter().map(|(_, _, _, c)| c.clone()).collect();
		let all: Vec<_> = due.iter().map(|(s, e, _, _)| (*s, *e)).collect();
		let n = batch.len();
		match self.submit(batch, all).await {
			Ok(()) => Ok(()),
			Err(e) if n > 1 && is_refusal(&e) => {
				tracing::warn!(calls = n, error = %e, "batch refused; sending its calls one by one");
				for (stage, epoch, what, call) in due {
					match self.submit(vec![call], vec![(stage, epoch)]).await {
						Ok(()) => {},
						Err(e) if is_refusal(&e) => {
							tracing::warn!(stage, error = %e, "{what} refused");
						},
						Err(e) => return Err(e.into()),
					}
				}
				Ok(())
			},
			Err(e) if is_refusal(&e) => {
				let (stage, _, what, _) = &due[0];
				tracing::warn!(stage, error = %e, "{what} refused");
				Ok(())
			},
			Err(e) => Err(e.into()),
		}
	}

	/// One extrinsic of `calls` (for `(stage, epoch)` each of `of`), waiting for inclusion; its wait is
	/// recorded whether its dispatch succeeded or was refused in the block.
	async fn submit(
		&self,
		calls: Vec<iota_chain::runtime::Call>,
		of: Vec<(u16, u32)>,
	) -> Result<(), iota_chain::Error> {
		let submitted_ms = iota_rpc::signing::now_ms();
		let r = self.client.submit_calls(&self.signer, calls, Wait::InBlock).await;
		if r.is_ok() || r.as_ref().is_err_and(is_refusal) {
			let ev = Event::ChainWait {
				calls: of,
				submitted_ms,
				included_ms: iota_rpc::signing::now_ms(),
			};
			if let Err(e) = self.orch.record(vec![ev]) {
				tracing::warn!(error = %e, "recording a chain wait");
			}
		}
		r.map(|_| ())
	}
}

/// A dispatch the chain ran and refused (as opposed to a lost connection or an invalid extrinsic).
fn is_refusal(e: &iota_chain::Error) -> bool {
	matches!(e, iota_chain::Error::Pallet { .. } | iota_chain::Error::Dispatch(_))
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
		let (disputed, subs, run) =
			orch.with_state(|st| (st.disputed(s), st.submissions(s), st.config().run.clone()));
		for (epoch, round, shard, range) in disputed {
			let p = orch.with_state(|st| {
				st.config().param_counts.get(usize::from(s)).copied().unwrap_or(0)
			});
			let bytes = reduce_shard(orch.store(), &subs, shard, range, p).await?;
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
/// the chunk-aligned span of each submission (read with a ranged GET, every chunk checked), in the
/// submissions' listed order, as little-endian f32 bytes.
///
/// # Errors
/// [`ChainError::Storage`], [`ChainError::Merge`] (a submission fails its chunk check or holds a
/// non-finite value; accepted submissions never do).
pub async fn reduce_shard(
	store: &ObjectStore,
	subs: &[(AccountId, Submission)],
	shard: u32,
	range: [u64; 2],
	param_count: u64,
) -> Result<Vec<u8>, ChainError> {
	let [start, end] = range;
	let (_, bytes) = chunk_span(start, end, param_count);
	let mut spans = Vec::with_capacity(subs.len());
	for (_, s) in subs {
		spans.push(store.get_range(&s.object.key, bytes.clone()).await?);
	}
	let inputs: Vec<SpanInput<'_>> = subs
		.iter()
		.zip(&spans)
		.map(|((_, s), span)| SpanInput { samples: s.samples, chunk_hashes: &s.chunk_hashes, span })
		.collect();
	let values = iota_protocol::reduce_shard(&inputs, start, end, param_count)
		.map_err(|source| ChainError::Merge { shard, source })?;
	Ok(iota_protocol::f32le::to_bytes(&values))
}
