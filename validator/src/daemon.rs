//! The validator daemon (docs/design.md §3 steps 7–8): watch the chain for completed epochs, audit each one
//! through the orchestrator, and put verdicts, weights and finalizations on chain.
//!
//! Per completed epoch `e` (`EpochCompletedAt(e)` set, oldest first):
//!
//! 1. `EpochSeeds(e)` from the chain; `iota_epochRecord(e)` from the orchestrator; the pathway log it
//!    names (hash-checked, [`PathwayLog::from_slice`], run/epoch/stage count checked against the spec).
//! 2. Sync mode: spot-checks drawn with [`spot_check::select`] and run with [`spot_check::Checker`];
//!    stage weights of `e` from the chain's manifest of `e − 1` ([`ChainWeights`]).
//!    Local mode (docs/design.md §10): with the challenge seed of `e` (`IotaClient::challenge_seed`),
//!    every challenged inner step ([`challenged_steps`]) is judged from its revealed states
//!    ([`Checker::check_inner_step`]); until the reveal deadline
//!    ([`reveal_deadline`]) a missing state makes the epoch wait (retried on later ticks, judged steps
//!    kept), after it the state's miner fails. Then spot-checks of passes at the revealed states they
//!    ran at ([`revealed_spot_checks`]) and each submitted pseudo-gradient against the miner's revealed
//!    last state ([`Checker::check_pseudo_gradient`]).
//! 3. The shard audit ([`shard_audit::audit_epoch`]) against the chain's manifests of `e`.
//! 4. Per judged miner one evidence bundle, PUT through `iota_presignPut`
//!    (`keys::evidence(run, validator, e, miner)`), for `submit_spot_check(e, miner, verdict, BLAKE3)`.
//!    A `Pass` needs a conclusive check of the miner's own work (spot-check, inner step or
//!    pseudo-gradient; shard audits alone give no verdict, counted as withheld); every bundle is stored
//!    before anything of the epoch goes on chain, and a failed upload fails the epoch for this tick.
//! 5. CLASP ([`clasp::score_epoch`]) with the spot-check statuses, the weight vector
//!    ([`weights::weight_vector`]) over the chain's registered miners, committed with
//!    `commit_weights(e, commitment)` (commit-reveal, [`iota_primitives::weights`]; the vector and its
//!    salt are stored first, [`CommitStore`]). Weights come only from conclusive data: an epoch with
//!    completed samples and no conclusive check of anyone's work sends nothing and is judged again on
//!    later ticks through the first half of its scoring window, then let go (`withheld`
//!    `no_conclusive_check`). The commitment and the verdicts go on chain as one `batch_all` waiting for
//!    inclusion (call by call if the chain refuses the batch); a `RateLimited` commitment is retried on
//!    later ticks until the scoring window closes.
//! 6. Independently, in its own task on the same period ([`Revealer`], so judging never delays it): every
//!    stored commitment whose reveal window is open at the best block is revealed with `reveal_weights`
//!    (once it matches the chain's commitment). Each tick: when the next epoch to finalize has closed
//!    windows and nobody finalized it, `finalize_epoch`.
//!
//! Every error is logged with `tracing`, counted in [`Metrics`] by kind, and retried on a later tick
//! (an epoch is marked done only when its audit ran); an epoch whose scoring window closed is skipped,
//! and so is one that a validator behind the chain would not finish judging before it can be finalized,
//! by the time its last judged epoch took, while a later epoch is complete, or whose weights it would
//! not commit in time, or that would make it late for its own next turn, while it is another
//! validator's turn ([`let_go`], [`turns_until`]).
//! Bad objects, logs and manifests never become verdicts (see [`spot_check`] and [`shard_audit`]).

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use bytes::Bytes;
use iota_chain::{calls, IotaClient, Signer, Wait};
use iota_primitives::{commit_window_end, finalizable_at, ContentHash, Verdict, WeightsWindow};
use iota_rpc::{AccountId, PathwayLog, RunSpec, SignedClient};
use iota_storage::keys::{self, Id};
use iota_storage::{PresignedHttp, RetryPolicy};

use iota_protocol::selection::reveal_deadline;
use iota_rpc::ObjectEntry;

use crate::clasp::{self, CheckStatus};
use crate::commit_reveal::{window_of, CommitStore, Revealer, SharedStore};
use crate::inner_step::{
	challenged_steps, not_revealed, reveal_key, revealed_spot_checks, RevealedStates,
	RevealedWeights, StepOutcome, StepTarget,
};
use crate::metrics::Metrics;
use crate::objects::{CachedObjects, FetchError, ObjectCache, Objects, OrchestratorObjects};
use crate::shard_audit;
use crate::spot_check::{
	self, CheckOutcome, CheckTarget, CheckTimes, Checker, EvidenceBundle, Findings, Inconclusive,
	WeightsError, WeightsRef, WeightsSource,
};
use crate::weights;

/// Daemon settings (the CLI's flags).
#[derive(Clone, Debug)]
pub struct Config {
	/// Node WebSocket URL.
	pub node_url: String,
	/// Orchestrator WebSocket URL.
	pub orchestrator_url: String,
	/// Stake to register with when not registered (`None`: the run config's minimum).
	pub stake: Option<u128>,
	/// Forward checks per (stage, miner) and epoch.
	pub forward_checks: usize,
	/// Backward checks per (stage, miner) and epoch.
	pub backward_checks: usize,
	/// Weights version key (`None`: the run config's `weights_version`).
	pub weights_version: Option<u64>,
	/// Whether to call `finalize_epoch` when nobody did.
	pub finalize: bool,
	/// First epoch to process (`None`: the chain's next epoch to finalize).
	pub start_epoch: Option<u32>,
	/// Wait between ticks.
	pub poll: Duration,
	/// Per-request timeout for the orchestrator and presigned transfers.
	pub request_timeout: Duration,
	/// Largest object downloaded, in bytes.
	pub max_object_bytes: u64,
	/// Memory for objects read recently ([`crate::objects::ObjectCache`]), in bytes.
	pub object_cache_bytes: u64,
	/// Folder of the validator's own state: the weight vectors and salts it committed to and must
	/// still reveal ([`CommitStore`], a subfolder per account).
	pub state_dir: PathBuf,
	/// Device the recomputations run on ([`Checker::with_device`]); the CPU unless a build with the
	/// `cuda` feature is given a CUDA device.
	pub device: candle_core::Device,
}

/// Why a step of the daemon failed (each is logged, counted by [`DaemonError::kind`] and retried).
#[derive(Debug, thiserror::Error)]
pub enum DaemonError {
	/// The chain refused a call or could not be read.
	#[error("chain: {0}")]
	Chain(#[from] iota_chain::Error),
	/// The orchestrator could not be reached or refused.
	#[error("orchestrator: {0}")]
	Orchestrator(String),
	/// The object store failed.
	#[error("object store: {0}")]
	Store(String),
	/// The run spec is missing or does not match the chain.
	#[error("run spec: {0}")]
	Spec(String),
	/// The pathway log is missing, garbage or malformed.
	#[error("pathway log: {0}")]
	PathwayLog(String),
	/// The chain holds no run config, seed or other state the step needs yet.
	#[error("chain state: {0}")]
	NotReady(String),
	/// Local setup failed (HTTP client, metrics).
	#[error("setup: {0}")]
	Setup(String),
	/// Local mode: challenged states are not revealed yet and the reveal deadline has not passed.
	#[error("reveals pending: {0}")]
	RevealsPending(String),
	/// The epoch has completed samples but no conclusive check of anyone's work (every check
	/// inconclusive: objects unreachable, an outage): no weights from it yet; judged again on later
	/// ticks through the first half of its scoring window.
	#[error("no conclusive check: {0}")]
	Inconclusive(String),
}

impl DaemonError {
	/// Metrics label.
	pub fn kind(&self) -> &'static str {
		match self {
			DaemonError::Chain(_) | DaemonError::NotReady(_) => "chain",
			DaemonError::Orchestrator(_) => "orchestrator",
			DaemonError::Store(_) => "store",
			DaemonError::Spec(_) => "spec",
			DaemonError::PathwayLog(_) => "pathway_log",
			DaemonError::Setup(_) => "setup",
			DaemonError::RevealsPending(_) => "reveals_pending",
			DaemonError::Inconclusive(_) => "inconclusive",
		}
	}
}

/// Stage weights from the chain's merge manifests.
pub struct ChainWeights<'a> {
	/// The chain.
	pub chain: &'a IotaClient,
}

#[async_trait]
impl WeightsSource for ChainWeights<'_> {
	async fn weights(&self, epoch: u32, stage: u16) -> Result<WeightsRef, WeightsError> {
		let Some(prev) = iota_protocol::plan::weights_merge_epoch(epoch) else {
			return Ok(WeightsRef::Init);
		};
		let m = self
			.chain
			.merge_manifest(prev, stage)
			.await
			.map_err(|e| WeightsError::Unavailable(e.to_string()))?
			.ok_or_else(|| WeightsError::Missing {
				epoch,
				stage,
				reason: format!("no manifest for epoch {prev}"),
			})?;
		let ck = m.checkpoint.ok_or_else(|| WeightsError::Missing {
			epoch,
			stage,
			reason: format!("the manifest of epoch {prev} names no checkpoint"),
		})?;
		let key = String::from_utf8(ck.key.0).map_err(|_| WeightsError::ManifestMismatch {
			epoch,
			stage,
			reason: "checkpoint key is not UTF-8".into(),
		})?;
		Ok(WeightsRef::Checkpoint { key, hash: ck.content_hash, state_hash: m.state_hash })
	}
}

/// What one epoch's audit produced (for logs and tests).
#[derive(Debug, Default)]
pub struct EpochSummary {
	/// Verdicts submitted (miner, verdict).
	pub verdicts: Vec<(AccountId, Verdict)>,
	/// The weight vector built (submitted or pending).
	pub weights: Vec<(AccountId, u16)>,
}

/// The running daemon.
pub struct Daemon {
	cfg: Config,
	signer: Signer,
	chain: IotaClient,
	rpc: Option<SignedClient>,
	http: PresignedHttp,
	checker: Option<Checker>,
	metrics: Metrics,
	next_epoch: Option<u32>,
	pending_weights: BTreeMap<u32, Vec<(AccountId, u16)>>,
	/// Committed vectors still to reveal, with their salts (on disk), shared with the [`Revealer`].
	commits: SharedStore,
	/// Local mode: inner-step outcomes of the epoch being processed (epoch, stage, miner, step), kept
	/// while its process is retried for reveals still to come, so no step is recomputed.
	inner_done: BTreeMap<(u32, u16, AccountId, u32), StepOutcome>,
	/// Objects read recently (revealed inner states are read by several checks).
	cache: ObjectCache,
	/// Finalized blocks each of the last [`JUDGE_SAMPLES`] epochs judged took, from the start of the
	/// call that judged it to its end, oldest first ([`judge_estimate`] for [`let_go`], which skips
	/// epochs it would not finish in time).
	judge_blocks: Vec<u32>,
	/// The last epoch whose turn was read, and that turn ([`Daemon::my_turn`]).
	turn: Option<(u32, Turn)>,
}

/// Why a validator lets an epoch go unjudged ([`let_go`]); the `reason` label of
/// `iota_validator_verdicts_withheld_total`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LetGo {
	/// A later epoch is complete and, by the blocks the last judged epoch took, judging this one
	/// would end at or after the block it can be finalized at: nothing of it would count.
	Behind,
	/// Another validator's turn ([`turns_until`]), and judging it would end at or after its commit
	/// window (only verdicts would count), or push this validator's own next turn past that turn's
	/// commit window ([`Turn::Others`]). It is left to the validator whose turn it is.
	OffTurn,
}

impl LetGo {
	/// The metric label.
	pub fn reason(self) -> &'static str {
		match self {
			LetGo::Behind => "behind",
			LetGo::OffTurn => "off_turn",
		}
	}
}

/// The blocks that bound what judging an epoch completed at `completed_at` can still earn: weights
/// count until `commit_closes` (the end of its scoring window, exclusive), verdicts (and the slashing
/// of a `Fail`) until `closes` ([`finalizable_at`]: the end of its reveal window).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EpochDeadlines {
	/// First block outside the commit window (`completed_at + scoring_window`).
	pub commit_closes: u32,
	/// The block the epoch can be finalized at (`commit_closes + reveal_window`).
	pub closes: u32,
}

impl EpochDeadlines {
	/// The deadlines of an epoch completed at block `completed_at`, with the run's windows (blocks);
	/// saturating at `u32::MAX`.
	pub fn of(completed_at: u32, scoring_window: u32, reveal_window: u32) -> Self {
		let to_u32 = |b: u64| u32::try_from(b).unwrap_or(u32::MAX);
		Self {
			commit_closes: to_u32(commit_window_end(completed_at.into(), scoring_window.into())),
			closes: to_u32(finalizable_at(
				completed_at.into(),
				scoring_window.into(),
				reveal_window.into(),
			)),
		}
	}
}

/// How many epochs after `epoch` `me`'s next turn is, among the validators that take turns
/// (`active`: the active validators that commit weights, [`takes_turns`], read at the block the epoch
/// completed at): sorted by account they take the epochs in turn, the one of rank `epoch mod n`; `0`
/// when `epoch` is `me`'s turn. A validator not in the set has every turn (always `0`), and so has the
/// only one. Every validator reads the set at that same finalized block, so the turns of its members
/// partition the epochs.
pub fn turns_until<A: Ord>(epoch: u32, me: &A, active: &[A]) -> u32 {
	if !active.contains(me) {
		return 0;
	}
	let n = active.len() as u64;
	let rank = active.iter().filter(|a| *a < me).count() as u64;
	// (rank − epoch) mod n, below n ≤ the number of validators.
	u32::try_from((rank + n - u64::from(epoch) % n) % n).unwrap_or(0)
}

/// Whose turn an epoch is, for [`let_go`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Turn {
	/// This validator's ([`turns_until`] is 0).
	Mine,
	/// Another validator's. `next_commit_closes`: the estimated end of the commit window of this
	/// validator's next turn ([`Turn::of`]), when the epochs' length is known.
	Others {
		/// Estimated first block outside the commit window of this validator's next turn.
		next_commit_closes: Option<u32>,
	},
}

impl Turn {
	/// The turn at an epoch completed at block `done_at`, `turns_until` epochs before this
	/// validator's next turn ([`turns_until`]), with the last epoch's length in blocks (`epoch_blocks`:
	/// `done_at` minus the block the previous epoch completed at; `None` for the first epoch): that
	/// next turn is estimated to complete `turns_until · epoch_blocks` blocks after `done_at`, and its
	/// commit window to close `scoring_window` blocks later (saturating).
	pub fn of(
		turns_until: u32,
		done_at: u32,
		epoch_blocks: Option<u32>,
		scoring_window: u32,
	) -> Self {
		if turns_until == 0 {
			return Turn::Mine;
		}
		Turn::Others {
			next_commit_closes: epoch_blocks.map(|t| {
				let completes = done_at.saturating_add(turns_until.saturating_mul(t));
				u32::try_from(commit_window_end(completes.into(), scoring_window.into()))
					.unwrap_or(u32::MAX)
			}),
		}
	}
}

/// Whether a validator takes turns at an epoch ([`turns_until`]): its last accepted
/// `commit_weights` (`last_weights_at`, read at the block `now` the epoch completed at) is at most two
/// scoring-plus-reveal windows before `now`. A validator that never committed is left out, and one
/// that stopped is left out two windows later (240 blocks with windows of 90 + 30, 540 with the
/// devnet's 240 + 30; until then the others, when they lag, let its turns go, see [`let_go`]). One
/// that commits on its turns (every `n` epochs) stays in while `n` epochs and its judging take less
/// than that; one left out judges every epoch, and so do the others when it is the only other one.
pub fn takes_turns(
	last_weights_at: Option<u32>,
	now: u32,
	scoring_window: u32,
	reveal_window: u32,
) -> bool {
	let window = scoring_window.saturating_add(reveal_window).saturating_mul(2);
	last_weights_at.is_some_and(|at| now.saturating_sub(at) <= window)
}

/// How many recently judged epochs' times [`judge_estimate`] looks at.
pub const JUDGE_SAMPLES: usize = 3;

/// The blocks judging an epoch is expected to take, from the times the last epochs judged took
/// (`recent`, blocks, up to [`JUDGE_SAMPLES`]): their median, the lower one of two, so that one slow
/// epoch (a resync, a checker that was just loaded) does not make the validator let epochs go.
/// `None` before any epoch was judged.
pub fn judge_estimate(recent: &[u32]) -> Option<u32> {
	let mut sorted = recent.to_vec();
	sorted.sort_unstable();
	sorted.get(sorted.len().saturating_sub(1) / 2).copied()
}

/// Whether a validator that lags the chain should let an epoch go unjudged, from finalized block
/// `now`, the epoch's `deadlines`, the blocks judging an epoch takes (`judge_blocks` = `J`,
/// [`judge_estimate`]; no estimate yet: judge it), whether a later
/// epoch is complete (`newer_completed`) and whose turn it is (`turn`, [`Turn::of`]).
///
/// - [`LetGo::Behind`]: a later epoch is complete (the newest is never let go for this) and judging
///   would end at or after `deadlines.closes`. Started anyway, such an epoch ends "finalized while
///   judged" with nothing sent, and the epochs after it start late too: on 2 cores beside 6 miners the
///   devnet's validators took ~130 s per local-mode epoch against ~90 s of training per epoch.
/// - [`LetGo::OffTurn`]: another validator's turn, and judging would end at or after
///   `deadlines.commit_closes` (verdicts but no weights), or would leave less than `J` blocks before
///   the commit window of this validator's own next turn closes (`now + 2J ≥ next_commit_closes`).
///   The epoch is left to the validator whose turn it is (which may itself lag and let it go, or be
///   down since its last commitment); this one goes on to the next epoch instead of adding to its lag,
///   even when no later epoch is complete yet.
///
/// Why turns: validators of equal speed fall behind at the same rate, and with `Behind` alone they
/// let the same epochs go; the 10-epoch devnets of 7 Dec finalized epoch 3 with no weights from
/// either of their two validators (1000 tokens unallocated). Letting off-turn epochs go before the
/// lag reaches the validator's own turns staggers them, so each judges its turns in time while it
/// takes less than `n` epochs to judge one: in the model of the test
/// `validators_slower_than_the_epochs_keep_their_turns_paid`, see there for the figures. The price:
/// an off-turn epoch gets this validator's verdicts no more, so its `Fail` verdicts come from the
/// validator whose turn it is alone (the devnet's slash quorum of half the stake is reached by one of
/// two equal validators).
pub fn let_go(
	now: u32,
	deadlines: EpochDeadlines,
	judge_blocks: Option<u32>,
	newer_completed: bool,
	turn: Turn,
) -> Option<LetGo> {
	let judge = judge_blocks?;
	let end = now.saturating_add(judge);
	if newer_completed && end >= deadlines.closes {
		return Some(LetGo::Behind);
	}
	match turn {
		Turn::Mine => None,
		Turn::Others { next_commit_closes } => {
			let own_late = next_commit_closes.is_some_and(|c| end.saturating_add(judge) >= c);
			(end >= deadlines.commit_closes || own_late).then_some(LetGo::OffTurn)
		},
	}
}

impl Daemon {
	/// Connects to the chain and registers the validator if it is not (errors are returned: the binary
	/// retries until the node answers).
	///
	/// # Errors
	/// [`DaemonError::Chain`], [`DaemonError::NotReady`] (no run config), [`DaemonError::Setup`] (also
	/// an unreadable commitment file in `state_dir`).
	pub async fn start(cfg: Config, signer: Signer, metrics: Metrics) -> Result<Self, DaemonError> {
		let me = signer.account_id();
		let commits = CommitStore::open(&cfg.state_dir, &me)
			.map_err(|e| DaemonError::Setup(format!("weight commitments: {e}")))?;
		if !commits.pending().is_empty() {
			let epochs: Vec<u32> = commits.pending().iter().map(|p| p.epoch).collect();
			tracing::info!(?epochs, file = %commits.path().display(), "committed weights to reveal");
		}
		let chain = IotaClient::connect(&cfg.node_url).await?;
		if chain.validator(&me).await?.is_none() {
			let run = chain
				.run_config()
				.await?
				.ok_or_else(|| DaemonError::NotReady("no run config on chain".into()))?;
			let stake = cfg.stake.unwrap_or(run.min_validator_stake);
			chain.register_validator(&signer, stake).await?;
			tracing::info!(account = %me, stake, "registered as validator");
		} else {
			tracing::info!(account = %me, "already a validator");
		}
		let http =
			PresignedHttp::new(RetryPolicy::default(), cfg.request_timeout, cfg.max_object_bytes)
				.map_err(|e| DaemonError::Setup(e.to_string()))?;
		let cache = ObjectCache::new(cfg.object_cache_bytes);
		Ok(Self {
			cfg,
			signer,
			chain,
			rpc: None,
			http,
			checker: None,
			metrics,
			next_epoch: None,
			pending_weights: BTreeMap::new(),
			inner_done: BTreeMap::new(),
			commits: SharedStore::new(commits),
			cache,
			judge_blocks: Vec::new(),
			turn: None,
		})
	}

	/// Runs forever: one [`tick`](Self::tick) every `poll`, and beside it the [`Revealer`] task on the
	/// same period (started again, counted as a `reveal_task` error, should it ever end); errors are
	/// logged and counted.
	pub async fn run(mut self) {
		let mut revealer = self.spawn_revealer();
		loop {
			if revealer.is_finished() {
				self.metrics.error("reveal_task");
				tracing::error!("the reveal task ended; starting it again");
				revealer = self.spawn_revealer();
			}
			if let Err(e) = self.tick().await {
				self.metrics.error(e.kind());
				tracing::warn!(error = %e, kind = e.kind(), "tick failed; retrying");
				if matches!(e, DaemonError::Orchestrator(_)) {
					self.rpc = None;
				}
			}
			tokio::time::sleep(self.cfg.poll).await;
		}
	}

	fn spawn_revealer(&self) -> tokio::task::JoinHandle<()> {
		let revealer = Revealer::new(
			self.chain.clone(),
			self.signer.clone(),
			self.commits.clone(),
			self.metrics.clone(),
		);
		tokio::spawn(revealer.run(self.cfg.poll))
	}

	async fn rpc(&mut self) -> Result<&SignedClient, DaemonError> {
		if self.rpc.as_ref().is_none_or(|c| !c.is_connected()) {
			let c = SignedClient::connect(
				&self.cfg.orchestrator_url,
				self.signer.keypair().clone(),
				self.cfg.request_timeout,
			)
			.await
			.map_err(|e| {
				DaemonError::Orchestrator(format!("connect {}: {e}", self.cfg.orchestrator_url))
			})?;
			self.rpc = Some(c);
		}
		self.rpc
			.as_ref()
			.ok_or_else(|| DaemonError::Orchestrator("not connected".into()))
	}

	/// Fetches the run spec and checks it against the chain's `model_hash` (once).
	async fn ensure_checker(&mut self) -> Result<(), DaemonError> {
		if self.checker.is_some() {
			return Ok(());
		}
		let run = self
			.chain
			.run_config()
			.await?
			.ok_or_else(|| DaemonError::NotReady("no run config on chain".into()))?;
		let text = self
			.rpc()
			.await?
			.run_spec()
			.await
			.map_err(|e| DaemonError::Orchestrator(format!("iota_runSpec: {e}")))?;
		let spec = RunSpec::from_bytes_checked(text.json.as_bytes(), &run.model_hash)
			.map_err(|e| DaemonError::Spec(e.to_string()))?;
		if spec.model.n_stages() != usize::from(run.stages) {
			return Err(DaemonError::Spec(format!(
				"the spec's model has {} stages, the chain's run {}",
				spec.model.n_stages(),
				run.stages
			)));
		}
		self.checker = Some(
			Checker::new(spec)
				.map_err(|e| DaemonError::Spec(e.to_string()))?
				.with_device(self.cfg.device.clone()),
		);
		Ok(())
	}

	/// One pass: process completed epochs in order, retry pending weights, finalize if due.
	///
	/// # Errors
	/// The first error of the pass (later steps run on the next tick).
	pub async fn tick(&mut self) -> Result<(), DaemonError> {
		let run = self
			.chain
			.run_config()
			.await?
			.ok_or_else(|| DaemonError::NotReady("no run config on chain".into()))?;
		let now = self.chain.finalized_number().await?;
		if self.next_epoch.is_none() {
			self.next_epoch = Some(match self.cfg.start_epoch {
				Some(e) => e,
				None => self.chain.next_epoch_to_finalize().await?,
			});
		}
		self.retry_pending_weights(&run, now).await;
		while let Some(epoch) = self.next_epoch {
			let Some(done_at) = self.chain.epoch_completed_at(epoch).await? else { break };
			// Epochs judged earlier in this pass took blocks: judge by the chain's block now.
			let now = self.chain.finalized_number().await?.max(now);
			if window_of(&run, done_at, now) != WeightsWindow::Commit {
				tracing::info!(
					epoch,
					"scoring window closed before this validator processed it; skipping"
				);
				self.next_epoch = Some(epoch + 1);
				continue;
			}
			// Verdicts (a Fail slashes) count until the epoch can be finalized; weights only in the
			// commit window, which the check above already asks for at the start.
			let deadlines = EpochDeadlines::of(done_at, run.scoring_window, run.reveal_window);
			let judge = judge_estimate(&self.judge_blocks);
			let newer_completed =
				judge.is_some() && self.chain.epoch_completed_at(epoch + 1).await?.is_some();
			// An epoch begun on an earlier tick (steps judged while reveals were missing) is finished.
			let begun = self.inner_done.keys().any(|k| k.0 == epoch);
			let turn = if begun { Turn::Mine } else { self.my_turn(epoch, done_at, &run).await };
			if let Some(why) = let_go(now, deadlines, judge, newer_completed, turn) {
				self.metrics.withheld.with_label_values(&[why.reason()]).inc();
				let next_commit_closes = match turn {
					Turn::Others { next_commit_closes } => next_commit_closes,
					Turn::Mine => None,
				};
				tracing::warn!(
					epoch,
					now,
					commit_closes = deadlines.commit_closes,
					finalizable_at = deadlines.closes,
					judge_blocks = judge,
					next_commit_closes,
					reason = why.reason(),
					"{}",
					match why {
						LetGo::Behind =>
							"behind: this epoch would be finalized before it is judged; judging the next one",
						LetGo::OffTurn =>
							"another validator's turn, and judging it would miss its weights or the commit \
							 window of this validator's own next turn; judging the next one",
					}
				);
				self.inner_done.retain(|k, _| k.0 > epoch);
				self.next_epoch = Some(epoch + 1);
				continue;
			}
			let now = if self.checker.is_none() {
				// Loading the checker (the model, once) is not part of judging an epoch.
				self.ensure_checker().await?;
				self.chain.finalized_number().await?.max(now)
			} else {
				now
			};
			// The pathway log is written just after the head's merge (the epoch's last): wait for it during
			// the first half of the scoring window, then audit without it.
			let wait_for_log = now < done_at.saturating_add(run.scoring_window / 2);
			// Local mode: challenged miners reveal until the deadline; a state missing then fails.
			let reveals_closed = now >= reveal_deadline(done_at, run.scoring_window);
			let summary = match self.process_epoch(epoch, &run, wait_for_log, reveals_closed).await
			{
				Ok(summary) => {
					// Best effort: the epoch is judged and its verdicts sent whatever this read says.
					match self.chain.finalized_number().await {
						Ok(end) => {
							if self.judge_blocks.len() == JUDGE_SAMPLES {
								self.judge_blocks.remove(0);
							}
							self.judge_blocks.push(end.saturating_sub(now));
						},
						Err(e) => {
							tracing::warn!(epoch, error = %e, "cannot read the block the judging ended at")
						},
					}
					summary
				},
				// Judged again on a later tick; finalization below still runs meanwhile.
				Err(e @ DaemonError::Inconclusive(_)) => {
					self.metrics.error(e.kind());
					tracing::warn!(epoch, error = %e, "epoch not judged yet");
					break;
				},
				Err(e) => return Err(e),
			};
			tracing::info!(
				epoch,
				verdicts = summary.verdicts.len(),
				weights = summary.weights.len(),
				"epoch processed"
			);
			self.metrics.last_epoch.set(i64::from(epoch));
			if let Some(c) = self.checker.as_mut() {
				c.forget_before(epoch);
			}
			self.inner_done.retain(|k, _| k.0 > epoch);
			self.next_epoch = Some(epoch + 1);
		}
		if self.cfg.finalize {
			self.finalize_if_due(&run, now).await?;
		}
		Ok(())
	}

	/// Whose turn `epoch` (completed at block `done_at`, finalized) is ([`Turn::of`]): this validator's
	/// next turn ([`Daemon::my_turns_until`]) and, when that is another epoch, the last epoch's length
	/// for when it completes. Remembered for the epoch once every read worked, so an epoch let go
	/// or judged over several ticks reads the chain once; a failed read of the previous epoch's
	/// completion leaves the estimate out (the tick goes on) and is tried again on the next tick.
	async fn my_turn(&mut self, epoch: u32, done_at: u32, run: &iota_chain::RunConfig) -> Turn {
		if let Some((e, turn)) = self.turn {
			if e == epoch {
				return turn;
			}
		}
		let Some(until) = self.my_turns_until(epoch, done_at, run).await else {
			return Turn::Mine;
		};
		let previous = match epoch.checked_sub(1) {
			Some(p) if until > 0 => match self.chain.epoch_completed_at(p).await {
				Ok(at) => Ok(at),
				Err(e) => {
					tracing::debug!(epoch, error = %e, "the previous epoch's completion; no estimate this tick");
					Err(())
				},
			},
			_ => Ok(None),
		};
		let epoch_blocks = previous.ok().flatten().map(|p| done_at.saturating_sub(p));
		let turn = Turn::of(until, done_at, epoch_blocks, run.scoring_window);
		if previous.is_ok() {
			self.turn = Some((epoch, turn));
		}
		turn
	}

	/// How many epochs after `epoch` (completed at block `done_at`, finalized) this validator's next
	/// turn is ([`turns_until`]), among the active validators that take turns ([`takes_turns`]) as of
	/// block `done_at`. Every validator reads that same block's state, so they agree on the set. A node
	/// that pruned that state (by default it keeps 256 blocks) or a failed read falls back to the latest
	/// finalized state, where only a validator whose first commitment in two windows came after
	/// `done_at` is seen differently; `None` when that fails too (the caller judges the epoch: the safe
	/// side, and reads again on the next tick).
	async fn my_turns_until(
		&self,
		epoch: u32,
		done_at: u32,
		run: &iota_chain::RunConfig,
	) -> Option<u32> {
		let pinned = async {
			match self.chain.block_hash(done_at).await {
				Ok(Some(hash)) => {
					self.chain.at_block(hash).validators().await.map_err(|e| e.to_string())
				},
				Ok(None) => Err(format!("the node has no block {done_at}")),
				Err(e) => Err(e.to_string()),
			}
		};
		let validators = match pinned.await {
			Ok(v) => v,
			Err(e) => {
				tracing::debug!(epoch, done_at, error = %e, "validators at the epoch's block; reading the latest");
				match self.chain.validators().await {
					Ok(v) => v,
					Err(e) => {
						self.metrics.error("chain");
						tracing::warn!(epoch, error = %e, "cannot read who takes turns; judging it");
						return None;
					},
				}
			},
		};
		let in_turn: Vec<_> = validators
			.into_iter()
			.filter(|(_, v)| {
				matches!(v.status, iota_chain::ValidatorStatus::Active)
					&& takes_turns(
						v.last_weights_at,
						done_at,
						run.scoring_window,
						run.reveal_window,
					)
			})
			.map(|(a, _)| a)
			.collect();
		Some(turns_until(epoch, &self.signer.account_id(), &in_turn))
	}

	async fn retry_pending_weights(&mut self, run: &iota_chain::RunConfig, now: u32) {
		let epochs: Vec<u32> = self.pending_weights.keys().copied().collect();
		for epoch in epochs {
			let open = match self.chain.epoch_completed_at(epoch).await {
				Ok(Some(at)) => window_of(run, at, now) == WeightsWindow::Commit,
				Ok(None) => false,
				Err(e) => {
					self.metrics.error("chain");
					tracing::warn!(epoch, error = %e, "cannot read the scoring window");
					continue;
				},
			};
			let Some(w) = self.pending_weights.remove(&epoch) else { continue };
			if open {
				if let Some(w) = self.submit_weights(epoch, w, run).await {
					self.pending_weights.insert(epoch, w);
				}
			} else {
				tracing::warn!(epoch, "scoring window closed with weights still uncommitted");
			}
		}
	}

	/// Whether this validator's commitment for `epoch` is on chain and its salt is stored: a restart
	/// that judges the epoch again then keeps that commitment instead of replacing it. A chain read
	/// that fails counts as no (a replacement is harmless: its salt is stored first).
	async fn committed_before(&self, epoch: u32) -> bool {
		let me = self.signer.account_id();
		let Some(stored) = self.commits.lock().get(epoch).and_then(|p| p.commitment(&me).ok())
		else {
			return false;
		};
		matches!(self.chain.weight_commit(epoch, &me).await, Ok(Some(c)) if c == stored)
	}

	/// Stores a fresh salt for `w` and returns the `commit_weights` call for it, with the entry it
	/// replaced (to [`Daemon::undo_commit`] when the call does not reach the chain). `None` when the
	/// store cannot be written: nothing is committed whose salt could be lost.
	fn prepare_commit(
		&mut self,
		epoch: u32,
		w: &[(AccountId, u16)],
		run: &iota_chain::RunConfig,
	) -> Option<(iota_chain::runtime::Call, Option<crate::commit_reveal::Pending>)> {
		let version = weights_version(self.cfg.weights_version, run);
		let entry = CommitStore::prepare(epoch, w, version);
		let commitment =
			iota_primitives::weights_commitment(epoch, &self.signer.account_id(), w, &entry.salt);
		let stored = self.commits.lock().put(entry);
		match stored {
			Ok(earlier) => Some((calls::commit_weights(epoch, commitment), earlier)),
			Err(e) => {
				self.metrics.error("weights");
				tracing::warn!(epoch, error = %e, "cannot store the salt; weights not committed");
				None
			},
		}
	}

	/// Puts back the stored entry a commit that failed replaced.
	fn undo_commit(&mut self, epoch: u32, earlier: Option<crate::commit_reveal::Pending>) {
		let restored = self.commits.lock().restore(epoch, earlier);
		if let Err(e) = restored {
			self.metrics.error("weights");
			tracing::warn!(epoch, error = %e, "cannot undo a stored commitment");
		}
	}

	/// `commit_weights` on its own (waiting for inclusion); returns the vector back when it is to be
	/// sent again on a later tick (the pallet rate-limited a replacement).
	async fn submit_weights(
		&mut self,
		epoch: u32,
		w: Vec<(AccountId, u16)>,
		run: &iota_chain::RunConfig,
	) -> Option<Vec<(AccountId, u16)>> {
		let (call, earlier) = self.prepare_commit(epoch, &w, run)?;
		match self.chain.submit_calls(&self.signer, vec![call], Wait::InBlock).await {
			Ok(_) => {
				self.metrics.weights.inc();
				tracing::info!(epoch, miners = w.len(), "weights committed");
				None
			},
			Err(e) if e.pallet_error() == Some("RateLimited") => {
				self.undo_commit(epoch, earlier);
				tracing::info!(epoch, "weights rate-limited; retrying later");
				Some(w)
			},
			Err(e) => {
				self.undo_commit(epoch, earlier);
				self.metrics.error("weights");
				tracing::warn!(epoch, error = %e, "commit_weights refused");
				None
			},
		}
	}

	/// `submit_spot_check` on its own (waiting for inclusion); whether the chain recorded it.
	async fn submit_verdict(&self, epoch: u32, v: &VerdictCall) -> bool {
		let call = calls::submit_spot_check(epoch, v.miner.clone(), v.verdict, v.evidence);
		match self.chain.submit_calls(&self.signer, vec![call], Wait::InBlock).await {
			Ok(_) => true,
			Err(e) if matches!(e.pallet_error(), Some("DuplicateSpotCheck" | "UnknownMiner")) => {
				tracing::info!(epoch, miner = %v.miner, error = %e, "verdict not recorded (already judged or no longer a miner)");
				false
			},
			Err(e) => {
				self.metrics.error("chain");
				tracing::warn!(epoch, miner = %v.miner, error = %e, "submit_spot_check failed");
				false
			},
		}
	}

	/// Puts an epoch's weight commitment (if any) and verdicts on chain as **one** extrinsic
	/// (`batch_all`, waiting for inclusion), the commitment first. When the chain refuses the batch (a
	/// rate-limited commitment, a verdict another path recorded), each call goes again on its own.
	/// Returns the weight vector back if it is still to be committed (rate-limited).
	async fn put_on_chain(
		&mut self,
		epoch: u32,
		run: &iota_chain::RunConfig,
		weights: Option<Vec<(AccountId, u16)>>,
		verdicts: Vec<VerdictCall>,
		summary: &mut EpochSummary,
	) -> Option<Vec<(AccountId, u16)>> {
		let mut batch = Vec::new();
		let mut stored = None;
		let mut weights = weights;
		if weights.is_some() && self.committed_before(epoch).await {
			tracing::info!(epoch, "weights committed before a restart; keeping that commitment");
			weights = None;
		}
		if let Some(w) = &weights {
			match self.prepare_commit(epoch, w, run) {
				Some((call, earlier)) => {
					batch.push(call);
					stored = Some(earlier);
				},
				// The salt cannot be stored: the verdicts still go, the vector on a later tick.
				None => {
					self.put_verdicts(epoch, verdicts, summary).await;
					return Some(w.clone());
				},
			}
		}
		for v in &verdicts {
			batch.push(calls::submit_spot_check(epoch, v.miner.clone(), v.verdict, v.evidence));
		}
		match self.chain.submit_calls(&self.signer, batch, Wait::InBlock).await {
			Ok(_) => {
				if let Some(w) = &weights {
					self.metrics.weights.inc();
					tracing::info!(epoch, miners = w.len(), "weights committed");
				}
				for v in &verdicts {
					self.recorded(epoch, v, summary);
				}
				None
			},
			Err(e) => {
				tracing::info!(epoch, error = %e, "epoch batch refused; sending its calls one by one");
				if let Some(earlier) = stored {
					self.undo_commit(epoch, earlier);
				}
				let pending = match weights {
					Some(w) => self.submit_weights(epoch, w, run).await,
					None => None,
				};
				self.put_verdicts(epoch, verdicts, summary).await;
				pending
			},
		}
	}

	/// Each verdict on its own.
	async fn put_verdicts(
		&self,
		epoch: u32,
		verdicts: Vec<VerdictCall>,
		summary: &mut EpochSummary,
	) {
		for v in &verdicts {
			if self.submit_verdict(epoch, v).await {
				self.recorded(epoch, v, summary);
			}
		}
	}

	/// Counts and logs a verdict the chain recorded.
	fn recorded(&self, epoch: u32, v: &VerdictCall, summary: &mut EpochSummary) {
		let label = if v.verdict == Verdict::Pass { "pass" } else { "fail" };
		self.metrics.verdicts.with_label_values(&[label]).inc();
		tracing::info!(epoch, miner = %v.miner, verdict = ?v.verdict, evidence = %v.evidence, "verdict submitted");
		summary.verdicts.push((v.miner.clone(), v.verdict));
	}

	async fn finalize_if_due(
		&mut self,
		run: &iota_chain::RunConfig,
		now: u32,
	) -> Result<(), DaemonError> {
		let next = self.chain.next_epoch_to_finalize().await?;
		let Some(at) = self.chain.epoch_completed_at(next).await? else { return Ok(()) };
		let due = finalizable_at(at.into(), run.scoring_window.into(), run.reveal_window.into());
		if u64::from(now) < due {
			return Ok(());
		}
		match self.chain.finalize_epoch(&self.signer, next).await {
			Ok(_) => {
				self.metrics.finalized.inc();
				tracing::info!(epoch = next, "epoch finalized");
			},
			// Somebody else was faster (or the window is still open on the block that included us).
			Err(e) if matches!(e.pallet_error(), Some("EpochNotNext" | "ScoringWindowOpen")) => {
				tracing::debug!(epoch = next, error = %e, "finalize_epoch not needed");
			},
			Err(e) => return Err(e.into()),
		}
		Ok(())
	}

	async fn process_epoch(
		&mut self,
		epoch: u32,
		run: &iota_chain::RunConfig,
		wait_for_log: bool,
		reveals_closed: bool,
	) -> Result<EpochSummary, DaemonError> {
		let seed = self
			.chain
			.epoch_seed(epoch)
			.await?
			.ok_or_else(|| DaemonError::NotReady(format!("no seed for epoch {epoch}")))?;
		let me = self.signer.account_id();
		let mut chain_shards: BTreeMap<u16, Vec<ContentHash>> = BTreeMap::new();
		for stage in 0..run.stages {
			if let Some(m) = self.chain.merge_manifest(epoch, stage).await? {
				chain_shards.insert(stage, m.shards.0.iter().map(|o| o.content_hash).collect());
			}
		}
		let registered: BTreeSet<AccountId> =
			self.chain.miners().await?.into_iter().map(|(a, _)| a).collect();
		self.rpc().await?;
		let (Some(rpc), Some(checker)) = (self.rpc.as_ref(), self.checker.as_mut()) else {
			return Err(DaemonError::Setup("no orchestrator connection or run spec".into()));
		};
		let record = rpc
			.epoch_record(epoch)
			.await
			.map_err(|e| DaemonError::Orchestrator(format!("iota_epochRecord({epoch}): {e}")))?;
		let store = OrchestratorObjects { rpc, http: &self.http };
		let objects = CachedObjects { inner: &store, cache: &self.cache };
		let spec_run = checker.spec().run.clone();
		let stages = checker.spec().model.n_stages();

		// The pathway log: not yet written or unreachable → retry on a later tick (while `wait_for_log`);
		// garbage or malformed → spot-checks and CLASP are skipped (counted), never a verdict; the shard
		// audit runs either way.
		let log: Option<PathwayLog> = match &record.pathway_log {
			None if wait_for_log => {
				return Err(DaemonError::PathwayLog(format!("epoch {epoch}: not written yet")))
			},
			None => {
				self.metrics.error("pathway_log");
				tracing::warn!(
					epoch,
					"the epoch record names no pathway log; auditing shards only"
				);
				None
			},
			Some(o) => match objects.get(&o.key, &o.hash).await {
				Err(e @ FetchError::Unavailable { .. }) if wait_for_log => {
					return Err(DaemonError::Store(format!("pathway log of epoch {epoch}: {e}")))
				},
				Err(e) => {
					self.metrics.error("pathway_log");
					tracing::warn!(epoch, error = %e, "pathway log unreadable");
					None
				},
				Ok(bytes) => match PathwayLog::from_slice(&bytes) {
					Ok(l)
						if l.epoch == epoch
							&& l.run == spec_run && usize::from(l.stages) == stages =>
					{
						Some(l)
					},
					Ok(l) => {
						self.metrics.error("pathway_log");
						tracing::warn!(epoch, log_epoch = l.epoch, run = %l.run, stages = l.stages, "pathway log is for another run, epoch or stage count");
						None
					},
					Err(e) => {
						self.metrics.error("pathway_log");
						tracing::warn!(epoch, error = %e, "malformed pathway log");
						None
					},
				},
			},
		};

		// Spot-checks.
		let mut phases = PhaseTimes::default();
		let mut clock = Instant::now();
		// Times a try that stopped on an error left behind are not this try's.
		let _ = checker.take_times();
		let weights_src = ChainWeights { chain: &self.chain };
		let mut found: BTreeMap<AccountId, Findings> = BTreeMap::new();
		if checker.spec().training.is_sync() {
			if let Some(log) = &log {
				let targets = spot_check::select(
					log,
					&seed,
					self.cfg.forward_checks,
					self.cfg.backward_checks,
				);
				for t in &targets {
					let outcome = checker.check(log, t, &weights_src, &objects).await;
					record_check(&self.metrics, &mut found, epoch, t, outcome);
				}
				phases.spot_checks = lap(&mut clock);
			}
		} else if let Some(log) = &log {
			// Local mode (docs/design.md §10): a miner's weights change at every inner step, so its
			// work is checked at the states it revealed when challenged, never at the global weights.
			let cseed = self.chain.challenge_seed(epoch).await?.ok_or_else(|| {
				DaemonError::NotReady(format!(
					"no challenge seed for epoch {epoch} (its completion block is not final)"
				))
			})?;
			let mut revealed: RevealedStates = BTreeMap::new();
			let mut missing: Vec<(StepTarget, String)> = Vec::new();
			let mut outcomes = Vec::new();
			for t in challenged_steps(log, &cseed) {
				let key = (epoch, t.stage, t.miner.clone(), t.step);
				let outcome = match self.inner_done.get(&key) {
					Some(o) => o.clone(),
					None => checker.check_inner_step(log, &t, &weights_src, &objects).await,
				};
				match &outcome {
					StepOutcome::NotRevealed { key } => missing.push((t, key.clone())),
					// An unreachable store is asked again on the next try of the epoch.
					StepOutcome::Inconclusive(Inconclusive::Unavailable(_)) => {
						outcomes.push((t, outcome))
					},
					_ => {
						self.inner_done.insert(key, outcome.clone());
						outcomes.push((t, outcome));
					},
				}
			}
			phases.inner_steps = lap(&mut clock);
			phases.steps = checker.take_times();
			if !reveals_closed {
				if let Some((t, key)) = missing.first() {
					phases.log(epoch, missing.len());
					return Err(DaemonError::RevealsPending(format!(
						"epoch {epoch}: {} challenged steps not revealed yet (first: {key} of {} at stage {})",
						missing.len(),
						t.miner,
						t.stage
					)));
				}
			}
			for (t, key) in &missing {
				count_judged(&self.metrics, Verdict::Fail, "inner_step");
				tracing::warn!(epoch, miner = %t.miner, stage = t.stage, step = t.step, %key, "challenged state not revealed by the deadline");
				found
					.entry(t.miner.clone())
					.or_default()
					.inner_steps
					.push(not_revealed(t, &spec_run, epoch));
			}
			for (t, outcome) in outcomes {
				let usable = match &outcome {
					StepOutcome::Judged(ev) => ev.judgement.is_some(),
					StepOutcome::Inconclusive(i) => matches!(i, Inconclusive::Stale(_)),
					StepOutcome::NotRevealed { .. } => false,
				};
				if usable {
					let states = revealed.entry((t.stage, t.miner.clone())).or_default();
					for (i, hash) in t.hashes.iter().enumerate() {
						let step = t.step + i as u32;
						let key = reveal_key(&spec_run, epoch, t.stage, step, &t.miner)
							.map_err(|e| DaemonError::Spec(e.to_string()))?;
						states.insert(step, ObjectEntry { key, hash: *hash });
					}
				}
				match outcome {
					StepOutcome::Judged(ev) => {
						if count_judged(&self.metrics, ev.verdict, "inner_step") {
							tracing::warn!(epoch, miner = %t.miner, stage = t.stage, step = t.step, reason = ?ev.reason, "inner step failed");
						}
						found.entry(t.miner.clone()).or_default().inner_steps.push(*ev);
					},
					StepOutcome::Inconclusive(i) => {
						count_inconclusive(&self.metrics, &i);
						tracing::warn!(epoch, miner = %t.miner, stage = t.stage, step = t.step, reason = %i, "inner-step check inconclusive");
					},
					StepOutcome::NotRevealed { .. } => {},
				}
			}
			// The passes at the revealed states, each recomputed at the state it ran at (grouped by
			// state, so each revealed state is loaded once).
			let mut targets = revealed_spot_checks(
				log,
				&cseed,
				&revealed,
				self.cfg.forward_checks,
				self.cfg.backward_checks,
			);
			targets.sort_by(|a, b| {
				let state = |w: &WeightsRef| match w {
					WeightsRef::Revealed { key, .. } => key.clone(),
					_ => String::new(),
				};
				(a.0.stage, state(&a.1)).cmp(&(b.0.stage, state(&b.1)))
			});
			for (t, w) in &targets {
				let outcome = checker.check(log, t, &RevealedWeights(w.clone()), &objects).await;
				record_check(&self.metrics, &mut found, epoch, t, outcome);
			}
			phases.spot_checks = lap(&mut clock);
			// Each submitted pseudo-gradient against the miner's last reported state, revealed
			// (its last step is always challenged).
			for trail in &log.inner_states {
				let Some(last) = (trail.hashes.len() as u32).checked_sub(1) else { continue };
				let Some(state) =
					revealed.get(&(trail.stage, trail.miner.clone())).and_then(|m| m.get(&last))
				else {
					continue;
				};
				let Some(sub) = record
					.submissions
					.iter()
					.find(|x| x.stage == trail.stage && x.source.miner == trail.miner)
				else {
					continue;
				};
				match checker.check_pseudo_gradient(epoch, sub, state, &weights_src, &objects).await
				{
					Ok(ev) => {
						if count_judged(&self.metrics, ev.verdict, "pseudo_gradient") {
							tracing::warn!(epoch, miner = %trail.miner, stage = trail.stage, reason = ?ev.reason, "pseudo-gradient check failed");
						}
						found.entry(trail.miner.clone()).or_default().pseudo_gradients.push(ev);
					},
					Err(i) => {
						count_inconclusive(&self.metrics, &i);
						tracing::warn!(epoch, miner = %trail.miner, stage = trail.stage, reason = %i, "pseudo-gradient check inconclusive");
					},
				}
			}
			phases.pseudo_gradients = lap(&mut clock);
		}

		// Shard audit.
		let layout = shard_audit::MergeLayout {
			codec: checker.spec().merge_codec,
			param_counts: (0..stages)
				.map(|s| checker.spec().model.stage_param_count(s).map_or(0, |p| p as u64))
				.collect(),
		};
		let audit =
			shard_audit::audit_epoch(&record, &seed, &chain_shards, &layout, &objects).await;
		phases.shard_audit = lap(&mut clock);
		self.metrics.shards.inc_by(audit.shards_recomputed as u64);
		for i in &audit.inconclusive {
			self.metrics.inconclusive.with_label_values(&[i.kind()]).inc();
			tracing::warn!(epoch, reason = %i, "shard audit inconclusive");
		}
		for f in audit.findings {
			if f.evidence.verdict == Verdict::Fail {
				self.metrics.failures.with_label_values(&["shard_audit"]).inc();
				tracing::warn!(epoch, miner = %f.miner, shard = f.evidence.shard, reason = ?f.evidence.reason, "shard copy wrong");
			}
			found.entry(f.miner).or_default().shards.push(f.evidence);
		}

		// Refused merge vectors, checked again with the acceptance rule.
		let vectors = crate::vector_audit::audit_refused_vectors(
			&record,
			layout.codec,
			&layout.param_counts,
			&objects,
		)
		.await;
		phases.vector_audit = lap(&mut clock);
		for u in &vectors.unjudged {
			tracing::info!(epoch, "{u}: not judged");
		}
		phases.log(epoch, 0);
		for f in vectors.findings {
			self.metrics.failures.with_label_values(&["refused_vector"]).inc();
			tracing::warn!(epoch, miner = %f.miner, stage = f.evidence.stage, refused = %f.evidence.refused, "refused merge vector breaks the acceptance rule");
			found.entry(f.miner).or_default().vectors.push(f.evidence);
		}

		// Evidence bundles (one per judged miner) and the spot-check statuses CLASP needs.
		let mut summary = EpochSummary::default();
		let mut weights = None;
		let mut statuses: BTreeMap<AccountId, CheckStatus> = BTreeMap::new();
		let mut bundles: Vec<EvidenceBundle> = Vec::new();
		for (miner, findings) in found {
			// A `Pass` needs a conclusive check of the miner's work (issue: six miners passed on shard
			// audits alone while their checkpoint was gone); a failed shard copy is a `Fail` by itself.
			if !findings.failed() && !findings.has_work_check() {
				self.metrics.withheld.with_label_values(&["no_work_check"]).inc();
				tracing::info!(epoch, miner = %miner, "no conclusive check of its work: no verdict");
				continue;
			}
			if let Some(bundle) = EvidenceBundle::new(&spec_run, epoch, &me, &miner, findings) {
				let failed = bundle.verdict == Verdict::Fail;
				statuses
					.insert(miner, if failed { CheckStatus::Failed } else { CheckStatus::Passed });
				bundles.push(bundle);
			}
		}

		// Weights only from conclusive data: with completed samples and no conclusive check of anyone's
		// work there is nothing to score from (CLASP would rank miners on the orchestrator's word alone).
		// Nothing of the epoch goes on chain now; it is judged again on later ticks through the first
		// half of its scoring window (as a missing pathway log is waited for), then let go with nothing
		// sent, so later epochs are not held up.
		let from =
			weights_from(statuses.len(), log.as_ref().map(|l| l.records.len()), wait_for_log);
		match from {
			WeightsFrom::Scores => {},
			// Counted once per retry as an error of kind `inconclusive` (the tick's caller).
			WeightsFrom::WaitForChecks => {
				return Err(DaemonError::Inconclusive(format!(
					"epoch {epoch}: no conclusive check of any miner's work yet; judged again later"
				)));
			},
			WeightsFrom::Nothing => {
				self.metrics.withheld.with_label_values(&["no_conclusive_check"]).inc();
				tracing::warn!(
					epoch,
					"no conclusive check of any miner's work: no weights for the epoch"
				);
			},
		}
		// CLASP and weights.
		if let (Some(log), WeightsFrom::Scores) = (&log, from) {
			match clasp::score_epoch(log, &statuses) {
				Ok(report) => {
					for m in &report.miners {
						tracing::info!(epoch, miner = %m.miner, stage = m.stage, samples = m.samples, items = m.items, z = m.z, flagged = m.flagged, validated = m.validated, score = m.score, "CLASP score");
					}
					for m in report.flagged() {
						tracing::warn!(epoch, miner = %m.miner, stage = m.stage, z = m.z, effect = m.effect, "CLASP outlier");
					}
					match weights::weight_vector(&report.scores(), &registered) {
						Ok(w) => {
							summary.weights = w.clone();
							weights = Some(w);
						},
						Err(e) => {
							self.metrics.error("weights");
							tracing::warn!(epoch, error = %e, "no weight vector");
						},
					}
				},
				Err(e) => {
					self.metrics.error("clasp");
					tracing::warn!(epoch, error = %e, "CLASP failed");
				},
			}
		}
		// Verdicts with evidence, failures first, after the weights in one extrinsic. Every bundle is
		// stored before anything goes on chain: a verdict whose evidence is not in the bucket is never
		// sent; a failed upload fails the epoch, which is judged again on a later tick (until its
		// scoring window closes, after which nothing is sent for it).
		bundles.sort_by_key(|b| b.verdict != Verdict::Fail);
		// Finalized while it was judged (its scoring window closed meanwhile): the orchestrator may
		// have pruned its objects by now (`--prune-finalized`), so a missing output could read as the
		// miner's fault, and the chain takes no weights for it any more. Nothing is sent.
		if self.chain.next_epoch_to_finalize().await? > epoch {
			self.metrics.withheld.with_label_values(&["finalized"]).inc();
			tracing::warn!(epoch, "finalized while judged: no verdicts or weights sent");
			return Ok(summary);
		}
		let mut verdicts = Vec::new();
		for bundle in bundles {
			let Ok(miner) = bundle.miner.parse::<AccountId>() else { continue };
			let evidence = bundle.hash();
			if let Err(e) =
				put_evidence(rpc, &self.http, &spec_run, &me, epoch, &miner, bundle.to_bytes())
					.await
			{
				self.metrics.error("evidence");
				tracing::warn!(epoch, miner = %miner, error = %e, "evidence upload failed; no verdict or weights for the epoch this tick");
				return Err(e);
			}
			verdicts.push(VerdictCall { miner, verdict: bundle.verdict, evidence });
		}
		if let Some(w) = self.put_on_chain(epoch, run, weights, verdicts, &mut summary).await {
			self.pending_weights.insert(epoch, w);
		}
		Ok(summary)
	}
}

/// Wall time of each phase of one try at judging an epoch (`checks timed` in the log; an epoch is
/// often tried several times while its reveals arrive, each try logging the work it did).
#[derive(Clone, Copy, Debug, Default)]
struct PhaseTimes {
	/// Local mode: the challenged inner steps (fetch, recompute, replay; steps judged by an earlier
	/// try are not checked again).
	inner_steps: Duration,
	/// Local mode: where the inner steps replayed in full by this try spent their time.
	steps: CheckTimes,
	/// Forward/backward spot-checks (at the global weights, or at revealed states in local mode).
	spot_checks: Duration,
	/// Local mode: submitted pseudo-gradients against the last revealed states.
	pseudo_gradients: Duration,
	/// Merge shards recomputed from their inputs.
	shard_audit: Duration,
	/// Refused merge vectors checked again.
	vector_audit: Duration,
}

impl PhaseTimes {
	/// Logs the try's times at info level (`pending`: challenged steps not revealed yet, so the try
	/// stops after the inner steps).
	fn log(&self, epoch: u32, pending: usize) {
		let ms = |d: Duration| d.as_millis() as u64;
		tracing::info!(
			epoch,
			inner_steps_ms = ms(self.inner_steps),
			replayed = self.steps.steps,
			states_ms = ms(self.steps.states),
			inputs_ms = ms(self.steps.inputs),
			replay_ms = ms(self.steps.compute),
			spot_checks_ms = ms(self.spot_checks),
			pseudo_gradients_ms = ms(self.pseudo_gradients),
			shard_audit_ms = ms(self.shard_audit),
			vector_audit_ms = ms(self.vector_audit),
			pending,
			"checks timed"
		);
	}
}

/// The time since `clock`, which is moved to now.
fn lap(clock: &mut Instant) -> Duration {
	let now = Instant::now();
	let d = now - *clock;
	*clock = now;
	d
}

/// What an epoch's weights may come from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum WeightsFrom {
	/// CLASP scores (with the statuses of the judged miners).
	Scores,
	/// Nothing yet: judge the epoch again on a later tick.
	WaitForChecks,
	/// Nothing: the epoch goes without weights from this validator.
	Nothing,
}

/// Weights only from conclusive data (issue: a validator during an orchestrator outage set weights with
/// every check inconclusive): `conclusive` miners judged from a conclusive check of their work, the
/// pathway log's record count (`None`: no usable log, so no scores either way), and whether the epoch may
/// still be waited for (`wait`: the first half of its scoring window).
fn weights_from(conclusive: usize, records: Option<usize>, wait: bool) -> WeightsFrom {
	match records {
		Some(n) if n > 0 && conclusive == 0 => {
			if wait {
				WeightsFrom::WaitForChecks
			} else {
				WeightsFrom::Nothing
			}
		},
		_ => WeightsFrom::Scores,
	}
}

/// Counts and logs one spot-check's outcome and keeps a conclusive one with its miner's findings.
fn record_check(
	metrics: &Metrics,
	found: &mut BTreeMap<AccountId, Findings>,
	epoch: u32,
	t: &CheckTarget,
	outcome: CheckOutcome,
) {
	match outcome {
		CheckOutcome::Judged(ev) => {
			if count_judged(metrics, ev.verdict, "spot_check") {
				tracing::warn!(epoch, miner = %t.miner, stage = t.stage, sample = t.sample, kind = ?t.kind, reason = ?ev.reason, "spot-check failed");
			}
			found.entry(t.miner.clone()).or_default().checks.push(*ev);
		},
		CheckOutcome::Inconclusive(i) => {
			count_inconclusive(metrics, &i);
			tracing::warn!(epoch, miner = %t.miner, stage = t.stage, sample = t.sample, reason = %i, "spot-check inconclusive");
		},
	}
}

/// Counts one conclusive check (`iota_validator_checks_total`, and on a `Fail` the failures of
/// `kind`); whether it failed.
fn count_judged(metrics: &Metrics, verdict: Verdict, kind: &str) -> bool {
	let failed = verdict == Verdict::Fail;
	metrics.checks.with_label_values(&[if failed { "fail" } else { "pass" }]).inc();
	if failed {
		metrics.failures.with_label_values(&[kind]).inc();
	}
	failed
}

/// Counts one check that ended without a verdict, by its kind.
fn count_inconclusive(metrics: &Metrics, i: &Inconclusive) {
	metrics.checks.with_label_values(&["inconclusive"]).inc();
	metrics.inconclusive.with_label_values(&[i.kind()]).inc();
}

/// One verdict to put on chain: `submit_spot_check(epoch, miner, verdict, evidence)`.
struct VerdictCall {
	miner: AccountId,
	verdict: Verdict,
	/// BLAKE3 of the uploaded evidence bundle.
	evidence: ContentHash,
}

/// The weights version key to send: the configured one, never below the run config's.
fn weights_version(configured: Option<u64>, run: &iota_chain::RunConfig) -> u64 {
	configured.unwrap_or(run.weights_version).max(run.weights_version)
}

async fn put_evidence(
	rpc: &SignedClient,
	http: &PresignedHttp,
	run: &str,
	me: &AccountId,
	epoch: u32,
	miner: &AccountId,
	bytes: Vec<u8>,
) -> Result<(), DaemonError> {
	let id = |s: String| Id::new(s).map_err(|e| DaemonError::Store(e.to_string()));
	let key = keys::evidence(
		&id(run.to_string())?,
		&id(me.to_string())?,
		u64::from(epoch),
		&id(miner.to_string())?,
	);
	let put = rpc
		.presign_put(key)
		.await
		.map_err(|e| DaemonError::Orchestrator(format!("iota_presignPut: {e}")))?;
	http.put(&put.put, Bytes::from(bytes))
		.await
		.map_err(|e| DaemonError::Store(e.to_string()))?;
	Ok(())
}

#[cfg(test)]
mod tests {
	use super::*;

	#[test]
	fn a_validator_behind_lets_go_only_epochs_it_would_not_finish_and_never_the_newest() {
		// Weights count until block 170, verdicts until block 200; the last epoch took 50 blocks.
		let d = EpochDeadlines::of(80, 90, 30);
		assert_eq!(d, EpochDeadlines { commit_closes: 170, closes: 200 });
		let (behind, mine) = (Some(LetGo::Behind), Turn::Mine);
		assert_eq!(let_go(150, d, Some(50), true, mine), behind, "would end exactly at the close");
		assert_eq!(let_go(180, d, Some(50), true, mine), behind);
		assert_eq!(let_go(149, d, Some(50), true, mine), None, "finishes one block before");
		assert_eq!(let_go(180, d, Some(50), false, mine), None, "the newest is always judged");
		assert_eq!(let_go(180, d, None, true, mine), None, "no estimate yet: judge it");
		let others = Turn::Others { next_commit_closes: Some(0) };
		assert_eq!(let_go(180, d, None, true, others), None, "no estimate yet, off turn: judge it");
		let far = EpochDeadlines::of(u32::MAX - 50, 90, 30);
		assert_eq!(far, EpochDeadlines { commit_closes: u32::MAX, closes: u32::MAX }, "saturating");
		assert_eq!(let_go(u32::MAX - 1, far, Some(50), true, mine), behind, "saturating");
	}

	#[test]
	fn off_turn_epochs_are_let_go_when_only_verdicts_would_count_or_the_own_turn_would_be_late() {
		let d = EpochDeadlines::of(80, 90, 30);
		let (off, unknown) = (Some(LetGo::OffTurn), Turn::Others { next_commit_closes: None });
		assert_eq!(let_go(120, d, Some(50), false, unknown), off, "ends at the commit close");
		assert_eq!(let_go(119, d, Some(50), false, unknown), None, "weights still in reach");
		assert_eq!(
			let_go(120, d, Some(50), false, Turn::Mine),
			None,
			"its own turn: verdicts count"
		);
		assert_eq!(
			let_go(120, d, Some(50), true, unknown),
			off,
			"whether or not a later epoch is done"
		);
		assert_eq!(
			let_go(160, d, Some(50), true, unknown),
			Some(LetGo::Behind),
			"nothing would count"
		);
		// The devnet's case: an epoch completed at 254 (weights until 494), 146 blocks to judge one, the
		// next turn estimated to close at 574 (one 80-block epoch later). Judging this one from 281
		// ends at 427, and the next turn from there at 573: in time. From 282 on, that would be 574.
		let d = EpochDeadlines::of(254, 240, 30);
		let next = Turn::Others { next_commit_closes: Some(574) };
		assert_eq!(let_go(281, d, Some(146), false, next), None);
		assert_eq!(
			let_go(282, d, Some(146), false, next),
			off,
			"the own turn would end at its close"
		);
		assert_eq!(let_go(282, d, Some(146), false, Turn::Mine), None);
		let saturated = Turn::Others { next_commit_closes: Some(u32::MAX) };
		assert_eq!(let_go(u32::MAX - 60, far(), Some(50), false, saturated), off, "saturating");
		assert_eq!(LetGo::OffTurn.reason(), "off_turn");
		assert_eq!(LetGo::Behind.reason(), "behind");
	}

	fn far() -> EpochDeadlines {
		EpochDeadlines::of(u32::MAX - 100, 90, 30)
	}

	#[test]
	fn the_judging_time_is_the_median_of_the_last_epochs() {
		assert_eq!(judge_estimate(&[]), None);
		assert_eq!(judge_estimate(&[140]), Some(140));
		assert_eq!(judge_estimate(&[140, 400]), Some(140), "the lower of two");
		assert_eq!(judge_estimate(&[400, 140, 146]), Some(146), "one slow epoch does not count");
		assert_eq!(judge_estimate(&[30, 140, 146]), Some(140), "nor one fast one");
	}

	#[test]
	fn the_validators_that_take_turns_take_the_epochs_in_turn() {
		let set = [7u8, 3, 5];
		// Sorted: 3, 5, 7 have ranks 0, 1, 2.
		for epoch in 0..9u32 {
			let until: Vec<u32> = set.iter().map(|v| turns_until(epoch, v, &set)).collect();
			assert_eq!(until.iter().filter(|&&u| u == 0).count(), 1, "epoch {epoch}: one turn");
			let mut sorted = until.clone();
			sorted.sort();
			assert_eq!(sorted, vec![0, 1, 2], "epoch {epoch}: the next turns follow in order");
		}
		assert_eq!([0, 1, 2].map(|e| turns_until(e, &3, &set)), [0, 2, 1]);
		assert_eq!([0, 1, 2].map(|e| turns_until(e, &5, &set)), [1, 0, 2]);
		assert_eq!(turns_until(4, &9, &set), 0, "not in the set: every turn");
		assert_eq!(turns_until(4, &9, &[9]), 0, "the only validator: every turn");
		assert_eq!(turns_until(u32::MAX, &5, &[3, 5]), 0, "u32::MAX is odd");
		assert_eq!(turns_until(u32::MAX, &3, &[3, 5]), 1);
		// Those that commit weights take turns: within two (90 + 30)-block windows.
		assert!(takes_turns(Some(760), 1000, 90, 30), "240 blocks ago");
		assert!(!takes_turns(Some(759), 1000, 90, 30), "241 blocks ago");
		assert!(!takes_turns(None, 1000, 90, 30), "never committed");
		assert!(takes_turns(Some(1000), 10, 90, 30), "a later block than now (a lagging read)");
		assert!(takes_turns(Some(0), 10, u32::MAX, 1), "saturating");
		// The next turn is estimated from the last epoch's length.
		assert_eq!(Turn::of(0, 500, Some(80), 240), Turn::Mine);
		assert_eq!(Turn::of(2, 500, Some(80), 240), Turn::Others { next_commit_closes: Some(900) });
		assert_eq!(Turn::of(1, 500, None, 240), Turn::Others { next_commit_closes: None });
		let saturated = Turn::of(3, u32::MAX - 1, Some(u32::MAX), 1);
		assert_eq!(saturated, Turn::Others { next_commit_closes: Some(u32::MAX) });
	}

	/// One validator in the [`unpaid`] model.
	#[derive(Default)]
	struct Modelled {
		/// Its block: where it is free to look at its next epoch.
		at: u32,
		/// The next epoch it looks at.
		next: u32,
		/// Blocks its last judged epochs took ([`judge_estimate`]).
		recent: Vec<u32>,
		/// Blocks its weights were committed at.
		commits: Vec<u32>,
	}

	/// `validators` validators of equal speed judge 10 epochs completed every `period` blocks, each in
	/// `judge` blocks, oldest first, starting 3 blocks after an epoch completes (the pathway log),
	/// skipping an epoch whose commit window closed before they reach it (as `tick` does) and the ones
	/// [`let_go`] lets go: with turns (`turns`), where the set of each epoch is formed as
	/// [`takes_turns`] forms it from the weights committed by then (so there is none until the first
	/// commitments land) and the next turn is estimated from the last epoch's length as `tick` does;
	/// or every epoch their own (`Behind` alone). The validators act in the order of their blocks, so
	/// a set is formed from every commitment made before its epoch completed. Returns the epochs no
	/// validator sent weights for (in their commit windows) and those no validator sent verdicts for
	/// (before they can be finalized), with `windows` = (scoring, reveal) blocks.
	fn unpaid(
		period: u32,
		judge: u32,
		windows: (u32, u32),
		validators: u8,
		turns: bool,
	) -> (Vec<u32>, Vec<u32>) {
		let epochs = 10u32;
		let mut state: Vec<Modelled> = (0..validators).map(|_| Modelled::default()).collect();
		let (mut weights, mut verdicts) = (BTreeSet::new(), BTreeSet::new());
		let starts = |v: &Modelled| v.at.max(v.next * period + 3);
		while let Some(me) = (0..state.len())
			.filter(|&i| state[i].next < epochs)
			.min_by_key(|&i| (starts(&state[i]), i))
		{
			let done = state[me].next * period;
			let in_turn: Vec<usize> = (0..state.len())
				.filter(|&j| {
					let last = state[j].commits.iter().copied().filter(|&c| c <= done).max();
					takes_turns(last, done, windows.0, windows.1)
				})
				.collect();
			let v = &mut state[me];
			let (e, t) = (v.next, starts(v));
			v.next += 1;
			v.at = t;
			let d = EpochDeadlines::of(done, windows.0, windows.1);
			if t >= d.commit_closes {
				continue;
			}
			let estimate = judge_estimate(&v.recent);
			let newer = estimate.is_some() && done + period <= t;
			let until = if turns { turns_until(e, &me, &in_turn) } else { 0 };
			let epoch_blocks = e.checked_sub(1).map(|_| period);
			let turn = Turn::of(until, done, epoch_blocks, windows.0);
			if let_go(t, d, estimate, newer, turn).is_some() {
				continue;
			}
			v.at = t + judge;
			if v.recent.len() == JUDGE_SAMPLES {
				v.recent.remove(0);
			}
			v.recent.push(judge);
			if v.at < d.commit_closes {
				weights.insert(e);
				v.commits.push(v.at);
			}
			if v.at < d.closes {
				verdicts.insert(e);
			}
		}
		let missing = |got: &BTreeSet<u32>| (0..epochs).filter(|e| !got.contains(e)).collect();
		(missing(&weights), missing(&verdicts))
	}

	#[test]
	fn validators_slower_than_the_epochs_keep_their_turns_paid() {
		// (blocks per epoch, blocks to judge one, (scoring, reveal) windows): each validator is slower
		// than the epochs; the first five with the e2e-like windows, the rest with the devnet's
		// (whose run of 7 Dec took 143-146 blocks to judge an epoch of about 80).
		let cases = [
			(65, 75, (90, 30)),
			(60, 80, (90, 30)),
			(50, 70, (90, 30)),
			(45, 60, (90, 30)),
			(40, 70, (90, 30)),
			(80, 146, (240, 30)),
			(85, 140, (240, 30)),
			(70, 130, (240, 30)),
			(100, 180, (240, 30)),
		];
		let (mut with_turns, mut alone) = (0, 0);
		for (period, judge, windows) in cases {
			let (no_weights, no_verdicts) = unpaid(period, judge, windows, 2, true);
			let (alone_no_weights, alone_no_verdicts) = unpaid(period, judge, windows, 2, false);
			println!(
				"{period} blocks per epoch, {judge} to judge, windows {windows:?}: without weights \
				 {no_weights:?} (Behind alone: {alone_no_weights:?}), without verdicts \
				 {no_verdicts:?} (Behind alone: {alone_no_verdicts:?})"
			);
			// Turns form once the first commitments land: until then the validators lag alike.
			assert!(
				no_verdicts.iter().all(|&e| e <= 2),
				"later epochs all judged: {no_verdicts:?}"
			);
			assert!(no_weights.len() <= 3, "at most 3 of 10 epochs unpaid: {no_weights:?}");
			assert!(
				alone_no_weights.len() >= no_weights.len() + 3,
				"turns pay 3 or more epochs more"
			);
			with_turns += no_weights.len();
			alone += alone_no_weights.len();
		}
		println!(
			"epochs without weights: {with_turns} of 90 with turns, {alone} with Behind alone"
		);
		// Validators that keep up judge every epoch, turns or not.
		assert_eq!(unpaid(70, 60, (90, 30), 2, true), (vec![], vec![]));
		assert_eq!(unpaid(80, 70, (240, 30), 2, true), (vec![], vec![]));
	}

	#[test]
	fn weights_come_only_from_conclusive_checks() {
		use WeightsFrom::*;
		assert_eq!(weights_from(2, Some(8), true), Scores);
		assert_eq!(weights_from(0, Some(8), true), WaitForChecks, "every check inconclusive");
		assert_eq!(weights_from(0, Some(8), false), Nothing, "past the wait: let go");
		assert_eq!(weights_from(0, Some(0), true), Scores, "no sample to check");
		assert_eq!(weights_from(0, None, true), Scores, "no log: nothing to score anyway");
	}

	#[test]
	fn error_kinds_are_metric_labels() {
		assert_eq!(DaemonError::Orchestrator("x".into()).kind(), "orchestrator");
		assert_eq!(DaemonError::NotReady("x".into()).kind(), "chain");
		assert_eq!(DaemonError::PathwayLog("x".into()).kind(), "pathway_log");
	}
}
