//! Request and response bodies of the orchestrator API (docs/design.md §3 steps 2–6).
//!
//! Units: sample ids are global (`epoch · quota + i`), epochs and stages are the chain's, times are
//! milliseconds since the Unix epoch, sizes are bytes, tensor shapes are element counts per axis
//! (`[B, T, b]` for a compressed activation: micro-batch rows, tokens per row, bottleneck width).

use iota_primitives::{ContentHash, Phase};
use iota_protocol::PresignedRequest;
use serde::{Deserialize, Serialize};

use crate::AccountId;

/// Identifier of one lease (one work item handed to one miner), unique for the orchestrator's lifetime
/// (persisted, so unique across restarts too).
pub type LeaseId = u64;

/// Longest object key accepted in a request, in bytes.
pub const MAX_KEY_LEN: usize = 512;
/// Most axes of a tensor shape accepted in a request.
pub const MAX_SHAPE_RANK: usize = 8;

/// An object to read: its key, the hash it must have and a presigned GET.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ObjectGet {
	/// Object key.
	pub key: String,
	/// BLAKE3 of the object; the reader checks it before using a byte.
	pub hash: ContentHash,
	/// Size in bytes.
	pub size: u64,
	/// Presigned GET for this key.
	pub get: PresignedRequest,
}

/// An object to write: the key the caller owns and a presigned PUT for it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ObjectPut {
	/// Object key (scoped to the caller: `v1/runs/{run}/miners/{account}/...`).
	pub key: String,
	/// Presigned PUT for this key.
	pub put: PresignedRequest,
}

/// A tensor a miner uploaded: key, hash, size and shape, as reported in a submit call.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TensorRef {
	/// Object key (must be the key of the lease's presigned PUT).
	pub key: String,
	/// BLAKE3 of the uploaded bytes.
	pub hash: ContentHash,
	/// Size in bytes.
	pub size: u64,
	/// Shape, e.g. `[B, T, b]`.
	pub shape: Vec<u64>,
}

impl TensorRef {
	/// The object this tensor was uploaded as (key, hash, size).
	pub fn object(&self) -> iota_protocol::ObjectRef {
		iota_protocol::ObjectRef { key: self.key.clone(), hash: self.hash, size: self.size }
	}
}

/// The tokens of one sample: a presigned GET of the data shard that holds it and where in it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DataSlice {
	/// Shard index in the run spec's data manifest.
	pub shard: u32,
	/// The shard object (`rows_per_shard × (seq_len + 1)` little-endian u32 tokens).
	pub object: ObjectGet,
	/// First row of the sample in the shard.
	pub row_offset: u32,
	/// Rows in the sample (`B`, the micro-batch size).
	pub rows: u32,
}

/// Body of `iota_getWork`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct GetWork {
	/// The stage the miner believes it holds (refused with `WrongStage` if the chain says otherwise).
	pub stage: u16,
	/// The miner process's session: a random number drawn once per process start. Another session of the
	/// same account is proof its earlier process is gone (a restart with the same key): its leases are
	/// released at once and its accepted passes not yet in a merge submission are re-listed
	/// (docs/design.md §3 step 5). A session so replaced is refused from then on (`SessionSuperseded`;
	/// the orchestrator remembers an account's last 16). `None`: no restart detection (tools, older
	/// clients).
	#[serde(default, skip_serializing_if = "Option::is_none")]
	pub session: Option<u64>,
}

/// A forward work item (the tail runs forward, loss and backward at once).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ForwardWork {
	/// The lease; submit with it before `expires_at_ms`.
	pub lease: LeaseId,
	/// Epoch of the sample.
	pub epoch: u32,
	/// Stage.
	pub stage: u16,
	/// Sample id.
	pub sample: u64,
	/// Input activation from stage − 1 (`None` at the head).
	pub input: Option<ObjectGet>,
	/// Tokens: the head's inputs, the tail's targets (`None` for middle stages).
	pub data: Option<DataSlice>,
	/// Where to write the result: the activation for stage + 1, or at the tail the gradient with
	/// respect to the tail's input.
	pub output: ObjectPut,
	/// Lease deadline.
	pub expires_at_ms: u64,
}

/// A backward work item.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct BackwardWork {
	/// The lease.
	pub lease: LeaseId,
	/// Epoch of the sample.
	pub epoch: u32,
	/// Stage.
	pub stage: u16,
	/// Sample id.
	pub sample: u64,
	/// The miner that ran this stage's forward; when it is not the caller, the caller recomputes the
	/// forward from `input`/`data` (docs/design.md §3 step 5).
	pub forward_by: AccountId,
	/// The stage's input activation (`None` at the head).
	pub input: Option<ObjectGet>,
	/// The head's tokens (`None` elsewhere).
	pub data: Option<DataSlice>,
	/// Gradient with respect to this stage's output, from stage + 1.
	pub grad_output: ObjectGet,
	/// Where to write the gradient with respect to this stage's input (`None` at the head).
	pub output: Option<ObjectPut>,
	/// Lease deadline.
	pub expires_at_ms: u64,
}

/// Why there is no training work right now.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum IdleReason {
	/// Nothing queued for the stage.
	QueueEmpty,
	/// The miner holds as many leases as it may, or (head) has as many samples in the pipeline as it
	/// may: started by its forward and not yet through the head's backward (the orchestrator's
	/// `--max-in-flight`).
	InFlightLimit,
	/// The head has issued its epoch's quota.
	QuotaIssued,
	/// The stage is merging; see [`Work::UploadGradient`] and `iota_getShards`.
	Merging,
	/// Local mode: the miner restarted mid-epoch; its inner-step trail of the epoch ended with its earlier
	/// process, so it waits for the stage's next epoch.
	Restarted,
	/// Sync mode: the miner made no request for a lease's length while holding accepted passes of the
	/// epoch that reached no merge submission, so the orchestrator re-listed them for recomputation by
	/// other members (or, once the stage's uploads were open, counted them lost). The gradient it
	/// accumulated in the epoch is void: drop it and follow the stage's merge as a replica without
	/// samples (`getManifest`; it is in no round, so it asks for no shards). Answered until the stage's
	/// epoch ends, the merge included.
	Forfeited,
}

/// Answer of `iota_getWork`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", tag = "kind")]
pub enum Work {
	/// Run a forward pass.
	Forward(ForwardWork),
	/// Run a backward pass.
	Backward(BackwardWork),
	/// The stage is in `WeightsUploading`: upload the accumulated gradient (flat f32, see
	/// [`GradientSubmission`]) here and call `iota_submitGradient`.
	UploadGradient {
		/// The epoch being merged.
		epoch: u32,
		/// Where to write it.
		output: ObjectPut,
	},
	/// Nothing to do; ask again after `retry_after_ms`. The orchestrator may hold the request open
	/// first (a long poll, up to its `--work-wait-ms`) while the reason is one new state can end
	/// (`QueueEmpty`, `InFlightLimit`, `QuotaIssued`): it then answers with the work as soon as there
	/// is some, or with this and a wait of 0 when the hold ends.
	Idle {
		/// Why.
		reason: IdleReason,
		/// Suggested wait, ms (0 after a held request: ask again at once).
		retry_after_ms: u64,
	},
}

/// Body of `iota_submitActivation`: completes a lease.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SubmitActivation {
	/// The lease being completed.
	pub lease: LeaseId,
	/// The uploaded result: activation (forward), input gradient (backward, tail forward). `None` only
	/// for the head's backward, which has nothing to send.
	pub output: Option<TensorRef>,
	/// Local mode: the inner step of the replica state the pass ran at (the number of inner steps the
	/// miner had applied this epoch; its state hash must have been reported with
	/// `iota_reportInnerStep` first, docs/design.md §10). Always 0 in sync mode.
	#[serde(default)]
	pub inner_step: u32,
}

/// Body of `iota_getChallenges` (local mode): which of the caller's inner steps of `epoch` it must
/// reveal.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ChallengeQuery {
	/// The epoch trained.
	pub epoch: u32,
}

/// One challenged inner step: upload the states it names (`InnerState::to_bytes`, whose BLAKE3 must be
/// the hash reported for that state) to the presigned PUTs.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Reveal {
	/// The inner step `k` (from state `k` to state `k + 1`).
	pub step: u32,
	/// The states to reveal, ascending ([`crate::PathwayLog::revealed_states`]): `k`, `k + 1`, and every
	/// earlier state a pass of step `k` ran its forward at.
	pub states: Vec<RevealedState>,
}

/// One state a challenge reveals.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RevealedState {
	/// The state index `j` (after `j` inner steps).
	pub state: u32,
	/// Where it goes.
	pub put: ObjectPut,
	/// The hash reported for it.
	pub hash: ContentHash,
}

/// Answer of `iota_getChallenges`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Challenges {
	/// The epoch.
	pub epoch: u32,
	/// Whether the challenge seed is known yet (the epoch completed and its block is finalized); until
	/// then `reveals` is empty and the caller asks again later.
	pub seeded: bool,
	/// The challenged steps (empty once seeded if the caller took fewer than one inner step).
	pub reveals: Vec<Reveal>,
}

/// Body of `iota_reportInnerStep` (local mode, docs/design.md §10): the BLAKE3 of the caller's replica
/// state after `step` inner steps of `epoch` (`step` 0: the state the epoch began with). Reports come in
/// order (0, 1, 2, ...), each before any pass that ran at that state is submitted and before the
/// miner's pseudo-gradient; reporting the same hash again is accepted and changes nothing.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct InnerStepReport {
	/// The epoch being trained.
	pub epoch: u32,
	/// Inner steps applied this epoch (0-based state index).
	pub step: u32,
	/// [`iota_protocol::inner_state_hash`] of the replica: weights, inner AdamW moments and step.
	pub state_hash: ContentHash,
}

/// Answer of a submit call.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Ack {
	/// Backward passes the stage has completed this epoch, after this call.
	pub backward_done: u32,
	/// The stage's quota.
	pub backward_quota: u32,
}

/// Body of `iota_reportLoss`: the tail reports a sample's loss before submitting its lease.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ReportLoss {
	/// The tail's lease of the sample.
	pub lease: LeaseId,
	/// Mean next-token cross-entropy over the sample's `B·T` tokens, in nats (finite, ≥ 0).
	pub loss: f32,
}

// The hashed-chunk rule of merge submissions is the protocol core's (one copy).
pub use iota_protocol::chunks::{
	chunk_count, chunk_hashes, chunk_span, gradient_chunk_elems, MAX_GRADIENT_CHUNK_ELEMS,
	MIN_GRADIENT_CHUNK_ELEMS,
};
pub use iota_protocol::codec::MergeCodec;
pub use iota_protocol::optim::Training;

/// Body of `iota_submitGradient` (phase `WeightsUploading`).
///
/// The object is `param_count` values in the run spec's `merge_codec` (little-endian f32 by default;
/// [`MergeCodec`]): the **sum** of the miner's per-sample gradients over `samples` micro-batches, in the
/// stage's parameter order.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct GradientSubmission {
	/// The epoch being merged.
	pub epoch: u32,
	/// The uploaded gradient (shape `[param_count]`).
	pub gradient: TensorRef,
	/// [`chunk_hashes`] of the uploaded bytes ([`chunk_count`]`(P)` entries).
	pub chunk_hashes: Vec<ContentHash>,
	/// Micro-batches accumulated (the weight of this submission in the mean).
	pub samples: u32,
}

/// Body of `iota_getShards` and `iota_getManifest`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MergeQuery {
	/// The epoch being merged.
	pub epoch: u32,
}

/// One gradient submission a shard reducer reads.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SubmissionSource {
	/// The submitting miner.
	pub miner: AccountId,
	/// Its sample count.
	pub samples: u32,
	/// The whole submission; a reducer reads the chunk-aligned span of its range ([`chunk_span`]) with
	/// an HTTP `Range` header and checks it against `chunk_hashes`.
	pub object: ObjectGet,
	/// [`chunk_hashes`] of the submission.
	pub chunk_hashes: Vec<ContentHash>,
}

/// A shard this miner must reduce.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ShardTask {
	/// Shard index (`0 .. K`).
	pub shard: u32,
	/// Element range `[start, end)` of the flat gradient, in f32 elements.
	pub range: [u64; 2],
	/// Where to write the reduced shard (`end − start` little-endian f32).
	pub output: ObjectPut,
}

/// Answer of `iota_getShards`: this miner's part of the butterfly (docs/design.md §6).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ShardAssignment {
	/// The epoch being merged.
	pub epoch: u32,
	/// Merge round (a timed-out merge restarts with a new round and a new assignment).
	pub round: u32,
	/// Length `P` of the flat gradient, in f32 elements.
	pub param_count: u64,
	/// Every gradient submission of the round (the butterfly's `n` members).
	pub submissions: Vec<SubmissionSource>,
	/// The shards this miner reduces (weighted mean by sample count over all submissions).
	pub shards: Vec<ShardTask>,
}

/// Body of `iota_submitShard`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SubmitShard {
	/// The epoch being merged.
	pub epoch: u32,
	/// The round of the assignment.
	pub round: u32,
	/// Shard index.
	pub shard: u32,
	/// The uploaded reduced shard (shape `[end − start]`).
	pub reduced: TensorRef,
}

/// One reduced shard of a completed butterfly, both copies agreeing.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ReducedShard {
	/// Shard index.
	pub shard: u32,
	/// Element range `[start, end)`.
	pub range: [u64; 2],
	/// The reduced values.
	pub object: ObjectGet,
}

/// Where a stage's merge stands, from a miner's point of view.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", tag = "state")]
pub enum MergeView {
	/// Shards are still being reduced (or a copy mismatch is being resolved).
	Reducing {
		/// Shards with two agreeing copies.
		present: u32,
		/// Shards expected.
		expected: u32,
	},
	/// Every shard is present: download them all, apply the AdamW step, call `iota_submitStateHash`.
	Ready {
		/// The mean gradient, shard by shard, in shard order.
		shards: Vec<ReducedShard>,
		/// Total samples merged (the step's sample count).
		samples: u32,
		/// Set for the replica the seed picked to upload the full stage checkpoint.
		checkpoint: Option<ObjectPut>,
	},
	/// The manifest is on chain; the stage is training the next epoch.
	Committed {
		/// The stage state hash every replica attested.
		state_hash: ContentHash,
	},
}

/// Body of `iota_submitStateHash`: a replica attests its stage state after the step.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SubmitStateHash {
	/// The merged epoch.
	pub epoch: u32,
	/// BLAKE3 of the stage state (weights + AdamW moments + step).
	pub state_hash: ContentHash,
	/// The uploaded checkpoint, when this replica was asked for one.
	pub checkpoint: Option<TensorRef>,
}

/// Body of `iota_releaseLease`: a miner shutting down hands a lease back at once.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ReleaseLease {
	/// The lease.
	pub lease: LeaseId,
}

/// Body of `iota_presignGet` (validators): presigned GETs for objects of the run.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PresignGet {
	/// Keys under the run's scope (at most [`MAX_PRESIGN_KEYS`]).
	pub keys: Vec<String>,
}

/// Most keys in one `iota_presignGet`.
pub const MAX_PRESIGN_KEYS: usize = 64;

/// Body of `iota_presignPut` (validators): a presigned PUT for a key in the caller's own scope
/// (`iota_storage::keys::evidence`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PresignPut {
	/// The key (its writer must be the caller).
	pub key: String,
}

/// Answer of `iota_epochRecord` (validators): what a validator needs to audit an epoch.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct EpochRecord {
	/// Epoch.
	pub epoch: u32,
	/// The epoch's pathway log ([`crate::PathwayLog`]), once written (after the head's merge).
	pub pathway_log: Option<ObjectGet>,
	/// Per stage, the shards whose two copies disagreed: (stage, shard, the two copies' writers and objects).
	pub shard_mismatches: Vec<ShardMismatch>,
	/// Per stage, every reduced shard copy accepted (for sampled audits).
	pub shard_copies: Vec<ShardCopy>,
	/// Per stage, every gradient submission of the final merge round.
	pub submissions: Vec<StageSubmission>,
	/// Gradient submissions the orchestrator refused after reading them from the bucket (the protocol's
	/// acceptance rule: length, chunk hashes, finite values), at most
	/// [`MAX_REFUSED_VECTORS_PER_MINER`] per miner and stage: evidence a validator checks with the same
	/// rule and judges the sender by.
	#[serde(default)]
	pub refused_vectors: Vec<RefusedVector>,
}

/// Refused gradient submissions an epoch record keeps per miner and stage.
pub const MAX_REFUSED_VECTORS_PER_MINER: usize = 4;

/// A gradient submission the orchestrator refused ([`EpochRecord::refused_vectors`]).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RefusedVector {
	/// Stage.
	pub stage: u16,
	/// Merge round.
	pub round: u32,
	/// The submission as it was sent (miner, claimed samples, object, chunk hashes).
	pub source: SubmissionSource,
	/// Why the orchestrator refused it.
	pub reason: String,
}

/// One accepted copy of a reduced shard.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ShardCopy {
	/// Stage.
	pub stage: u16,
	/// Merge round.
	pub round: u32,
	/// Shard index.
	pub shard: u32,
	/// Element range.
	pub range: [u64; 2],
	/// Who reduced it.
	pub miner: AccountId,
	/// The copy.
	pub object: ObjectGet,
}

/// Two copies of one shard that hash differently.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ShardMismatch {
	/// Stage.
	pub stage: u16,
	/// Merge round.
	pub round: u32,
	/// Shard index.
	pub shard: u32,
	/// The two copies.
	pub copies: Vec<ShardCopy>,
}

/// A gradient submission, with its stage.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StageSubmission {
	/// Stage.
	pub stage: u16,
	/// Merge round.
	pub round: u32,
	/// The submission.
	pub source: SubmissionSource,
}

/// Per-stage part of [`Status`].
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StageStatus {
	/// Stage index.
	pub stage: u16,
	/// Epoch the stage is in.
	pub epoch: u32,
	/// Phase (as last seen on chain).
	pub phase: Phase,
	/// Miners holding the stage on chain.
	pub miners: Vec<AccountId>,
	/// Items waiting for a forward.
	pub forward_queue: u32,
	/// Items waiting for a backward.
	pub backward_queue: u32,
	/// Leases out now.
	pub leases: u32,
	/// Backward passes done this epoch.
	pub backward_done: u32,
	/// Gradients submitted this epoch (merge phases).
	pub gradients_submitted: u32,
	/// Shards present / expected (merge phases).
	pub shards_present: u32,
	/// Shards expected.
	pub shards_expected: u32,
}

/// Answer of `iota_status` (public, unsigned).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Status {
	/// Run id.
	pub run: String,
	/// BLAKE3 of the run spec (equals the chain's `model_hash`).
	pub spec_hash: ContentHash,
	/// Best finalized block the orchestrator has seen.
	pub finalized_block: u32,
	/// Per stage.
	pub stages: Vec<StageStatus>,
	/// Mean tail loss of the last completed epoch, if any.
	pub last_epoch_loss: Option<f32>,
	/// Tokens trained (forward+backward through every stage) since the run began.
	pub tokens_trained: u64,
	/// Tokens per second over the last minute (head backward completions × tokens per sample).
	pub tokens_per_sec: f64,
	/// Bytes of activations and activation gradients accepted since the run began.
	pub wire_bytes: u64,
	/// Every miner the orchestrator has seen.
	pub miners: Vec<MinerActivity>,
	/// Completed epochs, oldest first (at most the last 1 000).
	pub epochs: Vec<EpochSummary>,
	/// Orchestrator clock, milliseconds since the Unix epoch.
	pub now_ms: u64,
}

/// What the orchestrator saw one miner do.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MinerActivity {
	/// Account.
	pub account: AccountId,
	/// Stage (from chain).
	pub stage: u16,
	/// Work items completed in the stage's current epoch.
	pub samples_this_epoch: u32,
	/// Backward passes (tail passes included) of the stage's current epoch accepted from it that its
	/// merge submission may weigh (cleared by a restart that lost them).
	#[serde(default)]
	pub backward_this_epoch: u32,
	/// Work items completed since the run began.
	pub samples_total: u64,
	/// Leases it holds now.
	pub leases: u32,
	/// Leases it let expire since the run began.
	pub leases_expired: u64,
	/// Times it came back under a new session (a process restart with the same key) since the run began.
	#[serde(default)]
	pub restarts: u64,
	/// Times it fell silent (no lease, no request for a lease's length) holding accepted passes of its
	/// stage's epoch, which were re-listed for recomputation by other members, since the run began.
	#[serde(default)]
	pub gone: u64,
	/// Requests refused since the run began (the sum of `refusals`).
	pub refused: u64,
	/// Requests refused since the run began, by error code name (`ErrorCode::name`: `wrong_phase`,
	/// `lease_expired`, …). "No work right now" is an answer (`Work::Idle`), never a refusal.
	#[serde(default)]
	pub refusals: std::collections::BTreeMap<String, u64>,
	/// Last accepted request, milliseconds since the Unix epoch.
	pub last_seen_ms: u64,
}

/// One completed epoch (every stage merged).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct EpochSummary {
	/// Epoch.
	pub epoch: u32,
	/// Mean tail loss over the epoch's samples, in nats.
	pub loss: f32,
	/// Samples completed.
	pub samples: u32,
	/// Tokens trained in the epoch.
	pub tokens: u64,
	/// Tokens trained since the run began, at the end of this epoch.
	pub tokens_cumulative: u64,
	/// Wire bytes (activations and activation gradients) of the epoch.
	pub wire_bytes: u64,
	/// When the first sample was issued and when the last stage committed its merge, ms since the Unix epoch.
	pub started_ms: u64,
	/// See `started_ms`.
	pub completed_ms: u64,
	/// Milliseconds the stages spent in merge phases, summed over stages.
	pub merge_ms: u64,
	/// Where each stage's time in the epoch went, as the orchestrator saw it (one entry per stage, in
	/// stage order; empty in summaries written before this field existed).
	#[serde(default)]
	pub stages: Vec<StageTime>,
	/// Milliseconds from the last stage reaching the previous epoch's backward quota (or leaving Training
	/// on a timeout) to this epoch's first sample issued at the head; `None` for the first epoch the
	/// orchestrator saw.
	#[serde(default)]
	pub quota_to_start_ms: Option<u64>,
	/// Extrinsics the orchestrator submitted for this epoch (a `batch_all` counts once; one that carries
	/// calls of two epochs counts in both).
	#[serde(default)]
	pub extrinsics: u32,
	/// Mean loss (nats) of the epoch's merged model on the run's held-out rows, once the orchestrator
	/// evaluated it; `None` without a held-out set, before the evaluation, or in older summaries.
	#[serde(default, skip_serializing_if = "Option::is_none")]
	pub heldout_loss: Option<f32>,
	/// Backward passes (tail passes included) recomputed by a live member after the miner that ran them
	/// restarted before its gradient reached a merge submission, summed over stages.
	#[serde(default)]
	pub recomputed: u32,
	/// Accepted backward passes whose gradient reached no merge (their miner restarted once its stage
	/// had left Training, or in local mode, where a pass belongs to its miner's inner-step trail), summed
	/// over stages.
	#[serde(default)]
	pub lost: u32,
}

/// One stage's epoch, split into what it was doing, in milliseconds. The four parts sum to the stage's
/// span: from entering the epoch (the previous merge's commit seen, or the run's first sample) to this
/// epoch's commit seen.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StageTime {
	/// Stage.
	pub stage: u16,
	/// Training phase time with at least one of the stage's leases out (forward or backward passes,
	/// with their activation downloads and uploads).
	pub training_ms: u64,
	/// Gradient upload, butterfly reduce and the optimizer step: time in `WeightsUploading` and
	/// `Merging` not spent waiting for the chain.
	pub merge_ms: u64,
	/// The stage held up by the chain: from its call falling due to the pool accepting it, where the
	/// orchestrator acts on the call's predicted effect, else from submission to seeing it in a best block.
	pub chain_wait_ms: u64,
	/// Training phase time with no lease out and no extrinsic pending: waiting for pipeline inputs
	/// (bubbles), for the quota, or for the next block.
	pub idle_ms: u64,
}

impl StageTime {
	/// The stage's span in the epoch (the sum of the four parts), in milliseconds.
	pub fn total_ms(&self) -> u64 {
		self.training_ms + self.merge_ms + self.chain_wait_ms + self.idle_ms
	}
}

/// Stage-time summed over [`StageTime`] records (any stages, any epochs), by what it was spent on (ms):
/// what the devnet report, bench-pipeline and the dashboard print as shares.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TimeSplit {
	/// Σ training (a lease out).
	pub training_ms: u64,
	/// Σ merge (gradient upload, butterfly, step).
	pub merge_ms: u64,
	/// Σ chain wait (see [`StageTime::chain_wait_ms`]).
	pub chain_wait_ms: u64,
	/// Σ idle.
	pub idle_ms: u64,
}

impl TimeSplit {
	/// The sum of `times`; `None` when there is none.
	pub fn of<'a>(times: impl IntoIterator<Item = &'a StageTime>) -> Option<Self> {
		let mut t = Self::default();
		let mut any = false;
		for st in times {
			any = true;
			t.training_ms += st.training_ms;
			t.merge_ms += st.merge_ms;
			t.chain_wait_ms += st.chain_wait_ms;
			t.idle_ms += st.idle_ms;
		}
		any.then_some(t)
	}

	/// Σ of the four parts (ms).
	pub fn total_ms(&self) -> u64 {
		self.training_ms + self.merge_ms + self.chain_wait_ms + self.idle_ms
	}

	/// A part's share of the total (0.05 = 5 %).
	pub fn share(&self, part_ms: u64) -> f64 {
		if self.total_ms() == 0 {
			0.0
		} else {
			part_ms as f64 / self.total_ms() as f64
		}
	}

	/// "training 61.0 %, merge 20.1 %, chain wait 4.2 %, idle 14.7 %".
	pub fn shares(&self) -> String {
		format!(
			"training {:.1} %, merge {:.1} %, chain wait {:.1} %, idle {:.1} %",
			self.share(self.training_ms) * 100.0,
			self.share(self.merge_ms) * 100.0,
			self.share(self.chain_wait_ms) * 100.0,
			self.share(self.idle_ms) * 100.0
		)
	}
}

/// A phase change of one stage, as pushed by `iota_subscribePhases`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PhaseEvent {
	/// Stage.
	pub stage: u16,
	/// The stage's epoch after the change.
	pub epoch: u32,
	/// The new phase.
	pub phase: Phase,
	/// Finalized block in which the change was seen.
	pub block: u32,
}

/// Answer of `iota_runSpec` (public): the spec's JSON bytes as text, so the caller can hash exactly what
/// was committed on chain and compare with `model_hash`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RunSpecText {
	/// The spec, as stored (JSON).
	pub json: String,
}

#[cfg(test)]
mod tests {
	use super::*;

	#[test]
	fn a_time_split_sums_stage_times_and_gives_shares() {
		assert_eq!(TimeSplit::of(&[]), None);
		let t = |training_ms, merge_ms, chain_wait_ms, idle_ms| StageTime {
			stage: 0,
			training_ms,
			merge_ms,
			chain_wait_ms,
			idle_ms,
		};
		let s = TimeSplit::of(&[t(600, 200, 100, 100), t(0, 0, 0, 1_000)]).unwrap();
		assert_eq!(s.total_ms(), 2_000);
		assert_eq!(s.shares(), "training 30.0 %, merge 10.0 %, chain wait 5.0 %, idle 55.0 %");
		assert_eq!(TimeSplit::default().share(5), 0.0);
	}

	#[test]
	fn chunk_size_grows_with_the_vector_within_bounds() {
		assert_eq!(gradient_chunk_elems(0), MIN_GRADIENT_CHUNK_ELEMS);
		assert_eq!(gradient_chunk_elems(100), MIN_GRADIENT_CHUNK_ELEMS);
		assert_eq!(gradient_chunk_elems(1_024 * 1_024), 1_024);
		assert_eq!(gradient_chunk_elems(1_024 * 1_024 + 1), 2_048);
		assert_eq!(gradient_chunk_elems(3_156_480), 4_096, "small preset, stage 1");
		assert_eq!(gradient_chunk_elems(1 << 40), MAX_GRADIENT_CHUNK_ELEMS);
		assert_eq!(gradient_chunk_elems(u64::MAX), MAX_GRADIENT_CHUNK_ELEMS);
		// Not monotonic: a larger vector may list fewer chunks when the chunk size doubles, so a bound on
		// the count must be the maximum over the sizes in use, not the count of the largest.
		assert_eq!(chunk_count(1_580_000), 772);
		assert_eq!(chunk_count(2_200_000), 538);
		for p in [1u64, 1_000, 70_000, 3_156_480, 500_000_000] {
			assert!(
				chunk_count(p) <= 1_024 || gradient_chunk_elems(p) == MAX_GRADIENT_CHUNK_ELEMS,
				"{p}"
			);
		}
	}

	#[test]
	fn chunk_span_covers_the_range_on_chunk_boundaries() {
		let p = 3 * 1_024 * 1_024; // chunks of 4 096 elements
		let c = gradient_chunk_elems(p);
		assert_eq!(c, 4_096);
		let f = MergeCodec::F32;
		let span = |s, e, p| {
			let sp = chunk_span(f, s, e, p);
			(sp.first_chunk, sp.bytes)
		};
		assert_eq!(span(0, 10, 100), (0, 0..400));
		assert_eq!(span(c + 5, c + 6, p), (1, c * 4..2 * c * 4));
		assert_eq!(span(c - 1, c + 1, p), (0, 0..2 * c * 4));
		assert_eq!(span(p - 7, p, p), ((p / c - 1) as usize, (p - c) * 4..p * 4));
		let bytes = vec![0u8; (2 * 1_024 + 3) * 4];
		let h = chunk_hashes(f, &bytes, 2 * 1_024 + 3);
		assert_eq!(h.len(), 3);
		assert_eq!(h[2], ContentHash::of(&[0u8; 12]));
		assert_eq!(chunk_count(2 * 1_024 + 3), 3);
	}

	#[test]
	fn work_is_tagged_json() {
		let w = Work::Idle { reason: IdleReason::QueueEmpty, retry_after_ms: 250 };
		let j = serde_json::to_value(&w).unwrap();
		assert_eq!(j["kind"], "idle");
		assert_eq!(j["reason"], "queueEmpty");
		assert_eq!(serde_json::from_value::<Work>(j).unwrap(), w);
		// From text too, as the RPC client reads it (the workspace build turns on serde_json's
		// arbitrary_precision, under which tagged enums have refused numbers).
		let text = serde_json::to_string(&w).unwrap();
		assert_eq!(serde_json::from_str::<Work>(&text).unwrap(), w);
		let m = MergeView::Reducing { present: 1, expected: 3 };
		assert_eq!(
			serde_json::from_str::<MergeView>(&serde_json::to_string(&m).unwrap()).unwrap(),
			m
		);
	}
}
