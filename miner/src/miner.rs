//! [`Miner`]: the loop's core, one step at a time, against the [`Orchestrator`], [`ObjectIo`] and
//! [`ChainView`] traits (so tests drive it with in-memory fakes and no processes).
//!
//! States ([`Phase`]):
//! - **Unsynced** (start-up, or after a missed or disagreeing merge): read the stage's epoch `E` on
//!   chain. `E = 0`: the weights are the run seed's. Else the manifest of epoch `E − 1` names the attested
//!   state hash and, usually, a checkpoint: the miner asks the orchestrator for a presigned GET of it,
//!   downloads it (hash-checked) and loads it only if its state hashes to the attested value
//!   ([`iota_model::Stage::load_checkpoint`]). If the manifest has no checkpoint (or the GET is refused),
//!   the miner **does not train**: it waits and retries, since the next merge of the stage publishes one.
//! - **Training**: `getWork` → one forward, backward, or the gradient upload that starts the merge.
//!   Inputs are hash-checked on download and decoded with every check of `iota_model::wire` plus the
//!   exact boundary shape; results are checked for NaN/Inf before upload; a result whose lease ran out is
//!   dropped, never submitted. The parameter gradient of an item is added to the merge accumulator only
//!   after the orchestrator accepted the item, so the submitted sum counts exactly the accepted samples.
//!   A bad item is released (`releaseLease`) with a logged reason and the loop goes on.
//! - **Merging**: reduce this miner's butterfly shards of each round ([`crate::merge::reduce_shard`]
//!   over ranged reads), poll `getManifest`; on `Ready`, download every reduced shard, assemble the
//!   mean (hash-checked, tiling `0..P`, this stage's own shard keys), apply the AdamW step, upload the
//!   checkpoint when asked, attest `state_hash`; on `Committed`, continue at epoch + 1 if the committed
//!   hash is ours, else resynchronise from the checkpoint.

use std::collections::VecDeque;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use candle_core::{DType, Device, Tensor};
use iota_model::wire::{self, Expect, Kind};
use iota_model::{Encoding, Forward, Stage};
use iota_primitives::ContentHash;
use iota_rpc::signing::now_ms;
use iota_rpc::types::*;
use iota_rpc::{AccountId, ErrorCode, RunSpec};
use iota_storage::keys::{self, ObjectKey};

use crate::chain::ChainView;
use crate::data::DataCache;
use crate::error::{MinerError, Result};
use crate::merge::{self, ShardInput, SpanInput};
use crate::metrics::Metrics;
use crate::orchestrator::Orchestrator;
use crate::transfer::ObjectIo;

/// Test-only faults (feature `fault-injection`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Fault {
	/// Add uniform noise in `[-a, a]` to every uploaded forward activation (seeded by the sample id).
	Perturb(f32),
}

impl std::str::FromStr for Fault {
	type Err = String;
	/// `perturb=<amplitude>` (finite, > 0).
	fn from_str(s: &str) -> std::result::Result<Self, String> {
		match s.split_once('=') {
			Some(("perturb", a)) => match a.parse::<f32>() {
				Ok(a) if a.is_finite() && a > 0.0 => Ok(Fault::Perturb(a)),
				_ => Err(format!("perturb amplitude {a:?} must be a finite number > 0")),
			},
			_ => Err(format!("unknown fault {s:?}; expected perturb=<amplitude>")),
		}
	}
}

/// Settings of the loop.
#[derive(Clone, Debug)]
pub struct MinerConfig {
	/// Compute device of the stage (the AdamW step always runs on the CPU).
	pub device: Device,
	/// Where data shards are cached on disk (`None`: memory only).
	pub cache_dir: Option<PathBuf>,
	/// Kept forward graphs (for backward without recomputation), oldest dropped first.
	pub max_kept: usize,
	/// A result is dropped if less than this is left of its lease when it is ready to submit, in ms.
	pub lease_margin_ms: u64,
	/// How often the merge polls the orchestrator.
	pub merge_poll: Duration,
	/// How long to wait before retrying a resynchronisation that cannot proceed yet.
	pub resync_wait: Duration,
	/// A fault to inject (tests only; honoured only with the `fault-injection` feature).
	pub fault: Option<Fault>,
}

impl Default for MinerConfig {
	fn default() -> Self {
		MinerConfig {
			device: Device::Cpu,
			cache_dir: None,
			max_kept: 32,
			lease_margin_ms: 250,
			merge_poll: Duration::from_millis(300),
			resync_wait: Duration::from_secs(3),
			fault: None,
		}
	}
}

/// Where the miner is (module docs).
#[derive(Clone, Debug, PartialEq)]
pub enum Phase {
	/// The stage's global weights are not known to be held.
	Unsynced,
	/// Pulling work for the epoch whose weights are held.
	Training,
	/// In the merge of `epoch`.
	Merging(MergeState),
}

/// Progress of one merge.
#[derive(Clone, Debug, PartialEq)]
pub struct MergeState {
	/// The epoch being merged.
	pub epoch: u32,
	/// Whether this miner's gradient was accepted (it reduces shards).
	pub member: bool,
	/// The round of the shards in `reduced`.
	pub round: Option<u32>,
	/// Shards of `round` this miner reduced and the orchestrator accepted.
	pub reduced: Vec<u32>,
	/// The state hash after the step, once applied (the step is applied once).
	pub applied: Option<ContentHash>,
	/// The uploaded checkpoint, when one was asked for.
	pub checkpoint: Option<TensorRef>,
	/// Whether the orchestrator accepted the attestation.
	pub attested: bool,
}

/// What one [`Miner::step`] did.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Outcome {
	/// Something was done; step again at once.
	Worked,
	/// Nothing to do now; wait this long.
	Idle(Duration),
}

/// The merge accumulator: the sum of the parameter gradients of the accepted items of this epoch.
#[derive(Debug, Default)]
struct Accumulator {
	sum: Vec<f32>,
	count: u32,
}

impl Accumulator {
	fn add(&mut self, g: &[f32], n: usize) {
		if self.sum.is_empty() {
			self.sum = g.to_vec();
		} else {
			for (s, x) in self.sum.iter_mut().zip(g) {
				*s += *x;
			}
		}
		self.count += n as u32;
	}
	fn clear(&mut self) {
		self.sum = Vec::new();
		self.count = 0;
	}
}

#[derive(Debug)]
struct EpochStats {
	started: Instant,
	forwards: u64,
	backwards: u64,
	loss_sum: f64,
	loss_n: u64,
}

impl EpochStats {
	fn new() -> Self {
		EpochStats { started: Instant::now(), forwards: 0, backwards: 0, loss_sum: 0.0, loss_n: 0 }
	}
}

/// One miner holding one stage (module docs).
pub struct Miner {
	orch: Arc<dyn Orchestrator>,
	io: Arc<dyn ObjectIo>,
	chain: Arc<dyn ChainView>,
	spec: RunSpec,
	encoding: Encoding,
	index: u16,
	stage: Stage,
	epoch: u32,
	me: AccountId,
	run_id: keys::Id,
	phase: Phase,
	kept: VecDeque<(u32, u64, Forward)>,
	data: DataCache,
	acc: Accumulator,
	lease: Option<LeaseId>,
	stats: EpochStats,
	cfg: MinerConfig,
	/// The miner's metrics.
	pub metrics: Metrics,
}

impl std::fmt::Debug for Miner {
	fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
		f.debug_struct("Miner")
			.field("stage", &self.index)
			.field("epoch", &self.epoch)
			.field("phase", &self.phase)
			.finish()
	}
}

fn bad(msg: impl Into<String>) -> MinerError {
	MinerError::BadInput(msg.into())
}

impl Miner {
	/// A miner of stage `index` of `spec`, starting [`Phase::Unsynced`] with the seed's weights (the
	/// first [`step`](Self::step) checks them against the chain).
	///
	/// # Errors
	/// [`MinerError::Spec`] for an invalid spec or encoding, [`MinerError::BadInput`] for a stage the
	/// model does not have, [`MinerError::Model`] if the stage cannot be built.
	pub fn new(
		orch: Arc<dyn Orchestrator>,
		io: Arc<dyn ObjectIo>,
		chain: Arc<dyn ChainView>,
		spec: RunSpec,
		index: u16,
		cfg: MinerConfig,
		metrics: Metrics,
	) -> Result<Self> {
		spec.validate()?;
		let encoding = spec.wire_encoding()?;
		if usize::from(index) >= spec.model.n_stages() {
			return Err(bad(format!(
				"stage {index} does not exist ({} stages)",
				spec.model.n_stages()
			)));
		}
		let run_id = keys::Id::new(spec.run.clone()).map_err(|e| bad(e.to_string()))?;
		let stage =
			Stage::new(&spec.model, usize::from(index), spec.seed, DType::F32, &cfg.device)?;
		let me = orch.account();
		Ok(Miner {
			orch,
			io,
			chain,
			encoding,
			index,
			stage,
			epoch: 0,
			me,
			run_id,
			phase: Phase::Unsynced,
			kept: VecDeque::new(),
			data: DataCache::new(cfg.cache_dir.clone()),
			acc: Accumulator::default(),
			lease: None,
			stats: EpochStats::new(),
			cfg,
			metrics,
			spec,
		})
	}

	/// The stage index.
	pub fn stage_index(&self) -> u16 {
		self.index
	}
	/// The epoch whose global weights the miner holds.
	pub fn epoch(&self) -> u32 {
		self.epoch
	}
	/// Where the miner is.
	pub fn phase(&self) -> &Phase {
		&self.phase
	}
	/// The stage (weights, AdamW state).
	pub fn stage(&self) -> &Stage {
		&self.stage
	}
	/// The lease currently held, if any.
	pub fn lease(&self) -> Option<LeaseId> {
		self.lease
	}
	/// Samples accumulated for this epoch's merge.
	pub fn accumulated(&self) -> u32 {
		self.acc.count
	}

	/// One step of the loop (module docs). Item-level failures release the item's lease and are
	/// returned, so the caller logs and counts them and goes on.
	///
	/// # Errors
	/// Any [`MinerError`]; none leaves the stage with unverified weights.
	pub async fn step(&mut self) -> Result<Outcome> {
		match self.phase.clone() {
			Phase::Unsynced => self.resync().await,
			Phase::Training => self.train_step().await,
			Phase::Merging(m) => self.merge_step(m).await,
		}
	}

	/// Run until `shutdown` turns true, then hand back a lease still held. Errors are logged, counted
	/// (`iota_miner_errors_total{kind}`) and retried with exponential backoff (250 ms to 10 s).
	pub async fn run(&mut self, mut shutdown: tokio::sync::watch::Receiver<bool>) {
		let mut failures = 0u32;
		loop {
			if *shutdown.borrow() {
				break;
			}
			let res = tokio::select! {
				r = self.step() => Some(r),
				_ = shutdown.changed() => None,
			};
			let wait = match res {
				None => break,
				Some(Ok(Outcome::Worked)) => {
					failures = 0;
					continue;
				},
				Some(Ok(Outcome::Idle(d))) => {
					failures = 0;
					d
				},
				Some(Err(e)) => {
					failures = failures.saturating_add(1);
					self.record_error(&e);
					Duration::from_millis(250u64.saturating_mul(1 << failures.min(6)))
						.min(Duration::from_secs(10))
				},
			};
			tokio::select! {
				_ = tokio::time::sleep(wait) => {}
				_ = shutdown.changed() => break,
			}
		}
		self.shutdown().await;
	}

	/// Log and count an error of [`step`](Self::step).
	pub fn record_error(&self, e: &MinerError) {
		self.metrics.errors.with_label_values(&[e.kind()]).inc();
		if matches!(e, MinerError::LeaseExpired { .. }) || e.code() == Some(ErrorCode::LeaseExpired)
		{
			self.metrics.expired.inc();
		}
		tracing::warn!(stage = self.index, epoch = self.epoch, kind = e.kind(), "{e}");
	}

	/// Release the lease still held (after an interrupted step).
	pub async fn shutdown(&mut self) {
		if let Some(lease) = self.lease.take() {
			match self.orch.release_lease(lease).await {
				Ok(()) => tracing::info!(lease, "released the lease held at shutdown"),
				Err(e) => {
					tracing::warn!(lease, error = %e, "could not release the lease at shutdown (it will expire)")
				},
			}
		}
	}

	// ---- synchronisation ------------------------------------------------------------------------

	async fn resync(&mut self) -> Result<Outcome> {
		let e = self.chain.stage_epoch(self.index).await?;
		if e == 0 {
			if self.stage.adam_state().step != 0 {
				self.stage = Stage::new(
					&self.spec.model,
					usize::from(self.index),
					self.spec.seed,
					DType::F32,
					&self.cfg.device,
				)?;
			}
			tracing::info!(stage = self.index, "epoch 0: weights initialised from the run seed");
			self.enter_training(0);
			return Ok(Outcome::Worked);
		}
		let Some(c) = self.chain.committed(e - 1, self.index).await? else {
			tracing::warn!(
				stage = self.index,
				epoch = e,
				"no committed manifest for epoch {} yet; waiting",
				e - 1
			);
			return Ok(Outcome::Idle(self.cfg.resync_wait));
		};
		if self.epoch == e && ContentHash(self.stage.state_hash()?) == c.state_hash {
			self.enter_training(e);
			return Ok(Outcome::Worked);
		}
		let Some((key, hash)) = c.checkpoint else {
			tracing::warn!(
				stage = self.index,
				epoch = e,
				"the stage's latest manifest has no checkpoint; not training on unverified weights, waiting for the next merge to publish one"
			);
			return Ok(Outcome::Idle(self.cfg.resync_wait));
		};
		let get = match self.orch.presign_get(vec![key.clone()]).await {
			Ok(v) if v.len() == 1 => {
				v.into_iter().next().ok_or_else(|| bad("empty presign answer"))?
			},
			Ok(v) => return Err(bad(format!("presignGet answered {} URLs for one key", v.len()))),
			Err(err) => {
				tracing::warn!(stage = self.index, epoch = e, %key, error = %err, "no GET for the checkpoint; not training, retrying later");
				return Ok(Outcome::Idle(self.cfg.resync_wait));
			},
		};
		let bytes = self
			.io
			.get(&get, &hash)
			.await
			.map_err(|err| MinerError::storage("stage checkpoint", err))?;
		self.metrics.bytes_down.inc_by(bytes.len() as u64);
		self.stage.load_checkpoint(&bytes, &c.state_hash.0)?;
		tracing::info!(stage = self.index, epoch = e, state = %c.state_hash, "loaded the attested checkpoint");
		self.enter_training(e);
		Ok(Outcome::Worked)
	}

	fn enter_training(&mut self, epoch: u32) {
		self.epoch = epoch;
		self.acc.clear();
		self.kept.clear();
		self.stage.zero_grad();
		self.stats = EpochStats::new();
		self.metrics.epoch.set(i64::from(epoch));
		self.phase = Phase::Training;
	}

	// ---- training -------------------------------------------------------------------------------

	async fn train_step(&mut self) -> Result<Outcome> {
		let work = self.orch.get_work(self.index).await?;
		match work {
			Work::Idle { reason, retry_after_ms } => {
				if reason == IdleReason::Merging {
					// The stage merges and this miner missed (or had nothing for) the gradient upload.
					self.enter_merge(self.epoch, false);
					return Ok(Outcome::Worked);
				}
				Ok(Outcome::Idle(Duration::from_millis(retry_after_ms.clamp(20, 5_000))))
			},
			Work::UploadGradient { epoch, output } => self.upload_gradient(epoch, output).await,
			Work::Forward(f) => {
				self.lease = Some(f.lease);
				let r = self.forward(f).await;
				self.finish_item(r).await
			},
			Work::Backward(b) => {
				self.lease = Some(b.lease);
				let r = self.backward(b).await;
				self.finish_item(r).await
			},
		}
	}

	async fn finish_item(&mut self, r: Result<()>) -> Result<Outcome> {
		self.stage.zero_grad();
		match r {
			Ok(()) => {
				self.lease = None;
				Ok(Outcome::Worked)
			},
			Err(e) => {
				if let Some(lease) = self.lease.take() {
					let gone = matches!(e, MinerError::LeaseExpired { .. })
						|| matches!(e.code(), Some(ErrorCode::LeaseExpired | ErrorCode::Unknown));
					if !gone {
						if let Err(re) = self.orch.release_lease(lease).await {
							tracing::debug!(lease, error = %re, "releasing a failed item's lease");
						}
					}
				}
				Err(e)
			},
		}
	}

	fn check_item(&mut self, stage: u16, epoch: u32) -> Result<()> {
		if stage != self.index {
			return Err(bad(format!(
				"work item for stage {stage}, this miner holds stage {}",
				self.index
			)));
		}
		if epoch > self.epoch {
			// A merge went by without this miner: its weights are stale.
			self.phase = Phase::Unsynced;
			return Err(bad(format!(
				"work item of epoch {epoch}, weights held are of epoch {}; resynchronising",
				self.epoch
			)));
		}
		if epoch < self.epoch {
			return Err(bad(format!("stale work item of epoch {epoch} (now {})", self.epoch)));
		}
		Ok(())
	}

	fn check_deadline(&self, lease: LeaseId, expires_at_ms: u64) -> Result<()> {
		let now = now_ms();
		if now.saturating_add(self.cfg.lease_margin_ms) > expires_at_ms {
			return Err(MinerError::LeaseExpired {
				lease,
				late_ms: now.saturating_sub(expires_at_ms),
			});
		}
		Ok(())
	}

	fn boundary(&self) -> [usize; 3] {
		let [b, t, w] = self.spec.boundary_shape();
		[b as usize, t as usize, w as usize]
	}

	/// Largest wire message of a boundary tensor: f32 payload plus per-row scale/offset and a header.
	fn max_wire_bytes(&self) -> usize {
		let [b, t, w] = self.boundary();
		b * t * w * 4 + b * t * 8 + 64 * 1024
	}

	/// Download, hash-check and decode a boundary tensor of `kind`, requiring exactly `[B, T, w]`.
	async fn fetch_tensor(&mut self, obj: &ObjectGet, kind: Kind) -> Result<Tensor> {
		let max = self.max_wire_bytes();
		if obj.size > max as u64 {
			return Err(bad(format!(
				"{} is {} bytes, over the {max}-byte limit for a [B, T, w] tensor",
				obj.key, obj.size
			)));
		}
		let what = if kind == Kind::Activation { "input activation" } else { "output gradient" };
		let bytes = self
			.io
			.get(&obj.get, &obj.hash)
			.await
			.map_err(|e| MinerError::storage(what, e))?;
		self.metrics.bytes_down.inc_by(bytes.len() as u64);
		let [b, t, w] = self.boundary();
		let mut expect = Expect::btw(kind, w, max);
		expect.shape = vec![Some(b), Some(t), Some(w)];
		Ok(wire::decode(&bytes, &expect, DType::F32, &self.cfg.device)?)
	}

	/// Encode (refusing NaN/Inf), upload and describe a boundary tensor.
	async fn upload_tensor(
		&mut self,
		t: &Tensor,
		kind: Kind,
		put: &ObjectPut,
	) -> Result<TensorRef> {
		let bytes = wire::encode(t, kind, self.encoding)?;
		let size = bytes.len() as u64;
		let what = if kind == Kind::Activation { "output activation" } else { "input gradient" };
		let hash = self
			.io
			.put(&put.put, Bytes::from(bytes))
			.await
			.map_err(|e| MinerError::storage(what, e))?;
		self.metrics.bytes_up.inc_by(size);
		Ok(TensorRef {
			key: put.key.clone(),
			hash,
			size,
			shape: t.dims().iter().map(|&d| d as u64).collect(),
		})
	}

	async fn tokens(&mut self, sample: u64, data: Option<&DataSlice>) -> Result<(Tensor, Tensor)> {
		let slice = data.ok_or_else(|| {
			bad(format!("sample {sample}: no data slice for a stage that reads tokens"))
		})?;
		let before = self.data.downloaded;
		let r = self
			.data
			.sample(&self.spec, self.io.as_ref(), sample, slice, &self.cfg.device)
			.await;
		self.metrics.bytes_down.inc_by(self.data.downloaded - before);
		r
	}

	async fn stage_input(
		&mut self,
		sample: u64,
		input: Option<&ObjectGet>,
		data: Option<&DataSlice>,
	) -> Result<Tensor> {
		if self.stage.is_first() {
			Ok(self.tokens(sample, data).await?.0)
		} else {
			let input =
				input.ok_or_else(|| bad(format!("sample {sample}: no input activation")))?;
			self.fetch_tensor(input, Kind::Activation).await
		}
	}

	async fn forward(&mut self, f: ForwardWork) -> Result<()> {
		self.check_item(f.stage, f.epoch)?;
		self.check_deadline(f.lease, f.expires_at_ms)?;
		let input = self.stage_input(f.sample, f.input.as_ref(), f.data.as_ref()).await?;
		if self.stage.is_last() {
			let (_, targets) = self.tokens(f.sample, f.data.as_ref()).await?;
			let lf = self.stage.forward_loss(&input, &targets)?;
			let loss = lf.value;
			if !loss.is_finite() {
				return Err(MinerError::Model(iota_model::Error::NonFinite {
					what: "loss".into(),
					index: 0,
				}));
			}
			let grad_in = self
				.stage
				.backward_loss(lf)?
				.ok_or_else(|| bad("a single-stage model has no input gradient"))?;
			let (g, n) = self.stage.take_gradient()?;
			self.check_deadline(f.lease, f.expires_at_ms)?;
			self.orch.report_loss(f.lease, loss).await?;
			let out = self.upload_tensor(&grad_in, Kind::Gradient, &f.output).await?;
			self.check_deadline(f.lease, f.expires_at_ms)?;
			self.orch.submit_activation(f.lease, Some(out)).await?;
			self.acc.add(&g, n);
			self.stats.backwards += 1;
			self.stats.loss_sum += f64::from(loss);
			self.stats.loss_n += 1;
			self.metrics.loss.set(f64::from(loss));
			self.metrics.samples.with_label_values(&["tail"]).inc();
		} else {
			let fwd = self.stage.forward(&input)?;
			let out = self.perturb(fwd.output(), f.sample)?;
			let r = self.upload_tensor(&out, Kind::Activation, &f.output).await?;
			self.check_deadline(f.lease, f.expires_at_ms)?;
			self.orch.submit_activation(f.lease, Some(r)).await?;
			self.kept.push_back((f.epoch, f.sample, fwd));
			while self.kept.len() > self.cfg.max_kept {
				self.kept.pop_front();
			}
			self.stats.forwards += 1;
			self.metrics.samples.with_label_values(&["forward"]).inc();
		}
		Ok(())
	}

	#[cfg(feature = "fault-injection")]
	fn perturb(&self, t: Tensor, sample: u64) -> Result<Tensor> {
		use rand::{Rng, SeedableRng};
		let Some(Fault::Perturb(a)) = self.cfg.fault else { return Ok(t) };
		let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(sample);
		let noise: Vec<f32> = (0..t.elem_count()).map(|_| rng.random_range(-a..=a)).collect();
		let noise = Tensor::from_vec(noise, t.dims(), t.device())?;
		Ok((t + noise)?)
	}

	#[cfg(not(feature = "fault-injection"))]
	fn perturb(&self, t: Tensor, _sample: u64) -> Result<Tensor> {
		Ok(t)
	}

	async fn backward(&mut self, b: BackwardWork) -> Result<()> {
		self.check_item(b.stage, b.epoch)?;
		self.check_deadline(b.lease, b.expires_at_ms)?;
		if self.stage.is_last() {
			return Err(bad("the tail runs its backward with its forward; a separate backward item is not expected"));
		}
		let grad_out = self.fetch_tensor(&b.grad_output, Kind::Gradient).await?;
		let kept = if b.forward_by == self.me {
			self.kept
				.iter()
				.position(|(e, s, _)| *e == b.epoch && *s == b.sample)
				.and_then(|i| self.kept.remove(i))
		} else {
			None
		};
		let grad_in = match kept {
			Some((_, _, fwd)) => self.stage.backward(fwd, &grad_out)?,
			None => {
				let input = self.stage_input(b.sample, b.input.as_ref(), b.data.as_ref()).await?;
				self.stage.backward_from_input(&input, &grad_out)?
			},
		};
		let (g, n) = self.stage.take_gradient()?;
		let output = match (self.stage.is_first(), &b.output, grad_in) {
			(true, _, _) => None,
			(false, Some(put), Some(gi)) => {
				Some(self.upload_tensor(&gi, Kind::Gradient, put).await?)
			},
			(false, None, _) => {
				return Err(bad(format!("sample {}: no PUT for the input gradient", b.sample)))
			},
			(false, Some(_), None) => return Err(bad("no input gradient from a non-head stage")),
		};
		self.check_deadline(b.lease, b.expires_at_ms)?;
		self.orch.submit_activation(b.lease, output).await?;
		self.acc.add(&g, n);
		self.stats.backwards += 1;
		self.metrics.samples.with_label_values(&["backward"]).inc();
		Ok(())
	}

	// ---- merge ----------------------------------------------------------------------------------

	fn enter_merge(&mut self, epoch: u32, member: bool) {
		self.kept.clear();
		self.phase = Phase::Merging(MergeState {
			epoch,
			member,
			round: None,
			reduced: Vec::new(),
			applied: None,
			checkpoint: None,
			attested: false,
		});
	}

	async fn upload_gradient(&mut self, epoch: u32, output: ObjectPut) -> Result<Outcome> {
		if epoch != self.epoch {
			if epoch > self.epoch {
				self.phase = Phase::Unsynced;
			}
			return Err(bad(format!(
				"gradient upload for epoch {epoch}, weights held are of epoch {}",
				self.epoch
			)));
		}
		if self.acc.count == 0 {
			tracing::info!(
				stage = self.index,
				epoch,
				"no samples this epoch: not a merge member, will apply the step"
			);
			self.enter_merge(epoch, false);
			return Ok(Outcome::Worked);
		}
		let bytes = merge::submission_bytes(&self.acc.sum)?;
		let chunk_hashes = merge::chunk_hashes(&bytes);
		let size = bytes.len() as u64;
		let hash = self
			.io
			.put(&output.put, Bytes::from(bytes))
			.await
			.map_err(|e| MinerError::storage("gradient submission", e))?;
		self.metrics.bytes_up.inc_by(size);
		let submission = GradientSubmission {
			epoch,
			gradient: TensorRef {
				key: output.key,
				hash,
				size,
				shape: vec![self.stage.param_count() as u64],
			},
			chunk_hashes,
			samples: self.acc.count,
		};
		match self.orch.submit_gradient(submission).await {
			Ok(()) => {},
			// Already accepted this round (a retried call whose first answer was lost).
			Err(e) if e.code() == Some(ErrorCode::Invalid) => {
				tracing::warn!(stage = self.index, epoch, error = %e, "gradient submission refused as invalid");
			},
			Err(e) => return Err(e),
		}
		tracing::info!(
			stage = self.index,
			epoch,
			samples = self.acc.count,
			bytes = size,
			"gradient submitted"
		);
		// The sum is kept until the epoch ends: a merge round that times out restarts with fresh submissions.
		self.enter_merge(epoch, true);
		Ok(Outcome::Worked)
	}

	/// During a merge: if the stage asks for gradients again (a restarted round), submit the kept sum.
	async fn resubmit_if_asked(&mut self, m: &mut MergeState) -> Result<()> {
		if self.acc.count == 0 {
			return Ok(());
		}
		match self.orch.get_work(self.index).await? {
			Work::UploadGradient { epoch, output } if epoch == m.epoch => {
				tracing::info!(
					stage = self.index,
					epoch,
					"the merge restarted; submitting the gradient again"
				);
				self.upload_gradient(epoch, output).await?;
				m.member = true;
				m.round = None;
				m.reduced.clear();
			},
			Work::Forward(ForwardWork { lease, .. })
			| Work::Backward(BackwardWork { lease, .. }) => {
				// The stage moved on while this miner was merging; hand the item back.
				let _ = self.orch.release_lease(lease).await;
			},
			_ => {},
		}
		Ok(())
	}

	async fn merge_step(&mut self, mut m: MergeState) -> Result<Outcome> {
		let view = match self.orch.get_manifest(m.epoch).await {
			Ok(v) => v,
			Err(e) if matches!(e.code(), Some(ErrorCode::Unknown | ErrorCode::WrongPhase)) => {
				return Ok(Outcome::Idle(self.cfg.merge_poll));
			},
			Err(e) => return Err(e),
		};
		let outcome = match view {
			MergeView::Reducing { .. } => {
				match self.orch.get_shards(m.epoch).await {
					Ok(a) => {
						if m.round != Some(a.round) {
							m.round = Some(a.round);
							m.reduced.clear();
						}
						m.member = true;
						// Shards already accepted are not sent twice; a failure keeps the progress.
						let r = self.reduce(&a, m.epoch, &mut m.reduced).await;
						if let Err(e) = r {
							self.phase = Phase::Merging(m);
							return Err(e);
						}
					},
					// Still uploading, or this miner is not in the round (it joined late, had no samples,
					// or the round restarted and wants fresh submissions).
					Err(e)
						if matches!(e.code(), Some(ErrorCode::WrongPhase | ErrorCode::Invalid)) =>
					{
						self.resubmit_if_asked(&mut m).await?;
					},
					Err(e) => return Err(e),
				}
				self.phase = Phase::Merging(m);
				return Ok(Outcome::Idle(self.cfg.merge_poll));
			},
			MergeView::Ready { shards, samples, checkpoint } => {
				if m.applied.is_none() {
					// Downloads and checks first; the step itself is synchronous, and recorded before the
					// next await, so it is applied exactly once whatever fails afterwards.
					m.applied = Some(self.apply_merge(m.epoch, &shards, samples).await?);
					self.phase = Phase::Merging(m.clone());
				}
				if let (Some(put), None) = (checkpoint, &m.checkpoint) {
					m.checkpoint = Some(self.upload_checkpoint(put).await?);
					self.phase = Phase::Merging(m.clone());
				}
				if !m.attested {
					let state_hash = m.applied.ok_or_else(|| bad("no state after the step"))?;
					let attest = SubmitStateHash {
						epoch: m.epoch,
						state_hash,
						checkpoint: m.checkpoint.clone(),
					};
					match self.orch.submit_state_hash(attest).await {
						Ok(()) => {},
						Err(e) if e.code() == Some(ErrorCode::Invalid) => {
							tracing::debug!(error = %e, "attestation refused as invalid (a non-member or a repeat)");
						},
						Err(e) => {
							self.phase = Phase::Merging(m);
							return Err(e);
						},
					}
					m.attested = true;
				}
				Outcome::Idle(self.cfg.merge_poll)
			},
			MergeView::Committed { state_hash } => {
				match m.applied {
					Some(h) if h == state_hash => {
						self.finish_epoch(m.epoch);
						return Ok(Outcome::Worked);
					},
					Some(h) => {
						tracing::error!(stage = self.index, epoch = m.epoch, ours = %h, committed = %state_hash, "this replica's state differs from the committed one; resynchronising from the checkpoint");
					},
					None => {
						tracing::warn!(
							stage = self.index,
							epoch = m.epoch,
							"the merge was committed before this miner applied it; resynchronising"
						);
					},
				}
				self.phase = Phase::Unsynced;
				return Ok(Outcome::Worked);
			},
		};
		self.phase = Phase::Merging(m);
		Ok(outcome)
	}

	fn finish_epoch(&mut self, epoch: u32) {
		let secs = self.stats.started.elapsed().as_secs_f64().max(1e-9);
		let tokens = (self.stats.forwards + self.stats.backwards) * self.spec.tokens_per_sample();
		let loss = (self.stats.loss_n > 0).then(|| self.stats.loss_sum / self.stats.loss_n as f64);
		self.metrics.merges.inc();
		match loss {
			Some(l) => tracing::info!(
				stage = self.index,
				epoch,
				forwards = self.stats.forwards,
				backwards = self.stats.backwards,
				tokens_per_s = format!("{:.0}", tokens as f64 / secs),
				loss = format!("{l:.4}"),
				"epoch merged"
			),
			None => tracing::info!(
				stage = self.index,
				epoch,
				forwards = self.stats.forwards,
				backwards = self.stats.backwards,
				tokens_per_s = format!("{:.0}", tokens as f64 / secs),
				"epoch merged"
			),
		}
		self.enter_training(epoch + 1);
	}

	/// Whether `key` is a reduced shard of this run, stage and `epoch`.
	fn is_own_shard_key(&self, key: &str, epoch: u32) -> bool {
		matches!(
			keys::parse(key),
			Ok(ObjectKey::ReducedShard { run, epoch: e, stage, .. })
				if run == self.run_id && e == u64::from(epoch) && stage == u32::from(self.index)
		)
	}

	/// Reduce and submit the shards of `a` not in `done`, adding each accepted one to `done`.
	async fn reduce(&mut self, a: &ShardAssignment, epoch: u32, done: &mut Vec<u32>) -> Result<()> {
		let p = self.stage.param_count() as u64;
		if a.epoch != epoch || a.param_count != p {
			return Err(bad(format!(
				"shard assignment for epoch {} with P = {}, expected epoch {epoch}, P = {p}",
				a.epoch, a.param_count
			)));
		}
		for s in &a.submissions {
			if s.object.size != 4 * p {
				return Err(bad(format!(
					"submission of {} is {} bytes, expected {}",
					s.miner,
					s.object.size,
					4 * p
				)));
			}
		}
		for task in &a.shards {
			if done.contains(&task.shard) {
				continue;
			}
			let [start, end] = task.range;
			if start >= end || end > p {
				return Err(merge::MergeError::BadRange { start, end, param_count: p }.into());
			}
			let (_, span) = chunk_span(start, end, p);
			let mut spans = Vec::with_capacity(a.submissions.len());
			for s in &a.submissions {
				let b = self
					.io
					.get_range(&s.object.get, span.clone())
					.await
					.map_err(|e| MinerError::storage("submission span", e))?;
				self.metrics.bytes_down.inc_by(b.len() as u64);
				spans.push(b);
			}
			let inputs: Vec<SpanInput<'_>> = a
				.submissions
				.iter()
				.zip(&spans)
				.map(|(s, b)| SpanInput {
					samples: s.samples,
					chunk_hashes: &s.chunk_hashes,
					span: b,
				})
				.collect();
			let values = merge::reduce_shard(&inputs, start, end, p)?;
			let (bytes, _) = merge::shard_bytes(&values);
			let size = bytes.len() as u64;
			let hash = self
				.io
				.put(&task.output.put, Bytes::from(bytes))
				.await
				.map_err(|e| MinerError::storage("reduced shard", e))?;
			self.metrics.bytes_up.inc_by(size);
			let reduced =
				TensorRef { key: task.output.key.clone(), hash, size, shape: vec![end - start] };
			match self
				.orch
				.submit_shard(SubmitShard { epoch, round: a.round, shard: task.shard, reduced })
				.await
			{
				Ok(()) => tracing::debug!(
					stage = self.index,
					epoch,
					round = a.round,
					shard = task.shard,
					"shard reduced"
				),
				// Already accepted (an answer lost in a retry) or no longer ours: do not send it again.
				Err(e) if e.code() == Some(ErrorCode::Invalid) => {
					tracing::warn!(stage = self.index, epoch, shard = task.shard, error = %e, "shard refused as invalid")
				},
				Err(e) => return Err(e),
			}
			done.push(task.shard);
		}
		Ok(())
	}

	async fn apply_merge(
		&mut self,
		epoch: u32,
		shards: &[ReducedShard],
		samples: u32,
	) -> Result<ContentHash> {
		let p = self.stage.param_count() as u64;
		if samples == 0 {
			return Err(bad("a merge of zero samples"));
		}
		let mut blobs = Vec::with_capacity(shards.len());
		for s in shards {
			if !self.is_own_shard_key(&s.object.key, epoch) {
				return Err(bad(format!(
					"reduced shard key {:?} is not of this run, stage {} and epoch {epoch}",
					s.object.key, self.index
				)));
			}
			let [start, end] = s.range;
			if s.object.size != 4 * end.saturating_sub(start) || end > p {
				return Err(bad(format!(
					"reduced shard {} announces {} bytes for range [{start}, {end}) of P = {p}",
					s.shard, s.object.size
				)));
			}
			let b = self
				.io
				.get(&s.object.get, &s.object.hash)
				.await
				.map_err(|e| MinerError::storage("reduced shard", e))?;
			self.metrics.bytes_down.inc_by(b.len() as u64);
			blobs.push(b);
		}
		let inputs: Vec<ShardInput<'_>> = shards
			.iter()
			.zip(&blobs)
			.map(|(s, b)| ShardInput {
				shard: s.shard,
				range: s.range,
				hash: &s.object.hash,
				bytes: b,
			})
			.collect();
		let mean = merge::assemble_mean(&inputs, p)?;
		let report =
			self.stage
				.apply_gradient(&mean, &self.spec.step_options(epoch), samples as usize)?;
		let state = ContentHash(self.stage.state_hash()?);
		tracing::info!(stage = self.index, epoch, samples, grad_norm = report.grad_norm, state = %state, "AdamW step applied");
		Ok(state)
	}

	/// Upload the stage checkpoint (after the step) where the seed-picked replica was asked to.
	async fn upload_checkpoint(&mut self, put: ObjectPut) -> Result<TensorRef> {
		let bytes = self.stage.to_checkpoint()?;
		let size = bytes.len() as u64;
		let hash = self
			.io
			.put(&put.put, Bytes::from(bytes))
			.await
			.map_err(|e| MinerError::storage("stage checkpoint", e))?;
		self.metrics.bytes_up.inc_by(size);
		Ok(TensorRef { key: put.key, hash, size, shape: vec![size] })
	}
}
