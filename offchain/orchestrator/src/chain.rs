//! The chain side (docs/design.md §3 step 6, §6): the registry and each stage's phase, epoch, round and members
//! from **finalized** chain state; the phase driver that asks `advance_phase` when
//! [`iota_primitives::next_phase`] allows it and `commit_merge` when the state's
//! `CommitPlan` ([`crate::state::CommitPlan`]) is complete; merge seeds; shard disputes; pathway logs.
//!
//! One [`ChainDriver::step`] per finalized block: refresh the registry (on registry events and every
//! [`REGISTRY_REFRESH_BLOCKS`] blocks), sync every stage into the state ([`Event::ChainStage`], and
//! [`Event::MergeSeed`] once a stage merges), resolve disputed shards, write due pathway logs, then drive.
//! Extrinsics are sent one at a time and wait for finality, so a step never races itself.

use std::sync::Arc;

use bytes::Bytes;
use iota_chain::{IotaClient, IotaEvent, Signer};
use iota_primitives::{next_phase, ContentHash, Phase, StageProgress};
use iota_protocol::{chunk_span, SpanInput};
use iota_rpc::AccountId;
use iota_storage::{keys, ObjectStore};

use crate::auth::{MinerStanding, Registry};
use crate::server::Orchestrator;
use crate::state::{CommitPlan, CopyRec, Event, Obj, Submission};

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
}

impl ChainDriver {
	/// A driver signing with the orchestrator key.
	pub fn new(client: IotaClient, signer: Signer, orch: Arc<Orchestrator>, stages: u16) -> Self {
		Self { client, signer, orch, stages, last_registry: None }
	}

	/// The chain client the driver reads and signs with.
	pub fn client(&self) -> &IotaClient {
		&self.client
	}

	/// Reads every miner and validator record into a [`Registry`].
	///
	/// # Errors
	/// [`ChainError::Chain`].
	pub async fn refresh_registry(&mut self, block: u32) -> Result<(), ChainError> {
		let mut r = Registry::default();
		for (who, info) in self.client.miners().await? {
			let standing = match info.status {
				iota_chain::MinerStatus::Active => MinerStanding::Active,
				iota_chain::MinerStatus::Leaving => MinerStanding::Leaving,
				_ => MinerStanding::Unbonding,
			};
			r.miners.insert(who.0, (info.stage, standing));
		}
		for (who, info) in self.client.validators().await? {
			r.validators
				.insert(who.0, matches!(info.status, iota_chain::ValidatorStatus::Active));
		}
		self.orch.set_registry(r);
		self.last_registry = Some(block);
		Ok(())
	}

	/// One step at finalized block `block` with its pallet-iota `events` (module docs).
	///
	/// # Errors
	/// Any [`ChainError`]; the state stays consistent (each part records its own events).
	pub async fn step(&mut self, block: u32, events: &[IotaEvent]) -> Result<(), ChainError> {
		self.orch.set_finalized(block);
		let registry_event = events.iter().any(|e| {
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
			self.refresh_registry(block).await?;
		}
		self.sync(block).await?;
		resolve_disputes(&self.orch).await?;
		write_pathways(&self.orch).await?;
		self.drive(block).await?;
		Ok(())
	}

	/// Brings every stage's chain view into the state.
	///
	/// # Errors
	/// [`ChainError::Chain`], [`ChainError::Db`].
	pub async fn sync(&self, block: u32) -> Result<(), ChainError> {
		let mut events = Vec::new();
		for s in 0..self.stages {
			let st = self.client.stage(s).await?;
			let members: Vec<AccountId> = self
				.client
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
					if let Some(seed) = self.client.epoch_seed(st.epoch).await? {
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

	async fn drive(&self, block: u32) -> Result<(), ChainError> {
		let cfg = self.client.run_config().await?.ok_or(ChainError::NoRunConfig)?;
		for s in 0..self.stages {
			if let Some(plan) = self.orch.with_state(|st| st.commit_plan(s)) {
				self.commit(plan).await?;
				continue;
			}
			let chain = self.client.stage(s).await?;
			let members = self.client.stage_members(s).await?.len() as u32;
			let report = self.orch.with_state(|st| st.report(s));
			let progress = StageProgress {
				phase: chain.phase,
				phase_since: u64::from(chain.phase_since),
				backward_quota: cfg.backward_quota,
				members,
				report,
			};
			if let Ok(t) = next_phase(&progress, u64::from(block), u64::from(cfg.phase_timeout)) {
				tracing::info!(stage = s, epoch = chain.epoch, from = ?progress.phase, to = ?t.to, timed_out = t.timed_out, ?report, "advance_phase");
				if let Err(e) =
					self.client.advance_phase(&self.signer, s, chain.epoch, report).await
				{
					tracing::warn!(stage = s, error = %e, "advance_phase refused");
				}
			}
		}
		Ok(())
	}

	async fn commit(&self, plan: CommitPlan) -> Result<(), ChainError> {
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
		tracing::info!(
			stage = plan.stage,
			epoch = plan.epoch,
			members = plan.members,
			samples = plan.samples,
			"commit_merge"
		);
		if let Err(e) =
			self.client.commit_merge(&self.signer, plan.stage, plan.epoch, manifest).await
		{
			tracing::warn!(stage = plan.stage, error = %e, "commit_merge refused");
		}
		Ok(())
	}
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
