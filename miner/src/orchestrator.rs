//! The orchestrator as the miner sees it: the [`Orchestrator`] trait (the API calls a miner makes, so
//! the loop can be driven by an in-memory fake in tests) and [`RpcOrchestrator`], the real one over
//! [`SignedClient`] that reconnects after the orchestrator restarts and retries transport failures and
//! `Unavailable` answers with exponential backoff.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use iota_rpc::types::*;
use iota_rpc::{AccountId, ErrorCode, SignedClient};
use iota_storage::{retry, PresignedRequest, RetryPolicy};
use jsonrpsee::core::ClientError;
use subxt_signer::sr25519::Keypair;
use tokio::sync::Mutex;

use crate::error::{MinerError, Result};

/// The orchestrator calls a miner makes (docs/design.md §3 steps 2–6; `iota-rpc`'s `IotaApi`). Errors are
/// [`MinerError::Refused`] (the orchestrator's code) or [`MinerError::Rpc`] (transport, after retries).
#[async_trait]
pub trait Orchestrator: Send + Sync {
	/// The miner's account (signs every call).
	fn account(&self) -> AccountId;
	/// `iota_runSpec`: the stored spec's bytes.
	async fn run_spec(&self) -> Result<Vec<u8>>;
	/// `iota_getWork`.
	async fn get_work(&self, stage: u16) -> Result<Work>;
	/// `iota_submitActivation` of a pass that ran at inner step `inner_step` (0 in sync mode).
	async fn submit_activation(
		&self,
		lease: LeaseId,
		output: Option<TensorRef>,
		inner_step: u32,
	) -> Result<Ack>;
	/// `iota_reportInnerStep` (local mode).
	async fn report_inner_step(&self, report: InnerStepReport) -> Result<()>;
	/// `iota_getChallenges` (local mode).
	async fn get_challenges(&self, epoch: u32) -> Result<Challenges>;
	/// `iota_reportLoss`.
	async fn report_loss(&self, lease: LeaseId, loss: f32) -> Result<()>;
	/// `iota_releaseLease`.
	async fn release_lease(&self, lease: LeaseId) -> Result<()>;
	/// `iota_submitGradient`.
	async fn submit_gradient(&self, submission: GradientSubmission) -> Result<()>;
	/// `iota_getShards`.
	async fn get_shards(&self, epoch: u32) -> Result<ShardAssignment>;
	/// `iota_submitShard`.
	async fn submit_shard(&self, submit: SubmitShard) -> Result<()>;
	/// `iota_getManifest`.
	async fn get_manifest(&self, epoch: u32) -> Result<MergeView>;
	/// `iota_submitStateHash`.
	async fn submit_state_hash(&self, attest: SubmitStateHash) -> Result<()>;
	/// `iota_presignGet` (a miner may ask only for its stage's checkpoint and initial-weights keys).
	async fn presign_get(&self, keys: Vec<String>) -> Result<Vec<PresignedRequest>>;
}

/// Retry settings of [`RpcOrchestrator`].
#[derive(Clone, Debug)]
pub struct RpcRetry {
	/// Attempts per call and backoff between them (the project's one retry policy).
	pub policy: RetryPolicy,
	/// Per-request timeout.
	pub request_timeout: Duration,
}

impl Default for RpcRetry {
	/// 6 attempts, 250 ms doubling to 5 s (with jitter), 30 s per request.
	fn default() -> Self {
		RpcRetry {
			policy: RetryPolicy {
				max_attempts: 6,
				initial_backoff: Duration::from_millis(250),
				max_backoff: Duration::from_secs(5),
			},
			request_timeout: Duration::from_secs(30),
		}
	}
}

/// The orchestrator over a signed WebSocket connection. The connection is (re)opened lazily: after a
/// transport error the client is dropped and the next attempt reconnects, so a restarted orchestrator
/// is picked up without restarting the miner. Only transport errors and `Unavailable` are retried;
/// every other refusal is returned at once (the orchestrator changed no state).
pub struct RpcOrchestrator {
	url: String,
	keypair: Keypair,
	retry: RpcRetry,
	client: Mutex<Option<Arc<SignedClient>>>,
	/// This process's session ([`iota_rpc::types::GetWork::session`]): drawn once, kept across
	/// reconnections, so only a new process reads as a restart.
	session: u64,
}

impl RpcOrchestrator {
	/// A client for `url` (`ws://host:port`) signing with `keypair`; connects on first use. Draws the
	/// session every `iota_getWork` carries: one `RpcOrchestrator` per miner process.
	pub fn new(url: impl Into<String>, keypair: Keypair, retry: RpcRetry) -> Self {
		RpcOrchestrator {
			url: url.into(),
			keypair,
			retry,
			client: Mutex::new(None),
			session: rand::random(),
		}
	}

	async fn client(&self) -> std::result::Result<Arc<SignedClient>, ClientError> {
		let mut guard = self.client.lock().await;
		if let Some(c) = guard.as_ref() {
			if c.is_connected() {
				return Ok(c.clone());
			}
			tracing::warn!(url = %self.url, "orchestrator connection lost; reconnecting");
		}
		let c = Arc::new(
			SignedClient::connect(&self.url, self.keypair.clone(), self.retry.request_timeout)
				.await?,
		);
		*guard = Some(c.clone());
		Ok(c)
	}

	async fn drop_client(&self) {
		*self.client.lock().await = None;
	}

	async fn with<R, F, Fut>(&self, method: &'static str, f: F) -> Result<R>
	where
		F: Fn(Arc<SignedClient>) -> Fut,
		Fut: std::future::Future<Output = std::result::Result<R, ClientError>>,
	{
		let attempt = || async {
			let c = self.client().await?;
			let res = f(c).await;
			if let Err(e) = &res {
				if is_transport(e) {
					self.drop_client().await;
				}
			}
			res
		};
		// Only transport errors and `Unavailable` are retried: any other refusal changed nothing.
		let retryable = |e: &ClientError| {
			is_transport(e) || iota_rpc::code_of(e) == Some(ErrorCode::Unavailable)
		};
		let (res, _) = retry(&self.retry.policy, method, attempt, retryable).await;
		res.map_err(|e| MinerError::rpc(method, e))
	}
}

/// A lost or broken connection (the client is dropped and the next attempt reconnects).
fn is_transport(e: &ClientError) -> bool {
	matches!(
		e,
		ClientError::Transport(_) | ClientError::RestartNeeded(_) | ClientError::RequestTimeout
	)
}

#[async_trait]
impl Orchestrator for RpcOrchestrator {
	fn account(&self) -> AccountId {
		self.keypair.public_key().to_account_id()
	}
	async fn run_spec(&self) -> Result<Vec<u8>> {
		self.with("iota_runSpec", |c| async move { c.run_spec().await })
			.await
			.map(|t| t.json.into_bytes())
	}
	async fn get_work(&self, stage: u16) -> Result<Work> {
		let session = self.session;
		self.with("iota_getWork", |c| async move { c.get_work_in(stage, session).await })
			.await
	}
	async fn submit_activation(
		&self,
		lease: LeaseId,
		output: Option<TensorRef>,
		inner_step: u32,
	) -> Result<Ack> {
		self.with("iota_submitActivation", |c| {
			let output = output.clone();
			async move { c.submit_activation_at(lease, output, inner_step).await }
		})
		.await
	}
	async fn get_challenges(&self, epoch: u32) -> Result<Challenges> {
		self.with("iota_getChallenges", |c| async move { c.get_challenges(epoch).await })
			.await
	}
	async fn report_inner_step(&self, report: InnerStepReport) -> Result<()> {
		self.with("iota_reportInnerStep", |c| {
			let r = report.clone();
			async move { c.report_inner_step(r).await }
		})
		.await
	}
	async fn report_loss(&self, lease: LeaseId, loss: f32) -> Result<()> {
		self.with("iota_reportLoss", |c| async move { c.report_loss(lease, loss).await })
			.await
	}
	async fn release_lease(&self, lease: LeaseId) -> Result<()> {
		self.with("iota_releaseLease", |c| async move { c.release_lease(lease).await })
			.await
	}
	async fn submit_gradient(&self, submission: GradientSubmission) -> Result<()> {
		self.with("iota_submitGradient", |c| {
			let s = submission.clone();
			async move { c.submit_gradient(s).await }
		})
		.await
	}
	async fn get_shards(&self, epoch: u32) -> Result<ShardAssignment> {
		self.with("iota_getShards", |c| async move { c.get_shards(epoch).await }).await
	}
	async fn submit_shard(&self, submit: SubmitShard) -> Result<()> {
		self.with("iota_submitShard", |c| {
			let s = submit.clone();
			async move { c.submit_shard(s).await }
		})
		.await
	}
	async fn get_manifest(&self, epoch: u32) -> Result<MergeView> {
		self.with("iota_getManifest", |c| async move { c.get_manifest(epoch).await })
			.await
	}
	async fn submit_state_hash(&self, attest: SubmitStateHash) -> Result<()> {
		self.with("iota_submitStateHash", |c| {
			let a = attest.clone();
			async move { c.submit_state_hash(a).await }
		})
		.await
	}
	async fn presign_get(&self, keys: Vec<String>) -> Result<Vec<PresignedRequest>> {
		self.with("iota_presignGet", |c| {
			let k = keys.clone();
			async move { c.presign_get(k).await }
		})
		.await
	}
}
