//! [`SignedClient`]: a WebSocket client of the orchestrator that signs every call with the caller's
//! sr25519 key (docs/design.md §7), for miners, validators, tests and benchmarks.

use jsonrpsee::core::client::{ClientT, Subscription, SubscriptionClientT};
use jsonrpsee::core::ClientError;
use jsonrpsee::rpc_params;
use jsonrpsee::ws_client::{WsClient, WsClientBuilder};
use serde::{de::DeserializeOwned, Serialize};
use std::time::Duration;
use subxt_signer::sr25519::Keypair;

use crate::api::methods;
use crate::signing::{now_ms, sign, NonceSource};
use crate::types::*;
use crate::AccountId;

/// Largest request or response the client accepts, in bytes (the server's limit is its own).
pub const CLIENT_MAX_MESSAGE_BYTES: u32 = 16 * 1024 * 1024;

/// An orchestrator connection that signs for one account.
pub struct SignedClient {
	inner: WsClient,
	keypair: Keypair,
	nonces: NonceSource,
}

impl SignedClient {
	/// Connects to `url` (`ws://host:port`) with a per-request timeout.
	///
	/// # Errors
	/// The transport's error when the server cannot be reached.
	pub async fn connect(
		url: &str,
		keypair: Keypair,
		request_timeout: Duration,
	) -> Result<Self, ClientError> {
		let inner = WsClientBuilder::default()
			.request_timeout(request_timeout)
			.max_request_size(CLIENT_MAX_MESSAGE_BYTES)
			.max_response_size(CLIENT_MAX_MESSAGE_BYTES)
			.build(url)
			.await?;
		Ok(Self { inner, keypair, nonces: NonceSource::default() })
	}

	/// The account this client signs for.
	pub fn account(&self) -> AccountId {
		self.keypair.public_key().to_account_id()
	}

	/// The underlying jsonrpsee client (for unsigned or deliberately malformed calls in tests).
	pub fn raw(&self) -> &WsClient {
		&self.inner
	}

	/// Whether the connection is still open.
	pub fn is_connected(&self) -> bool {
		self.inner.is_connected()
	}

	/// Signs `body` for `method` with a fresh nonce and the current time and calls it.
	///
	/// # Errors
	/// The server's error (see [`crate::code_of`]) or a transport error.
	pub async fn call<B: Serialize + Send, R: DeserializeOwned>(
		&self,
		method: &str,
		body: B,
	) -> Result<R, ClientError> {
		let signed = sign(&self.keypair, method, body, self.nonces.next(), now_ms())
			.map_err(|e| ClientError::Custom(e.to_string()))?;
		self.inner.request(method, rpc_params![signed]).await
	}

	/// `iota_getWork` without a session (no restart detection).
	pub async fn get_work(&self, stage: u16) -> Result<Work, ClientError> {
		self.call(methods::GET_WORK, GetWork { stage, session: None }).await
	}

	/// `iota_getWork` for the miner process whose session is `session` ([`GetWork::session`]).
	pub async fn get_work_in(&self, stage: u16, session: u64) -> Result<Work, ClientError> {
		self.call(methods::GET_WORK, GetWork { stage, session: Some(session) }).await
	}

	/// `iota_submitActivation`.
	pub async fn submit_activation(
		&self,
		lease: LeaseId,
		output: Option<TensorRef>,
	) -> Result<Ack, ClientError> {
		self.submit_activation_at(lease, output, 0).await
	}

	/// `iota_submitActivation` of a pass that ran at local mode's inner step `inner_step`.
	pub async fn submit_activation_at(
		&self,
		lease: LeaseId,
		output: Option<TensorRef>,
		inner_step: u32,
	) -> Result<Ack, ClientError> {
		self.call(methods::SUBMIT_ACTIVATION, SubmitActivation { lease, output, inner_step })
			.await
	}

	/// `iota_getChallenges`.
	pub async fn get_challenges(&self, epoch: u32) -> Result<Challenges, ClientError> {
		self.call(methods::GET_CHALLENGES, ChallengeQuery { epoch }).await
	}

	/// `iota_reportInnerStep`.
	pub async fn report_inner_step(&self, report: InnerStepReport) -> Result<(), ClientError> {
		self.call(methods::REPORT_INNER_STEP, report).await
	}

	/// `iota_reportLoss`.
	pub async fn report_loss(&self, lease: LeaseId, loss: f32) -> Result<(), ClientError> {
		self.call(methods::REPORT_LOSS, ReportLoss { lease, loss }).await
	}

	/// `iota_releaseLease`.
	pub async fn release_lease(&self, lease: LeaseId) -> Result<(), ClientError> {
		self.call(methods::RELEASE_LEASE, ReleaseLease { lease }).await
	}

	/// `iota_submitGradient`.
	pub async fn submit_gradient(&self, submission: GradientSubmission) -> Result<(), ClientError> {
		self.call(methods::SUBMIT_GRADIENT, submission).await
	}

	/// `iota_getShards`.
	pub async fn get_shards(&self, epoch: u32) -> Result<ShardAssignment, ClientError> {
		self.call(methods::GET_SHARDS, MergeQuery { epoch }).await
	}

	/// `iota_submitShard`.
	pub async fn submit_shard(&self, submit: SubmitShard) -> Result<(), ClientError> {
		self.call(methods::SUBMIT_SHARD, submit).await
	}

	/// `iota_getManifest`.
	pub async fn get_manifest(&self, epoch: u32) -> Result<MergeView, ClientError> {
		self.call(methods::GET_MANIFEST, MergeQuery { epoch }).await
	}

	/// `iota_submitStateHash`.
	pub async fn submit_state_hash(&self, attest: SubmitStateHash) -> Result<(), ClientError> {
		self.call(methods::SUBMIT_STATE_HASH, attest).await
	}

	/// `iota_presignGet` (validators).
	pub async fn presign_get(
		&self,
		keys: Vec<String>,
	) -> Result<Vec<iota_protocol::PresignedRequest>, ClientError> {
		self.call(methods::PRESIGN_GET, PresignGet { keys }).await
	}

	/// `iota_presignPut` (validators).
	pub async fn presign_put(&self, key: String) -> Result<ObjectPut, ClientError> {
		self.call(methods::PRESIGN_PUT, PresignPut { key }).await
	}

	/// `iota_epochRecord` (validators).
	pub async fn epoch_record(&self, epoch: u32) -> Result<EpochRecord, ClientError> {
		self.call(methods::EPOCH_RECORD, MergeQuery { epoch }).await
	}

	/// `iota_status` (unsigned).
	pub async fn status(&self) -> Result<Status, ClientError> {
		self.inner.request("iota_status", rpc_params![]).await
	}

	/// `iota_runSpec` (unsigned).
	pub async fn run_spec(&self) -> Result<RunSpecText, ClientError> {
		self.inner.request("iota_runSpec", rpc_params![]).await
	}

	/// `iota_subscribePhases` (unsigned).
	pub async fn subscribe_phases(&self) -> Result<Subscription<PhaseEvent>, ClientError> {
		self.inner
			.subscribe("iota_subscribePhases", rpc_params![], "iota_unsubscribePhases")
			.await
	}
}
