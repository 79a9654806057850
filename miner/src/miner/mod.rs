//! [`Miner`]: the loop's core, one step at a time, against the [`Orchestrator`], [`ObjectIo`] and
//! [`ChainView`] traits (so tests drive it with in-memory fakes and no processes).
//!
//! States ([`Phase`]):
//! - **Unsynced** (start-up, or after a missed or disagreeing merge): read the stage's epoch `E` at the
//!   chain's best block. `E = 0`: the weights are the run seed's. Else the manifest of epoch `E − 1` names the attested
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
//!
//! One file per phase: `sync` (Unsynced), `train` (Training), `merge` (Merging); this file holds the
//! loop, its state and the dispatch between them.

use std::collections::VecDeque;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use candle_core::{Device, Tensor};
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
use crate::merge::{ErrorFeedback, ShardInput, SpanInput};
use crate::metrics::Metrics;
use crate::orchestrator::Orchestrator;
use crate::reveal::InnerLog;
use crate::transfer::ObjectIo;

mod merge;
mod sync;
mod train;

/// Test-only faults (feature `fault-injection`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Fault {
	/// Add uniform noise in `[-a, a]` to every uploaded forward activation (seeded by the sample id).
	Perturb(f32),
	/// Local mode: never answer a challenge (no state is revealed).
	IgnoreChallenges,
	/// Local mode: submit the pseudo-gradient multiplied by this factor (not the delta the reported
	/// states imply).
	ScalePseudoGradient(f32),
	/// Local mode: at the inner steps a seeded coin picks ([`perturbs_state_at`]: about half of them,
	/// the same steps on every run), apply the step's mean gradient plus uniform noise in `[-a, a]`, so
	/// the state after the step is not what the step makes of the one before. The inner-step log
	/// records the noised gradient, so the reveals match the reported hashes and only the validator's
	/// replay of the step can tell.
	PerturbState(f32),
	/// Wait this long (ms) before uploading the epoch's gradient when seated at the given stage: a slow
	/// but honest member (`slow-upload=<ms>@<stage>`).
	SlowUpload {
		/// Delay, ms.
		ms: u64,
		/// Only a miner of this stage waits.
		stage: u16,
	},
}

/// Whether [`Fault::PerturbState`] perturbs inner step `step` of `epoch`: bit 0 of the BLAKE3 of both
/// (a fixed coin, so a test knows in advance which steps are perturbed).
pub fn perturbs_state_at(epoch: u32, step: u32) -> bool {
	let mut bytes = b"iota-miner fault perturb-state".to_vec();
	bytes.extend_from_slice(&epoch.to_le_bytes());
	bytes.extend_from_slice(&step.to_le_bytes());
	ContentHash::of(&bytes).0[0] & 1 == 1
}

impl std::str::FromStr for Fault {
	type Err = String;
	/// `perturb=<amplitude>` (finite, > 0), `perturb-state=<amplitude>` (finite, > 0),
	/// `ignore-challenges`, `pseudo-gradient=<factor>` (finite, ≠ 1), `slow-upload=<ms>@<stage>`.
	fn from_str(s: &str) -> std::result::Result<Self, String> {
		let expected =
			"expected perturb=<amplitude>, perturb-state=<amplitude>, ignore-challenges, pseudo-gradient=<factor> or slow-upload=<ms>@<stage>";
		match s.split_once('=') {
			Some(("slow-upload", v)) => {
				let parsed = v
					.split_once('@')
					.and_then(|(ms, st)| Some((ms.parse::<u64>().ok()?, st.parse::<u16>().ok()?)));
				match parsed {
					Some((ms, stage)) if ms > 0 => Ok(Fault::SlowUpload { ms, stage }),
					_ => Err(format!("slow-upload {v:?} must be <ms>@<stage> with ms > 0")),
				}
			},
			Some(("perturb", a)) => match a.parse::<f32>() {
				Ok(a) if a.is_finite() && a > 0.0 => Ok(Fault::Perturb(a)),
				_ => Err(format!("perturb amplitude {a:?} must be a finite number > 0")),
			},
			Some(("perturb-state", a)) => match a.parse::<f32>() {
				Ok(a) if a.is_finite() && a > 0.0 => Ok(Fault::PerturbState(a)),
				_ => Err(format!("perturb-state amplitude {a:?} must be a finite number > 0")),
			},
			Some(("pseudo-gradient", f)) => match f.parse::<f32>() {
				Ok(f) if f.is_finite() && f != 1.0 => Ok(Fault::ScalePseudoGradient(f)),
				_ => Err(format!(
					"pseudo-gradient factor {f:?} must be a finite number other than 1"
				)),
			},
			None if s == "ignore-challenges" => Ok(Fault::IgnoreChallenges),
			_ => Err(format!("unknown fault {s:?}; {expected}")),
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
	/// Kept forward graphs (for backward without recomputation). Beyond it the oldest graph is dropped
	/// and its backward recomputes the forward from its input, at the weights the forward ran at.
	pub max_kept: usize,
	/// Local mode: most weight stashes held at once (one per inner step that kept forwards have seen
	/// pass, `P` values of the stage dtype each: [`iota_model::Stash`]). Beyond it the oldest step's
	/// stash is dropped and a backward that needs those weights rebuilds them from the inner-step log
	/// ([`crate::reveal`]), which replays the epoch's steps up to it. At least 1.
	pub max_stashes: usize,
	/// A result is dropped if less than this is left of its lease when it is ready to submit, in ms.
	pub lease_margin_ms: u64,
	/// How often the merge polls the orchestrator.
	pub merge_poll: Duration,
	/// How long to wait before retrying a resynchronisation that cannot proceed yet.
	pub resync_wait: Duration,
	/// A fault to inject (tests only; honoured only with the `fault-injection` feature).
	pub fault: Option<Fault>,
	/// Local mode: where the inner-step log that answers challenges lives ([`crate::reveal`]; `None`:
	/// `<cache_dir>/inner-s<stage>-<account>`, else a folder of its own in the system's temporary
	/// directory). The folder is the log's own: a miner of the same run keeps what an earlier process
	/// left there (to answer its challenges), any other content is removed; it goes at exit once empty.
	/// The temporary folder is emptied at start and goes at exit.
	pub reveal_dir: Option<PathBuf>,
	/// Local mode: most bytes the inner-step log may use on disk, over the epoch being trained and those
	/// waiting for their challenges ([`crate::reveal::InnerLog::begin`]).
	pub reveal_max_bytes: u64,
}

impl Default for MinerConfig {
	fn default() -> Self {
		MinerConfig {
			device: Device::Cpu,
			cache_dir: None,
			max_kept: 32,
			max_stashes: 8,
			lease_margin_ms: 250,
			merge_poll: Duration::from_millis(300),
			resync_wait: Duration::from_secs(3),
			fault: None,
			reveal_dir: None,
			reveal_max_bytes: 2 << 30,
		}
	}
}

/// A forward the miner ran whose backward may still come to it ([`Miner::kept`]): what the backward
/// needs to be the pass at the weights the forward ran at (weight stashing, docs/design.md §3), which is
/// the pass a validator recomputes at that inner step's state (§10).
pub(super) struct Kept {
	pub(super) epoch: u32,
	pub(super) sample: u64,
	/// Inner steps the replica had taken when the forward ran (local mode; sync mode's `state_step`).
	pub(super) step: u32,
	/// The graph, while it is one of the newest [`MinerConfig::max_kept`]; without it the backward
	/// recomputes the forward from its input.
	pub(super) graph: Option<Forward>,
	/// The weights of `step` once an inner step has moved them ([`Stage::stash`], taken by
	/// [`inner_step`](Miner::inner_step)). `None` while they are the current ones, or, for an earlier
	/// step, once dropped beyond [`MinerConfig::max_stashes`] (rebuilt from the inner-step log then).
	pub(super) at: Option<iota_model::Stash>,
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
	/// The state hash after the step, once applied (the step is applied once; in local mode again if
	/// the mean changes, see `applied_to`).
	pub applied: Option<ContentHash>,
	/// Hashes of the reduced shards the applied step used (local mode: other shards mean another
	/// mean, so the outer step is applied again from the epoch's start).
	pub applied_to: Vec<ContentHash>,
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

/// The merge accumulator: the sum of the parameter gradients of the accepted items of this epoch (sync
/// mode), or the merge vector prepared at submission (local mode: the sample-scaled pseudo-gradient).
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

/// Local mode (docs/design.md §3): the inner steps of one epoch.
#[derive(Debug)]
struct LocalSteps {
	/// Backward passes per inner AdamW step.
	accumulate: u32,
	/// The outer optimizer every replica applies at the merge.
	outer: iota_model::optim::OuterSgd,
	/// The stage's global weights of the epoch (what every replica held when it began), `P` values.
	global: Vec<f32>,
	/// The outer optimizer state of the epoch's start: a merge applied again (its round restarted
	/// with another mean) starts from it, as a replica applying it for the first time does.
	outer_start: Option<iota_model::optim::OuterState>,
	/// Parameter gradients of accepted items not yet applied by an inner step.
	pending: Accumulator,
	/// Samples trained into the local weights this epoch.
	samples: u32,
	/// Inner steps taken this epoch.
	steps: u32,
	/// `hashes[k]`: the inner state hash after `k` inner steps this epoch (docs/design.md §10).
	hashes: Vec<[u8; 32]>,
	/// How many of `hashes` the orchestrator has (`iota_reportInnerStep`).
	reported: usize,
	/// The orchestrator refused this epoch's states (a restart mid-epoch began another trajectory):
	/// the miner takes no work until its stage has moved to the next epoch.
	sat_out: bool,
	/// Backward passes this epoch whose kept forward saw an earlier inner step's weights.
	stale: u32,
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
	/// The forwards this miner ran in the epoch whose backward may still come to it, oldest first
	/// (local mode; in sync mode a forward past [`MinerConfig::max_kept`] is dropped whole).
	kept: VecDeque<Kept>,
	/// Local mode: the weights last rebuilt from the inner-step log ([`weights_at`](Self::weights_at)),
	/// (epoch, inner step, stash), so the backwards of one dropped stash's forwards replay once. One
	/// stash beyond [`MinerConfig::max_stashes`].
	rebuilt: Option<(u32, u32, iota_model::Stash)>,
	data: DataCache,
	acc: Accumulator,
	/// Local mode's inner steps (`None` in sync mode).
	local: Option<LocalSteps>,
	/// Local mode: the kept trajectories that rebuild any reported state ([`crate::reveal`]).
	inner_log: Option<InnerLog>,
	/// Local mode: epochs trained whose challenges are not answered yet, and when to ask next.
	reveal_due: std::collections::BTreeMap<u32, Instant>,
	/// Local mode: per epoch, how far its reveal got (states uploaded, states rebuilt and waiting), so
	/// each state is rebuilt in one replay and goes up once however many calls the reveal takes.
	revealed: std::collections::BTreeMap<u32, sync::RevealProgress>,
	/// The epoch the stage is known to be in at least (the orchestrator reported its merge committed)
	/// and since when: a resync waits up to [`CHAIN_LAG_WAIT`] for the chain's best block to show it,
	/// rather than re-enter an epoch already trained (which would drop its inner-step log).
	resync_floor: Option<(u32, Instant)>,
	/// What a lossy merge codec dropped from the submissions merged so far (error feedback), where
	/// `merge::carries_error_feedback` keeps it (empty otherwise).
	feedback: ErrorFeedback,
	/// The feedback after this epoch's submission, kept once its merge is committed.
	feedback_next: Option<ErrorFeedback>,
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

/// Longest a resync waits for the chain's best block to show a merge the orchestrator reported
/// committed; after it the chain's view is taken (the orchestrator may have reverted the commit).
pub const CHAIN_LAG_WAIT: Duration = Duration::from_secs(60);

fn bad(msg: impl Into<String>) -> MinerError {
	MinerError::BadInput(msg.into())
}

/// Stage `index` of `spec` with the seed's weights, in the spec's training mode; `init` is the
/// spec's initial checkpoint and its state hash, for a run that continues an existing model.
fn fresh_stage(
	spec: &RunSpec,
	index: u16,
	device: &Device,
	init: Option<(&[u8], &[u8; 32])>,
) -> Result<Stage> {
	Ok(Stage::initial(&spec.model, usize::from(index), spec.seed, &spec.training, device, init)?)
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
		let stage = fresh_stage(&spec, index, &cfg.device, None)?;
		let local = match spec.training {
			iota_rpc::types::Training::Sync => None,
			iota_rpc::types::Training::Local { accumulate, outer_lr, outer_momentum } => {
				Some(LocalSteps {
					accumulate,
					outer: iota_model::optim::OuterSgd { lr: outer_lr, momentum: outer_momentum },
					global: Vec::new(),
					outer_start: None,
					pending: Accumulator::default(),
					samples: 0,
					steps: 0,
					stale: 0,
					hashes: Vec::new(),
					reported: 0,
					sat_out: false,
				})
			},
		};
		let me = orch.account();
		let inner_log = match &local {
			None => None,
			Some(_) => {
				let named = cfg.reveal_dir.clone().or_else(|| {
					cfg.cache_dir.as_ref().map(|c| c.join(format!("inner-s{index}-{me}")))
				});
				match named {
					// A folder of the miner's own: kept across a crash for a restart in the same run.
					Some(dir) => Some(InnerLog::open(dir, cfg.reveal_max_bytes, &spec.run)?),
					None => {
						// One temporary folder per miner instance, even for several in one process,
						// gone with it (a restarted process would not find it again).
						static NEXT: std::sync::atomic::AtomicU64 =
							std::sync::atomic::AtomicU64::new(0);
						let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
						let dir = std::env::temp_dir()
							.join(format!("iota-inner-{}-{n}-s{index}", std::process::id()));
						Some((InnerLog::new(dir, cfg.reveal_max_bytes)?, Vec::new()))
					},
				}
			},
		};
		// Epochs an earlier process of this miner kept (it crashed or was restarted): their challenges
		// are answered from the log, the one it was training included.
		let (inner_log, reveal_due) = match inner_log {
			Some((log, found)) => {
				let now = Instant::now();
				(Some(log), found.into_iter().map(|e| (e, now)).collect())
			},
			None => (None, Default::default()),
		};
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
			rebuilt: None,
			data: DataCache::new(cfg.cache_dir.clone()),
			acc: Accumulator::default(),
			local,
			inner_log,
			reveal_due,
			revealed: Default::default(),
			resync_floor: None,
			feedback: ErrorFeedback::default(),
			feedback_next: None,
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
	/// The orchestrator forfeited this epoch's accepted passes (the miner was found silent; other
	/// miners recompute them), so what they trained must not reach the merge twice: drops the
	/// gradient sum (sync mode), or the local progress (local mode: the weights go back to the
	/// epoch's global weights, with no trained samples and no pending gradient), and the error
	/// feedback of a dropped submission. `when` names the phase for the log. The caller follows the
	/// stage's merge as a replica without samples.
	///
	/// # Errors
	/// Restoring the global weights fails only on a parameter count that differs from the stage's.
	pub(super) fn drop_forfeited(&mut self, when: &'static str) -> Result<()> {
		let samples = self.accumulated();
		if samples > 0 {
			tracing::warn!(
				stage = self.index,
				epoch = self.epoch,
				samples,
				when,
				"accepted passes forfeited after a silence; dropping the epoch's gradient"
			);
		}
		self.acc.clear();
		self.feedback_next = None;
		if let Some(l) = self.local.as_mut() {
			if l.samples > 0 || l.pending.count > 0 {
				self.stage.set_flat_params(&l.global)?;
			}
			l.samples = 0;
			l.pending.clear();
		}
		Ok(())
	}

	/// Samples accumulated for this epoch's merge (local mode: trained into the local weights, or
	/// pending for the next inner step).
	pub fn accumulated(&self) -> u32 {
		match &self.local {
			Some(l) if self.acc.count == 0 => l.samples + l.pending.count,
			_ => self.acc.count,
		}
	}

	/// Local mode: inner steps taken this epoch (`None` in sync mode).
	pub fn inner_steps(&self) -> Option<u32> {
		self.local.as_ref().map(|l| l.steps)
	}

	/// Local mode: the replica's states after `k` inner steps of `epoch` for each `k` of `ks` (ones the
	/// inner-step log still keeps), rebuilt from the log in one replay; the hash of state `k` is the
	/// one reported for step `k`.
	///
	/// # Errors
	/// [`MinerError::BadInput`] in sync mode or for a state not kept
	/// ([`crate::reveal::InnerLog::states_at`]).
	pub fn inner_states_at(
		&self,
		epoch: u32,
		ks: &std::collections::BTreeSet<u32>,
	) -> Result<std::collections::BTreeMap<u32, iota_protocol::optim::InnerState>> {
		let log = self.inner_log.as_ref().ok_or_else(|| bad("sync mode keeps no inner steps"))?;
		log.states_at(
			epoch,
			ks,
			self.stage.decay_mask(),
			&self.spec.step_options(epoch),
			self.stage.total_params(),
		)
	}

	/// Local mode: the weights of state `step` of `epoch` as the stage's passes read them, rebuilt from
	/// the inner-step log ([`inner_states_at`](Self::inner_states_at)) for a backward whose forward ran
	/// there after its stash was dropped ([`MinerConfig::max_stashes`]). Replays `step` inner steps, once
	/// for all the backwards of that step (the last rebuild is kept), and checks the rebuilt state
	/// against the hash the miner reported for it (`iota_miner_weights_rebuilt_total` counts rebuilds).
	///
	/// # Errors
	/// As [`inner_states_at`](Self::inner_states_at) (the log does not keep the state: bounded by
	/// `reveal_max_bytes`, an inner step past the bound is not kept and nor is any later one of its
	/// epoch); [`MinerError::BadInput`] when the rebuilt state does not hash to the reported one.
	pub(super) fn weights_at(&mut self, epoch: u32, step: u32) -> Result<iota_model::Stash> {
		if let Some((e, s, at)) = &self.rebuilt {
			if (*e, *s) == (epoch, step) {
				return Ok(at.clone());
			}
		}
		let states = self.inner_states_at(epoch, &std::collections::BTreeSet::from([step]))?;
		let state = states.get(&step).ok_or_else(|| {
			bad(format!("inner-step log: state {step} of epoch {epoch} not rebuilt"))
		})?;
		let reported = self
			.local
			.as_ref()
			.filter(|_| epoch == self.epoch)
			.and_then(|l| l.hashes.get(step as usize));
		if reported != Some(&state.hash()) {
			return Err(bad(format!(
				"inner-step log: state {step} of epoch {epoch} does not rebuild to the hash reported for it"
			)));
		}
		let at = self.stage.stash_of(&state.weights)?;
		self.metrics.weights_rebuilt.inc();
		tracing::debug!(
			stage = self.index,
			epoch,
			step,
			"weights of an earlier inner step rebuilt from the log"
		);
		self.rebuilt = Some((epoch, step, at.clone()));
		Ok(at)
	}

	/// Local mode: forwards kept now: (all of them, those with their graph, distinct weight stashes
	/// held). Diagnostics and tests of the bounds [`MinerConfig::max_kept`] and
	/// [`MinerConfig::max_stashes`].
	pub fn kept_forwards(&self) -> (usize, usize, usize) {
		let graphs = self.kept.iter().filter(|k| k.graph.is_some()).count();
		let stashes: std::collections::BTreeSet<u32> =
			self.kept.iter().filter(|k| k.at.is_some()).map(|k| k.step).collect();
		(self.kept.len(), graphs, stashes.len())
	}

	/// One step of the loop (module docs). Item-level failures release the item's lease and are
	/// returned, so the caller logs and counts them and goes on.
	///
	/// # Errors
	/// Any [`MinerError`]; none leaves the stage with unverified weights.
	pub async fn step(&mut self) -> Result<Outcome> {
		// Local mode: challenges of earlier epochs are answered whatever this replica is doing now (a
		// short epoch may spend the whole reveal window merging or resynchronising).
		self.answer_challenges().await;
		match self.phase.clone() {
			Phase::Unsynced => self.resync().await,
			Phase::Training => self.train_step().await,
			Phase::Merging(m) => self.merge_step(m).await,
		}
	}

	/// Run until `shutdown` turns true, then hand back a lease still held. Errors are logged, counted
	/// (`iota_miner_errors_total{kind}`) and retried with exponential backoff (250 ms to 10 s).
	///
	/// # Errors
	/// The orchestrator's `SessionSuperseded`: a newer process of this miner's account has replaced
	/// this one (it restarted elsewhere, or runs twice), so this one gets no more work and stops.
	pub async fn run(&mut self, mut shutdown: tokio::sync::watch::Receiver<bool>) -> Result<()> {
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
				Some(Err(e)) if e.code() == Some(ErrorCode::SessionSuperseded) => {
					self.record_error(&e);
					self.shutdown().await;
					return Err(e);
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
		Ok(())
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
}
