//! Fake sources and a recorded network state for the dashboard's tests: a 3-stage run of the `tiny`
//! model, one miner per stage, two validators, two completed epochs, one slash.

#![allow(dead_code)]

use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use iota_dashboard::views::*;
use iota_dashboard::{ChainSource, Dashboard, Options, OrchestratorSource, SourceError};
use iota_model::optim::AdamW;
use iota_model::ModelConfig;
use iota_primitives::{ContentHash, MinerStatus, Phase, ValidatorStatus, Verdict};
use iota_rpc::types::{EpochSummary, MinerActivity, PhaseEvent, StageStatus, StageTime, Status};
use iota_rpc::{AccountId, DataManifest, LrSchedule, RunSpec, SpecObject};

/// A text no page may ever show unescaped.
pub const HOSTILE: &str = "<script>alert('pwned')</script><img src=x onerror=alert(1)>";

pub fn account(n: u8) -> AccountId {
	AccountId::from([n; 32])
}

/// Miners of stages 0, 1, 2 and the validators.
pub fn miner(stage: u16) -> AccountId {
	account(10 + stage as u8)
}
pub fn validator(n: u8) -> AccountId {
	account(100 + n)
}

pub fn spec(run: &str) -> RunSpec {
	let obj = SpecObject {
		key: format!("v1/runs/{run}/tokenizer.json"),
		hash: ContentHash::of(b"tok"),
		size: 3,
	};
	RunSpec {
		init: None,
		run: run.into(),
		model: ModelConfig::tiny(),
		seed: 7,
		encoding: "u8".into(),
		adamw: AdamW::default(),
		lr: LrSchedule { peak: 1e-3, warmup_epochs: 1, total_epochs: 10, min_ratio: 0.1 },
		max_norm: Some(1.0),
		merge_codec: Default::default(),
		training: Default::default(),
		data: DataManifest {
			tokenizer: obj,
			seq_len: 32,
			batch_rows: 2,
			rows_per_shard: 8,
			shards: vec![],
			heldout: None,
		},
	}
}

/// The orchestrator's status at clock `now_ms`, with `epochs` completed epochs whose losses are
/// `losses[e]`, stage epochs all equal to `epochs`, and `done` backward passes in the current epoch.
pub fn status(run: &str, now_ms: u64, losses: &[f32], done: u32) -> Status {
	let spec_hash = spec(run).hash();
	let epochs: Vec<EpochSummary> = losses
		.iter()
		.enumerate()
		.map(|(e, &loss)| EpochSummary {
			epoch: e as u32,
			loss,
			samples: 4,
			tokens: 256,
			tokens_cumulative: 256 * (e as u64 + 1),
			wire_bytes: 256 * 40,
			started_ms: 1_000 * e as u64,
			completed_ms: 1_000 * e as u64 + 900,
			merge_ms: 300,
			stages: (0..3)
				.map(|s| StageTime {
					stage: s,
					training_ms: 500,
					merge_ms: 100,
					chain_wait_ms: 50 + u64::from(s),
					idle_ms: 250 - u64::from(s),
				})
				.collect(),
			quota_to_start_ms: (e > 0).then_some(120),
			extrinsics: 3,
			// Evaluated from epoch 1 on: the first epoch shows none.
			heldout_loss: (e > 0).then_some(loss + 0.5),
			recomputed: 0,
			lost: 0,
		})
		.collect();
	let e = losses.len() as u32;
	Status {
		run: run.into(),
		spec_hash,
		finalized_block: 40 + e,
		stages: (0..3)
			.map(|s| StageStatus {
				stage: s,
				epoch: e,
				phase: if s == 2 { Phase::WeightsUploading } else { Phase::Training },
				miners: vec![miner(s)],
				forward_queue: 1,
				backward_queue: 2,
				leases: 1,
				backward_done: done,
				gradients_submitted: 0,
				shards_present: 0,
				shards_expected: 0,
			})
			.collect(),
		last_epoch_loss: losses.last().copied(),
		tokens_trained: 256 * e as u64 + 64 * u64::from(done),
		tokens_per_sec: 12.5,
		wire_bytes: 256 * 40 * e as u64,
		miners: (0..3)
			.map(|s| MinerActivity {
				account: miner(s),
				stage: s,
				samples_this_epoch: done,
				samples_total: 8 * u64::from(e) + u64::from(done),
				leases: 1,
				leases_expired: 0,
				restarts: 0,
				gone: 0,
				backward_this_epoch: 0,
				refused: u64::from(s),
				refusals: (s > 0)
					.then(|| ("wrong_phase".to_string(), u64::from(s)))
					.into_iter()
					.collect(),
				last_seen_ms: now_ms - 100,
			})
			.collect(),
		epochs,
		now_ms,
	}
}

pub fn overview(top_epoch: u32) -> ChainOverview {
	ChainOverview {
		best_block: 52,
		finalized_block: 50,
		run_config: Some(RunConfigView {
			model_hash: spec("run-a").hash(),
			stages: 3,
			bottleneck_width: 8,
			backward_quota: 4,
			lease_timeout_secs: 60,
			phase_timeout: 20,
			emission_per_epoch: 1_000_000_000_000_000,
			validator_share_ppb: 100_000_000,
			miner_bond: 5_000_000_000_000,
			min_validator_stake: 10_000_000_000_000,
			scoring_window: 5,
			reveal_window: 2,
			slash_quorum_ppb: 500_000_000,
		}),
		stages: (0..3)
			.map(|s| ChainStage {
				stage: s,
				phase: Phase::Training,
				epoch: top_epoch,
				phase_since: 45,
				round: 0,
				members: vec![miner(s)],
			})
			.collect(),
		miners: (0..3)
			.map(|s| ChainMiner {
				account: miner(s),
				stage: s,
				bond: 5_000_000_000_000,
				status: MinerStatus::Active,
				registered_at: 3,
			})
			.collect(),
		validators: (1..=2)
			.map(|n| ChainValidator {
				account: validator(n),
				stake: 10_000_000_000_000,
				status: ValidatorStatus::Active,
				last_weights_at: Some(30),
			})
			.collect(),
		next_epoch_to_finalize: 1,
		total_minted: 1_000_000_000_000_000,
	}
}

/// Epoch 0 is finalized (scores, emission; stage 1's miner failed a check and was slashed), later ones
/// are in progress.
pub fn epoch_trust(epoch: u32, manifest_key: &str) -> EpochTrust {
	let finalized = epoch == 0;
	EpochTrust {
		epoch,
		completed_at: finalized.then_some(20),
		finalized,
		verdicts: if finalized {
			vec![
				VerdictView {
					miner: miner(0),
					validator: validator(1),
					verdict: Verdict::Pass,
					evidence: ContentHash::of(b"e0"),
				},
				VerdictView {
					miner: miner(1),
					validator: validator(1),
					verdict: Verdict::Fail,
					evidence: ContentHash::of(b"e1"),
				},
				VerdictView {
					miner: miner(1),
					validator: validator(2),
					verdict: Verdict::Fail,
					evidence: ContentHash::of(b"e2"),
				},
			]
		} else {
			vec![]
		},
		scores: if finalized {
			vec![
				ScoreView { miner: miner(0), ppb: 600_000_000 },
				ScoreView { miner: miner(2), ppb: 400_000_000 },
			]
		} else {
			vec![]
		},
		emission: finalized.then(|| EmissionView {
			miners: vec![
				Payout { account: miner(0), amount: 540_000_000_000_000 },
				Payout { account: miner(2), amount: 360_000_000_000_000 },
			],
			validators: vec![Payout { account: validator(1), amount: 100_000_000_000_000 }],
			unallocated: 0,
		}),
		slashes: if finalized {
			vec![Payout { account: miner(1), amount: 5_000_000_000_000 }]
		} else {
			vec![]
		},
		manifests: (0..3)
			.map(|s| ManifestView {
				stage: s,
				members: 1,
				param_count: 1000,
				samples: 4,
				shards: vec![ObjectView {
					key: manifest_key.into(),
					hash: ContentHash::of(b"shard"),
				}],
				state_hash: ContentHash::of(b"state"),
				checkpoint: None,
			})
			.collect(),
	}
}

/// An orchestrator whose answers the test sets.
pub struct FakeOrchestrator {
	pub status: Mutex<Result<Status, SourceError>>,
	pub spec: Mutex<Result<RunSpec, SourceError>>,
	pub events: Mutex<Vec<PhaseEvent>>,
}

impl FakeOrchestrator {
	pub fn new(status: Status, spec: RunSpec) -> Arc<Self> {
		Arc::new(Self {
			status: Mutex::new(Ok(status)),
			spec: Mutex::new(Ok(spec)),
			events: Mutex::new(vec![]),
		})
	}

	pub fn set(&self, status: Result<Status, SourceError>) {
		*self.status.lock().unwrap() = status;
	}
}

#[async_trait]
impl OrchestratorSource for FakeOrchestrator {
	fn describe(&self) -> String {
		"fake orchestrator".into()
	}
	async fn status(&self) -> Result<Status, SourceError> {
		self.status.lock().unwrap().clone()
	}
	async fn run_spec(&self) -> Result<RunSpec, SourceError> {
		self.spec.lock().unwrap().clone()
	}
	async fn phase_events(&self) -> Result<Vec<PhaseEvent>, SourceError> {
		Ok(std::mem::take(&mut *self.events.lock().unwrap()))
	}
}

/// A chain whose answers the test sets.
pub struct FakeChain {
	pub overview: Mutex<Result<ChainOverview, SourceError>>,
	pub manifest_key: Mutex<String>,
	/// Epochs asked for, in order.
	pub asked: Mutex<Vec<u32>>,
}

impl FakeChain {
	pub fn new(overview: ChainOverview) -> Arc<Self> {
		Arc::new(Self {
			overview: Mutex::new(Ok(overview)),
			manifest_key: Mutex::new("v1/runs/run-a/stages/0/shard-0".into()),
			asked: Mutex::new(vec![]),
		})
	}

	pub fn set(&self, overview: Result<ChainOverview, SourceError>) {
		*self.overview.lock().unwrap() = overview;
	}
}

#[async_trait]
impl ChainSource for FakeChain {
	fn describe(&self) -> String {
		"fake chain".into()
	}
	async fn overview(&self) -> Result<ChainOverview, SourceError> {
		self.overview.lock().unwrap().clone()
	}
	async fn epoch(&self, epoch: u32, _stages: u16) -> Result<EpochTrust, SourceError> {
		self.asked.lock().unwrap().push(epoch);
		let ov = self.overview.lock().unwrap().clone()?;
		if epoch > ov.top_epoch() {
			return Err(SourceError::Invalid {
				url: "fake".into(),
				reason: format!("epoch {epoch} not started"),
			});
		}
		Ok(epoch_trust(epoch, &self.manifest_key.lock().unwrap()))
	}
}

pub fn down(what: &str) -> SourceError {
	SourceError::Unreachable {
		url: format!("ws://127.0.0.1:1/{what}"),
		reason: "connection refused".into(),
	}
}

/// The recorded network: two completed epochs (losses 5.5 and 4.25), the run in epoch 2.
pub fn recorded() -> (Arc<FakeOrchestrator>, Arc<FakeChain>) {
	(
		FakeOrchestrator::new(status("run-a", 10_000, &[5.5, 4.25], 2), spec("run-a")),
		FakeChain::new(overview(2)),
	)
}

pub fn options() -> Options {
	Options {
		refresh: Duration::from_millis(500),
		source_timeout: Duration::from_secs(5),
		history_len: 16,
		trust_epochs: 8,
	}
}

pub fn dashboard(o: Arc<FakeOrchestrator>, c: Arc<FakeChain>) -> Dashboard {
	Dashboard::new(o, c, options())
}
