//! The orchestrator's JSON-RPC API as one jsonrpsee trait: the server implements `IotaApiServer`, miners
//! and validators call `IotaApiClient` (or [`crate::SignedClient`], which signs for them).
//!
//! Methods are namespaced `iota_*`. Every method that changes state or hands out presigned URLs takes a
//! [`Signed`] envelope (method name, params hash, nonce, millisecond timestamp, sr25519 signature;
//! [`crate::signing`]); `iota_status`, `iota_runSpec` and the phase subscription are public reads.
//! Errors carry an [`crate::ErrorCode`].

use jsonrpsee::core::SubscriptionResult;
use jsonrpsee::proc_macros::rpc;
use jsonrpsee::types::ErrorObjectOwned;

use crate::signing::Signed;
use crate::types::*;

/// Result type of the API's methods.
pub type RpcResult<T> = Result<T, ErrorObjectOwned>;

/// Full JSON-RPC method names, as signed.
pub mod methods {
	/// `iota_getWork`.
	pub const GET_WORK: &str = "iota_getWork";
	/// `iota_submitActivation`.
	pub const SUBMIT_ACTIVATION: &str = "iota_submitActivation";
	/// `iota_reportLoss`.
	pub const REPORT_LOSS: &str = "iota_reportLoss";
	/// `iota_reportInnerStep`.
	pub const REPORT_INNER_STEP: &str = "iota_reportInnerStep";
	/// `iota_getChallenges`.
	pub const GET_CHALLENGES: &str = "iota_getChallenges";
	/// `iota_releaseLease`.
	pub const RELEASE_LEASE: &str = "iota_releaseLease";
	/// `iota_submitGradient`.
	pub const SUBMIT_GRADIENT: &str = "iota_submitGradient";
	/// `iota_getShards`.
	pub const GET_SHARDS: &str = "iota_getShards";
	/// `iota_submitShard`.
	pub const SUBMIT_SHARD: &str = "iota_submitShard";
	/// `iota_getManifest`.
	pub const GET_MANIFEST: &str = "iota_getManifest";
	/// `iota_submitStateHash`.
	pub const SUBMIT_STATE_HASH: &str = "iota_submitStateHash";
	/// `iota_presignGet`.
	pub const PRESIGN_GET: &str = "iota_presignGet";
	/// `iota_presignPut`.
	pub const PRESIGN_PUT: &str = "iota_presignPut";
	/// `iota_epochRecord`.
	pub const EPOCH_RECORD: &str = "iota_epochRecord";
}

/// The orchestrator API (docs/design.md §3 steps 2–6).
#[rpc(server, client, namespace = "iota")]
pub trait IotaApi {
	/// Pull one work item for the caller's stage: a forward, a backward, the gradient upload of the merge,
	/// or `Idle` with a retry hint. Each item is leased to the caller until its `expires_at_ms`.
	///
	/// Errors: auth codes, `NotRegistered`, `WrongRole`, `WrongStage`, `Unavailable`,
	/// `SessionSuperseded` (a newer process of the caller's account replaced this one's session).
	#[method(name = "getWork")]
	async fn get_work(&self, req: Signed<GetWork>) -> RpcResult<Work>;

	/// Complete a lease with its uploaded result. The orchestrator checks the key, the hash of the stored
	/// object and its shape before accepting; the accepted item is queued for the next (or previous) stage.
	///
	/// Errors: auth codes, `Unknown` lease, `LeaseExpired`, `Invalid` (not the caller's lease, wrong key),
	/// `HashMismatch`, `ShapeMismatch`, `Oversize`, `WrongPhase` (the lease's stage left `Training` for
	/// its merge, so the pass can no longer count; drop the item), `Invalid` (local mode: an inner step
	/// whose state was not reported, or earlier than one already submitted; sync mode: a step other
	/// than 0).
	#[method(name = "submitActivation")]
	async fn submit_activation(&self, req: Signed<SubmitActivation>) -> RpcResult<Ack>;

	/// The tail reports a sample's loss (before submitting the lease); it goes into the pathway log.
	///
	/// Errors: auth codes, `Unknown` lease, `LeaseExpired`, `WrongStage` (not a tail lease), `Invalid`
	/// (NaN/Inf or negative loss, reported twice).
	#[method(name = "reportLoss")]
	async fn report_loss(&self, req: Signed<ReportLoss>) -> RpcResult<()>;

	/// Local mode: report the BLAKE3 of the caller's replica state after an inner step (docs/design.md
	/// §10). The orchestrator records it with the passes that ran at that state; the pathway log carries
	/// both, so a validator can later challenge any inner step.
	///
	/// Errors: auth codes, `NotRegistered`, `WrongPhase` (sync mode, the stage is not in that epoch, or
	/// the caller already submitted its pseudo-gradient), `Invalid` (a step out of order, a step with no
	/// backward pass at the state before it or fewer than `accumulate` before the merge, another hash for
	/// a reported step).
	#[method(name = "reportInnerStep")]
	async fn report_inner_step(&self, req: Signed<InnerStepReport>) -> RpcResult<()>;

	/// Local mode: the caller's challenged inner steps of an epoch it trained (docs/design.md §10), with
	/// presigned PUTs for the states before and after each. Not seeded until the epoch completed and its
	/// block is finalized; the draw is `iota_protocol::selection::inner_step_challenges` (the last step
	/// and `INNER_CHALLENGES` drawn ones per miner), so validators know which reveals to expect. They
	/// count until `iota_protocol::selection::reveal_deadline`.
	///
	/// Errors: auth codes, `NotRegistered`, `WrongPhase` (sync mode), `Unknown` (no states of the caller
	/// in that epoch, or the epoch's challenges are no longer kept).
	#[method(name = "getChallenges")]
	async fn get_challenges(&self, req: Signed<ChallengeQuery>) -> RpcResult<Challenges>;

	/// Hand a lease back (clean shutdown); the item is re-listed at once.
	///
	/// Errors: auth codes, `Unknown`, `Invalid` (not the caller's lease).
	#[method(name = "releaseLease")]
	async fn release_lease(&self, req: Signed<ReleaseLease>) -> RpcResult<()>;

	/// Report the caller's uploaded accumulated gradient (phase `WeightsUploading`).
	///
	/// Errors: auth codes, `WrongPhase`, `Unknown` epoch, `HashMismatch`, `ShapeMismatch`, `Invalid`
	/// (submitted twice, zero samples).
	#[method(name = "submitGradient")]
	async fn submit_gradient(&self, req: Signed<GradientSubmission>) -> RpcResult<()>;

	/// The caller's butterfly shards of the current merge round and the submissions to reduce.
	///
	/// Errors: auth codes, `WrongPhase` (not `Merging`), `Unknown` epoch, `Invalid` (the caller submitted
	/// no gradient this round).
	#[method(name = "getShards")]
	async fn get_shards(&self, req: Signed<MergeQuery>) -> RpcResult<ShardAssignment>;

	/// Report a reduced shard. Both copies of a shard are compared by hash.
	///
	/// Errors: auth codes, `WrongPhase`, `Unknown` shard or round, `Invalid` (not the caller's shard),
	/// `HashMismatch`, `ShapeMismatch`.
	#[method(name = "submitShard")]
	async fn submit_shard(&self, req: Signed<SubmitShard>) -> RpcResult<()>;

	/// Where the stage's merge of `epoch` stands: still reducing, ready to apply, or committed.
	///
	/// Errors: auth codes, `Unknown` epoch.
	#[method(name = "getManifest")]
	async fn get_manifest(&self, req: Signed<MergeQuery>) -> RpcResult<MergeView>;

	/// A replica attests the BLAKE3 of its stage state after the step (and the checkpoint, if asked).
	///
	/// Errors: auth codes, `WrongPhase`, `Unknown` epoch, `Invalid` (attested twice), `HashMismatch`
	/// (checkpoint object).
	#[method(name = "submitStateHash")]
	async fn submit_state_hash(&self, req: Signed<SubmitStateHash>) -> RpcResult<()>;

	/// Validators: presigned GETs for objects of the run (at most `MAX_PRESIGN_KEYS`).
	///
	/// Miners may call it too, but only for the stage checkpoint keys (`keys::stage_checkpoint`) of the
	/// stage they hold: a miner that joins mid-run (or fell out of step) loads the checkpoint named in its
	/// stage's latest on-chain merge manifest and checks it against the attested state hash
	/// (docs/design.md §3 step 6); any other key is `WrongRole` for a miner.
	///
	/// Errors: auth codes, `NotRegistered`, `WrongRole` (not a validator, or a miner asking for anything but
	/// its stage's checkpoints), `Oversize`, `Invalid` (key outside the run).
	#[method(name = "presignGet")]
	async fn presign_get(
		&self,
		req: Signed<PresignGet>,
	) -> RpcResult<Vec<iota_protocol::PresignedRequest>>;

	/// Validators: a presigned PUT for a key the caller owns (evidence).
	///
	/// Errors: auth codes, `NotRegistered`, `WrongRole`, `Invalid` (key not in the caller's scope).
	#[method(name = "presignPut")]
	async fn presign_put(&self, req: Signed<PresignPut>) -> RpcResult<ObjectPut>;

	/// Validators: the audit record of a completed epoch (pathway log, shard copies, mismatches).
	///
	/// Errors: auth codes, `NotRegistered`, `WrongRole`, `Unknown` epoch.
	#[method(name = "epochRecord")]
	async fn epoch_record(&self, req: Signed<MergeQuery>) -> RpcResult<EpochRecord>;

	/// Stages, phases, miners, queue depths, merge progress and loss (public).
	#[method(name = "status")]
	async fn status(&self) -> RpcResult<Status>;

	/// The run spec as stored; its BLAKE3 is the chain's `model_hash` (public).
	#[method(name = "runSpec")]
	async fn run_spec(&self) -> RpcResult<RunSpecText>;

	/// Phase changes of every stage as the orchestrator sees them on finalized blocks (public).
	#[subscription(name = "subscribePhases" => "phase", unsubscribe = "unsubscribePhases", item = PhaseEvent)]
	async fn subscribe_phases(&self) -> SubscriptionResult;
}
