//! The dashboard's memory: the latest answer of each source ([`Feed`]), a bounded history sampled from
//! status polls ([`History`]), and the refresh that fills them ([`Dashboard::refresh_once`]).
//!
//! HTTP handlers only read the [`Snapshot`]; they never wait on the network (except the epoch page for an
//! epoch outside the cached window, which asks the chain once, with a timeout).

use std::collections::{BTreeMap, VecDeque};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use iota_model::ModelConfig;
use iota_primitives::ContentHash;
use iota_rpc::types::{PhaseEvent, Status};
use iota_rpc::{AccountId, RunSpec};
use serde::Serialize;
use tokio::sync::{Mutex, RwLock};

use crate::source::{ChainSource, OrchestratorSource, SourceError};
use crate::views::{ChainOverview, EpochTrust};

/// What a source last gave: data, or why there is none.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase", tag = "state")]
pub enum Feed<T> {
	/// Not asked yet.
	Pending,
	/// The latest answer.
	Ok {
		/// The data.
		data: T,
	},
	/// The last attempt failed; no data is shown (stale numbers would mislead).
	Unavailable {
		/// Which source and why.
		reason: String,
	},
}

impl<T> Feed<T> {
	/// The data, if any.
	pub fn data(&self) -> Option<&T> {
		match self {
			Feed::Ok { data } => Some(data),
			_ => None,
		}
	}

	/// A feed of a part of the data.
	pub fn map<U>(&self, f: impl FnOnce(&T) -> U) -> Feed<U> {
		match self {
			Feed::Pending => Feed::Pending,
			Feed::Ok { data } => Feed::Ok { data: f(data) },
			Feed::Unavailable { reason } => Feed::Unavailable { reason: reason.clone() },
		}
	}
}

impl<T> From<Result<T, SourceError>> for Feed<T> {
	fn from(r: Result<T, SourceError>) -> Self {
		match r {
			Ok(data) => Feed::Ok { data },
			Err(e) => Feed::Unavailable { reason: e.to_string() },
		}
	}
}

/// The run spec, summarised for the Network page.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SpecSummary {
	/// The spec's BLAKE3 (the chain's `model_hash`).
	pub hash: ContentHash,
	/// The iota-model preset the model equals, if any (`tiny`, `small`, ...).
	pub preset: Option<String>,
	/// Model width.
	pub d_model: usize,
	/// Decoder blocks.
	pub n_layers: usize,
	/// Stages the model is cut into.
	pub stages: usize,
	/// Trainable parameters.
	pub params: Option<u64>,
	/// Width at each cut (`b`), in channels.
	pub wire_width: usize,
	/// `d_model / b`.
	pub width_ratio: f64,
	/// Wire encoding (`f32`, `bf16`, `u8`).
	pub encoding: String,
	/// Compression of a wire tensor against bf16 `[B, T, d_model]`: `width_ratio` × (2 bytes / bytes per
	/// element of the encoding), ignoring the u8 encoding's 8 bytes per row of scale and offset.
	pub compression: f64,
	/// Tokens per sample: `B · T` (rows × sequence length).
	pub tokens_per_sample: u64,
}

impl SpecSummary {
	/// Summarise `spec`.
	pub fn of(spec: &RunSpec) -> Self {
		let m = &spec.model;
		let preset = iota_model::config::PRESETS.iter().find_map(|name| {
			let p = ModelConfig::preset(name).ok()?;
			let same = p.vocab_size == m.vocab_size
				&& p.d_model == m.d_model
				&& p.n_layers == m.n_layers
				&& p.n_heads == m.n_heads
				&& p.n_kv_heads == m.n_kv_heads
				&& p.ffn_dim == m.ffn_dim;
			same.then(|| name.to_string())
		});
		let bytes_per_elem = match spec.encoding.as_str() {
			"f32" => 4.0,
			"u8" => 1.0,
			_ => 2.0,
		};
		Self {
			hash: spec.hash(),
			preset,
			d_model: m.d_model,
			n_layers: m.n_layers,
			stages: m.n_stages(),
			params: m.total_param_count().ok().map(|p| p as u64),
			wire_width: m.wire_width(),
			width_ratio: m.width_ratio(),
			encoding: spec.encoding.clone(),
			compression: m.width_ratio() * 2.0 / bytes_per_elem,
			tokens_per_sample: u64::from(spec.data.batch_rows) * u64::from(spec.data.seq_len),
		}
	}
}

/// The orchestrator's side of the snapshot.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct OrchestratorData {
	/// `iota_status`.
	pub status: Status,
	/// The run spec, once read (its hash matches `status.spec_hash`).
	pub spec: Option<SpecSummary>,
}

/// The chain's side of the snapshot.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ChainData {
	/// Heights, config, registrations.
	pub overview: ChainOverview,
	/// Trust records of the most recent epochs, newest first.
	pub epochs: Vec<EpochTrust>,
}

/// One status poll, as kept in the history.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct HistoryPoint {
	/// Orchestrator clock, ms since the Unix epoch.
	pub t_ms: u64,
	/// Tokens trained since the run began.
	pub tokens_trained: u64,
	/// The orchestrator's tokens/s over its last minute.
	pub tokens_per_sec: f64,
	/// Per stage (index = stage): backward passes counted since the dashboard started ([`History::record`]).
	pub stage_backward_total: Vec<u64>,
	/// Per stage (index = stage): tokens/s over the trailing [`RATE_WINDOW_MS`] (from the oldest point in
	/// the window, or the previous point if none is): backward passes × tokens per sample / seconds.
	/// `None` for the first point, or while tokens per sample are unknown.
	pub stage_tokens_per_sec: Vec<Option<f64>>,
}

/// Highest stage index the history tracks (stages beyond it are left out of the throughput history: a
/// status naming stage 65 535 must not make every history point 65 536 entries long).
pub const MAX_TRACKED_STAGES: usize = 256;
/// Most miners whose sample counts the history tracks (later ones are left out).
pub const MAX_TRACKED_MINERS: usize = 4096;

/// Window over which per-stage tokens/s are averaged, in ms (stages work in bursts: a quota of backward
/// passes, then a merge).
pub const RATE_WINDOW_MS: u64 = 30_000;

/// Per-stage backward counter across epochs.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
struct StageCounter {
	epoch: u32,
	done: u32,
	cumulative: u64,
}

/// A bounded history sampled from status polls: at most `capacity` points (oldest dropped), and per miner
/// at most `capacity` `(t_ms, samples_total)` samples.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct History {
	capacity: usize,
	points: VecDeque<HistoryPoint>,
	#[serde(skip)]
	counters: Vec<StageCounter>,
	miners: BTreeMap<String, VecDeque<(u64, u64)>>,
}

impl History {
	/// An empty history of at most `capacity` points (at least 2).
	pub fn new(capacity: usize) -> Self {
		Self {
			capacity: capacity.max(2),
			points: VecDeque::new(),
			counters: Vec::new(),
			miners: BTreeMap::new(),
		}
	}

	/// The points, oldest first.
	pub fn points(&self) -> impl Iterator<Item = &HistoryPoint> {
		self.points.iter()
	}

	/// `(t_ms, samples_total)` of one miner (SS58 account), oldest first.
	pub fn miner_samples(&self, account: &str) -> Vec<(u64, u64)> {
		self.miners
			.get(account)
			.map(|v| v.iter().copied().collect())
			.unwrap_or_default()
	}

	/// Add one status poll. A status not newer than the last point (`now_ms` did not advance) is ignored.
	///
	/// Per-stage throughput counts backward passes: within an epoch the increase of `backward_done`; across
	/// an epoch change the rest of the old epoch's quota (`quota`, the chain's `backward_quota`; without
	/// it, nothing for the old epoch), whole quotas for skipped epochs, and the new epoch's `backward_done`.
	pub fn record(&mut self, status: &Status, quota: Option<u32>, tokens_per_sample: Option<u64>) {
		if self.points.back().is_some_and(|p| status.now_ms <= p.t_ms) {
			return;
		}
		let first = self.points.is_empty();
		let tracked = || status.stages.iter().filter(|s| usize::from(s.stage) < MAX_TRACKED_STAGES);
		let n = tracked().map(|s| usize::from(s.stage) + 1).max().unwrap_or(0);
		if self.counters.len() < n {
			self.counters.resize(n, StageCounter::default());
		}
		for st in tracked() {
			let i = usize::from(st.stage);
			let c = self.counters[i];
			let delta = if first {
				0
			} else if st.epoch == c.epoch {
				u64::from(st.backward_done.saturating_sub(c.done))
			} else if st.epoch > c.epoch {
				let q = u64::from(quota.unwrap_or(0));
				q.saturating_sub(u64::from(c.done))
					+ q * u64::from(st.epoch - c.epoch - 1)
					+ u64::from(st.backward_done)
			} else {
				0
			};
			self.counters[i] = StageCounter {
				epoch: st.epoch,
				done: st.backward_done,
				cumulative: c.cumulative + delta,
			};
		}
		let totals: Vec<u64> = self.counters.iter().map(|c| c.cumulative).collect();
		let base = self
			.points
			.iter()
			.find(|p| p.t_ms + RATE_WINDOW_MS >= status.now_ms)
			.or(self.points.back());
		let rates = match (base, tokens_per_sample) {
			(Some(b), Some(tps)) => {
				let secs = (status.now_ms - b.t_ms) as f64 / 1000.0;
				(0..totals.len())
					.map(|i| {
						b.stage_backward_total
							.get(i)
							.map(|b0| (totals[i] - b0) as f64 * tps as f64 / secs)
					})
					.collect()
			},
			_ => vec![None; totals.len()],
		};
		self.points.push_back(HistoryPoint {
			t_ms: status.now_ms,
			tokens_trained: status.tokens_trained,
			tokens_per_sec: status.tokens_per_sec,
			stage_backward_total: totals,
			stage_tokens_per_sec: rates,
		});
		while self.points.len() > self.capacity {
			self.points.pop_front();
		}
		for m in &status.miners {
			let key = m.account.to_string();
			if !self.miners.contains_key(&key) && self.miners.len() >= MAX_TRACKED_MINERS {
				continue;
			}
			let q = self.miners.entry(key).or_default();
			q.push_back((status.now_ms, m.samples_total));
			while q.len() > self.capacity {
				q.pop_front();
			}
		}
	}
}

/// Most phase changes kept for the Stages page.
pub const PHASE_EVENTS_KEPT: usize = 50;

/// Everything the pages and JSON endpoints show, as of the last refresh.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Snapshot {
	/// Increases with every refresh (the live script asks for changes since the one it has).
	pub generation: u64,
	/// When the last refresh finished, ms since the Unix epoch (dashboard clock).
	pub updated_ms: u64,
	/// The orchestrator.
	pub orchestrator: Feed<OrchestratorData>,
	/// The chain.
	pub chain: Feed<ChainData>,
	/// Sampled history.
	#[serde(skip)]
	pub history: History,
	/// Recent phase changes pushed by the orchestrator, newest last.
	pub phase_events: VecDeque<PhaseEvent>,
}

impl Snapshot {
	/// Whether `account` appears anywhere in the snapshot (orchestrator, chain records, trust records).
	pub fn knows_miner(&self, account: &AccountId) -> bool {
		let in_orch = self
			.orchestrator
			.data()
			.is_some_and(|o| o.status.miners.iter().any(|m| &m.account == account));
		let in_chain = self.chain.data().is_some_and(|c| {
			c.overview.miners.iter().any(|m| &m.account == account)
				|| c.epochs.iter().any(|e| {
					e.verdicts.iter().any(|v| &v.miner == account)
						|| e.scores.iter().any(|s| &s.miner == account)
						|| e.slashes.iter().any(|s| &s.account == account)
						|| e.emission
							.as_ref()
							.is_some_and(|em| em.miners.iter().any(|p| &p.account == account))
				})
		});
		in_orch || in_chain
	}

	/// The highest epoch any source knows of (a stage's current epoch or a completed one), if any source
	/// answered.
	pub fn top_epoch(&self) -> Option<u32> {
		let o = self.orchestrator.data().map(|o| {
			let st = o.status.stages.iter().map(|s| s.epoch).max().unwrap_or(0);
			let done = o.status.epochs.iter().map(|e| e.epoch).max().unwrap_or(0);
			st.max(done)
		});
		let c = self.chain.data().map(|c| c.overview.top_epoch());
		match (o, c) {
			(Some(a), Some(b)) => Some(a.max(b)),
			(a, b) => a.or(b),
		}
	}
}

/// Tuning of the refresh.
#[derive(Clone, Debug, PartialEq)]
pub struct Options {
	/// Time between refreshes (also the page's live-update period).
	pub refresh: Duration,
	/// Bound on each source call.
	pub source_timeout: Duration,
	/// History points kept.
	pub history_len: usize,
	/// Most recent epochs whose trust records are kept.
	pub trust_epochs: u32,
}

impl Default for Options {
	fn default() -> Self {
		Self {
			refresh: Duration::from_secs(2),
			source_timeout: Duration::from_secs(10),
			history_len: 720,
			trust_epochs: 8,
		}
	}
}

struct Inner {
	orchestrator: Arc<dyn OrchestratorSource>,
	chain: Arc<dyn ChainSource>,
	options: Options,
	snapshot: RwLock<Snapshot>,
	spec: Mutex<Option<SpecSummary>>,
	refresh_lock: Mutex<()>,
}

/// The dashboard: two sources, a snapshot, a router ([`Dashboard::router`]). Cheap to clone.
#[derive(Clone)]
pub struct Dashboard {
	inner: Arc<Inner>,
}

fn now_ms() -> u64 {
	SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis() as u64)
}

impl Dashboard {
	/// A dashboard over the given sources; nothing is fetched until [`Self::refresh_once`] or
	/// [`Self::spawn_refresh`].
	pub fn new(
		orchestrator: Arc<dyn OrchestratorSource>,
		chain: Arc<dyn ChainSource>,
		options: Options,
	) -> Self {
		let snapshot = Snapshot {
			generation: 0,
			updated_ms: 0,
			orchestrator: Feed::Pending,
			chain: Feed::Pending,
			history: History::new(options.history_len),
			phase_events: VecDeque::new(),
		};
		Self {
			inner: Arc::new(Inner {
				orchestrator,
				chain,
				options,
				snapshot: RwLock::new(snapshot),
				spec: Mutex::new(None),
				refresh_lock: Mutex::new(()),
			}),
		}
	}

	/// The options.
	pub fn options(&self) -> &Options {
		&self.inner.options
	}

	/// A copy of the current snapshot.
	pub async fn snapshot(&self) -> Snapshot {
		self.inner.snapshot.read().await.clone()
	}

	/// Read the current snapshot without copying it.
	pub(crate) async fn with_snapshot<R>(&self, f: impl FnOnce(&Snapshot) -> R) -> R {
		f(&*self.inner.snapshot.read().await)
	}

	async fn timed<T>(
		&self,
		what: String,
		f: impl std::future::Future<Output = Result<T, SourceError>>,
	) -> Result<T, SourceError> {
		tokio::time::timeout(self.inner.options.source_timeout, f)
			.await
			.unwrap_or_else(|_| {
				Err(SourceError::Unreachable { url: what, reason: "no answer in time".into() })
			})
	}

	async fn fetch_orchestrator(&self) -> (Feed<OrchestratorData>, Vec<PhaseEvent>) {
		let src = &self.inner.orchestrator;
		let status = match self.timed(src.describe(), src.status()).await {
			Ok(s) => s,
			Err(e) => return (Feed::Unavailable { reason: e.to_string() }, Vec::new()),
		};
		let mut spec = self.inner.spec.lock().await;
		if spec.as_ref().is_none_or(|s| s.hash != status.spec_hash) {
			match self.timed(src.describe(), src.run_spec()).await {
				Ok(s) => *spec = Some(SpecSummary::of(&s)),
				Err(e) => tracing::debug!(error = %e, "run spec not read"),
			}
		}
		let events = self.timed(src.describe(), src.phase_events()).await.unwrap_or_default();
		(Feed::Ok { data: OrchestratorData { status, spec: spec.clone() } }, events)
	}

	async fn fetch_chain(&self) -> Feed<ChainData> {
		let src = &self.inner.chain;
		let r = self
			.timed(src.describe(), async {
				let overview = src.overview().await?;
				let top = overview.top_epoch();
				let stages =
					overview.run_config.as_ref().map_or(overview.stages.len() as u16, |c| c.stages);
				let lowest = (top + 1).saturating_sub(self.inner.options.trust_epochs);
				let mut epochs = Vec::new();
				for e in (lowest..=top).rev() {
					epochs.push(src.epoch(e, stages).await?);
				}
				Ok(ChainData { overview, epochs })
			})
			.await;
		r.into()
	}

	/// Ask both sources once (concurrently) and publish a new snapshot generation. A source that fails
	/// becomes [`Feed::Unavailable`]; the other is unaffected.
	pub async fn refresh_once(&self) {
		let _one_at_a_time = self.inner.refresh_lock.lock().await;
		let ((orchestrator, events), chain) =
			tokio::join!(self.fetch_orchestrator(), self.fetch_chain());
		let quota = chain
			.data()
			.and_then(|c| c.overview.run_config.as_ref().map(|r| r.backward_quota));
		let mut snap = self.inner.snapshot.write().await;
		if let Some(o) = orchestrator.data() {
			let tps = o.spec.as_ref().map(|s| s.tokens_per_sample);
			snap.history.record(&o.status, quota, tps);
		}
		snap.phase_events.extend(events);
		while snap.phase_events.len() > PHASE_EVENTS_KEPT {
			snap.phase_events.pop_front();
		}
		snap.orchestrator = orchestrator;
		snap.chain = chain;
		snap.generation += 1;
		snap.updated_ms = now_ms();
	}

	/// Refresh every [`Options::refresh`] forever (a tokio task).
	pub fn spawn_refresh(&self) -> tokio::task::JoinHandle<()> {
		let me = self.clone();
		tokio::spawn(async move {
			let mut tick = tokio::time::interval(me.inner.options.refresh);
			tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
			loop {
				tick.tick().await;
				me.refresh_once().await;
			}
		})
	}

	/// The trust record of `epoch`: from the snapshot's window, else asked from the chain (with the
	/// source timeout).
	///
	/// Errors: [`SourceError`] when the chain cannot be asked.
	pub async fn epoch_trust(&self, epoch: u32) -> Result<EpochTrust, SourceError> {
		let (cached, stages) = self
			.with_snapshot(|s| {
				let c = s.chain.data();
				(
					c.and_then(|c| c.epochs.iter().find(|e| e.epoch == epoch).cloned()),
					c.map(|c| c.overview.stages.len() as u16),
				)
			})
			.await;
		if let Some(t) = cached {
			return Ok(t);
		}
		let src = &self.inner.chain;
		self.timed(src.describe(), async {
			let stages = match stages {
				Some(s) => s,
				None => src.overview().await?.stages.len() as u16,
			};
			src.epoch(epoch, stages).await
		})
		.await
	}
}

#[cfg(test)]
mod tests {
	use super::*;
	use iota_primitives::Phase;
	use iota_rpc::types::StageStatus;

	fn status(now_ms: u64, stages: &[(u32, u32)]) -> Status {
		Status {
			run: "r".into(),
			spec_hash: ContentHash::of(b"s"),
			finalized_block: 0,
			stages: stages
				.iter()
				.enumerate()
				.map(|(i, &(epoch, done))| StageStatus {
					stage: i as u16,
					epoch,
					phase: Phase::Training,
					miners: vec![],
					forward_queue: 0,
					backward_queue: 0,
					leases: 0,
					backward_done: done,
					gradients_submitted: 0,
					shards_present: 0,
					shards_expected: 0,
				})
				.collect(),
			last_epoch_loss: None,
			tokens_trained: 0,
			tokens_per_sec: 0.0,
			wire_bytes: 0,
			miners: vec![],
			epochs: vec![],
			now_ms,
		}
	}

	fn rates(h: &History) -> Vec<Vec<Option<f64>>> {
		h.points().map(|p| p.stage_tokens_per_sec.clone()).collect()
	}

	#[test]
	fn stage_throughput_counts_backward_passes_across_epochs() {
		let mut h = History::new(10);
		h.record(&status(0, &[(0, 1), (0, 0)]), Some(4), Some(10));
		// Stage 0 finished epoch 0 (3 more) and did 2 of epoch 1; stage 1 did 2 in epoch 0. 40 s.
		h.record(&status(40_000, &[(1, 2), (0, 2)]), Some(4), Some(10));
		// Stage 0 skipped a whole epoch (quota 4) and did 1 of epoch 3: 2 + 4 + 1 = 7 in 40 s.
		h.record(&status(80_000, &[(3, 1), (0, 2)]), Some(4), Some(10));
		assert_eq!(
			rates(&h),
			vec![vec![None, None], vec![Some(1.25), Some(0.5)], vec![Some(1.75), Some(0.0)]]
		);
		let totals: Vec<Vec<u64>> = h.points().map(|p| p.stage_backward_total.clone()).collect();
		assert_eq!(totals, vec![vec![0, 0], vec![5, 2], vec![12, 2]]);
	}

	#[test]
	fn stage_throughput_is_averaged_over_the_trailing_window() {
		let mut h = History::new(10);
		// A burst of 8 passes in the first 2 s, then nothing: 10 s later the rate is still the window's mean.
		h.record(&status(0, &[(0, 0)]), Some(8), Some(10));
		h.record(&status(2_000, &[(0, 8)]), Some(8), Some(10));
		h.record(&status(10_000, &[(0, 8)]), Some(8), Some(10));
		assert_eq!(rates(&h)[1], vec![Some(40.0)]);
		assert_eq!(
			rates(&h)[2],
			vec![Some(8.0)],
			"8 passes × 10 tokens over the 10 s since the window's first point"
		);
		// Past the window the burst drops out.
		h.record(&status(35_000, &[(0, 8)]), Some(8), Some(10));
		assert_eq!(rates(&h)[3], vec![Some(0.0)]);
	}

	#[test]
	fn without_quota_or_tokens_per_sample_rates_are_partial_or_unknown() {
		let mut h = History::new(10);
		h.record(&status(1_000, &[(0, 3)]), None, None);
		h.record(&status(2_000, &[(1, 1)]), None, None);
		assert_eq!(rates(&h), vec![vec![None], vec![None]]);
		let mut h = History::new(10);
		h.record(&status(1_000, &[(0, 3)]), None, Some(10));
		h.record(&status(2_000, &[(1, 1)]), None, Some(10));
		assert_eq!(
			rates(&h)[1],
			vec![Some(10.0)],
			"only the new epoch's pass is counted without the quota"
		);
	}

	#[test]
	fn history_is_bounded_and_ignores_stale_polls() {
		let mut h = History::new(3);
		for t in 1..=5 {
			h.record(&status(t * 1000, &[(0, t as u32)]), Some(4), Some(1));
		}
		h.record(&status(5_000, &[(0, 9)]), Some(4), Some(1));
		h.record(&status(4_000, &[(0, 9)]), Some(4), Some(1));
		let ts: Vec<u64> = h.points().map(|p| p.t_ms).collect();
		assert_eq!(ts, vec![3_000, 4_000, 5_000]);
	}

	#[test]
	fn absurd_stage_ids_and_miner_counts_stay_bounded() {
		let mut h = History::new(4);
		let mut st = status(1_000, &[(0, 1)]);
		st.stages[0].stage = u16::MAX;
		st.miners = (0..MAX_TRACKED_MINERS + 10)
			.map(|i| {
				let mut a = [0u8; 32];
				a[..8].copy_from_slice(&(i as u64).to_le_bytes());
				iota_rpc::types::MinerActivity {
					account: AccountId::from(a),
					stage: 0,
					samples_this_epoch: 0,
					samples_total: 1,
					leases: 0,
					leases_expired: 0,
					restarts: 0,
					gone: 0,
					backward_this_epoch: 0,
					refused: 0,
					refusals: Default::default(),
					last_seen_ms: 0,
				}
			})
			.collect();
		h.record(&st, Some(4), Some(1));
		assert!(h
			.points()
			.all(|p| p.stage_tokens_per_sec.is_empty() && p.stage_backward_total.is_empty()));
		assert_eq!(h.miners.len(), MAX_TRACKED_MINERS);
	}

	#[test]
	fn feeds_keep_the_reason_of_a_failure() {
		let f: Feed<u32> =
			Err(SourceError::Unreachable { url: "ws://x".into(), reason: "refused".into() }).into();
		assert_eq!(f, Feed::Unavailable { reason: "cannot reach ws://x: refused".into() });
		assert_eq!(
			f.map(|v| v + 1),
			Feed::Unavailable { reason: "cannot reach ws://x: refused".into() }
		);
		let ok: Feed<u32> = Ok(1).into();
		assert_eq!(ok.map(|v| v + 1).data(), Some(&2));
	}
}
