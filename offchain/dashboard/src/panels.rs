//! The data behind each page, built from a [`Snapshot`]: what a JSON endpoint returns is exactly what
//! its page renders (so scripts and the page never disagree).
//!
//! | endpoint | builder | page |
//! |---|---|---|
//! | `/api/network` | [`network`] | `/` |
//! | `/api/stages` | [`stages`] | `/stages` |
//! | `/api/training` | [`training`] | `/training` |
//! | `/api/trust` | [`trust`] | `/trust` |
//! | `/api/miners/{account}` | [`miner`] | `/miners/{account}` |
//! | `/api/epochs/{epoch}` | (route) | `/epochs/{epoch}` |

use iota_primitives::{ContentHash, MinerStatus, Verdict};
use iota_rpc::types::{EpochSummary, MinerActivity, PhaseEvent, StageStatus};
use iota_rpc::AccountId;
use serde::Serialize;

use crate::state::{Feed, HistoryPoint, Snapshot, SpecSummary};
use crate::views::{
	balance_str, Balance, ChainMiner, ChainStage, ChainValidator, EpochTrust, RunConfigView,
	VerdictView,
};

/// `/api/network`: the run at a glance.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct NetworkPanel {
	/// Snapshot generation.
	pub generation: u64,
	/// When the snapshot was taken, ms since the Unix epoch.
	pub updated_ms: u64,
	/// From the orchestrator.
	pub orchestrator: Feed<NetworkOrchestrator>,
	/// From the chain.
	pub chain: Feed<NetworkChain>,
	/// Whether the chain's `model_hash` equals the orchestrator's spec hash (`None` until both answered).
	pub spec_hash_agrees: Option<bool>,
}

/// The orchestrator's part of [`NetworkPanel`].
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct NetworkOrchestrator {
	/// Run id.
	pub run: String,
	/// BLAKE3 of the run spec.
	pub spec_hash: ContentHash,
	/// The spec, summarised (model preset, compression, tokens per sample), once read.
	pub spec: Option<SpecSummary>,
	/// The highest epoch a stage is in.
	pub current_epoch: u32,
	/// Completed epochs the orchestrator reports.
	pub epochs_completed: usize,
	/// Mean tail loss of the last completed epoch, nats.
	pub last_epoch_loss: Option<f32>,
	/// Best finalized block the orchestrator has seen.
	pub finalized_block_seen: u32,
	/// Tokens trained since the run began.
	pub tokens_trained: u64,
	/// Tokens per second over the orchestrator's last minute.
	pub tokens_per_sec: f64,
	/// Bytes of activations and activation gradients accepted since the run began.
	pub wire_bytes: u64,
	/// Miners the orchestrator has seen.
	pub miners_seen: usize,
}

/// The chain's part of [`NetworkPanel`].
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct NetworkChain {
	/// Best block.
	pub best_block: u32,
	/// Finalized block.
	pub finalized_block: u32,
	/// The run config.
	pub run_config: Option<RunConfigView>,
	/// Miner records on chain.
	pub miners_registered: usize,
	/// Validator records on chain.
	pub validators_registered: usize,
	/// The validators.
	pub validators: Vec<ChainValidator>,
	/// Next epoch to be paid out.
	pub next_epoch_to_finalize: u32,
	/// Minted so far.
	#[serde(with = "balance_str")]
	pub total_minted: Balance,
}

/// Build `/api/network`.
pub fn network(s: &Snapshot) -> NetworkPanel {
	let orchestrator = s.orchestrator.map(|o| {
		let st = &o.status;
		NetworkOrchestrator {
			run: st.run.clone(),
			spec_hash: st.spec_hash,
			spec: o.spec.clone(),
			current_epoch: st.stages.iter().map(|s| s.epoch).max().unwrap_or(0),
			epochs_completed: st.epochs.len(),
			last_epoch_loss: st.last_epoch_loss,
			finalized_block_seen: st.finalized_block,
			tokens_trained: st.tokens_trained,
			tokens_per_sec: st.tokens_per_sec,
			wire_bytes: st.wire_bytes,
			miners_seen: st.miners.len(),
		}
	});
	let chain = s.chain.map(|c| {
		let o = &c.overview;
		NetworkChain {
			best_block: o.best_block,
			finalized_block: o.finalized_block,
			run_config: o.run_config.clone(),
			miners_registered: o.miners.len(),
			validators_registered: o.validators.len(),
			validators: o.validators.clone(),
			next_epoch_to_finalize: o.next_epoch_to_finalize,
			total_minted: o.total_minted,
		}
	});
	let spec_hash_agrees = match (s.orchestrator.data(), s.chain.data()) {
		(Some(o), Some(c)) => {
			c.overview.run_config.as_ref().map(|r| r.model_hash == o.status.spec_hash)
		},
		_ => None,
	};
	NetworkPanel {
		generation: s.generation,
		updated_ms: s.updated_ms,
		orchestrator,
		chain,
		spec_hash_agrees,
	}
}

/// `/api/stages`: per stage, its phase, queues, leases, merge progress and miners.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct StagesPanel {
	/// Snapshot generation.
	pub generation: u64,
	/// When the snapshot was taken.
	pub updated_ms: u64,
	/// The orchestrator's view of each stage.
	pub stages: Feed<Vec<StageRow>>,
	/// The chain's record of each stage (phase, epoch, phase start, round, members).
	pub chain: Feed<Vec<ChainStage>>,
	/// Recent phase changes, newest last.
	pub phase_events: Vec<PhaseEvent>,
}

/// One stage as the orchestrator sees it, with its miners.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct StageRow {
	/// The orchestrator's `StageStatus`.
	#[serde(flatten)]
	pub status: StageStatus,
	/// The chain's backward quota per epoch, if the chain answered.
	pub backward_quota: Option<u32>,
	/// Miners of the stage: on chain, or seen working it.
	pub miner_rows: Vec<StageMinerRow>,
}

/// One miner of a stage.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct StageMinerRow {
	/// Account.
	pub account: AccountId,
	/// What the orchestrator saw it do (none if it never called).
	pub activity: Option<MinerActivity>,
	/// Work items per second between the last two status polls.
	pub items_per_sec: Option<f64>,
	/// Its chain status (none if the chain did not answer or has no record).
	pub chain_status: Option<MinerStatus<u32>>,
}

fn items_per_sec(samples: &[(u64, u64)]) -> Option<f64> {
	let [.., (t0, a), (t1, b)] = samples else { return None };
	(t1 > t0).then(|| b.saturating_sub(*a) as f64 * 1000.0 / (t1 - t0) as f64)
}

/// Build `/api/stages`.
pub fn stages(s: &Snapshot) -> StagesPanel {
	let chain_miners: Option<&Vec<ChainMiner>> = s.chain.data().map(|c| &c.overview.miners);
	let quota = s
		.chain
		.data()
		.and_then(|c| c.overview.run_config.as_ref().map(|r| r.backward_quota));
	let stages = s.orchestrator.map(|o| {
		o.status
			.stages
			.iter()
			.map(|st| {
				let mut accounts: Vec<AccountId> = st.miners.clone();
				for m in o.status.miners.iter().filter(|m| m.stage == st.stage) {
					if !accounts.contains(&m.account) {
						accounts.push(m.account.clone());
					}
				}
				let miner_rows = accounts
					.into_iter()
					.map(|account| {
						let activity =
							o.status.miners.iter().find(|m| m.account == account).cloned();
						let chain_status = chain_miners
							.and_then(|ms| ms.iter().find(|m| m.account == account))
							.map(|m| m.status);
						let items_per_sec =
							items_per_sec(&s.history.miner_samples(&account.to_string()));
						StageMinerRow { account, activity, items_per_sec, chain_status }
					})
					.collect();
				StageRow { status: st.clone(), backward_quota: quota, miner_rows }
			})
			.collect()
	});
	StagesPanel {
		generation: s.generation,
		updated_ms: s.updated_ms,
		stages,
		chain: s.chain.map(|c| c.overview.stages.clone()),
		phase_events: s.phase_events.iter().cloned().collect(),
	}
}

/// `/api/training`: loss per epoch, throughput history, wire bytes per token.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct TrainingPanel {
	/// Snapshot generation.
	pub generation: u64,
	/// When the snapshot was taken.
	pub updated_ms: u64,
	/// From the orchestrator (and the dashboard's own history of its status).
	pub orchestrator: Feed<TrainingData>,
}

/// The data of [`TrainingPanel`].
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct TrainingData {
	/// Completed epochs, oldest first (loss, tokens, wire bytes, timings).
	pub epochs: Vec<EpochSummary>,
	/// Tokens trained since the run began.
	pub tokens_trained: u64,
	/// Tokens per second over the orchestrator's last minute.
	pub tokens_per_sec: f64,
	/// Wire bytes per token trained since the run began (`None` before the first token).
	pub wire_bytes_per_token: Option<f64>,
	/// Status polls, oldest first (bounded).
	pub history: Vec<HistoryPoint>,
}

/// Build `/api/training`.
pub fn training(s: &Snapshot) -> TrainingPanel {
	let orchestrator = s.orchestrator.map(|o| TrainingData {
		epochs: o.status.epochs.clone(),
		tokens_trained: o.status.tokens_trained,
		tokens_per_sec: o.status.tokens_per_sec,
		wire_bytes_per_token: (o.status.tokens_trained > 0)
			.then(|| o.status.wire_bytes as f64 / o.status.tokens_trained as f64),
		history: s.history.points().cloned().collect(),
	});
	TrainingPanel { generation: s.generation, updated_ms: s.updated_ms, orchestrator }
}

/// `/api/trust`: verdicts, scores, emission splits, slashes and manifests, all from chain.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct TrustPanel {
	/// Snapshot generation.
	pub generation: u64,
	/// When the snapshot was taken.
	pub updated_ms: u64,
	/// From the chain.
	pub chain: Feed<TrustData>,
}

/// The data of [`TrustPanel`].
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct TrustData {
	/// Next epoch to be paid out.
	pub next_epoch_to_finalize: u32,
	/// Minted so far.
	#[serde(with = "balance_str")]
	pub total_minted: Balance,
	/// The validators.
	pub validators: Vec<ChainValidator>,
	/// The most recent epochs, newest first.
	pub epochs: Vec<EpochTrust>,
}

/// Build `/api/trust`.
pub fn trust(s: &Snapshot) -> TrustPanel {
	let chain = s.chain.map(|c| TrustData {
		next_epoch_to_finalize: c.overview.next_epoch_to_finalize,
		total_minted: c.overview.total_minted,
		validators: c.overview.validators.clone(),
		epochs: c.epochs.clone(),
	});
	TrustPanel { generation: s.generation, updated_ms: s.updated_ms, chain }
}

/// `/api/miners/{account}`: one miner's work, verdicts, scores and rewards.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct MinerPanel {
	/// Snapshot generation.
	pub generation: u64,
	/// The miner.
	pub account: AccountId,
	/// What the orchestrator saw it do (`data: null` if it never called).
	pub activity: Feed<Option<MinerActivity>>,
	/// `(t_ms, samples_total)` from the dashboard's history of status polls.
	pub samples: Vec<(u64, u64)>,
	/// Its chain record and per-epoch trust and rewards.
	pub chain: Feed<MinerChain>,
}

/// The chain's part of [`MinerPanel`].
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct MinerChain {
	/// Its record, if registered.
	pub record: Option<ChainMiner>,
	/// Per recent epoch, newest first (epochs where nothing concerns it are left out).
	pub epochs: Vec<MinerEpoch>,
}

/// One epoch from one miner's point of view.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct MinerEpoch {
	/// Epoch.
	pub epoch: u32,
	/// Whether it was paid out.
	pub finalized: bool,
	/// Verdicts on the miner.
	pub verdicts: Vec<VerdictView>,
	/// Its consensus score, ppb.
	pub score_ppb: Option<u32>,
	/// What it was paid.
	#[serde(serialize_with = "opt_balance")]
	pub reward: Option<Balance>,
	/// What was slashed.
	#[serde(serialize_with = "opt_balance")]
	pub slashed: Option<Balance>,
}

fn opt_balance<S: serde::Serializer>(v: &Option<Balance>, s: S) -> Result<S::Ok, S::Error> {
	match v {
		Some(b) => s.collect_str(b),
		None => s.serialize_none(),
	}
}

impl MinerEpoch {
	/// Fail verdicts on the miner.
	pub fn fails(&self) -> usize {
		self.verdicts.iter().filter(|v| v.verdict == Verdict::Fail).count()
	}
}

/// Build `/api/miners/{account}`. The caller decides whether the miner is known
/// ([`Snapshot::knows_miner`]).
pub fn miner(s: &Snapshot, account: &AccountId) -> MinerPanel {
	let activity = s
		.orchestrator
		.map(|o| o.status.miners.iter().find(|m| &m.account == account).cloned());
	let chain = s.chain.map(|c| MinerChain {
		record: c.overview.miners.iter().find(|m| &m.account == account).cloned(),
		epochs: c
			.epochs
			.iter()
			.map(|e| MinerEpoch {
				epoch: e.epoch,
				finalized: e.finalized,
				verdicts: e.verdicts.iter().filter(|v| &v.miner == account).cloned().collect(),
				score_ppb: e.scores.iter().find(|x| &x.miner == account).map(|x| x.ppb),
				reward: e
					.emission
					.as_ref()
					.and_then(|em| em.miners.iter().find(|p| &p.account == account))
					.map(|p| p.amount),
				slashed: e.slashes.iter().find(|p| &p.account == account).map(|p| p.amount),
			})
			.filter(|m| {
				!m.verdicts.is_empty()
					|| m.score_ppb.is_some()
					|| m.reward.is_some()
					|| m.slashed.is_some()
			})
			.collect(),
	});
	MinerPanel {
		generation: s.generation,
		account: account.clone(),
		activity,
		samples: s.history.miner_samples(&account.to_string()),
		chain,
	}
}

/// `/api/epochs/{epoch}`: one epoch's training summary and trust record.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct EpochPanel {
	/// Snapshot generation.
	pub generation: u64,
	/// Epoch.
	pub epoch: u32,
	/// The orchestrator's summary (`data: null` while the epoch is not complete).
	pub summary: Feed<Option<EpochSummary>>,
	/// The chain's record.
	pub trust: Feed<EpochTrust>,
}

/// Build `/api/epochs/{epoch}` from the snapshot and a trust record fetched by the caller.
pub fn epoch(s: &Snapshot, epoch: u32, trust: Feed<EpochTrust>) -> EpochPanel {
	let summary = s
		.orchestrator
		.map(|o| o.status.epochs.iter().find(|e| e.epoch == epoch).cloned());
	EpochPanel { generation: s.generation, epoch, summary, trust }
}
