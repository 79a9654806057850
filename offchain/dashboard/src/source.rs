//! Where the data comes from: two traits, one per source, and their live implementations.
//!
//! - [`OrchestratorSource`]: the orchestrator's public JSON-RPC (`iota_status`, `iota_runSpec`,
//!   `iota_subscribePhases`; `iota_rpc::IotaApi`). Live: [`RpcOrchestrator`] (jsonrpsee WebSocket client).
//! - [`ChainSource`]: pallet-iota's storage at the latest finalized block. Live: [`ChainReader`]
//!   (`iota_chain::IotaClient`).
//!
//! Both live sources connect lazily and reconnect after a failure, so a source that is down when the
//! dashboard starts, or goes down and comes back, is picked up without a restart. Tests put fakes behind
//! the same traits, so no node or orchestrator is needed.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use futures_util::FutureExt;
use iota_rpc::types::{PhaseEvent, Status};
use iota_rpc::{IotaApiClient, RunSpec};
use jsonrpsee::core::client::Subscription;
use jsonrpsee::ws_client::{WsClient, WsClientBuilder};
use tokio::sync::Mutex;

use crate::views::*;

/// Why a source gave no data.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum SourceError {
	/// Nothing answered at the source's address (connection refused, closed, timed out).
	#[error("cannot reach {url}: {reason}")]
	Unreachable {
		/// The endpoint.
		url: String,
		/// What the transport said.
		reason: String,
	},
	/// The source answered with an error.
	#[error("{url} refused the request: {reason}")]
	Refused {
		/// The endpoint.
		url: String,
		/// The error it returned.
		reason: String,
	},
	/// The source answered with something the dashboard cannot use.
	#[error("invalid answer from {url}: {reason}")]
	Invalid {
		/// The endpoint.
		url: String,
		/// What is wrong with it.
		reason: String,
	},
}

/// The orchestrator's public reads.
#[async_trait]
pub trait OrchestratorSource: Send + Sync + 'static {
	/// Where the data comes from (shown when it is down).
	fn describe(&self) -> String;

	/// `iota_status`.
	///
	/// Errors: [`SourceError`] when the orchestrator is unreachable or refuses.
	async fn status(&self) -> Result<Status, SourceError>;

	/// `iota_runSpec`, parsed.
	///
	/// Errors: [`SourceError::Invalid`] when the stored spec does not parse; otherwise as [`Self::status`].
	async fn run_spec(&self) -> Result<RunSpec, SourceError>;

	/// Phase changes pushed by `iota_subscribePhases` since the last call (drained, never blocks).
	/// A source without a subscription returns an empty list.
	///
	/// Errors: as [`Self::status`].
	async fn phase_events(&self) -> Result<Vec<PhaseEvent>, SourceError>;
}

/// pallet-iota's storage, read at the latest finalized block.
#[async_trait]
pub trait ChainSource: Send + Sync + 'static {
	/// Where the data comes from (shown when it is down).
	fn describe(&self) -> String;

	/// Heights, run config, stages, miners, validators, payout totals.
	///
	/// Errors: [`SourceError`] when the node is unreachable or an answer does not decode.
	async fn overview(&self) -> Result<ChainOverview, SourceError>;

	/// Verdicts, scores, emission split, slashes and merge manifests of `epoch` (manifests of stages
	/// `0 .. stages`).
	///
	/// Errors: as [`Self::overview`].
	async fn epoch(&self, epoch: u32, stages: u16) -> Result<EpochTrust, SourceError>;
}

// ---- orchestrator over jsonrpsee ------------------------------------------------------------------

/// Live [`OrchestratorSource`]: a jsonrpsee WebSocket client to the orchestrator's public API.
pub struct RpcOrchestrator {
	url: String,
	timeout: Duration,
	conn: Mutex<Option<OrchestratorConn>>,
}

struct OrchestratorConn {
	client: Arc<WsClient>,
	phases: Option<Subscription<PhaseEvent>>,
}

impl RpcOrchestrator {
	/// A source for `url` (e.g. `ws://127.0.0.1:9955`); connects on first use. `timeout` bounds the
	/// connection and every request.
	pub fn new(url: impl Into<String>, timeout: Duration) -> Self {
		Self { url: url.into(), timeout, conn: Mutex::new(None) }
	}

	async fn client(&self) -> Result<Arc<WsClient>, SourceError> {
		let mut conn = self.conn.lock().await;
		if let Some(c) = conn.as_ref() {
			if c.client.is_connected() {
				return Ok(c.client.clone());
			}
		}
		let client = WsClientBuilder::default()
			.connection_timeout(self.timeout)
			.request_timeout(self.timeout)
			.build(&self.url)
			.await
			.map_err(|e| SourceError::Unreachable {
				url: self.url.clone(),
				reason: e.to_string(),
			})?;
		let client = Arc::new(client);
		let phases = match IotaApiClient::subscribe_phases(&*client).await {
			Ok(s) => Some(s),
			Err(e) => {
				tracing::debug!(url = %self.url, error = %e, "no phase subscription");
				None
			},
		};
		*conn = Some(OrchestratorConn { client: client.clone(), phases });
		Ok(client)
	}

	fn rpc_error(&self, e: jsonrpsee::core::client::Error) -> SourceError {
		use jsonrpsee::core::client::Error as E;
		match e {
			E::Call(obj) => SourceError::Refused { url: self.url.clone(), reason: obj.to_string() },
			E::ParseError(p) => {
				SourceError::Invalid { url: self.url.clone(), reason: p.to_string() }
			},
			other => SourceError::Unreachable { url: self.url.clone(), reason: other.to_string() },
		}
	}
}

#[async_trait]
impl OrchestratorSource for RpcOrchestrator {
	fn describe(&self) -> String {
		format!("orchestrator at {}", self.url)
	}

	async fn status(&self) -> Result<Status, SourceError> {
		let client = self.client().await?;
		IotaApiClient::status(&*client).await.map_err(|e| self.rpc_error(e))
	}

	async fn run_spec(&self) -> Result<RunSpec, SourceError> {
		let client = self.client().await?;
		let text = IotaApiClient::run_spec(&*client).await.map_err(|e| self.rpc_error(e))?;
		serde_json::from_str(&text.json)
			.map_err(|e| SourceError::Invalid { url: self.url.clone(), reason: e.to_string() })
	}

	async fn phase_events(&self) -> Result<Vec<PhaseEvent>, SourceError> {
		let mut conn = self.conn.lock().await;
		let mut out = Vec::new();
		let Some(c) = conn.as_mut() else { return Ok(out) };
		let Some(sub) = c.phases.as_mut() else { return Ok(out) };
		loop {
			match sub.next().now_or_never() {
				Some(Some(Ok(ev))) => out.push(ev),
				Some(Some(Err(e))) => {
					tracing::debug!(error = %e, "undecodable phase event skipped")
				},
				Some(None) => {
					c.phases = None;
					break;
				},
				None => break,
			}
		}
		Ok(out)
	}
}

// ---- chain over iota-chain ------------------------------------------------------------------------

/// Live [`ChainSource`]: `iota_chain::IotaClient` on a node's WebSocket RPC.
pub struct ChainReader {
	url: String,
	timeout: Duration,
	client: Mutex<Option<iota_chain::IotaClient>>,
}

impl ChainReader {
	/// A source for `url` (e.g. `ws://127.0.0.1:9944`); connects on first use. `timeout` bounds the
	/// connection.
	pub fn new(url: impl Into<String>, timeout: Duration) -> Self {
		Self { url: url.into(), timeout, client: Mutex::new(None) }
	}

	async fn client(&self) -> Result<iota_chain::IotaClient, SourceError> {
		let mut slot = self.client.lock().await;
		if let Some(c) = slot.as_ref() {
			return Ok(c.clone());
		}
		let c = tokio::time::timeout(self.timeout, iota_chain::IotaClient::connect(&self.url))
			.await
			.map_err(|_| SourceError::Unreachable {
				url: self.url.clone(),
				reason: "connection timed out".into(),
			})?
			.map_err(|e| SourceError::Unreachable {
				url: self.url.clone(),
				reason: e.to_string(),
			})?;
		*slot = Some(c.clone());
		Ok(c)
	}

	/// Map a chain error; a transport failure drops the connection so the next call reconnects.
	async fn fail(&self, e: iota_chain::Error) -> SourceError {
		*self.client.lock().await = None;
		SourceError::Unreachable { url: self.url.clone(), reason: e.to_string() }
	}
}

fn object(o: iota_chain::ObjectRef) -> ObjectView {
	ObjectView { key: String::from_utf8_lossy(&o.key.0).into_owned(), hash: o.content_hash }
}

#[async_trait]
impl ChainSource for ChainReader {
	fn describe(&self) -> String {
		format!("chain node at {}", self.url)
	}

	async fn overview(&self) -> Result<ChainOverview, SourceError> {
		let c = self.client().await?;
		let r: Result<ChainOverview, iota_chain::Error> = async {
			let finalized_block = c.finalized_number().await?;
			let best_block = c.best_number().await?.max(finalized_block);
			let cfg = c.run_config().await?;
			let mut stages = Vec::new();
			for s in 0..cfg.as_ref().map_or(0, |c| c.stages) {
				let st = c.stage(s).await?;
				stages.push(ChainStage {
					stage: s,
					phase: st.phase,
					epoch: st.epoch,
					phase_since: st.phase_since,
					round: st.round,
					members: c.stage_members(s).await?,
				});
			}
			let mut miners: Vec<ChainMiner> = c
				.miners()
				.await?
				.into_iter()
				.map(|(account, m)| ChainMiner {
					account,
					stage: m.stage,
					bond: m.bond,
					status: m.status,
					registered_at: m.registered_at,
				})
				.collect();
			miners.sort_by(|a, b| (a.stage, &a.account.0).cmp(&(b.stage, &b.account.0)));
			let mut validators: Vec<ChainValidator> = c
				.validators()
				.await?
				.into_iter()
				.map(|(account, v)| ChainValidator {
					account,
					stake: v.stake,
					status: v.status,
					last_weights_at: v.last_weights_at,
				})
				.collect();
			validators.sort_by_key(|v| v.account.0);
			Ok(ChainOverview {
				best_block,
				finalized_block,
				run_config: cfg.map(|c| RunConfigView {
					model_hash: c.model_hash,
					stages: c.stages,
					bottleneck_width: c.bottleneck_width,
					backward_quota: c.backward_quota,
					lease_timeout_secs: c.lease_timeout_secs,
					phase_timeout: c.phase_timeout,
					emission_per_epoch: c.emission_per_epoch,
					validator_share_ppb: c.validator_share_ppb,
					miner_bond: c.miner_bond,
					min_validator_stake: c.min_validator_stake,
					scoring_window: c.scoring_window,
					reveal_window: c.reveal_window,
					slash_quorum_ppb: c.slash_quorum_ppb,
				}),
				stages,
				miners,
				validators,
				next_epoch_to_finalize: c.next_epoch_to_finalize().await?,
				total_minted: c.total_minted().await?,
			})
		}
		.await;
		match r {
			Ok(o) => Ok(o),
			Err(e) => Err(self.fail(e).await),
		}
	}

	async fn epoch(&self, epoch: u32, stages: u16) -> Result<EpochTrust, SourceError> {
		let c = self.client().await?;
		let r: Result<EpochTrust, iota_chain::Error> = async {
			let mut verdicts = Vec::new();
			for (miner, checks) in c.spot_checks_of_epoch(epoch).await? {
				for sc in checks {
					verdicts.push(VerdictView {
						miner: miner.clone(),
						validator: sc.validator,
						verdict: sc.verdict,
						evidence: sc.evidence,
					});
				}
			}
			verdicts
				.sort_by(|a, b| (&a.miner.0, &a.validator.0).cmp(&(&b.miner.0, &b.validator.0)));
			let scores = c
				.scores(epoch)
				.await?
				.unwrap_or_default()
				.into_iter()
				.map(|(miner, ppb)| ScoreView { miner, ppb })
				.collect();
			let emission = c.emission_split(epoch).await?.map(|s| EmissionView {
				miners: s
					.miners
					.0
					.into_iter()
					.map(|(account, amount)| Payout { account, amount })
					.collect(),
				validators: s
					.validators
					.0
					.into_iter()
					.map(|(account, amount)| Payout { account, amount })
					.collect(),
				unallocated: s.unallocated,
			});
			let slashes = c
				.slashes(epoch)
				.await?
				.into_iter()
				.map(|(account, amount)| Payout { account, amount })
				.collect();
			let mut manifests = Vec::new();
			for s in 0..stages {
				if let Some(m) = c.merge_manifest(epoch, s).await? {
					manifests.push(ManifestView {
						stage: s,
						members: m.members,
						param_count: m.param_count,
						samples: m.samples,
						shards: m.shards.0.into_iter().map(object).collect(),
						state_hash: m.state_hash,
						checkpoint: m.checkpoint.map(object),
					});
				}
			}
			Ok(EpochTrust {
				epoch,
				completed_at: c.epoch_completed_at(epoch).await?,
				finalized: c.next_epoch_to_finalize().await? > epoch,
				verdicts,
				scores,
				emission,
				slashes,
				manifests,
			})
		}
		.await;
		match r {
			Ok(t) => Ok(t),
			Err(e) => Err(self.fail(e).await),
		}
	}
}
