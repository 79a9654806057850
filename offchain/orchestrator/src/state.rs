//! The orchestrator's state machine (DESIGN §3 steps 2–6): pure, no I/O. Time (`now_ms`) and chain facts
//! come in as arguments; every accepted change is an [`Event`] that [`State::apply`] folds in, so the
//! same events replayed from the database after a restart rebuild the same state ([`crate::db`]).
//!
//! Decisions are split from their effects: `plan_*`/`check_*` methods take `&self` and return the
//! [`Event`] to record (or a [`Refusal`] with its [`ErrorCode`]); the server persists the event and then
//! calls [`State::apply`]. A refused request therefore never changes state.
//!
//! What it tracks:
//! - **Queues** per stage: samples waiting for a forward at stage `s` and samples waiting for a backward
//!   at stage `s`, oldest (lowest sample id) first. The head's forward queue is implicit: while the head
//!   is `Training` at epoch `e` it issues samples `e·Q + i`, `i < Q`; re-listed head items come first.
//! - **Leases**: one work item held by one miner until `expires_at_ms` (the chain's `lease_timeout_secs`
//!   unless overridden); at most `max_leases` per miner; expired or released leases are re-listed.
//! - **Routing of backward passes**: an item goes to the miner that ran the stage's forward while that
//!   miner is live (a member of the stage, seen within one lease period, and not the holder of an expired
//!   lease of this item); otherwise to any miner of the stage, which recomputes the forward
//!   (`BackwardWork::forward_by` tells it; DESIGN §3 step 5).
//! - **Epoch gating**: a stage leases only items of its current epoch while `Training`; items of a later
//!   epoch wait; items of an earlier epoch (left behind by a timed-out phase) are dropped.
//! - **Merge bookkeeping** per stage and round: gradient submissions, the butterfly plan (brief §6) from
//!   the chain's epoch seed, the reduced copies of each shard compared by hash (a mismatch is recorded and
//!   waits for [`Event::ShardResolved`]), state-hash attestations and the checkpoint, until the manifest
//!   can be committed ([`State::commit_plan`]).
//! - **Pathway records** (who ran what, the loss) and activity counters for `iota_status`.

use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};

use iota_primitives::{
	butterfly_shards, derive_seed, ContentHash, Phase, ShardDescriptor, StageReport,
};
use iota_rpc::types::{EpochSummary, IdleReason, LeaseId, MinerActivity, StageStatus, TensorRef};
use iota_rpc::{AccountId, ErrorCode, ObjectEntry, PathwayLog, PathwayRecord};
use iota_storage::keys::{self, Direction, Id};
use serde::{Deserialize, Serialize};

/// A refused request: the JSON-RPC error code and a message naming what was expected and what came.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{code:?}: {message}")]
pub struct Refusal {
	/// The error code the client sees.
	pub code: ErrorCode,
	/// Human-readable reason.
	pub message: String,
}

impl Refusal {
	/// A refusal with `code`.
	pub fn new(code: ErrorCode, message: impl Into<String>) -> Self {
		Self { code, message: message.into() }
	}
}

fn refuse<T>(code: ErrorCode, message: impl Into<String>) -> Result<T, Refusal> {
	Err(Refusal::new(code, message))
}

/// An object in the bucket as the state records it: key, BLAKE3 and size in bytes.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Obj {
	/// Object key.
	pub key: String,
	/// BLAKE3 of its bytes.
	pub hash: ContentHash,
	/// Size in bytes.
	pub size: u64,
}

impl Obj {
	/// From a reported tensor.
	pub fn from_tensor(t: &TensorRef) -> Self {
		Self { key: t.key.clone(), hash: t.hash, size: t.size }
	}

	fn entry(&self) -> ObjectEntry {
		ObjectEntry { key: self.key.clone(), hash: self.hash }
	}
}

/// Fixed parameters of the state machine (from the run spec and the chain's run config).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct StateConfig {
	/// Run id (key scope).
	pub run: Id,
	/// Pipeline stages.
	pub stages: u16,
	/// Backward passes per stage per epoch (`Q`; samples of epoch `e` are `e·Q + i`).
	pub backward_quota: u32,
	/// Lease duration in milliseconds.
	pub lease_ms: u64,
	/// Most leases one miner may hold at once.
	pub max_leases: u32,
	/// Tokens in one sample (`B·T`).
	pub tokens_per_sample: u64,
	/// Shape `[B, T, width]` of every tensor crossing a cut.
	pub boundary_shape: [u64; 3],
	/// Flat gradient length `P` of each stage, in f32 elements.
	pub param_counts: Vec<u64>,
}

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
	},
	/// The tail reported the loss of a lease's sample.
	LossReported {
		/// Lease id.
		lease: LeaseId,
		/// Mean cross-entropy, nats.
		loss: f32,
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
	/// A gradient submission was accepted (phase `WeightsUploading`).
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
	/// The chain's view of a stage changed (finalized state).
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
	/// The pathway log of an epoch was written.
	PathwayWritten {
		/// Epoch.
		epoch: u32,
		/// The log object.
		object: Obj,
	},
}

/// A sample's accepted work.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct SampleState {
	/// Epoch of the sample.
	pub epoch: u32,
	/// Per stage: who ran the accepted forward and its output (tail: the gradient w.r.t. its input).
	pub forward: Vec<Option<(AccountId, Option<Obj>)>>,
	/// Per stage: who ran the accepted backward and its output (head: none).
	pub backward: Vec<Option<(AccountId, Option<Obj>)>>,
	/// The tail's loss.
	pub loss: Option<f32>,
	/// Loss reported on a tail lease not yet completed: (lease, loss).
	pub pending_loss: Option<(LeaseId, f32)>,
}

impl SampleState {
	/// Whether the head's backward is done (the sample is complete).
	pub fn complete(&self) -> bool {
		self.backward.first().is_some_and(Option::is_some)
	}
}

/// A backward item waiting in a queue.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
struct BackwardItem {
	/// Routed to anyone (the forward miner let a lease of it expire).
	open: bool,
}

/// The plan of one merge round (brief §6).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MergePlan {
	/// Round.
	pub round: u32,
	/// The round's butterfly seed.
	pub seed: [u8; 32],
	/// Members: submitters sorted by account bytes.
	pub members: Vec<AccountId>,
	/// The shard table.
	pub shards: Vec<ShardDescriptor>,
	/// Flat gradient length.
	pub param_count: u64,
	/// The replica asked for the full checkpoint.
	pub checkpoint_by: AccountId,
}

/// An accepted gradient submission.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Submission {
	/// The object.
	pub object: Obj,
	/// Its chunk hashes.
	pub chunk_hashes: Vec<ContentHash>,
	/// Micro-batches summed.
	pub samples: u32,
}

/// One accepted reduced copy.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CopyRec {
	/// Reducer.
	pub miner: AccountId,
	/// The copy.
	pub object: Obj,
}

/// Merge progress of one stage in its current epoch.
#[derive(Clone, Debug, Default)]
pub struct MergeState {
	/// Current round.
	pub round: u32,
	/// Submissions of the round, keyed by account bytes (= butterfly order).
	pub submissions: BTreeMap<[u8; 32], (AccountId, Submission)>,
	/// The plan, once the seed is known and the stage is merging.
	pub plan: Option<MergePlan>,
	/// Accepted copies per shard.
	pub copies: BTreeMap<u32, Vec<CopyRec>>,
	/// The agreed (or resolved) object of each present shard.
	pub present: BTreeMap<u32, Obj>,
	/// Shards whose copies disagree and await resolution.
	pub disputed: BTreeSet<u32>,
	/// State hashes attested, per account bytes.
	pub attested: BTreeMap<[u8; 32], ContentHash>,
	/// The checkpoint, once uploaded.
	pub checkpoint: Option<Obj>,
}

/// A shard whose copies disagreed: (stage, round, shard, element range, the copies).
pub type MismatchRec = (u16, u32, u32, [u64; 2], Vec<CopyRec>);

/// An accepted shard copy: (stage, round, shard, element range, the copy).
pub type CopyAudit = (u16, u32, u32, [u64; 2], CopyRec);

/// Audit data of one epoch across stages (`iota_epochRecord`).
#[derive(Clone, Debug, Default)]
pub struct EpochAudit {
	/// The pathway log, once written.
	pub pathway_log: Option<Obj>,
	/// (stage, round, shard, copies) whose copies disagreed.
	pub mismatches: Vec<MismatchRec>,
	/// (stage, round, shard, range, copy) accepted.
	pub copies: Vec<CopyAudit>,
	/// (stage, round, miner, submission) of each stage's final round.
	pub submissions: Vec<(u16, u32, AccountId, Submission)>,
	/// Sum of losses, number of losses, completed samples, wire bytes.
	loss_sum: f64,
	losses: u32,
	completed: u32,
	wire_bytes: u64,
	started_ms: Option<u64>,
	merge_ms: u64,
}

/// One stage as the chain and the orchestrator see it.
#[derive(Clone, Debug, Default)]
pub struct StageState {
	/// Epoch (chain).
	pub epoch: u32,
	/// Phase (chain).
	pub phase: Phase,
	/// Round (chain).
	pub round: u32,
	/// Members (chain).
	pub members: Vec<AccountId>,
	/// Backward passes done in `epoch`.
	pub backward_done: u32,
	/// Samples waiting for a forward here.
	forward_queue: BTreeSet<u64>,
	/// Samples waiting for a backward here.
	backward_queue: BTreeMap<u64, BackwardItem>,
	/// Merge progress of `epoch`.
	pub merge: MergeState,
	/// When the stage entered a merge phase in `epoch` (ms).
	merge_started_ms: Option<u64>,
}

#[derive(Clone, Debug, Default)]
struct MinerStats {
	stage: u16,
	epoch: u32,
	samples_epoch: u32,
	samples_total: u64,
	leases_expired: u64,
	last_seen_ms: u64,
}

/// What `iota_getWork` decided.
#[derive(Clone, Debug, PartialEq)]
pub enum WorkPlan {
	/// Grant this lease (record the event, then answer with its item).
	Lease(Event),
	/// Upload the accumulated gradient of `epoch`.
	UploadGradient {
		/// The epoch being merged.
		epoch: u32,
	},
	/// Nothing to do.
	Idle(IdleReason),
}

/// What `iota_getManifest` answers, before presigning.
#[derive(Clone, Debug, PartialEq)]
pub enum ManifestPlan {
	/// Still reducing.
	Reducing {
		/// Shards present.
		present: u32,
		/// Shards expected.
		expected: u32,
	},
	/// Every shard present.
	Ready {
		/// (shard, range, object) in shard order.
		shards: Vec<(u32, [u64; 2], Obj)>,
		/// Total samples.
		samples: u32,
		/// The checkpoint key, for the replica asked.
		checkpoint_key: Option<String>,
	},
	/// Committed on chain.
	Committed {
		/// The attested state hash.
		state_hash: ContentHash,
	},
}

/// Everything `commit_merge` needs.
#[derive(Clone, Debug, PartialEq)]
pub struct CommitPlan {
	/// Stage.
	pub stage: u16,
	/// Epoch.
	pub epoch: u32,
	/// Members merged (`n`).
	pub members: u32,
	/// `P`.
	pub param_count: u64,
	/// Samples merged.
	pub samples: u32,
	/// Shards in order.
	pub shards: Vec<Obj>,
	/// The state hash every member attested.
	pub state_hash: ContentHash,
	/// The checkpoint.
	pub checkpoint: Option<Obj>,
}

/// The orchestrator's state (module docs).
#[derive(Clone, Debug)]
pub struct State {
	cfg: StateConfig,
	stages: Vec<StageState>,
	/// Head: (epoch, samples issued in it).
	head_issued: (u32, u32),
	leases: BTreeMap<LeaseId, Lease>,
	/// Leases that expired or were dropped: their holder gets `LeaseExpired`.
	expired: HashMap<LeaseId, AccountId>,
	next_lease: LeaseId,
	samples: BTreeMap<u64, SampleState>,
	miners: BTreeMap<[u8; 32], (AccountId, MinerStats)>,
	/// Head backward completions (ms, tokens) in the last minute.
	recent: VecDeque<(u64, u64)>,
	tokens_trained: u64,
	wire_bytes: u64,
	audits: BTreeMap<u32, EpochAudit>,
	summaries: VecDeque<EpochSummary>,
	committed: BTreeMap<(u16, u32), ContentHash>,
	/// Epoch seeds seen.
	seeds: BTreeMap<u32, [u8; 32]>,
	last_loss: Option<f32>,
	finalized_block: u32,
	leases_expired_total: u64,
}

/// Epoch summaries kept (`Status::epochs`).
pub const MAX_SUMMARIES: usize = 1000;

impl State {
	/// An empty state (before any event).
	pub fn new(cfg: StateConfig) -> Self {
		let stages = (0..cfg.stages).map(|_| StageState::default()).collect();
		Self {
			cfg,
			stages,
			head_issued: (0, 0),
			leases: BTreeMap::new(),
			expired: HashMap::new(),
			next_lease: 1,
			samples: BTreeMap::new(),
			miners: BTreeMap::new(),
			recent: VecDeque::new(),
			tokens_trained: 0,
			wire_bytes: 0,
			audits: BTreeMap::new(),
			summaries: VecDeque::new(),
			committed: BTreeMap::new(),
			seeds: BTreeMap::new(),
			last_loss: None,
			finalized_block: 0,
			leases_expired_total: 0,
		}
	}

	/// The configuration.
	pub fn config(&self) -> &StateConfig {
		&self.cfg
	}

	/// A stage's state (`None` for an unknown stage).
	pub fn stage(&self, stage: u16) -> Option<&StageState> {
		self.stages.get(usize::from(stage))
	}

	/// A lease.
	pub fn lease(&self, id: LeaseId) -> Option<&Lease> {
		self.leases.get(&id)
	}

	/// A sample's record.
	pub fn sample(&self, sample: u64) -> Option<&SampleState> {
		self.samples.get(&sample)
	}

	/// Leases out now.
	pub fn leases(&self) -> impl Iterator<Item = &Lease> {
		self.leases.values()
	}

	/// Total leases expired since the run began.
	pub fn leases_expired_total(&self) -> u64 {
		self.leases_expired_total
	}

	/// Mean loss of the last completed epoch, else the last reported loss.
	pub fn last_loss(&self) -> Option<f32> {
		self.summaries.back().map(|s| s.loss).or(self.last_loss)
	}

	/// Tokens per second over the minute before `now_ms` (head backward completions × tokens/sample).
	pub fn tokens_per_sec(&self, now_ms: u64) -> f64 {
		let from = now_ms.saturating_sub(60_000);
		let tokens: u64 = self.recent.iter().filter(|(t, _)| *t >= from).map(|(_, n)| n).sum();
		tokens as f64 / 60.0
	}

	/// Epoch of sample `n`.
	pub fn epoch_of(&self, sample: u64) -> u32 {
		(sample / u64::from(self.cfg.backward_quota.max(1))) as u32
	}

	fn tail(&self) -> u16 {
		self.cfg.stages.saturating_sub(1)
	}

	fn leases_of(&self, miner: &AccountId) -> u32 {
		self.leases.values().filter(|l| &l.miner == miner).count() as u32
	}

	/// Records that `miner` made an authenticated request (liveness for backward routing; not persisted:
	/// after a restart liveness restarts from the replayed work).
	pub fn touch(&mut self, miner: &AccountId, stage: u16, now_ms: u64) {
		let m = self.miner_mut(miner, stage);
		m.last_seen_ms = m.last_seen_ms.max(now_ms);
	}

	fn miner_mut(&mut self, miner: &AccountId, stage: u16) -> &mut MinerStats {
		let entry = self
			.miners
			.entry(miner.0)
			.or_insert_with(|| (miner.clone(), MinerStats::default()));
		entry.1.stage = stage;
		&mut entry.1
	}

	fn is_live(&self, miner: &AccountId, stage: u16, now_ms: u64) -> bool {
		let member = self.stages.get(usize::from(stage)).is_some_and(|s| s.members.contains(miner));
		let seen = self
			.miners
			.get(&miner.0)
			.is_some_and(|(_, m)| m.last_seen_ms.saturating_add(self.cfg.lease_ms) >= now_ms);
		let holds = self.leases.values().any(|l| &l.miner == miner);
		member && (seen || holds)
	}

	/// The key a lease's result goes to.
	pub fn output_key(
		&self,
		stage: u16,
		epoch: u32,
		sample: u64,
		kind: WorkKind,
		miner: &AccountId,
	) -> Option<String> {
		let id = miner_id(miner);
		let tail = stage == self.tail();
		match kind {
			WorkKind::Forward if !tail => Some(keys::activation(
				&self.cfg.run,
				u64::from(epoch),
				u32::from(stage),
				sample,
				Direction::Forward,
				&id,
			)),
			WorkKind::Forward if stage == 0 => None,
			WorkKind::Forward => Some(keys::activation(
				&self.cfg.run,
				u64::from(epoch),
				u32::from(stage),
				sample,
				Direction::Backward,
				&id,
			)),
			WorkKind::Backward if stage == 0 => None,
			WorkKind::Backward => Some(keys::activation(
				&self.cfg.run,
				u64::from(epoch),
				u32::from(stage),
				sample,
				Direction::Backward,
				&id,
			)),
		}
	}

	// ---- work ---------------------------------------------------------------------------------

	/// Decide `iota_getWork` for `miner` of `stage` at `now_ms` (the caller checked the registry).
	///
	/// Errors: `WrongStage` for a stage outside the run.
	pub fn plan_work(
		&self,
		miner: &AccountId,
		stage: u16,
		now_ms: u64,
	) -> Result<WorkPlan, Refusal> {
		let Some(st) = self.stages.get(usize::from(stage)) else {
			return refuse(
				ErrorCode::WrongStage,
				format!("stage {stage} is not below the run's {} stages", self.cfg.stages),
			);
		};
		match st.phase {
			Phase::WeightsUploading => {
				return Ok(if st.merge.submissions.contains_key(&miner.0) {
					WorkPlan::Idle(IdleReason::Merging)
				} else {
					WorkPlan::UploadGradient { epoch: st.epoch }
				})
			},
			Phase::Merging => return Ok(WorkPlan::Idle(IdleReason::Merging)),
			Phase::Training => {},
		}
		if self.leases_of(miner) >= self.cfg.max_leases {
			return Ok(WorkPlan::Idle(IdleReason::InFlightLimit));
		}
		let epoch = st.epoch;
		let q = u64::from(self.cfg.backward_quota);
		let in_epoch = |n: u64| self.epoch_of(n) == epoch;
		let lease = |sample: u64, kind: WorkKind, fresh: bool| {
			WorkPlan::Lease(Event::LeaseGranted {
				lease: Lease {
					id: self.next_lease,
					miner: miner.clone(),
					stage,
					epoch,
					sample,
					kind,
					granted_ms: now_ms,
					expires_at_ms: now_ms.saturating_add(self.cfg.lease_ms),
					output_key: self.output_key(stage, epoch, sample, kind, miner),
				},
				fresh,
			})
		};
		// Backward first (it drains the pipeline): own forwards, then items whose forward miner is gone.
		let mut other = None;
		for (&n, item) in st.backward_queue.iter().filter(|(n, _)| in_epoch(**n)) {
			let by = self
				.samples
				.get(&n)
				.and_then(|s| s.forward.get(usize::from(stage)).cloned().flatten())
				.map(|(m, _)| m);
			match by {
				Some(by) if &by == miner => return Ok(lease(n, WorkKind::Backward, false)),
				Some(by) if !item.open && self.is_live(&by, stage, now_ms) => {},
				_ => {
					if other.is_none() {
						other = Some(n);
					}
				},
			}
		}
		if let Some(n) = other {
			return Ok(lease(n, WorkKind::Backward, false));
		}
		if let Some(&n) = st.forward_queue.iter().find(|n| in_epoch(**n)) {
			return Ok(lease(n, WorkKind::Forward, false));
		}
		if stage == 0 {
			let issued = if self.head_issued.0 == epoch { self.head_issued.1 } else { 0 };
			if issued < self.cfg.backward_quota {
				return Ok(lease(
					u64::from(epoch) * q + u64::from(issued),
					WorkKind::Forward,
					true,
				));
			}
			return Ok(WorkPlan::Idle(IdleReason::QuotaIssued));
		}
		Ok(WorkPlan::Idle(IdleReason::QueueEmpty))
	}

	/// The lease `id` if `miner` holds it and it is live at `now_ms`.
	///
	/// Errors: `LeaseExpired` (expired, re-listed or dropped), `Unknown`, `Invalid` (another miner's).
	pub fn check_lease(
		&self,
		miner: &AccountId,
		id: LeaseId,
		now_ms: u64,
	) -> Result<&Lease, Refusal> {
		let Some(l) = self.leases.get(&id) else {
			return match self.expired.get(&id) {
				Some(holder) if holder == miner => refuse(
					ErrorCode::LeaseExpired,
					format!("lease {id} expired and its item was re-listed"),
				),
				Some(_) => refuse(ErrorCode::Invalid, format!("lease {id} is not yours")),
				None => refuse(ErrorCode::Unknown, format!("no lease {id}")),
			};
		};
		if &l.miner != miner {
			return refuse(ErrorCode::Invalid, format!("lease {id} is held by another miner"));
		}
		if now_ms > l.expires_at_ms {
			return refuse(
				ErrorCode::LeaseExpired,
				format!("lease {id} expired at {} ms (now {now_ms} ms)", l.expires_at_ms),
			);
		}
		Ok(l)
	}

	/// Check `iota_submitActivation`'s claims against the lease (before the object itself is verified).
	/// Returns the lease.
	///
	/// Errors: as [`check_lease`](Self::check_lease); `WrongPhase` (the stage left `Training`: its
	/// gradients are being merged, so a late pass could not count); `Invalid` (output missing, unexpected,
	/// other key, tail without a reported loss); `ShapeMismatch` (shape or size not `[B, T, width]`).
	pub fn check_submit(
		&self,
		miner: &AccountId,
		id: LeaseId,
		output: Option<&TensorRef>,
		now_ms: u64,
		max_bytes: u64,
	) -> Result<&Lease, Refusal> {
		let l = self.check_lease(miner, id, now_ms)?;
		if self
			.stages
			.get(usize::from(l.stage))
			.is_none_or(|s| s.phase != Phase::Training || s.epoch != l.epoch)
		{
			return refuse(
				ErrorCode::WrongPhase,
				format!(
					"stage {} left Training in epoch {}; lease {id} cannot count",
					l.stage, l.epoch
				),
			);
		}
		match (&l.output_key, output) {
			(None, None) => {},
			(None, Some(_)) => {
				return refuse(ErrorCode::Invalid, "this lease has no output to submit")
			},
			(Some(k), None) => {
				return refuse(ErrorCode::Invalid, format!("lease {id} needs its output at {k}"))
			},
			(Some(k), Some(t)) => {
				if &t.key != k {
					return refuse(
						ErrorCode::Invalid,
						format!("output key {:?} is not the lease's key {k:?}", t.key),
					);
				}
				if t.shape != self.cfg.boundary_shape {
					return refuse(
						ErrorCode::ShapeMismatch,
						format!("shape {:?}, expected {:?}", t.shape, self.cfg.boundary_shape),
					);
				}
				if t.size == 0 || t.size > max_bytes {
					return refuse(
						ErrorCode::ShapeMismatch,
						format!("size {} bytes, expected 1..={max_bytes}", t.size),
					);
				}
			},
		}
		if l.kind == WorkKind::Forward && l.stage == self.tail() {
			let reported = self
				.samples
				.get(&l.sample)
				.and_then(|s| s.pending_loss)
				.is_some_and(|(lid, _)| lid == id);
			if !reported {
				return refuse(
					ErrorCode::Invalid,
					format!("report the loss of lease {id} before submitting it"),
				);
			}
		}
		Ok(l)
	}

	/// Check `iota_reportLoss`.
	///
	/// Errors: as [`check_lease`](Self::check_lease); `WrongStage` (not a tail forward lease); `Invalid`
	/// (NaN/Inf or negative, reported twice).
	pub fn check_loss(
		&self,
		miner: &AccountId,
		id: LeaseId,
		loss: f32,
		now_ms: u64,
	) -> Result<Event, Refusal> {
		let l = self.check_lease(miner, id, now_ms)?;
		if l.stage != self.tail() || l.kind != WorkKind::Forward {
			return refuse(
				ErrorCode::WrongStage,
				format!("lease {id} is not a tail forward lease"),
			);
		}
		if !loss.is_finite() || loss < 0.0 {
			return refuse(
				ErrorCode::Invalid,
				format!("loss {loss} is not a finite non-negative number"),
			);
		}
		if self
			.samples
			.get(&l.sample)
			.and_then(|s| s.pending_loss)
			.is_some_and(|(lid, _)| lid == id)
		{
			return refuse(ErrorCode::Invalid, format!("loss of lease {id} was already reported"));
		}
		Ok(Event::LossReported { lease: id, loss })
	}

	/// Check `iota_releaseLease`.
	///
	/// Errors: `Unknown`, `Invalid` (another miner's), `LeaseExpired`.
	pub fn check_release(
		&self,
		miner: &AccountId,
		id: LeaseId,
		now_ms: u64,
	) -> Result<Event, Refusal> {
		self.check_lease(miner, id, now_ms)?;
		Ok(Event::LeaseReleased { lease: id })
	}

	/// Leases past their deadline at `now_ms`, as events.
	pub fn expired_leases(&self, now_ms: u64) -> Vec<Event> {
		self.leases
			.values()
			.filter(|l| now_ms > l.expires_at_ms)
			.map(|l| Event::LeaseExpired { lease: l.id })
			.collect()
	}

	// ---- merge --------------------------------------------------------------------------------

	fn merging_stage(&self, stage: u16, epoch: u32, phase: Phase) -> Result<&StageState, Refusal> {
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

	/// Check `iota_submitGradient` (before the object is verified).
	///
	/// Errors: `WrongPhase`, `Unknown` epoch, `Invalid` (twice, zero samples, wrong key),
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
		let st = self.merging_stage(stage, epoch, Phase::WeightsUploading)?;
		if st.merge.submissions.contains_key(&miner.0) {
			return refuse(
				ErrorCode::Invalid,
				format!("gradient of epoch {epoch} already submitted this round"),
			);
		}
		if samples == 0 {
			return refuse(ErrorCode::Invalid, "a gradient of zero samples");
		}
		let key = self.gradient_key(stage, epoch, miner);
		if t.key != key {
			return refuse(
				ErrorCode::Invalid,
				format!("gradient key {:?}, expected {key:?}", t.key),
			);
		}
		let p = self.cfg.param_counts.get(usize::from(stage)).copied().unwrap_or(0);
		if t.shape != [p] || t.size != p * 4 {
			return refuse(
				ErrorCode::ShapeMismatch,
				format!(
					"gradient shape {:?} / {} bytes, expected [{p}] / {} bytes",
					t.shape,
					t.size,
					p * 4
				),
			);
		}
		let want = iota_rpc::types::chunk_count(p);
		if chunks.len() != want {
			return refuse(
				ErrorCode::ShapeMismatch,
				format!("{} chunk hashes, expected {want}", chunks.len()),
			);
		}
		Ok(Event::GradientAccepted {
			stage,
			epoch,
			round: st.round,
			miner: miner.clone(),
			object: Obj::from_tensor(t),
			chunk_hashes: chunks.to_vec(),
			samples,
		})
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
		let len = desc.len();
		if t.shape != [len] || t.size != len * 4 {
			return refuse(
				ErrorCode::ShapeMismatch,
				format!(
					"shard shape {:?} / {} bytes, expected [{len}] / {} bytes",
					t.shape,
					t.size,
					len * 4
				),
			);
		}
		Ok(Event::ShardAccepted {
			stage,
			epoch,
			round,
			shard,
			miner: miner.clone(),
			object: Obj::from_tensor(t),
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
		let st = self
			.stages
			.get(usize::from(stage))
			.ok_or_else(|| Refusal::new(ErrorCode::WrongStage, format!("no stage {stage}")))?;
		if epoch != st.epoch {
			return refuse(
				ErrorCode::Unknown,
				format!("no merge of epoch {epoch} at stage {stage} (current epoch {})", st.epoch),
			);
		}
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
				Some(Obj::from_tensor(t))
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
	/// this epoch and so have no gradient to submit (a miner that got no sample, e.g. on a loaded machine):
	/// the chain's rule waits for `gradients_submitted ≥ members`, and without them the stage would sit out
	/// the whole phase timeout.
	pub fn report(&self, stage: u16) -> StageReport {
		let Some(s) = self.stages.get(usize::from(stage)) else { return StageReport::default() };
		let mut gradients_submitted = s.merge.submissions.len() as u32;
		if s.phase != Phase::Training {
			let first = u64::from(s.epoch) * u64::from(self.cfg.backward_quota);
			let worked: BTreeSet<[u8; 32]> = self
				.samples
				.range(first..first.saturating_add(u64::from(self.cfg.backward_quota)))
				.filter(|(_, r)| r.epoch == s.epoch)
				.filter_map(|(_, r)| {
					r.backward.get(usize::from(stage)).cloned().flatten().map(|(m, _)| m.0)
				})
				.collect();
			let idle = s
				.members
				.iter()
				.filter(|m| !worked.contains(&m.0) && !s.merge.submissions.contains_key(&m.0))
				.count() as u32;
			gradients_submitted = gradients_submitted.saturating_add(idle);
		}
		StageReport { backward_done: s.backward_done, gradients_submitted }
	}

	/// The epoch seed of `epoch`, if seen.
	pub fn seed(&self, epoch: u32) -> Option<[u8; 32]> {
		self.seeds.get(&epoch).copied()
	}

	// ---- audit --------------------------------------------------------------------------------

	/// The pathway log of `epoch` from the completed samples (sorted by sample id).
	pub fn pathway_log(&self, epoch: u32) -> PathwayLog {
		let s = usize::from(self.cfg.stages);
		let empty = ObjectEntry { key: String::new(), hash: ContentHash::of(&[]) };
		let records = self
			.samples
			.range(u64::from(epoch) * u64::from(self.cfg.backward_quota)..)
			.take_while(|(_, r)| r.epoch == epoch)
			.filter(|(_, r)| r.complete() && r.loss.is_some())
			.filter_map(|(&sample, r)| {
				let fwd: Option<Vec<_>> =
					(0..s).map(|i| r.forward.get(i).cloned().flatten()).collect();
				let bwd: Option<Vec<_>> =
					(0..s).map(|i| r.backward.get(i).cloned().flatten()).collect();
				let (fwd, bwd) = (fwd?, bwd?);
				Some(PathwayRecord {
					sample,
					forward: fwd.iter().map(|(m, _)| m.clone()).collect(),
					backward: bwd.iter().map(|(m, _)| m.clone()).collect(),
					forward_outputs: fwd
						.iter()
						.map(|(_, o)| o.as_ref().map_or(empty.clone(), Obj::entry))
						.collect(),
					backward_outputs: bwd
						.iter()
						.enumerate()
						.map(|(i, (_, o))| if i == 0 { None } else { o.as_ref().map(Obj::entry) })
						.collect(),
					loss: r.loss.unwrap_or_default(),
				})
			})
			.collect();
		PathwayLog { run: self.cfg.run.to_string(), epoch, stages: self.cfg.stages, records }
	}

	/// Epochs whose head merge is committed but whose pathway log is not written yet.
	pub fn pathway_due(&self) -> Vec<u32> {
		let head = self.stages.first().map_or(0, |s| s.epoch);
		self.audits
			.iter()
			.filter(|(e, a)| **e < head && a.pathway_log.is_none())
			.map(|(e, _)| *e)
			.collect()
	}

	/// The audit record of `epoch`.
	pub fn audit(&self, epoch: u32) -> Option<&EpochAudit> {
		self.audits.get(&epoch)
	}

	/// Per-stage status.
	pub fn stage_status(&self) -> Vec<StageStatus> {
		self.stages
			.iter()
			.enumerate()
			.map(|(i, s)| StageStatus {
				stage: i as u16,
				epoch: s.epoch,
				phase: s.phase,
				miners: s.members.clone(),
				forward_queue: s.forward_queue.len() as u32
					+ if i == 0 && s.phase == Phase::Training {
						self.cfg.backward_quota.saturating_sub(if self.head_issued.0 == s.epoch {
							self.head_issued.1
						} else {
							0
						})
					} else {
						0
					},
				backward_queue: s.backward_queue.len() as u32,
				leases: self.leases.values().filter(|l| usize::from(l.stage) == i).count() as u32,
				backward_done: s.backward_done,
				gradients_submitted: s.merge.submissions.len() as u32,
				shards_present: s.merge.present.len() as u32,
				shards_expected: s.merge.plan.as_ref().map_or(0, |p| p.shards.len() as u32),
			})
			.collect()
	}

	/// Per-miner activity (`refused` filled by the caller, which counts refusals outside the state).
	pub fn miner_activity(&self) -> Vec<MinerActivity> {
		self.miners
			.values()
			.map(|(a, m)| {
				let epoch = self.stages.get(usize::from(m.stage)).map_or(0, |s| s.epoch);
				MinerActivity {
					account: a.clone(),
					stage: m.stage,
					samples_this_epoch: if m.epoch == epoch { m.samples_epoch } else { 0 },
					samples_total: m.samples_total,
					leases: self.leases_of(a),
					leases_expired: m.leases_expired,
					refused: 0,
					last_seen_ms: m.last_seen_ms,
				}
			})
			.collect()
	}

	/// Completed epochs, oldest first.
	pub fn summaries(&self) -> Vec<EpochSummary> {
		self.summaries.iter().cloned().collect()
	}

	/// Tokens trained and wire bytes accepted since the run began.
	pub fn totals(&self) -> (u64, u64) {
		(self.tokens_trained, self.wire_bytes)
	}

	/// Best finalized block seen in a chain event.
	pub fn finalized_block(&self) -> u32 {
		self.finalized_block
	}

	// ---- apply --------------------------------------------------------------------------------

	/// Fold one accepted event into the state. Total: an event that no longer applies (a lease already
	/// gone, a stale epoch) is ignored, so replaying a log is always possible.
	pub fn apply(&mut self, ev: &Event) {
		match ev {
			Event::LeaseGranted { lease, fresh } => self.apply_grant(lease, *fresh),
			Event::LeaseCompleted { lease, output, now_ms } => {
				self.apply_complete(*lease, output.clone(), *now_ms)
			},
			Event::LossReported { lease, loss } => {
				if let Some(l) = self.leases.get(lease) {
					let sample = l.sample;
					if let Some(s) = self.samples.get_mut(&sample) {
						s.pending_loss = Some((*lease, *loss));
					}
				}
			},
			Event::LeaseReleased { lease } => self.relist(*lease, false),
			Event::LeaseExpired { lease } => self.relist(*lease, true),
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
			Event::ChainStage { stage, epoch, phase, round, members, block, now_ms } => {
				self.finalized_block = self.finalized_block.max(*block);
				self.apply_chain_stage(*stage, *epoch, *phase, *round, members.clone(), *now_ms)
			},
			Event::MergeSeed { stage, epoch, round, epoch_seed } => {
				self.seeds.insert(*epoch, *epoch_seed);
				self.make_plan(*stage, *epoch, *round, epoch_seed);
			},
			Event::PathwayWritten { epoch, object } => {
				self.audits.entry(*epoch).or_default().pathway_log = Some(object.clone());
				// The records are in the log now; the samples of the epoch leave memory.
				let q = u64::from(self.cfg.backward_quota);
				let (lo, hi) = (u64::from(*epoch) * q, u64::from(*epoch + 1) * q);
				let done: Vec<u64> = self.samples.range(lo..hi).map(|(k, _)| *k).collect();
				let busy: BTreeSet<u64> = self.leases.values().map(|l| l.sample).collect();
				for k in done {
					if !busy.contains(&k) {
						self.samples.remove(&k);
					}
				}
			},
		}
	}

	fn apply_grant(&mut self, lease: &Lease, fresh: bool) {
		let s = usize::from(lease.stage);
		let stages = usize::from(self.cfg.stages);
		self.next_lease = self.next_lease.max(lease.id + 1);
		if let Some(st) = self.stages.get_mut(s) {
			match lease.kind {
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
		let m = self.miner_mut(&lease.miner, lease.stage);
		m.last_seen_ms = m.last_seen_ms.max(lease.granted_ms);
		self.leases.insert(lease.id, lease.clone());
	}

	fn apply_complete(&mut self, id: LeaseId, output: Option<Obj>, now_ms: u64) {
		let Some(l) = self.leases.remove(&id) else { return };
		let tail = self.tail();
		let s = usize::from(l.stage);
		let tps = self.cfg.tokens_per_sample;
		let wire = output.as_ref().map_or(0, |o| o.size);
		self.wire_bytes += wire;
		self.audits.entry(l.epoch).or_default().wire_bytes += wire;
		{
			let m = self.miner_mut(&l.miner, l.stage);
			m.last_seen_ms = m.last_seen_ms.max(now_ms);
			if m.epoch != l.epoch {
				m.epoch = l.epoch;
				m.samples_epoch = 0;
			}
			m.samples_epoch += 1;
			m.samples_total += 1;
		}
		let Some(sample) = self.samples.get_mut(&l.sample) else { return };
		let backward_at;
		let next;
		match l.kind {
			WorkKind::Forward => {
				sample.forward[s] = Some((l.miner.clone(), output.clone()));
				if l.stage == tail {
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

	fn relist(&mut self, id: LeaseId, expired: bool) {
		let Some(l) = self.leases.remove(&id) else { return };
		if expired {
			self.leases_expired_total += 1;
			let m = self.miner_mut(&l.miner, l.stage);
			m.leases_expired += 1;
		}
		self.expired.insert(id, l.miner.clone());
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
			WorkKind::Forward => {
				st.forward_queue.insert(l.sample);
			},
			WorkKind::Backward => {
				st.backward_queue.insert(l.sample, BackwardItem { open: expired });
			},
		}
	}

	fn apply_shard(&mut self, stage: u16, epoch: u32, round: u32, shard: u32, copy: CopyRec) {
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

	fn make_plan(&mut self, stage: u16, epoch: u32, round: u32, epoch_seed: &[u8; 32]) {
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
		if let Some(plan) = merge_plan(stage, epoch, round, epoch_seed, members, p) {
			st.merge.plan = Some(plan);
		}
	}

	fn apply_chain_stage(
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
			if let Some(h) = hash {
				self.committed.insert((stage, old), h);
			}
			let audit = self.audits.entry(old).or_default();
			audit.merge_ms += merge_ms;
			audit.submissions.extend(subs);
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
			self.maybe_complete_epochs(stages, now_ms);
			return;
		}
		if epoch < st.epoch {
			return;
		}
		if round != st.merge.round {
			// A timed-out merge restarted: a fresh round with fresh submissions.
			st.merge = MergeState { round, ..Default::default() };
		}
		if phase != Phase::Training && st.merge_started_ms.is_none() {
			st.merge_started_ms = Some(now_ms);
		}
		st.phase = phase;
		st.round = round;
		if phase == Phase::Merging && st.merge.plan.is_none() {
			if let Some(seed) = self.seeds.get(&epoch).copied() {
				self.make_plan(stage, epoch, round, &seed);
			}
		}
	}

	fn maybe_complete_epochs(&mut self, stages: u16, now_ms: u64) {
		let min_epoch = (0..usize::from(stages)).map(|s| self.stages[s].epoch).min().unwrap_or(0);
		let done_through = self.summaries.back().map(|s| s.epoch + 1).unwrap_or(0);
		for e in done_through..min_epoch {
			let a = self.audits.entry(e).or_default();
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
				started_ms: a.started_ms.unwrap_or(now_ms),
				completed_ms: now_ms,
				merge_ms: a.merge_ms,
			};
			self.summaries.push_back(summary);
			if self.summaries.len() > MAX_SUMMARIES {
				self.summaries.pop_front();
			}
		}
	}
}

/// The butterfly plan of a round (brief §6): members sorted by account bytes, seed
/// `derive_seed("iota-rs butterfly v1", epoch_seed, (stage, epoch, round).encode())`, shards
/// `butterfly_shards(n, P, seed)`, checkpoint replica `members[derive_seed("iota-rs checkpoint v1", seed) mod n]`.
/// `None` with no members or a vector shorter than the shard count.
pub fn merge_plan(
	stage: u16,
	epoch: u32,
	round: u32,
	epoch_seed: &[u8; 32],
	mut members: Vec<AccountId>,
	param_count: u64,
) -> Option<MergePlan> {
	use codec::Encode;
	members.sort_by_key(|a| a.0);
	members.dedup();
	let seed = derive_seed("iota-rs butterfly v1", epoch_seed, &(stage, epoch, round).encode());
	let shards = butterfly_shards(members.len() as u32, param_count, &seed).ok()?;
	let pick = derive_seed("iota-rs checkpoint v1", &seed, &[]);
	let idx = (u64::from_le_bytes(pick[..8].try_into().ok()?) % members.len() as u64) as usize;
	let checkpoint_by = members[idx].clone();
	Some(MergePlan { round, seed, members, shards, param_count, checkpoint_by })
}

/// A miner's id in object keys: its account's SS58 string (brief §3).
pub fn miner_id(account: &AccountId) -> Id {
	// SS58 strings are base58: always valid identifiers.
	Id::new(account.to_string())
		.unwrap_or_else(|_| Id::new("invalid-account").expect("constant id is valid"))
}

#[cfg(test)]
mod tests {
	use super::*;
	use iota_rpc::types::TensorRef;

	const LEASE: u64 = 1_000;
	const SHAPE: [u64; 3] = [2, 4, 8];

	fn acc(i: u8) -> AccountId {
		AccountId::from([i; 32])
	}

	fn cfg(quota: u32, max_leases: u32) -> StateConfig {
		StateConfig {
			run: Id::new("run").unwrap(),
			stages: 3,
			backward_quota: quota,
			lease_ms: LEASE,
			max_leases,
			tokens_per_sample: 8,
			boundary_shape: SHAPE,
			param_counts: vec![10, 20, 30],
		}
	}

	/// A state and the events applied to it (to check replay).
	struct World {
		st: State,
		log: Vec<Event>,
	}

	impl World {
		/// Stage `s` has members `m[s]`; all Training at epoch 0.
		fn new(quota: u32, max_leases: u32, members: &[&[u8]]) -> Self {
			let mut w = World { st: State::new(cfg(quota, max_leases)), log: Vec::new() };
			for (s, m) in members.iter().enumerate() {
				w.chain(s as u16, 0, Phase::Training, 0, m, 0);
			}
			w
		}
		fn apply(&mut self, e: Event) {
			self.st.apply(&e);
			self.log.push(e);
		}
		fn chain(
			&mut self,
			stage: u16,
			epoch: u32,
			phase: Phase,
			round: u32,
			members: &[u8],
			now_ms: u64,
		) {
			let members = members.iter().map(|i| acc(*i)).collect();
			self.apply(Event::ChainStage { stage, epoch, phase, round, members, block: 1, now_ms });
		}
		/// getWork, granting the lease if one is planned.
		fn work(&mut self, miner: u8, stage: u16, now: u64) -> WorkPlan {
			self.st.touch(&acc(miner), stage, now);
			let plan = self.st.plan_work(&acc(miner), stage, now).unwrap();
			if let WorkPlan::Lease(e) = &plan {
				self.apply(e.clone());
			}
			plan
		}
		fn lease(&mut self, miner: u8, stage: u16, now: u64) -> Lease {
			match self.work(miner, stage, now) {
				WorkPlan::Lease(Event::LeaseGranted { lease, .. }) => lease,
				other => {
					panic!("expected a lease for miner {miner} at stage {stage}, got {other:?}")
				},
			}
		}
		fn output(&self, l: &Lease) -> Option<TensorRef> {
			l.output_key.as_ref().map(|k| TensorRef {
				key: k.clone(),
				hash: ContentHash::of(k.as_bytes()),
				size: 100,
				shape: SHAPE.to_vec(),
			})
		}
		fn submit(&mut self, l: &Lease, now: u64) {
			let out = self.output(l);
			self.st.check_submit(&l.miner, l.id, out.as_ref(), now, 1 << 20).unwrap();
			self.apply(Event::LeaseCompleted {
				lease: l.id,
				output: out.as_ref().map(Obj::from_tensor),
				now_ms: now,
			});
		}
		fn loss(&mut self, l: &Lease, loss: f32, now: u64) {
			let e = self.st.check_loss(&l.miner, l.id, loss, now).unwrap();
			self.apply(e);
		}
		/// One sample through stages 0..3 with miners (head, mid, tail), forward and backward.
		fn run_sample(&mut self, m: [u8; 3], now: u64) -> u64 {
			let h = self.lease(m[0], 0, now);
			self.submit(&h, now);
			let f1 = self.lease(m[1], 1, now);
			self.submit(&f1, now);
			let t = self.lease(m[2], 2, now);
			self.loss(&t, 2.5, now);
			self.submit(&t, now);
			let b1 = self.lease(m[1], 1, now);
			assert_eq!(b1.kind, WorkKind::Backward);
			self.submit(&b1, now);
			let b0 = self.lease(m[0], 0, now);
			assert_eq!(b0.kind, WorkKind::Backward);
			self.submit(&b0, now);
			h.sample
		}
	}

	fn code<T: std::fmt::Debug>(r: Result<T, Refusal>) -> ErrorCode {
		r.unwrap_err().code
	}

	#[test]
	fn head_issues_its_epoch_quota_then_idles() {
		let mut w = World::new(3, 8, &[&[1], &[2], &[3]]);
		let samples: Vec<u64> = (0..3).map(|_| w.lease(1, 0, 0).sample).collect();
		assert_eq!(samples, vec![0, 1, 2]);
		assert_eq!(w.work(1, 0, 0), WorkPlan::Idle(IdleReason::QuotaIssued));
		assert_eq!(w.work(2, 1, 0), WorkPlan::Idle(IdleReason::QueueEmpty));
	}

	#[test]
	fn in_flight_limit_per_miner() {
		let mut w = World::new(10, 2, &[&[1, 4], &[2], &[3]]);
		w.lease(1, 0, 0);
		w.lease(1, 0, 0);
		assert_eq!(w.work(1, 0, 0), WorkPlan::Idle(IdleReason::InFlightLimit));
		assert_eq!(
			w.lease(4, 0, 0).sample,
			2,
			"another miner is not limited by the first one's leases"
		);
	}

	#[test]
	fn a_sample_flows_forward_and_back_and_lands_in_the_pathway_log() {
		let mut w = World::new(2, 4, &[&[1], &[2], &[3]]);
		let n = w.run_sample([1, 2, 3], 10);
		let s = w.st.sample(n).unwrap();
		assert!(s.complete());
		assert_eq!(s.loss, Some(2.5));
		assert_eq!(w.st.stage(0).unwrap().backward_done, 1);
		assert_eq!(w.st.stage(2).unwrap().backward_done, 1);
		assert_eq!(w.st.report(1), StageReport { backward_done: 1, gradients_submitted: 0 });
		let log = w.st.pathway_log(0);
		log.validate().unwrap();
		assert_eq!(log.records.len(), 1);
		let r = &log.records[0];
		assert_eq!(r.forward, vec![acc(1), acc(2), acc(3)]);
		assert_eq!(r.backward, vec![acc(1), acc(2), acc(3)]);
		assert_eq!(r.backward_outputs[0], None);
		assert!(r.backward_outputs[1].is_some());
		assert_eq!(w.st.totals().0, 8);
	}

	#[test]
	fn bad_submissions_are_refused_with_distinct_codes() {
		let mut w = World::new(2, 4, &[&[1], &[2], &[3]]);
		let l = w.lease(1, 0, 0);
		let good = w.output(&l).unwrap();
		let now = 5;
		assert_eq!(
			code(w.st.check_submit(&acc(1), 999, Some(&good), now, 1 << 20)),
			ErrorCode::Unknown
		);
		assert_eq!(
			code(w.st.check_submit(&acc(2), l.id, Some(&good), now, 1 << 20)),
			ErrorCode::Invalid
		);
		let other_key = TensorRef { key: "v1/runs/run/x".into(), ..good.clone() };
		assert_eq!(
			code(w.st.check_submit(&acc(1), l.id, Some(&other_key), now, 1 << 20)),
			ErrorCode::Invalid
		);
		let bad_shape = TensorRef { shape: vec![2, 4, 9], ..good.clone() };
		assert_eq!(
			code(w.st.check_submit(&acc(1), l.id, Some(&bad_shape), now, 1 << 20)),
			ErrorCode::ShapeMismatch
		);
		let too_big = TensorRef { size: 2 << 20, ..good.clone() };
		assert_eq!(
			code(w.st.check_submit(&acc(1), l.id, Some(&too_big), now, 1 << 20)),
			ErrorCode::ShapeMismatch
		);
		assert_eq!(code(w.st.check_submit(&acc(1), l.id, None, now, 1 << 20)), ErrorCode::Invalid);
		assert_eq!(
			code(w.st.check_submit(&acc(1), l.id, Some(&good), LEASE + 1, 1 << 20)),
			ErrorCode::LeaseExpired
		);
		assert_eq!(
			code(w.st.check_loss(&acc(1), l.id, 1.0, now)),
			ErrorCode::WrongStage,
			"not a tail lease"
		);
		w.submit(&l, now);
		let f1 = w.lease(2, 1, now);
		w.submit(&f1, now);
		let t = w.lease(3, 2, now);
		let tout = w.output(&t).unwrap();
		assert_eq!(
			code(w.st.check_submit(&acc(3), t.id, Some(&tout), now, 1 << 20)),
			ErrorCode::Invalid,
			"loss first"
		);
		assert_eq!(code(w.st.check_loss(&acc(3), t.id, f32::NAN, now)), ErrorCode::Invalid);
		assert_eq!(code(w.st.check_loss(&acc(3), t.id, -1.0, now)), ErrorCode::Invalid);
		w.loss(&t, 1.0, now);
		assert_eq!(
			code(w.st.check_loss(&acc(3), t.id, 1.0, now)),
			ErrorCode::Invalid,
			"reported twice"
		);
		assert_eq!(code(w.st.plan_work(&acc(1), 7, now)), ErrorCode::WrongStage);
	}

	#[test]
	fn an_expired_lease_is_relisted_and_its_holder_refused() {
		let mut w = World::new(2, 4, &[&[1, 4], &[2], &[3]]);
		let l = w.lease(1, 0, 0);
		assert!(w.st.expired_leases(LEASE).is_empty(), "not before the deadline");
		let expired = w.st.expired_leases(LEASE + 1);
		assert_eq!(expired, vec![Event::LeaseExpired { lease: l.id }]);
		for e in expired {
			w.apply(e);
		}
		assert_eq!(w.st.leases_expired_total(), 1);
		let out = w.output(&l);
		assert_eq!(
			code(w.st.check_submit(&acc(1), l.id, out.as_ref(), LEASE + 2, 1 << 20)),
			ErrorCode::LeaseExpired
		);
		let again = w.lease(4, 0, LEASE + 2);
		assert_eq!(again.sample, l.sample, "the re-listed item comes before new samples");
		// A release re-lists at once too.
		let e = w.st.check_release(&acc(4), again.id, LEASE + 3).unwrap();
		w.apply(e);
		assert_eq!(w.lease(1, 0, LEASE + 3).sample, l.sample);
	}

	#[test]
	fn backward_goes_to_the_forward_miner_while_live_then_to_anyone() {
		let mut w = World::new(4, 4, &[&[1], &[2, 5], &[3]]);
		let h = w.lease(1, 0, 0);
		w.submit(&h, 0);
		let f = w.lease(2, 1, 0);
		w.submit(&f, 0);
		let t = w.lease(3, 2, 0);
		w.loss(&t, 1.0, 0);
		w.submit(&t, 0);
		// Miner 5 may not take miner 2's backward while miner 2 is live.
		assert_eq!(w.work(5, 1, 10), WorkPlan::Idle(IdleReason::QueueEmpty));
		// Miner 2 went silent for longer than a lease: anyone takes it, and recomputes.
		let b = w.lease(5, 1, 10 + LEASE + 1);
		assert_eq!((b.kind, b.sample), (WorkKind::Backward, h.sample));
		assert_eq!(
			w.st.sample(h.sample).unwrap().forward[1].as_ref().unwrap().0,
			acc(2),
			"forward_by is miner 2"
		);
		// Miner 5 lets it expire: the item is open to anyone, miner 2 included.
		for e in w.st.expired_leases(b.expires_at_ms + 1) {
			w.apply(e);
		}
		let b2 = w.lease(2, 1, b.expires_at_ms + 2);
		assert_eq!(b2.sample, h.sample);
		w.submit(&b2, b.expires_at_ms + 2);
		assert_eq!(w.st.stage(1).unwrap().backward_done, 1);
	}

	#[test]
	fn items_of_a_later_epoch_wait_and_stale_ones_are_dropped() {
		let mut w = World::new(2, 4, &[&[1], &[2], &[3]]);
		// The head merged epoch 0 and is training epoch 1; stage 1 is still in epoch 0.
		w.chain(0, 1, Phase::Training, 0, &[1], 5);
		let h = w.lease(1, 0, 10);
		assert_eq!(h.sample, 2, "epoch 1 starts at sample Q = 2");
		w.submit(&h, 10);
		assert_eq!(w.work(2, 1, 10), WorkPlan::Idle(IdleReason::QueueEmpty), "epoch 1 item waits");
		w.chain(1, 0, Phase::WeightsUploading, 0, &[2], 11);
		assert_eq!(w.work(2, 1, 11), WorkPlan::UploadGradient { epoch: 0 });
		w.chain(1, 1, Phase::Training, 0, &[2], 12);
		// A lease of stage 0 still out when its stage leaves Training cannot count any more.
		let late = w.lease(1, 0, 13);
		w.chain(0, 1, Phase::WeightsUploading, 0, &[1], 14);
		let out = w.output(&late);
		assert_eq!(
			code(w.st.check_submit(&acc(1), late.id, out.as_ref(), 15, 1 << 20)),
			ErrorCode::WrongPhase
		);
		assert_eq!(w.lease(2, 1, 12).sample, 2);
	}

	fn tensor(key: String, len: u64, tag: &[u8]) -> TensorRef {
		TensorRef { key, hash: ContentHash::of(tag), size: len * 4, shape: vec![len] }
	}

	#[test]
	fn a_member_without_backward_passes_does_not_hold_up_the_upload_phase() {
		// Stage 1 has two miners; only miner 2 gets the epoch's one sample.
		let mut w = World::new(1, 4, &[&[1], &[2, 4], &[3]]);
		w.run_sample([1, 2, 3], 10);
		assert_eq!(w.st.report(1).gradients_submitted, 0, "training: no idle accounting");
		w.chain(1, 0, Phase::WeightsUploading, 0, &[2, 4], 20);
		// Miner 4 has nothing to submit and is counted as done; miner 2's gradient is still awaited.
		assert_eq!(w.st.report(1), StageReport { backward_done: 1, gradients_submitted: 1 });
		let g = tensor(w.st.gradient_key(1, 0, &acc(2)), 20, b"g");
		let e = w.st.check_gradient(&acc(2), 1, 0, &g, &[ContentHash::of(b"c")], 1).unwrap();
		w.apply(e);
		assert_eq!(w.st.report(1).gradients_submitted, 2);
	}

	#[test]
	fn merge_bookkeeping_from_gradients_to_commit() {
		let mut w = World::new(1, 4, &[&[7, 6], &[2], &[3]]);
		let (a, b) = (acc(7), acc(6));
		let g = |st: &State, m: &AccountId| tensor(st.gradient_key(0, 0, m), 10, &m.0);
		let chunks = vec![ContentHash::of(b"c")];
		assert_eq!(
			code(w.st.check_gradient(&a, 0, 0, &g(&w.st, &a), &chunks, 1)),
			ErrorCode::WrongPhase
		);
		w.chain(0, 0, Phase::WeightsUploading, 0, &[7, 6], 100);
		assert_eq!(
			code(w.st.check_gradient(&a, 0, 1, &g(&w.st, &a), &chunks, 1)),
			ErrorCode::Unknown
		);
		assert_eq!(
			code(w.st.check_gradient(&a, 0, 0, &g(&w.st, &a), &chunks, 0)),
			ErrorCode::Invalid
		);
		assert_eq!(
			code(w.st.check_gradient(&a, 0, 0, &g(&w.st, &b), &chunks, 1)),
			ErrorCode::Invalid,
			"another's key"
		);
		assert_eq!(
			code(w.st.check_gradient(
				&a,
				0,
				0,
				&tensor(w.st.gradient_key(0, 0, &a), 9, b"x"),
				&chunks,
				1
			)),
			ErrorCode::ShapeMismatch
		);
		assert_eq!(
			code(w.st.check_gradient(&a, 0, 0, &g(&w.st, &a), &[], 1)),
			ErrorCode::ShapeMismatch
		);
		for m in [&a, &b] {
			let e = w.st.check_gradient(m, 0, 0, &g(&w.st, m), &chunks, 3).unwrap();
			w.apply(e);
		}
		assert_eq!(
			code(w.st.check_gradient(&a, 0, 0, &g(&w.st, &a), &chunks, 3)),
			ErrorCode::Invalid,
			"twice"
		);
		assert_eq!(w.st.report(0).gradients_submitted, 2);
		w.chain(0, 0, Phase::Merging, 0, &[7, 6], 200);
		assert_eq!(code(w.st.plan_of(0, 0)), ErrorCode::Unavailable, "no seed yet");
		w.apply(Event::MergeSeed { stage: 0, epoch: 0, round: 0, epoch_seed: [9; 32] });
		let plan = w.st.plan_of(0, 0).unwrap().clone();
		assert_eq!(plan.members, vec![b.clone(), a.clone()], "sorted by account bytes");
		assert_eq!(plan.shards.len(), 1);
		assert_eq!(
			Some(&plan),
			merge_plan(0, 0, 0, &[9; 32], vec![a.clone(), b.clone()], 10).as_ref()
		);
		let shard =
			|st: &State, m: &AccountId, tag: &[u8]| tensor(st.shard_key(0, 0, 0, m), 10, tag);
		assert_eq!(
			code(w.st.check_shard(&a, 0, 0, 1, 0, &shard(&w.st, &a, b"s"))),
			ErrorCode::Unknown,
			"round"
		);
		assert_eq!(
			code(w.st.check_shard(&a, 0, 0, 0, 5, &shard(&w.st, &a, b"s"))),
			ErrorCode::Unknown,
			"shard"
		);
		assert_eq!(
			code(w.st.check_shard(&acc(9), 0, 0, 0, 0, &shard(&w.st, &acc(9), b"s"))),
			ErrorCode::Invalid,
			"not a member"
		);
		// The two copies disagree: recorded, the merge waits for the resolution.
		let e = w.st.check_shard(&a, 0, 0, 0, 0, &shard(&w.st, &a, b"s")).unwrap();
		w.apply(e);
		assert_eq!(
			code(w.st.check_shard(&a, 0, 0, 0, 0, &shard(&w.st, &a, b"s"))),
			ErrorCode::Invalid,
			"twice"
		);
		let e = w.st.check_shard(&b, 0, 0, 0, 0, &shard(&w.st, &b, b"t")).unwrap();
		w.apply(e);
		assert_eq!(
			w.st.manifest(&a, 0, 0).unwrap(),
			ManifestPlan::Reducing { present: 0, expected: 1 }
		);
		assert_eq!(w.st.disputed(0), vec![(0, 0, 0, [0, 10])]);
		assert_eq!(w.st.audit(0).unwrap().mismatches.len(), 1);
		assert_eq!(
			code(w.st.check_attest(&a, 0, 0, ContentHash::of(b"h"), None)),
			ErrorCode::WrongPhase
		);
		let right = Obj::from_tensor(&shard(&w.st, &a, b"s"));
		w.apply(Event::ShardResolved {
			stage: 0,
			epoch: 0,
			round: 0,
			shard: 0,
			object: right.clone(),
		});
		let ManifestPlan::Ready { shards, samples, checkpoint_key } =
			w.st.manifest(&plan.checkpoint_by, 0, 0).unwrap()
		else {
			panic!("ready")
		};
		assert_eq!((shards, samples), (vec![(0, [0, 10], right.clone())], 6));
		let ck = checkpoint_key.expect("the chosen replica is asked for the checkpoint");
		let other = if plan.checkpoint_by == a { b.clone() } else { a.clone() };
		assert!(matches!(
			w.st.manifest(&other, 0, 0).unwrap(),
			ManifestPlan::Ready { checkpoint_key: None, .. }
		));
		// Attestations: the chosen replica must bring the checkpoint, the other must not.
		let h = ContentHash::of(b"state");
		let ckt = TensorRef { key: ck, hash: ContentHash::of(b"ck"), size: 5, shape: vec![] };
		assert_eq!(code(w.st.check_attest(&plan.checkpoint_by, 0, 0, h, None)), ErrorCode::Invalid);
		assert_eq!(code(w.st.check_attest(&other, 0, 0, h, Some(&ckt))), ErrorCode::Invalid);
		let e = w.st.check_attest(&other, 0, 0, h, None).unwrap();
		w.apply(e);
		assert_eq!(w.st.commit_plan(0), None, "one member still to attest");
		let e = w.st.check_attest(&plan.checkpoint_by, 0, 0, h, Some(&ckt)).unwrap();
		w.apply(e);
		let c = w.st.commit_plan(0).expect("complete");
		assert_eq!((c.members, c.param_count, c.samples, c.state_hash), (2, 10, 6, h));
		assert_eq!(c.shards, vec![right]);
		// The chain commits: the stage trains epoch 1, and the manifest reads Committed.
		w.chain(0, 1, Phase::Training, 0, &[7, 6], 300);
		assert_eq!(w.st.manifest(&a, 0, 0).unwrap(), ManifestPlan::Committed { state_hash: h });
		assert_eq!(w.st.audit(0).unwrap().submissions.len(), 2);
	}

	#[test]
	fn conflicting_state_hashes_block_the_commit() {
		let mut w = World::new(1, 4, &[&[7, 6], &[2], &[3]]);
		w.chain(0, 0, Phase::WeightsUploading, 0, &[7, 6], 1);
		for m in [acc(7), acc(6)] {
			let t = tensor(w.st.gradient_key(0, 0, &m), 10, b"g");
			let e = w.st.check_gradient(&m, 0, 0, &t, &[ContentHash::of(b"c")], 1).unwrap();
			w.apply(e);
		}
		w.chain(0, 0, Phase::Merging, 0, &[7, 6], 2);
		w.apply(Event::MergeSeed { stage: 0, epoch: 0, round: 0, epoch_seed: [1; 32] });
		for m in [acc(7), acc(6)] {
			let t = tensor(w.st.shard_key(0, 0, 0, &m), 10, b"same");
			let e = w.st.check_shard(&m, 0, 0, 0, 0, &t).unwrap();
			w.apply(e);
		}
		let by = w.st.plan_of(0, 0).unwrap().checkpoint_by.clone();
		for (i, m) in [acc(7), acc(6)].into_iter().enumerate() {
			let ck = (m == by).then(|| TensorRef {
				key: keys::stage_checkpoint(&Id::new("run").unwrap(), 0, 0, &miner_id(&m)),
				hash: ContentHash::of(b"ck"),
				size: 1,
				shape: vec![],
			});
			let e = w.st.check_attest(&m, 0, 0, ContentHash::of(&[i as u8]), ck.as_ref()).unwrap();
			w.apply(e);
		}
		assert!(w.st.attest_conflict(0));
		assert_eq!(w.st.commit_plan(0), None);
		// A timed-out round restarts with fresh submissions.
		w.chain(0, 0, Phase::WeightsUploading, 1, &[7, 6], 3);
		assert!(w.st.stage(0).unwrap().merge.submissions.is_empty(), "fresh submissions");
		assert_eq!(w.work(7, 0, 4), WorkPlan::UploadGradient { epoch: 0 });
	}

	#[test]
	fn replaying_the_event_log_rebuilds_the_same_state() {
		let mut w = World::new(3, 4, &[&[1], &[2], &[3]]);
		w.run_sample([1, 2, 3], 10);
		let l = w.lease(1, 0, 20);
		for e in w.st.expired_leases(l.expires_at_ms + 1) {
			w.apply(e);
		}
		w.run_sample([1, 2, 3], 2_000);
		let mut again = State::new(cfg(3, 4));
		for e in &w.log {
			again.apply(e);
		}
		assert_eq!(again.stage_status(), w.st.stage_status());
		assert_eq!(again.pathway_log(0), w.st.pathway_log(0));
		assert_eq!(again.leases().count(), w.st.leases().count());
		assert_eq!(again.totals(), w.st.totals());
		assert_eq!(again.leases_expired_total(), 1);
		// Lease ids continue after the replayed ones.
		assert_eq!(
			again.plan_work(&acc(1), 0, 3_000).unwrap(),
			w.st.plan_work(&acc(1), 0, 3_000).unwrap()
		);
	}
}
