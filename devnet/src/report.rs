//! The run report: `runs/<id>/report.md` with the loss plot (`loss.png`), `loss.csv` (header
//! `epoch,tokens,loss,heldout_loss,baseline_loss,baseline_heldout_loss`: one row per completed epoch, the tail stage's mean training loss
//! and, where the run has a held-out set, the merged model's held-out loss; then the single-process
//! baseline's training and held-out loss, [`crate::baseline`]), text the merged models of
//! the first and the last epoch write ([`PROMPTS`], [`text_samples`]), the time split between training
//! and the chain/merge phases per stage, and, read back from chain, the merges (members × samples), the
//! spot-check verdicts (miners × epochs), the emission (accounts × epochs) and slashes, and the command
//! to reproduce the run: tables to read in a minute (issue "What the network trained, in the user's
//! hands", item 4), every row in `time.csv`, `manifests.csv`, `verdicts.csv` and `emission.csv` beside
//! the report.
//!
//! Everything that matters for money is read from chain storage after the run, not from the
//! orchestrator's view of it.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use std::collections::BTreeMap;

use iota_chain::{AccountId, Balance, IotaClient, MergeManifest, SpotCheck, Verdict};
use iota_model::data::tokenizer_from_bytes;
use iota_model::generate::Sampling;
use iota_rpc::types::{EpochSummary, TimeSplit};
use iota_rpc::RunSpec;
use iota_storage::ObjectStore;

use crate::baseline::Baseline;

/// An epoch's payout as recorded on chain: miners, validators, and the unallocated rest.
#[derive(Clone, Debug)]
pub struct Payout {
	/// Paid per miner.
	pub miners: Vec<(AccountId, Balance)>,
	/// Paid per validator.
	pub validators: Vec<(AccountId, Balance)>,
	/// Part of the pool nobody earned (not minted).
	pub unallocated: Balance,
}

/// What chain storage says about one epoch.
#[derive(Clone, Debug)]
pub struct EpochOnChain {
	/// Epoch.
	pub epoch: u32,
	/// Per stage, its merge manifest (if committed).
	pub manifests: Vec<(u16, Option<MergeManifest>)>,
	/// Verdicts per miner.
	pub verdicts: Vec<(AccountId, Vec<SpotCheck<AccountId>>)>,
	/// Validators that committed weights (commit-reveal), in account order.
	pub committed: Vec<AccountId>,
	/// Validators that revealed their committed weights, in account order.
	pub revealed: Vec<AccountId>,
	/// Consensus scores (parts per billion), once the epoch is finalized.
	pub scores: Option<Vec<(AccountId, u32)>>,
	/// Miner payouts, validator payouts and the unallocated rest, once finalized.
	pub split: Option<Payout>,
	/// Bonds slashed for this epoch.
	pub slashes: Vec<(AccountId, Balance)>,
}

/// Everything the report shows.
#[derive(Clone, Debug)]
pub struct ReportData {
	/// Run id.
	pub run_id: String,
	/// Model preset name and a one-line description of the model.
	pub model: String,
	/// Stages.
	pub stages: u32,
	/// Miners per stage.
	pub miners_per_stage: u32,
	/// Validators.
	pub validators: u32,
	/// Samples per epoch.
	pub quota: u32,
	/// Tokens per sample (`B · T`).
	pub tokens_per_sample: u64,
	/// Spec hash (the chain's `model_hash`).
	pub spec_hash: String,
	/// Wall-clock seconds from start-up to the end of training.
	pub wall_secs: f64,
	/// Seconds spent starting the network (node, data, processes) before the first epoch began.
	pub startup_secs: f64,
	/// Completed epochs as the orchestrator summarised them.
	pub epochs: Vec<EpochSummary>,
	/// Chain records per epoch.
	pub chain: Vec<EpochOnChain>,
	/// Total minted by pallet-iota.
	pub total_minted: Balance,
	/// The command line that reproduces the run.
	pub command: String,
	/// Completions of [`PROMPTS`] by merged models (the first and the last completed epoch's).
	pub samples: Vec<TextSample>,
	/// Why there are no samples (or fewer), when something stood in the way.
	pub samples_error: Option<String>,
	/// The last epoch's Hugging Face export ([`export_last`]): what was written, or why not.
	pub export: Option<Result<Export, String>>,
	/// The single-process baseline on the same samples ([`crate::baseline`]): its figures, why there
	/// are none, or `None` when it was not asked for.
	pub baseline: Option<Result<Baseline, String>>,
	/// Traffic through the test hosts' links ([`crate::hosts`]), when the run had them.
	pub hosts: Option<HostsTraffic>,
	/// Where the machine's CPU went while training ([`CpuUse::between`]).
	pub cpu: Option<CpuUse>,
	/// The validators' niceness ([`crate::NetworkOptions::validator_nice`]), if they were niced.
	pub validator_nice: Option<u8>,
}

/// The CPU the network's processes used while training, by role (node, orchestrator, miner,
/// validator), against what the machine had: `cores × seconds`. On one shared machine this is what
/// the stage-time split cannot say: how much of the compute went to the miners' training.
#[derive(Clone, Debug, PartialEq)]
pub struct CpuUse {
	/// Cores the machine offers (`std::thread::available_parallelism`).
	pub cores: usize,
	/// Wall-clock seconds between the two readings.
	pub secs: f64,
	/// CPU seconds (user + system) per role, in the order roles first appear.
	pub by_role: Vec<(String, f64)>,
}

impl CpuUse {
	/// The CPU used between two readings of a network ([`crate::Network::cpu_reading`]), over the
	/// wall-clock time between them on the end reading's cores: per process its end reading minus its
	/// start reading, or the whole end reading for a process that started (or restarted: another pid or
	/// start time) in between, summed by role. A process gone at the end is not counted.
	pub fn between(start: &crate::CpuReading, end: &crate::CpuReading) -> Self {
		let mut by_role: Vec<(String, f64)> = Vec::new();
		for e in &end.processes {
			let before =
				start.processes.iter().find(|b| b.process == e.process).map_or(0.0, |b| b.secs);
			let used = (e.secs - before).max(0.0);
			match by_role.iter_mut().find(|(r, _)| r == e.role) {
				Some((_, t)) => *t += used,
				None => by_role.push((e.role.to_owned(), used)),
			}
		}
		let secs = end.at.saturating_duration_since(start.at).as_secs_f64();
		Self { cores: end.cores, secs, by_role }
	}

	/// The machine's CPU seconds over the span: `cores × secs`.
	pub fn available(&self) -> f64 {
		self.cores as f64 * self.secs
	}

	/// One line: each role's CPU seconds and share, then the rest, e.g. `miner 814 s (50.6 %),
	/// validator 418 s (26.0 %), idle or other 2.8 %` (the rest is idle time, the harness itself, the
	/// kernel and any other load on the machine).
	pub fn summary(&self) -> String {
		let mut parts: Vec<String> = self
			.by_role
			.iter()
			.map(|(r, t)| format!("{r} {t:.0} s ({:.1} %)", self.share(r) * 100.0))
			.collect();
		let used: f64 = self.by_role.iter().map(|(_, t)| t).sum();
		let rest = (1.0 - used / self.available().max(f64::MIN_POSITIVE)).max(0.0);
		parts.push(format!("idle or other {:.1} %", rest * 100.0));
		parts.join(", ")
	}

	/// `role`'s share of [`CpuUse::available`] (0 when the span is empty).
	pub fn share(&self, role: &str) -> f64 {
		let used = self.by_role.iter().filter(|(r, _)| r == role).map(|(_, t)| t).sum::<f64>();
		if self.available() > 0.0 {
			used / self.available()
		} else {
			0.0
		}
	}
}

/// What went through each test host's link over a run (read when training ended).
#[derive(Clone, Debug, PartialEq)]
pub struct HostsTraffic {
	/// Each link's rate in Mbit/s (`None`: unlimited).
	pub mbit: Option<u32>,
	/// Per host (its process's name), bytes sent and received, Ethernet frames included.
	pub hosts: Vec<(String, crate::hosts::LinkBytes)>,
}

/// The report's test-hosts section: each host's bytes, and per completed epoch.
fn hosts_section(s: &mut String, t: &HostsTraffic, epochs: usize) {
	let rate = t.mbit.map_or("unlimited".to_owned(), |m| format!("{m} Mbit/s each way"));
	let _ = writeln!(
		s,
		"## Test hosts

Every miner and validator ran in a network namespace of its own, its link to the \
		 node, orchestrator and S3 server {rate}. Bytes through each link (Ethernet frames, the \
		 bridge's counters) from start-up to the end of training, and per completed epoch:\n"
	);
	let _ = writeln!(s, "| host | sent B | received B | sent + received per epoch B |");
	let _ = writeln!(s, "|---|---:|---:|---:|");
	for (name, b) in &t.hosts {
		let per = if epochs > 0 { (b.sent + b.received) / epochs as u64 } else { 0 };
		let _ = writeln!(s, "| {name} | {} | {} | {per} |", b.sent, b.received);
	}
	let _ = writeln!(s);
}

/// The folder (beside the report) the last epoch's merged model is exported to.
pub const EXPORT_DIR: &str = "hf";
/// The reference file (beside the report): held-out ids and our logits for them.
pub const REFERENCE_FILE: &str = "hf-reference.safetensors";

/// What [`export_last`] wrote.
#[derive(Clone, Debug, PartialEq)]
pub struct Export {
	/// The exported epoch.
	pub epoch: u32,
	/// Parameters written.
	pub params: usize,
	/// Held-out rows in the reference file (`None`: the run has no held-out set, no reference).
	pub reference_rows: Option<usize>,
}

/// Exports `epoch`'s merged model into `dir/`[`EXPORT_DIR`] (and, when the run has a held-out set,
/// the reference `dir/`[`REFERENCE_FILE`] for `scripts/check-hf-export.py`) through
/// [`iota_orchestrator::eval::export_epoch`], the code `iota-orchestrator export` runs.
///
/// # Errors
/// A message naming what failed.
pub async fn export_last(
	store: &ObjectStore,
	chain: &IotaClient,
	spec: &RunSpec,
	epoch: u32,
	dir: &Path,
) -> Result<Export, String> {
	let reference = spec.data.heldout.is_some().then(|| dir.join(REFERENCE_FILE));
	let e = iota_orchestrator::eval::export_epoch(
		store,
		chain,
		spec,
		Some(epoch),
		&dir.join(EXPORT_DIR),
		reference.as_deref(),
	)
	.await
	.map_err(|e| e.to_string())?;
	Ok(Export { epoch: e.epoch, params: e.params, reference_rows: e.reference_rows })
}

/// The prompts the report has each sampled epoch's merged model complete (Shakespeare-flavoured,
/// for the devnet's corpus).
pub const PROMPTS: [&str; 3] = ["ROMEO:\n", "First Citizen:\nWe", "KING HENRY:\nNow"];

/// How the report's samples are drawn: 48 new tokens, temperature 0.8, top-k 40, top-p 0.95, seed 0
/// (the same run gives the same text).
pub fn sampling() -> Sampling {
	Sampling { max_new_tokens: 48, ..Sampling::default() }
}

/// A prompt completed by an epoch's merged model.
#[derive(Clone, Debug, PartialEq)]
pub struct TextSample {
	/// The epoch whose merged model (every stage's attested checkpoint) wrote it.
	pub epoch: u32,
	/// The prompt.
	pub prompt: String,
	/// What the model wrote after it.
	pub completion: String,
}

/// Completions of [`PROMPTS`] with [`sampling`] by the merged model of `epoch`: every stage's
/// checkpoint as the chain's manifest names it (hash-checked, loaded only if it reproduces the attested
/// state hash), the run's wire codec across the cuts as in training, the run's tokenizer from the bucket.
///
/// # Errors
/// A message saying what is missing (a manifest, a checkpoint, the tokenizer) or what failed.
pub async fn text_samples(
	store: &ObjectStore,
	chain: &IotaClient,
	spec: &RunSpec,
	epoch: u32,
) -> Result<Vec<TextSample>, String> {
	use iota_orchestrator::eval::{merged_checkpoints, merged_model, Merged};
	let stages = spec.model.n_stages();
	let checkpoints = match merged_checkpoints(store, chain, stages, epoch).await {
		Ok(Merged::Checkpoints(c)) => c,
		Ok(Merged::NotYet) => return Err(format!("epoch {epoch} is not committed at every stage")),
		Ok(Merged::Unavailable(why)) => return Err(format!("epoch {epoch}: {why}")),
		Err(e) => return Err(format!("epoch {epoch}: {e}")),
	};
	let wire = spec.wire_encoding().map_err(|e| e.to_string())?;
	let mut model = merged_model(spec, &checkpoints, Some(wire)).map_err(|e| e.to_string())?;
	let tok = &spec.data.tokenizer;
	let bytes = store
		.get(&tok.key, &tok.hash)
		.await
		.map_err(|e| format!("the run's tokenizer: {e}"))?;
	let tokenizer = tokenizer_from_bytes(&bytes).map_err(|e| e.to_string())?;
	PROMPTS
		.iter()
		.map(|p| {
			let completion =
				model.complete(&tokenizer, p, &sampling()).map_err(|e| e.to_string())?;
			Ok(TextSample { epoch, prompt: (*p).to_string(), completion })
		})
		.collect()
}

/// Reads what the report needs from chain storage for epochs `0..epochs`.
///
/// # Errors
/// The chain client's error.
pub async fn read_chain(
	chain: &IotaClient,
	epochs: u32,
	stages: u32,
) -> Result<(Vec<EpochOnChain>, Balance), iota_chain::Error> {
	let mut out = Vec::new();
	for epoch in 0..epochs {
		let mut manifests = Vec::new();
		for stage in 0..stages as u16 {
			manifests.push((stage, chain.merge_manifest(epoch, stage).await?));
		}
		let split = chain.emission_split(epoch).await?.map(|s| Payout {
			miners: s.miners.0,
			validators: s.validators.0,
			unallocated: s.unallocated,
		});
		let mut committed = chain.weight_committers(epoch).await?;
		committed.sort();
		let mut revealed: Vec<AccountId> =
			chain.revealed_weights(epoch).await?.into_iter().map(|(v, _)| v).collect();
		revealed.sort();
		out.push(EpochOnChain {
			epoch,
			manifests,
			verdicts: chain.spot_checks_of_epoch(epoch).await?,
			committed,
			revealed,
			scores: chain.scores(epoch).await?,
			split,
			slashes: chain.slashes(epoch).await?,
		});
	}
	Ok((out, chain.total_minted().await?))
}

fn hex(bytes: &[u8]) -> String {
	bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// One token is 10^12 of the smallest unit.
fn units(b: Balance) -> String {
	format!("{}.{:03}", b / 1_000_000_000_000, (b % 1_000_000_000_000) / 1_000_000_000)
}

/// Loss drop from the first to the last completed epoch, as a share of the first (0.2 = 20 % lower).
pub fn loss_drop(epochs: &[EpochSummary]) -> Option<f64> {
	let (first, last) = (epochs.first()?, epochs.last()?);
	(first.loss > 0.0).then(|| 1.0 - f64::from(last.loss) / f64::from(first.loss))
}

/// Share of stage-time spent outside training (uploading gradients, merging, waiting for the chain),
/// over all epochs: `Σ merge_ms / (stages · Σ epoch wall time)`.
pub fn overhead_share(epochs: &[EpochSummary], stages: u32) -> Option<f64> {
	let wall: u64 = epochs.iter().map(|e| e.completed_ms.saturating_sub(e.started_ms)).sum();
	let merge: u64 = epochs.iter().map(|e| e.merge_ms).sum();
	(wall > 0 && stages > 0).then(|| merge as f64 / (wall as f64 * f64::from(stages)))
}

/// Mean and maximum of `quota_to_start_ms` over the epochs that have it, in seconds.
pub fn quota_to_start_secs(epochs: &[EpochSummary]) -> Option<(f64, f64)> {
	let v: Vec<f64> = epochs
		.iter()
		.filter_map(|e| e.quota_to_start_ms)
		.map(|ms| ms as f64 / 1000.0)
		.collect();
	(!v.is_empty())
		.then(|| (v.iter().sum::<f64>() / v.len() as f64, v.iter().copied().fold(0.0, f64::max)))
}

/// `loss.csv`: `epoch,tokens,loss,heldout_loss`, one row per completed epoch (`heldout_loss` empty
/// where the epoch's merged model has not been evaluated).
pub fn loss_csv(epochs: &[EpochSummary], baseline: Option<&Baseline>) -> String {
	let mut s =
		String::from("epoch,tokens,loss,heldout_loss,baseline_loss,baseline_heldout_loss\n");
	let text = |v: Option<&f32>| v.map(|h| h.to_string()).unwrap_or_default();
	for (i, e) in epochs.iter().enumerate() {
		let h = text(e.heldout_loss.as_ref());
		let (bl, bh) = (
			text(baseline.and_then(|b| b.losses.get(i))),
			text(baseline.and_then(|b| b.heldout.get(i))),
		);
		let _ = writeln!(s, "{},{},{},{h},{bl},{bh}", e.epoch, e.tokens_cumulative, e.loss);
	}
	s
}

/// The baseline's series for the plot: (tokens after the epoch, training loss) and (tokens, held-out
/// loss), epoch `i` at the network's `i`-th epoch's cumulative tokens.
fn baseline_series(epochs: &[EpochSummary], b: &Baseline) -> [Vec<(f64, f64)>; 2] {
	let at = |v: &[f32]| {
		epochs
			.iter()
			.zip(v)
			.map(|(e, l)| (e.tokens_cumulative as f64, f64::from(*l)))
			.collect()
	};
	[at(&b.losses), at(&b.heldout)]
}

/// Per stage over every epoch: the markdown rows `| stage | training | merge | chain wait | idle |
/// stage-time s |` (shares of the stage's time); `None` when no epoch has a time split.
fn stage_totals(epochs: &[EpochSummary]) -> Option<Vec<String>> {
	let mut by: BTreeMap<u16, Vec<&iota_rpc::types::StageTime>> = BTreeMap::new();
	for t in epochs.iter().flat_map(|e| &e.stages) {
		by.entry(t.stage).or_default().push(t);
	}
	(!by.is_empty()).then(|| {
		by.into_iter()
			.filter_map(|(stage, times)| {
				let t = TimeSplit::of(times)?;
				let pct = |ms: u64| format!("{:.1} %", t.share(ms) * 100.0);
				Some(format!(
					"| {stage} | {} | {} | {} | {} | {:.1} |",
					pct(t.training_ms),
					pct(t.merge_ms),
					pct(t.chain_wait_ms),
					pct(t.idle_ms),
					t.total_ms() as f64 / 1000.0
				))
			})
			.collect()
	})
}

/// `time.csv`: `epoch,stage,training_ms,merge_ms,chain_wait_ms,idle_ms`, one row per stage and
/// completed epoch (the orchestrator's clock).
pub fn time_csv(epochs: &[EpochSummary]) -> String {
	let mut s = String::from("epoch,stage,training_ms,merge_ms,chain_wait_ms,idle_ms\n");
	for e in epochs {
		for t in &e.stages {
			let _ = writeln!(
				s,
				"{},{},{},{},{},{}",
				e.epoch, t.stage, t.training_ms, t.merge_ms, t.chain_wait_ms, t.idle_ms
			);
		}
	}
	s
}

/// `manifests.csv`: `epoch,stage,members,samples,parameters,shards,state_hash,checkpoint`, one row per
/// committed merge manifest on chain.
pub fn manifests_csv(chain: &[EpochOnChain]) -> String {
	let mut s =
		String::from("epoch,stage,members,samples,parameters,shards,state_hash,checkpoint\n");
	for e in chain {
		for (stage, m) in &e.manifests {
			let Some(m) = m else { continue };
			let ck = m
				.checkpoint
				.as_ref()
				.map(|c| String::from_utf8_lossy(&c.key.0).into_owned())
				.unwrap_or_default();
			let _ = writeln!(
				s,
				"{},{stage},{},{},{},{},{},{ck}",
				e.epoch,
				m.members,
				m.samples,
				m.param_count,
				m.shards.0.len(),
				hex(&m.state_hash.0)
			);
		}
	}
	s
}

/// `verdicts.csv`: `epoch,miner,validator,verdict,evidence`, one row per verdict on chain.
pub fn verdicts_csv(chain: &[EpochOnChain]) -> String {
	let mut s = String::from("epoch,miner,validator,verdict,evidence\n");
	for e in chain {
		for (miner, checks) in &e.verdicts {
			for c in checks {
				let v = if c.verdict == Verdict::Pass { "pass" } else { "fail" };
				let _ =
					writeln!(s, "{},{miner},{},{v},{}", e.epoch, c.validator, hex(&c.evidence.0));
			}
		}
	}
	s
}

/// The verdicts as a table of miners × epochs: each cell the passes of that miner in that epoch
/// (all validators), failures in bold before them (`2`, `**1 fail** 1`, `—` for none), then the
/// miner's totals. `None` when no verdict is recorded.
fn verdict_table(chain: &[EpochOnChain]) -> Option<String> {
	// miner -> epoch -> (passes, failures)
	let mut counts: BTreeMap<String, BTreeMap<u32, (u32, u32)>> = BTreeMap::new();
	for e in chain {
		for (miner, checks) in &e.verdicts {
			for c in checks {
				let cell = counts.entry(miner.to_string()).or_default().entry(e.epoch).or_default();
				match c.verdict {
					Verdict::Pass => cell.0 += 1,
					Verdict::Fail => cell.1 += 1,
				}
			}
		}
	}
	if counts.is_empty() {
		return None;
	}
	let mut s = String::from("| miner |");
	for e in chain {
		let _ = write!(s, " epoch {} |", e.epoch);
	}
	s.push_str(" pass | fail |\n|---|");
	s.push_str(&"---:|".repeat(chain.len() + 2));
	s.push('\n');
	for (miner, by_epoch) in &counts {
		let _ = write!(s, "| `{miner}` |");
		for e in chain {
			let cell = match by_epoch.get(&e.epoch) {
				None => "—".to_string(),
				Some((p, 0)) => p.to_string(),
				Some((p, f)) => format!("**{f} fail** {p}"),
			};
			let _ = write!(s, " {cell} |");
		}
		let (p, f) = by_epoch.values().fold((0, 0), |a, c| (a.0 + c.0, a.1 + c.1));
		let _ = writeln!(s, " {p} | {f} |");
	}
	Some(s)
}

/// `emission.csv`: `epoch,account,role,score_ppb,paid` (`paid` in the smallest unit), one row per
/// account a finalized epoch scored or paid.
pub fn emission_csv(chain: &[EpochOnChain]) -> String {
	let mut s = String::from("epoch,account,role,score_ppb,paid\n");
	for e in chain {
		let (Some(scores), Some(split)) = (&e.scores, &e.split) else { continue };
		let mut miners: BTreeMap<String, (Option<u32>, Balance)> = BTreeMap::new();
		for (a, sc) in scores {
			miners.entry(a.to_string()).or_default().0 = Some(*sc);
		}
		for (a, b) in &split.miners {
			miners.entry(a.to_string()).or_default().1 = *b;
		}
		for (a, (sc, paid)) in miners {
			let sc = sc.map(|v| v.to_string()).unwrap_or_default();
			let _ = writeln!(s, "{},{a},miner,{sc},{paid}", e.epoch);
		}
		for (a, b) in &split.validators {
			let _ = writeln!(s, "{},{a},validator,,{b}", e.epoch);
		}
	}
	s
}

/// The emission as one table of accounts × finalized epochs (tokens paid, then the total), the
/// unallocated rest per epoch, which epochs were not finalized or had no consensus scores, and slashes.
fn emission_section(chain: &[EpochOnChain]) -> String {
	let mut s = String::new();
	let finalized: Vec<(&EpochOnChain, &Payout)> =
		chain.iter().filter_map(|e| e.split.as_ref().map(|p| (e, p))).collect();
	// (role, account) -> epoch -> paid
	let mut paid: BTreeMap<(&str, String), BTreeMap<u32, Balance>> = BTreeMap::new();
	for (e, p) in &finalized {
		for (a, b) in &p.miners {
			*paid.entry(("miner", a.to_string())).or_default().entry(e.epoch).or_default() += *b;
		}
		for (a, b) in &p.validators {
			*paid
				.entry(("validator", a.to_string()))
				.or_default()
				.entry(e.epoch)
				.or_default() += *b;
		}
		// A scored miner paid nothing still gets its row.
		for (a, _) in e.scores.iter().flatten() {
			paid.entry(("miner", a.to_string())).or_default();
		}
	}
	if finalized.is_empty() {
		let _ =
			writeln!(s, "No epoch finalized when the run ended (scoring windows still open).\n");
	} else {
		let _ = writeln!(
			s,
			"Tokens paid per finalized epoch; consensus scores per account and epoch: `emission.csv`.\n"
		);
		let _ = write!(s, "| account | role |");
		for (e, _) in &finalized {
			let _ = write!(s, " epoch {} |", e.epoch);
		}
		let _ = writeln!(s, " total |\n|---|---|{}", "---:|".repeat(finalized.len() + 1));
		for ((role, a), by_epoch) in &paid {
			let _ = write!(s, "| `{a}` | {role} |");
			for (e, _) in &finalized {
				let _ = write!(s, " {} |", units(by_epoch.get(&e.epoch).copied().unwrap_or(0)));
			}
			let _ = writeln!(s, " {} |", units(by_epoch.values().sum()));
		}
		let _ = write!(s, "| unallocated (not minted) | |");
		for (_, p) in &finalized {
			let _ = write!(s, " {} |", units(p.unallocated));
		}
		let _ = writeln!(s, " {} |\n", units(finalized.iter().map(|(_, p)| p.unallocated).sum()));
	}
	let list = |v: Vec<u32>| v.iter().map(u32::to_string).collect::<Vec<_>>().join(", ");
	let unscored: Vec<u32> = finalized
		.iter()
		.filter(|(e, _)| e.scores.as_ref().is_none_or(Vec::is_empty))
		.map(|(e, _)| e.epoch)
		.collect();
	if !unscored.is_empty() {
		let _ = writeln!(
			s,
			"Finalized without consensus scores (no validator revealed weights in time, so \
			 no miner was paid): epochs {}.\n",
			list(unscored)
		);
	}
	let open: Vec<u32> = chain.iter().filter(|e| e.split.is_none()).map(|e| e.epoch).collect();
	if !open.is_empty() && !finalized.is_empty() {
		let _ = writeln!(
			s,
			"Not finalized yet (scoring window still open when the run ended): epochs {}.\n",
			list(open)
		);
	}
	for e in chain {
		for (a, b) in &e.slashes {
			let _ = writeln!(s, "Slashed in epoch {}: `{a}` lost {}.\n", e.epoch, units(*b));
		}
	}
	s
}

/// Per epoch, how many validators committed weights and how many revealed them; a validator that
/// committed and did not reveal is named (it earns nothing for that epoch).
fn weights_section(chain: &[EpochOnChain]) -> String {
	let mut s = String::from(
		"Validators commit a hash of their weights during an epoch's scoring window and reveal the \
		 vector after it; only revealed vectors count.\n\n| epoch | committed | revealed | committed, not revealed |\n|---:|---:|---:|---|\n",
	);
	for e in chain {
		let missing: Vec<String> = e
			.committed
			.iter()
			.filter(|v| !e.revealed.contains(v))
			.map(|v| format!("`{v}`"))
			.collect();
		let missing = if missing.is_empty() { "—".to_string() } else { missing.join(", ") };
		let _ = writeln!(
			s,
			"| {} | {} | {} | {missing} |",
			e.epoch,
			e.committed.len(),
			e.revealed.len()
		);
	}
	s
}

/// The markdown report (pure; `loss.png` is referenced, not embedded).
pub fn render_markdown(d: &ReportData) -> String {
	let mut s = String::new();
	let _ = writeln!(s, "# iota-rs devnet run `{}`\n", d.run_id);
	let _ = writeln!(
		s,
		"{} stages × {} miners, {} validators, model {}, {} samples of {} tokens per epoch; run spec hash \
		 (the chain's `model_hash`) `{}`.\n",
		d.stages, d.miners_per_stage, d.validators, d.model, d.quota, d.tokens_per_sample, d.spec_hash
	);
	let _ = writeln!(s, "## Loss\n\n![loss](loss.png)\n");
	match (d.epochs.first(), d.epochs.last(), loss_drop(&d.epochs)) {
		(Some(f), Some(l), Some(drop)) => {
			let _ = writeln!(
				s,
				"Training loss (the tail's mean over the epoch's samples): epoch {} {:.4} → epoch {} {:.4}: \
				 **{:.1} % lower** after {} tokens ({} epochs). Per-epoch numbers: `loss.csv`.\n",
				f.epoch,
				f.loss,
				l.epoch,
				l.loss,
				drop * 100.0,
				l.tokens_cumulative,
				d.epochs.len()
			);
		},
		_ => {
			let _ = writeln!(s, "No epoch completed.\n");
		},
	}
	let held: Vec<(u32, f32)> =
		d.epochs.iter().filter_map(|e| e.heldout_loss.map(|h| (e.epoch, h))).collect();
	if let (Some(f), Some(l)) = (held.first(), held.last()) {
		let _ = writeln!(
			s,
			"Held-out loss of the merged model (the orchestrator's evaluation of every stage's attested \
			 checkpoint on documents no shard holds): epoch {} {:.4} → epoch {} {:.4} ({} of {} epochs \
			 evaluated).\n",
			f.0,
			f.1,
			l.0,
			l.1,
			held.len(),
			d.epochs.len()
		);
	}
	match &d.baseline {
		Some(Ok(b)) => {
			let _ = writeln!(
				s,
				"Against the single-process baseline: the same model trained in one process on the same \
				 samples, epoch by epoch, with the run's optimizer ({} AdamW steps; in local mode one every \
				 `accumulate` samples, as one replica steps, without outer steps), its held-out loss after \
				 each epoch (ratio: network over baseline).\n",
				b.steps
			);
			let _ = writeln!(
				s,
				"| epoch | tokens | training loss | baseline | ratio | held-out loss | baseline | ratio |"
			);
			let _ = writeln!(s, "|---:|---:|---:|---:|---:|---:|---:|---:|");
			let ratio = |a: Option<f32>, b: Option<&f32>| match (a, b) {
				(Some(a), Some(b)) if *b > 0.0 => format!("{:.3}", a / b),
				_ => "—".into(),
			};
			let num = |v: Option<&f32>| v.map_or("—".into(), |v| format!("{v:.4}"));
			for (i, e) in d.epochs.iter().enumerate() {
				let _ = writeln!(
					s,
					"| {} | {} | {:.4} | {} | {} | {} | {} | {} |",
					e.epoch,
					e.tokens_cumulative,
					e.loss,
					num(b.losses.get(i)),
					ratio(Some(e.loss), b.losses.get(i)),
					num(e.heldout_loss.as_ref()),
					num(b.heldout.get(i)),
					ratio(e.heldout_loss, b.heldout.get(i)),
				);
			}
			let _ = writeln!(s);
		},
		Some(Err(why)) => {
			let _ = writeln!(s, "No single-process baseline: {why}.\n");
		},
		None => {},
	}
	let _ = writeln!(s, "## What the model writes\n");
	let sm = sampling();
	let _ = writeln!(
		s,
		"Each prompt completed by an epoch's merged model (every stage's attested checkpoint, the run's \
		 wire across the cuts): {} new tokens, temperature {}, top-k {}, top-p {}, seed {}.\n",
		sm.max_new_tokens, sm.temperature, sm.top_k, sm.top_p, sm.seed
	);
	let mut by_epoch: BTreeMap<u32, Vec<String>> = BTreeMap::new();
	for t in &d.samples {
		let text = format!("{}{}", t.prompt, t.completion).replace("```", "` ` `");
		by_epoch.entry(t.epoch).or_default().push(text.trim_end().to_string());
	}
	for (epoch, texts) in by_epoch {
		let _ = writeln!(s, "After epoch {epoch}:\n\n```text\n{}\n```\n", texts.join("\n---\n"));
	}
	if let Some(why) = &d.samples_error {
		let _ = writeln!(s, "No (further) samples: {why}.\n");
	} else if d.samples.is_empty() {
		let _ = writeln!(s, "No samples (no epoch completed).\n");
	}
	let _ = writeln!(s, "## Time\n");
	let train_secs = (d.wall_secs - d.startup_secs).max(0.0);
	let tokens: u64 = d.epochs.iter().map(|e| e.tokens).sum();
	let _ = writeln!(
		s,
		"Wall clock {:.0} s ({:.0} s start-up, {:.0} s training); {:.0} tokens/s while training.",
		d.wall_secs,
		d.startup_secs,
		train_secs,
		if train_secs > 0.0 { tokens as f64 / train_secs } else { 0.0 }
	);
	if let Some(o) = overhead_share(&d.epochs, d.stages) {
		let _ = writeln!(
			s,
			"Chain and merge overhead (stage-time outside the Training phase: gradient upload, butterfly, \
			 step, waiting for blocks): **{:.1} %** of stage-time.\n",
			o * 100.0
		);
	}
	if let Some(t) = TimeSplit::of(d.epochs.iter().flat_map(|e| &e.stages)) {
		let _ = writeln!(
			s,
			"Where stage-time went (orchestrator's clock, all stages and epochs): **{}**.",
			t.shares()
		);
	}
	if let Some(c) = &d.cpu {
		let _ = writeln!(
			s,
			"Where the machine's CPU went while training ({} cores × {:.0} s = {:.0} CPU-seconds, from \
			 /proc): **{}**. The orchestrator's share includes its embedded S3 server, which stores and \
			 serves every object (activations, reveals, merge vectors).{}\n",
			c.cores,
			c.secs,
			c.available(),
			c.summary(),
			match d.validator_nice {
				Some(n) => format!(
					" The validators ran at nice {n}: they got the CPU mostly when the other roles left \
					 it (reports of runs without it are not directly comparable)."
				),
				None => String::new(),
			},
		);
	}
	if let Some((mean, max)) = quota_to_start_secs(&d.epochs) {
		let _ = writeln!(
			s,
			"From the last stage's quota to the next epoch's first sample: {mean:.1} s on average, {max:.1} s \
			 at most. Extrinsics the orchestrator sent: {} in {} epochs.\n",
			d.epochs.iter().map(|e| e.extrinsics).sum::<u32>(),
			d.epochs.len()
		);
	}
	let _ = writeln!(
		s,
		"| epoch | loss | held-out loss | samples | tokens | wire bytes | wall s | merge s (all stages) | quota → start s | extrinsics | recomputed / lost passes |"
	);
	let _ = writeln!(s, "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
	for e in &d.epochs {
		let _ = writeln!(
			s,
			"| {} | {:.4} | {} | {} | {} | {} | {:.1} | {:.1} | {} | {} | {} / {} |",
			e.epoch,
			e.loss,
			e.heldout_loss.map_or("—".into(), |h| format!("{h:.4}")),
			e.samples,
			e.tokens,
			e.wire_bytes,
			e.completed_ms.saturating_sub(e.started_ms) as f64 / 1000.0,
			e.merge_ms as f64 / 1000.0,
			e.quota_to_start_ms
				.map_or("—".into(), |ms| format!("{:.1}", ms as f64 / 1000.0)),
			e.extrinsics,
			e.recomputed,
			e.lost
		);
	}
	if let Some(lines) = stage_totals(&d.epochs) {
		let _ = writeln!(
			s,
			"\nPer stage over the run (shares of its stage-time): training (a lease out), merge (gradient \
			 upload, butterfly, step), chain wait (the stage held up by the chain), idle (Training with \
			 nothing to do: pipeline bubbles, the quota). Per epoch and stage: `time.csv`.\n"
		);
		let _ = writeln!(s, "| stage | training | merge | chain wait | idle | stage-time s |");
		let _ = writeln!(s, "|---:|---:|---:|---:|---:|---:|");
		for l in lines {
			let _ = writeln!(s, "{l}");
		}
	}
	if let Some(t) = &d.hosts {
		let _ = writeln!(s);
		hosts_section(&mut s, t, d.epochs.len());
	}
	let _ = writeln!(s, "\n## Merges (on chain)\n");
	let _ = writeln!(
		s,
		"Members × samples of each stage's committed merge; state hashes and checkpoints: \
		 `manifests.csv`.\n"
	);
	let _ = writeln!(
		s,
		"| epoch |{}",
		(0..d.stages).map(|st| format!(" stage {st} |")).collect::<String>()
	);
	let _ = writeln!(s, "|---:|{}", "---|".repeat(d.stages as usize));
	for e in &d.chain {
		let cells: String = e
			.manifests
			.iter()
			.map(|(_, m)| match m {
				Some(m) => format!(" {} × {} samples |", m.members, m.samples),
				None => " not committed |".to_string(),
			})
			.collect();
		let _ = writeln!(s, "| {} |{cells}", e.epoch);
	}
	let _ = writeln!(s, "\n## Spot-check verdicts (on chain)\n");
	match verdict_table(&d.chain) {
		Some(t) => {
			let _ = writeln!(
				s,
				"Verdicts per miner and epoch, all validators together (failures in bold); every verdict \
				 with its validator and evidence hash: `verdicts.csv`.\n\n{t}"
			);
		},
		None => {
			let _ = writeln!(s, "None recorded.");
		},
	}
	let _ = writeln!(s, "\n## Validator weights (commit-reveal, on chain)\n");
	let _ = writeln!(s, "{}", weights_section(&d.chain));
	let _ = writeln!(s, "\n## Emission (on chain)\n");
	let _ = writeln!(s, "{}", emission_section(&d.chain));
	let _ = writeln!(s, "Total minted by pallet-iota: {}.\n", units(d.total_minted));
	let _ = writeln!(s, "## The model\n");
	match &d.export {
		Some(Ok(e)) => {
			let _ = writeln!(
				s,
				"Epoch {}'s merged model ({} parameters) is the Hugging Face folder `{EXPORT_DIR}/` beside \
				 this report: `iota-generate --hf {EXPORT_DIR} --prompt \"ROMEO:\"` writes with it, and \
				 transformers loads it (`AutoModelForCausalLM.from_pretrained(\"{EXPORT_DIR}\", \
				 trust_remote_code=True)`; with the bottleneck its `modeling_iota.py` is in the folder).",
				e.epoch, e.params
			);
			if let Some(n) = e.reference_rows {
				let _ = writeln!(
					s,
					"`{REFERENCE_FILE}` holds {n} held-out rows and our logits for them; \
					 `python3 scripts/check-hf-export.py {EXPORT_DIR} {REFERENCE_FILE}` (torch and \
					 transformers installed) compares transformers' logits with ours."
				);
			}
			let _ = writeln!(s);
		},
		Some(Err(why)) => {
			let _ = writeln!(s, "No export: {why}.\n");
		},
		None => {
			let _ = writeln!(s, "No export (no epoch completed).\n");
		},
	}
	let _ = writeln!(
		s,
		"## Files\n\nBeside this report: `loss.csv` and `loss.png` (per epoch), `time.csv` (per epoch and \
		 stage), `manifests.csv`, `verdicts.csv`, `emission.csv` (everything on chain, row by row), and the \
		 model (above).\n"
	);
	let _ = writeln!(s, "## Reproduce\n\n```sh\n{}\n```", d.command);
	s
}

/// Writes `report.md`, `loss.csv`, `loss.png`, `time.csv`, `manifests.csv`, `verdicts.csv` and
/// `emission.csv` into `dir`; returns the report's path.
///
/// # Errors
/// I/O errors; the plot is skipped (with a note in the report) when there is nothing to draw.
pub fn write(dir: &Path, d: &ReportData) -> std::io::Result<PathBuf> {
	std::fs::create_dir_all(dir)?;
	let baseline = d.baseline.as_ref().and_then(|b| b.as_ref().ok());
	std::fs::write(dir.join("loss.csv"), loss_csv(&d.epochs, baseline))?;
	std::fs::write(dir.join("time.csv"), time_csv(&d.epochs))?;
	std::fs::write(dir.join("manifests.csv"), manifests_csv(&d.chain))?;
	std::fs::write(dir.join("verdicts.csv"), verdicts_csv(&d.chain))?;
	std::fs::write(dir.join("emission.csv"), emission_csv(&d.chain))?;
	let series: Vec<(f64, f64)> = d
		.epochs
		.iter()
		.map(|e| (e.tokens_cumulative as f64, f64::from(e.loss)))
		.collect();
	let held: Vec<(f64, f64)> = d
		.epochs
		.iter()
		.filter_map(|e| e.heldout_loss.map(|h| (e.tokens_cumulative as f64, f64::from(h))))
		.collect();
	let mut lines = vec![("network (tail mean training loss)", series)];
	if !held.is_empty() {
		lines.push(("network's merged model (held-out loss)", held));
	}
	if let Some(b) = baseline {
		let [train, held] = baseline_series(&d.epochs, b);
		lines.push(("single process (training loss)", train));
		if !held.is_empty() {
			lines.push(("single process (held-out loss)", held));
		}
	}
	let mut md = render_markdown(d);
	if let Err(e) = iota_model::plot::plot_png(
		dir.join("loss.png"),
		&format!("iota-rs devnet {}: loss per epoch", d.run_id),
		"tokens",
		&lines,
	) {
		md.push_str(&format!("\n(No loss plot: {e}.)\n"));
	}
	let path = dir.join("report.md");
	std::fs::write(&path, md)?;
	Ok(path)
}

#[cfg(test)]
mod tests {
	use super::*;

	fn epoch(e: u32, loss: f32) -> EpochSummary {
		EpochSummary {
			epoch: e,
			loss,
			samples: 16,
			tokens: 1024,
			tokens_cumulative: 1024 * u64::from(e + 1),
			wire_bytes: 10,
			started_ms: 1_000 * u64::from(e),
			completed_ms: 1_000 * u64::from(e) + 1_000,
			merge_ms: 600,
			stages: (0..3)
				.map(|s| iota_rpc::types::StageTime {
					stage: s,
					training_ms: 500,
					merge_ms: 200,
					chain_wait_ms: 100,
					idle_ms: 200,
				})
				.collect(),
			quota_to_start_ms: (e > 0).then_some(1_500 * u64::from(e)),
			extrinsics: 3,
			heldout_loss: None,
			recomputed: 0,
			lost: 0,
		}
	}

	fn data(epochs: Vec<EpochSummary>) -> ReportData {
		ReportData {
			run_id: "r1".into(),
			model: "tiny".into(),
			stages: 3,
			miners_per_stage: 2,
			validators: 2,
			quota: 16,
			tokens_per_sample: 64,
			spec_hash: "ab".into(),
			wall_secs: 10.0,
			startup_secs: 2.0,
			epochs,
			chain: vec![EpochOnChain {
				epoch: 0,
				manifests: vec![(0, None)],
				verdicts: vec![],
				committed: vec![],
				revealed: vec![],
				scores: None,
				split: None,
				slashes: vec![],
			}],
			total_minted: 2_000_000_000_000,
			command: "./scripts/devnet.sh --epochs 2".into(),
			samples: vec![],
			samples_error: None,
			export: None,
			baseline: None,
			hosts: None,
			cpu: Some(CpuUse {
				cores: 2,
				secs: 100.0,
				by_role: vec![("miner".into(), 150.0), ("validator".into(), 30.0)],
			}),
			validator_nice: Some(10),
		}
	}

	#[test]
	fn the_cpu_split_is_what_each_role_used_between_the_readings() {
		let p = |role: &'static str, process: (u32, u64), secs: f64| crate::ProcessCpu {
			role,
			process,
			secs,
		};
		let t0 = std::time::Instant::now();
		let start = crate::CpuReading {
			at: t0,
			cores: 2,
			processes: vec![
				p("miner", (10, 100), 10.0),
				p("miner", (11, 100), 12.0),
				p("validator", (12, 100), 5.0),
				p("node", (13, 90), 30.0),
			],
		};
		// The second miner restarted (another process: its counter began again at 0, and has passed
		// its old reading); the node is gone; the orchestrator is new.
		let end = crate::CpuReading {
			at: t0 + std::time::Duration::from_secs(50),
			cores: 2,
			processes: vec![
				p("miner", (10, 100), 70.0),
				p("miner", (20, 400), 15.0),
				p("validator", (12, 100), 25.0),
				p("orchestrator", (21, 400), 4.0),
			],
		};
		let c = CpuUse::between(&start, &end);
		assert_eq!(
			c.by_role,
			vec![("miner".into(), 75.0), ("validator".into(), 20.0), ("orchestrator".into(), 4.0)]
		);
		assert_eq!(c.available(), 100.0);
		assert!((c.share("miner") - 0.75).abs() < 1e-12);
		assert_eq!(c.share("node"), 0.0);
		let md = render_markdown(&data(vec![epoch(0, 5.0)]));
		assert!(
			md.contains("(2 cores × 100 s = 200 CPU-seconds, from /proc): **miner 150 s (75.0 %), validator 30 s (15.0 %), idle or other 10.0 %**"),
			"{md}"
		);
		assert!(md.contains("The validators ran at nice 10"), "{md}");
	}

	#[test]
	fn test_hosts_traffic_is_reported_per_host_and_epoch() {
		let mut d = data(vec![epoch(0, 5.0), epoch(1, 4.5)]);
		assert!(!render_markdown(&d).contains("## Test hosts"));
		d.hosts = Some(HostsTraffic {
			mbit: Some(20),
			hosts: vec![(
				"miner-dave".into(),
				crate::hosts::LinkBytes { sent: 3_000, received: 1_000 },
			)],
		});
		let md = render_markdown(&d);
		assert!(md.contains("## Test hosts"), "{md}");
		assert!(md.contains("20 Mbit/s each way"));
		assert!(md.contains("| miner-dave | 3000 | 1000 | 2000 |"), "{md}");
	}

	fn acc(i: u8) -> AccountId {
		AccountId::from([i; 32])
	}

	fn check(v: u8, verdict: Verdict) -> SpotCheck<AccountId> {
		SpotCheck { validator: acc(v), verdict, evidence: iota_primitives::ContentHash([v; 32]) }
	}

	/// Two epochs on chain: epoch 0 finalized (miner 1 paid 3, miner 2 scored and paid nothing after
	/// a failed check, validator 9 paid 1, 0.5 unallocated), epoch 1 not finalized.
	fn chain() -> Vec<EpochOnChain> {
		let t = 1_000_000_000_000u128;
		vec![
			EpochOnChain {
				epoch: 0,
				manifests: vec![(0, None), (1, None)],
				verdicts: vec![
					(acc(1), vec![check(9, Verdict::Pass), check(8, Verdict::Pass)]),
					(acc(2), vec![check(9, Verdict::Fail), check(8, Verdict::Pass)]),
				],
				committed: vec![acc(8), acc(9)],
				revealed: vec![acc(9)],
				scores: Some(vec![(acc(1), 1_000_000_000), (acc(2), 0)]),
				split: Some(Payout {
					miners: vec![(acc(1), 3 * t)],
					validators: vec![(acc(9), t)],
					unallocated: t / 2,
				}),
				slashes: vec![(acc(2), 2 * t)],
			},
			EpochOnChain {
				epoch: 1,
				manifests: vec![(0, None), (1, None)],
				verdicts: vec![(acc(1), vec![check(9, Verdict::Pass)])],
				committed: vec![acc(9)],
				revealed: vec![],
				scores: None,
				split: None,
				slashes: vec![],
			},
		]
	}

	#[test]
	fn verdicts_and_emission_as_tables_and_csv() {
		let mut d = data(vec![epoch(0, 8.0), epoch(1, 6.0)]);
		d.chain = chain();
		d.samples =
			vec![TextSample { epoch: 1, prompt: "ROMEO:\n".into(), completion: "Ay".into() }];
		let md = render_markdown(&d);
		let (a1, a2, a9) = (acc(1).to_string(), acc(2).to_string(), acc(9).to_string());
		assert!(md.contains(&format!("| `{a1}` | 2 | 1 | 3 | 0 |")), "{md}");
		assert!(md.contains(&format!("| `{a2}` | **1 fail** 1 | — | 1 | 1 |")), "{md}");
		assert!(md.contains(&format!("| `{a1}` | miner | 3.000 | 3.000 |")), "{md}");
		assert!(md.contains(&format!("| `{a2}` | miner | 0.000 | 0.000 |")), "{md}");
		assert!(md.contains(&format!("| `{a9}` | validator | 1.000 | 1.000 |")), "{md}");
		assert!(md.contains("| unallocated (not minted) | | 0.500 | 0.500 |"), "{md}");
		assert!(md.contains(
			"Not finalized yet (scoring window still open when the run ended): epochs 1."
		));
		assert!(md.contains(&format!("Slashed in epoch 0: `{a2}` lost 2.000.")), "{md}");
		let a8 = acc(8).to_string();
		assert!(md.contains(&format!("| 0 | 2 | 1 | `{a8}` |")), "{md}");
		assert!(md.contains(&format!("| 1 | 1 | 0 | `{a9}` |")), "{md}");
		assert!(md.contains("After epoch 1:\n\n```text\nROMEO:\nAy\n```"), "{md}");
		assert!(md.contains("| 0 | not committed | not committed |"), "{md}");
		let v = verdicts_csv(&d.chain);
		assert_eq!(v.lines().count(), 1 + 5, "{v}");
		assert!(v.contains(&format!("0,{a2},{a9},fail,{}", "09".repeat(32))), "{v}");
		let e = emission_csv(&d.chain);
		assert_eq!(
			e,
			format!(
				"epoch,account,role,score_ppb,paid\n0,{a1},miner,1000000000,3000000000000\n\
				 0,{a2},miner,0,0\n0,{a9},validator,,1000000000000\n"
			)
		);
		assert_eq!(time_csv(&d.epochs).lines().count(), 1 + 2 * 3);
		assert_eq!(
			manifests_csv(&d.chain),
			"epoch,stage,members,samples,parameters,shards,state_hash,checkpoint\n"
		);
		let dir = tempfile::tempdir().unwrap();
		write(dir.path(), &d).unwrap();
		for f in ["time.csv", "manifests.csv", "verdicts.csv", "emission.csv"] {
			assert!(dir.path().join(f).exists(), "{f}");
		}
		d.export = Some(Ok(Export { epoch: 1, params: 1234, reference_rows: Some(32) }));
		let md = render_markdown(&d);
		assert!(md
			.contains("Epoch 1's merged model (1234 parameters) is the Hugging Face folder `hf/`"));
		assert!(md.contains("`hf-reference.safetensors` holds 32 held-out rows"), "{md}");
		d.export = Some(Err("epoch 1 is not committed at every stage".into()));
		assert!(render_markdown(&d).contains("No export: epoch 1 is not committed at every stage."));
		d.samples_error = Some("epoch 0: a checkpoint is gone".into());
		assert!(
			render_markdown(&d).contains("No (further) samples: epoch 0: a checkpoint is gone.")
		);
	}

	#[test]
	fn numbers_and_files() {
		let e = vec![epoch(0, 8.0), epoch(1, 6.0)];
		assert!((loss_drop(&e).unwrap() - 0.25).abs() < 1e-9);
		// 1 200 ms of merge over 2 epochs × 1 s × 3 stages.
		assert!((overhead_share(&e, 3).unwrap() - 0.2).abs() < 1e-9);
		let head = "epoch,tokens,loss,heldout_loss,baseline_loss,baseline_heldout_loss\n";
		assert_eq!(loss_csv(&e, None), format!("{head}0,1024,8,,,\n1,2048,6,,,\n"));
		let mut held = e.clone();
		held[1].heldout_loss = Some(6.5);
		assert_eq!(loss_csv(&held, None), format!("{head}0,1024,8,,,\n1,2048,6,6.5,,\n"));
		let b = Baseline {
			losses: vec![7.5, 5.0],
			heldout: vec![7.0, 6.0],
			steps: 8,
			epoch_secs: vec![1.0, 1.0],
			wire_bytes: 0,
		};
		assert_eq!(loss_csv(&held, Some(&b)), format!("{head}0,1024,8,,7.5,7\n1,2048,6,6.5,5,6\n"));
		let mut with = data(held.clone());
		with.baseline = Some(Ok(b));
		let md = render_markdown(&with);
		assert!(
			md.contains("| 1 | 2048 | 6.0000 | 5.0000 | 1.200 | 6.5000 | 6.0000 | 1.083 |"),
			"{md}"
		);
		assert!(md.contains("| 0 | 1024 | 8.0000 | 7.5000 | 1.067 | — | 7.0000 | — |"), "{md}");
		with.baseline = Some(Err("interrupted".into()));
		assert!(render_markdown(&with).contains("No single-process baseline: interrupted."));
		let md = render_markdown(&data(held.clone()));
		assert!(md.contains("epoch 1 6.5000 → epoch 1 6.5000 (1 of 2 epochs evaluated)"), "{md}");
		assert!(md.contains("| 1 | 6.0000 | 6.5000 |"), "{md}");
		assert!(md.contains("| 0 | 8.0000 | — |"), "{md}");
		let md = render_markdown(&data(e.clone()));
		assert!(md.contains("**25.0 % lower**"), "{md}");
		assert!(md.contains("**20.0 %** of stage-time"), "{md}");
		assert!(
			md.contains("**training 50.0 %, merge 20.0 %, chain wait 10.0 %, idle 20.0 %**"),
			"{md}"
		);
		assert!(
			md.contains(
				"1.5 s on average, 1.5 s at most. Extrinsics the orchestrator sent: 6 in 2"
			),
			"{md}"
		);
		assert!(md.contains("| 2 | 50.0 % | 20.0 % | 10.0 % | 20.0 % | 2.0 |"), "{md}");
		assert_eq!(quota_to_start_secs(&[epoch(0, 1.0)]), None);
		assert!(md.contains("not committed"));
		assert!(md.contains("No epoch finalized when the run ended"));
		assert!(md.contains("Total minted by pallet-iota: 2.000"));
		let dir = tempfile::tempdir().unwrap();
		let p = write(dir.path(), &data(e)).unwrap();
		assert!(p.exists() && dir.path().join("loss.png").exists());
		assert_eq!(loss_drop(&[]), None);
		let md = render_markdown(&data(vec![]));
		assert!(md.contains("No epoch completed"));
	}
}
