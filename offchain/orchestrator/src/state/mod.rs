//! The orchestrator's state machine (docs/design.md §3 steps 2–6): pure, no I/O. Time (`now_ms`) and chain facts
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
//!   (`BackwardWork::forward_by` tells it; docs/design.md §3 step 5).
//! - **Epoch gating**: a stage leases only items of its current epoch while `Training`; items of a later
//!   epoch wait; items of an earlier epoch (left behind by a timed-out phase) are dropped.
//! - **Merge bookkeeping** per stage and round: gradient submissions, the butterfly plan (docs/design.md §6) from
//!   the chain's epoch seed, the reduced copies of each shard compared by hash (a mismatch is recorded and
//!   waits for [`Event::ShardResolved`]), state-hash attestations and the checkpoint, until the manifest
//!   can be committed ([`State::commit_plan`]).
//! - **Pathway records** (who ran what, the loss) and activity counters for `iota_status`.
//!
//! Files, one concept each: `events` (the [`Event`] log and [`State::apply`], one path for live
//! requests and replay), `work` (routing and leases), `merge` (merge bookkeeping), `audit` (the
//! pathway log and audit records), `inner` (local mode's inner-step trails), `times` (where each stage's epoch goes), `views` (what `iota_status` and the dashboard read),
//! `invariants` (what holds after any sequence of events: [`State::check_invariants`]).

use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};

use iota_primitives::{ContentHash, Phase, StageReport};
use iota_rpc::types::{
	EpochSummary, IdleReason, LeaseId, MinerActivity, StageStatus, StageTime, TensorRef,
};
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

/// An object in the bucket as the state records it: the protocol's object reference (key, BLAKE3,
/// size in bytes).
pub type Obj = iota_protocol::ObjectRef;

/// How the pathway log names an object (key and hash).
fn entry(o: &Obj) -> ObjectEntry {
	ObjectEntry { key: o.key.clone(), hash: o.hash }
}

/// Fixed parameters of the state machine (from the run spec and the chain's run config).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
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
	/// Codec of merge vectors (the run spec's `merge_codec`): fixes a submission's byte length.
	#[serde(default)]
	pub merge_codec: iota_protocol::MergeCodec,
	/// Local mode: backward passes per inner step (the spec's `accumulate`); `None` in sync mode.
	#[serde(default)]
	pub accumulate: Option<u32>,
	/// Most samples one head miner may have in the pipeline at once: started by its forward (leased
	/// or accepted) and not yet through the head's backward. `None`: unbounded. See
	/// [`default_max_in_flight`].
	#[serde(default)]
	pub max_in_flight: Option<u32>,
}

/// The default bound on a head miner's samples in flight ([`StateConfig::max_in_flight`]): in local
/// mode the inner step's micro-batches `accumulate`, at least 2; none in sync mode (`accumulate` is
/// `None`).
///
/// In local mode every replica steps its weights every `accumulate` backward passes, so a sample
/// started `k` samples before its backward ran its forward about `k / accumulate` inner steps
/// earlier: its backward comes that many steps late (docs/design.md §3; the pass itself runs at its
/// forward's weights, which the miner stashes). With at most `accumulate` samples in flight the head's
/// backward passes are at most one inner step late. Unbounded, a fast head ran its whole quota ahead.
/// Measured with `bench-pipeline` (3 × 1, quota 64, accumulate 2, int8 merges; last-epoch loss against
/// the single-process baseline's, tokens/s ratio): unbounded 1.106 / 0.813 (backward passes up to 12
/// inner steps late; the tail lost ~1 nat at every epoch start), a bound of 4 1.058 / 0.841; once idle
/// requests were held (long poll) and stale passes ran at their stashed weights, 4: 1.058 / 0.849,
/// 3: 1.057 / 0.863, **2: 1.021 / 0.805**. A bound of 1 runs one sample at a time (1.015 / 0.301, the
/// same loss as the baseline with the network's bottleneck). In sync mode the weights do not move
/// within an epoch, so nothing goes stale and the head is not held back.
pub fn default_max_in_flight(accumulate: Option<u32>) -> Option<u32> {
	accumulate.map(|a| a.max(2))
}

mod audit;
mod events;
mod inner;
mod invariants;
mod merge;
mod restart;
#[cfg(test)]
mod tests;
mod times;
mod views;
mod work;

use times::StageClock;

pub use events::{Event, Lease, WorkKind};
pub use inner::InnerTrail;
pub use invariants::InvariantError;
pub use merge::phase_changes;

/// A sample's accepted work.
#[derive(Clone, Debug, PartialEq, Default, Serialize, Deserialize)]
pub struct SampleState {
	/// Epoch of the sample.
	pub epoch: u32,
	/// Per stage: who ran the accepted forward and its output (tail: the gradient w.r.t. its input).
	pub forward: Vec<Option<(AccountId, Option<Obj>)>>,
	/// Per stage: who ran the accepted backward and its output (head: none).
	pub backward: Vec<Option<(AccountId, Option<Obj>)>>,
	/// Local mode: per stage, the inner step the accepted forward ran at (empty until one is).
	#[serde(default)]
	pub forward_steps: Vec<u32>,
	/// Local mode: per stage, the inner step the accepted backward ran at.
	#[serde(default)]
	pub backward_steps: Vec<u32>,
	/// The tail's loss.
	pub loss: Option<f32>,
	/// Loss reported on a tail lease not yet completed: (lease, loss).
	pub pending_loss: Option<(LeaseId, f32)>,
	/// Passes recomputed for the merge after their miner restarted: (stage, miner, output). The last
	/// entry of a stage is the pass its merge counts ([`State::counted_by`]).
	#[serde(default)]
	pub recomputed: Vec<(u16, AccountId, Option<Obj>)>,
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

/// The plan of one merge round: the protocol core's ([`iota_protocol::plan`]), over chain accounts.
pub type MergePlan = iota_protocol::MergePlan<AccountId>;

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
#[derive(Clone, Debug, PartialEq, Default)]
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

/// A refused gradient submission: (stage, round, miner, the submission, the refusal).
pub type RefusedRec = (u16, u32, AccountId, Submission, String);

/// An accepted shard copy: (stage, round, shard, element range, the copy).
pub type CopyAudit = (u16, u32, u32, [u64; 2], CopyRec);

/// Audit data of one epoch across stages (`iota_epochRecord`).
#[derive(Clone, Debug, PartialEq, Default)]
pub struct EpochAudit {
	/// The pathway log, once written.
	pub pathway_log: Option<Obj>,
	/// (stage, round, shard, copies) whose copies disagreed.
	pub mismatches: Vec<MismatchRec>,
	/// (stage, round, shard, range, copy) accepted.
	pub copies: Vec<CopyAudit>,
	/// (stage, round, miner, submission) of each stage's final round.
	pub submissions: Vec<(u16, u32, AccountId, Submission)>,
	/// (stage, round, miner, submission, reason) of refused gradient submissions ([`Event::GradientRefused`]).
	pub refused: Vec<RefusedRec>,
	/// Sum of losses, number of losses, completed samples, wire bytes.
	loss_sum: f64,
	losses: u32,
	completed: u32,
	wire_bytes: u64,
	started_ms: Option<u64>,
	merge_ms: u64,
	/// Each stage's split of the epoch, as its commit is seen.
	stage_times: Vec<StageTime>,
	/// The latest stage's end of training (its quota, or leaving Training on a timeout), ms.
	training_end_ms: Option<u64>,
	/// Extrinsics submitted for the epoch.
	extrinsics: u32,
	/// Passes recomputed after their miner restarted.
	recomputed: u32,
	/// Accepted passes whose gradient reached no merge (their miner restarted too late to re-list them).
	lost: u32,
}

/// One stage as the chain and the orchestrator see it.
#[derive(Clone, Debug, PartialEq, Default)]
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
	/// Samples of `epoch` whose pass here is re-listed for recomputation (its miner restarted before its
	/// gradient reached a merge submission): a backward lease (the tail: a forward lease) of any live
	/// member, which counts for the merge and changes nothing the other stages used.
	recompute: BTreeSet<u64>,
	/// Merge progress of `epoch`.
	pub merge: MergeState,
	/// When the stage entered a merge phase in `epoch` (ms).
	merge_started_ms: Option<u64>,
	/// Where its time in `epoch` went so far.
	clock: StageClock,
}

#[derive(Clone, Debug, PartialEq, Default)]
struct MinerStats {
	stage: u16,
	epoch: u32,
	samples_epoch: u32,
	samples_total: u64,
	leases_expired: u64,
	last_seen_ms: u64,
	/// The session of its latest process ([`Event::SessionStarted`]).
	session: Option<u64>,
	/// Sessions its latest ones replaced, newest last (at most [`RETIRED_SESSIONS`]): a request of one
	/// is refused (`SessionSuperseded`), never taken for a restart back to it.
	retired: std::collections::VecDeque<u64>,
	/// Sessions after the first.
	restarts: u64,
	/// Times it fell silent holding accepted passes that were then re-listed ([`Event::MinerGone`]).
	gone: u64,
	/// The epoch of its stage it forfeited by falling silent: no more work in it (a new session of its
	/// process clears this).
	gone_in: Option<u32>,
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
#[derive(Clone, Debug, PartialEq)]
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
	/// Held-out loss of each evaluated epoch's merged model ([`Event::HeldOutEvaluated`]), the last
	/// [`MAX_SUMMARIES`].
	heldout: BTreeMap<u32, f32>,
	committed: BTreeMap<(u16, u32), ContentHash>,
	/// Epoch seeds seen.
	seeds: BTreeMap<u32, [u8; 32]>,
	/// Local mode's inner-step trails, until the epoch's pathway log is written and its challenges drawn.
	inner: BTreeMap<inner::TrailKey, InnerTrail>,
	/// Backward passes (tail forwards included) accepted per (epoch, stage, miner) while the stage
	/// trained that epoch: the weight a merge submission must claim ([`State::accepted_passes`]). Kept
	/// for a stage's current and previous epoch (a predicted commit can be reverted).
	accepted: BTreeMap<inner::TrailKey, u32>,
	/// Local mode: challenge seeds of recent epochs.
	challenge_seeds: BTreeMap<u32, [u8; 32]>,
	/// Local mode: each trail's challenged steps `(k, hash k, hash k + 1)`, recent epochs.
	challenges: BTreeMap<inner::TrailKey, Vec<inner::Challenge>>,
	last_loss: Option<f32>,
	leases_expired_total: u64,
	/// The latest instant an event carried (ms): the time of events that carry none.
	clock_ms: u64,
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
			heldout: BTreeMap::new(),
			committed: BTreeMap::new(),
			seeds: BTreeMap::new(),
			inner: BTreeMap::new(),
			accepted: BTreeMap::new(),
			challenge_seeds: BTreeMap::new(),
			challenges: BTreeMap::new(),
			last_loss: None,
			leases_expired_total: 0,
			clock_ms: 0,
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

	/// The first epoch to evaluate on the held-out set: after the last one evaluated, else the first
	/// completed epoch still summarised, else 0.
	pub fn next_heldout_epoch(&self) -> u32 {
		match self.heldout.keys().next_back() {
			Some(e) => e + 1,
			None => self.summaries.front().map_or(0, |s| s.epoch),
		}
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
	/// after a restart liveness restarts from the replayed work). The server skips a request of a
	/// replaced session (`SessionSuperseded`).
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
}

/// A miner's id in object keys: its account's SS58 string (docs/design.md §3).
pub fn miner_id(account: &AccountId) -> Id {
	// SS58 strings are base58: always valid identifiers.
	Id::new(account.to_string())
		.unwrap_or_else(|_| Id::new("invalid-account").expect("constant id is valid"))
}
