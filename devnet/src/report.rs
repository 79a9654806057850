//! The run report: `runs/<id>/report.md` with the loss plot (`loss.png`), `loss.csv` (header
//! `epoch,tokens,loss,heldout_loss`: one row per completed epoch, the tail stage's mean training loss
//! and, where the run has a held-out set, the merged model's held-out loss), the per-epoch merge
//! manifests, spot-check verdicts, consensus scores, emission splits and slashes read back from chain,
//! the time split between training and the chain/merge phases, and the commands to reproduce the run.
//!
//! Everything that matters for money is read from chain storage after the run, not from the
//! orchestrator's view of it.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use iota_chain::{AccountId, Balance, IotaClient, MergeManifest, SpotCheck, Verdict};
use iota_rpc::types::{EpochSummary, TimeSplit};

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
		out.push(EpochOnChain {
			epoch,
			manifests,
			verdicts: chain.spot_checks_of_epoch(epoch).await?,
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

fn short(a: &AccountId) -> String {
	let s = a.to_string();
	format!("{}…{}", &s[..6.min(s.len())], &s[s.len().saturating_sub(4)..])
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
pub fn loss_csv(epochs: &[EpochSummary]) -> String {
	let mut s = String::from("epoch,tokens,loss,heldout_loss\n");
	for e in epochs {
		let h = e.heldout_loss.map(|h| h.to_string()).unwrap_or_default();
		let _ = writeln!(s, "{},{},{},{h}", e.epoch, e.tokens_cumulative, e.loss);
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
	if d.epochs.iter().any(|e| !e.stages.is_empty()) {
		let _ = writeln!(s, "
Per stage (seconds): training (a lease out), merge (gradient upload, butterfly, step), chain wait (the stage held up by the chain: its call due → the pool accepted it, where the orchestrator acts on the predicted effect, else → seen in a best block), idle (Training with nothing to do: pipeline bubbles, the quota, the next block).
");
		let _ = writeln!(s, "| epoch | stage | training | merge | chain wait | idle | span |");
		let _ = writeln!(s, "|---:|---:|---:|---:|---:|---:|---:|");
		for e in &d.epochs {
			for t in &e.stages {
				let f = |ms: u64| format!("{:.1}", ms as f64 / 1000.0);
				let _ = writeln!(
					s,
					"| {} | {} | {} | {} | {} | {} | {} |",
					e.epoch,
					t.stage,
					f(t.training_ms),
					f(t.merge_ms),
					f(t.chain_wait_ms),
					f(t.idle_ms),
					f(t.total_ms())
				);
			}
		}
	}
	let _ = writeln!(s, "\n## Merge manifests (on chain)\n");
	let _ = writeln!(
		s,
		"| epoch | stage | members | samples | parameters | shards | state hash | checkpoint |"
	);
	let _ = writeln!(s, "|---:|---:|---:|---:|---:|---:|---|---|");
	for e in &d.chain {
		for (stage, m) in &e.manifests {
			match m {
				Some(m) => {
					let ck = m
						.checkpoint
						.as_ref()
						.map(|c| format!("`{}`", String::from_utf8_lossy(&c.key.0)))
						.unwrap_or_else(|| "—".into());
					let _ = writeln!(
						s,
						"| {} | {} | {} | {} | {} | {} | `{}…` | {} |",
						e.epoch,
						stage,
						m.members,
						m.samples,
						m.param_count,
						m.shards.0.len(),
						&hex(&m.state_hash.0)[..16],
						ck
					);
				},
				None => {
					let _ = writeln!(s, "| {} | {} | not committed | | | | | |", e.epoch, stage);
				},
			}
		}
	}
	let _ = writeln!(s, "\n## Spot-check verdicts (on chain)\n");
	let mut any = false;
	for e in &d.chain {
		for (miner, checks) in &e.verdicts {
			for c in checks {
				any = true;
				let v = match c.verdict {
					Verdict::Pass => "pass",
					Verdict::Fail => "**FAIL**",
				};
				let _ = writeln!(
					s,
					"- epoch {}: miner `{}` — {} by validator `{}`",
					e.epoch,
					miner,
					v,
					short(&c.validator)
				);
			}
		}
	}
	if !any {
		let _ = writeln!(s, "None recorded.");
	}
	let _ = writeln!(s, "\n## Scores and emission (on chain)\n");
	for e in &d.chain {
		match (&e.scores, &e.split) {
			(Some(scores), Some(Payout { unallocated, .. })) if scores.is_empty() => {
				let _ = writeln!(
					s,
					"Epoch {} (finalized) without consensus scores: no validator's weights landed in the scoring \
					 window, so nobody was paid ({} unallocated, not minted).\n",
					e.epoch,
					units(*unallocated)
				);
			},
			(Some(scores), Some(Payout { miners, validators, unallocated })) => {
				let _ = writeln!(s, "Epoch {} (finalized):\n", e.epoch);
				let _ = writeln!(s, "| account | role | consensus score (ppb) | paid |");
				let _ = writeln!(s, "|---|---|---:|---:|");
				for (a, score) in scores {
					let paid = miners
						.iter()
						.find(|(m, _)| m == a)
						.map(|(_, b)| units(*b))
						.unwrap_or_else(|| "0".into());
					let _ = writeln!(s, "| `{a}` | miner | {score} | {paid} |");
				}
				for (a, b) in validators {
					let _ = writeln!(s, "| `{a}` | validator | | {} |", units(*b));
				}
				let _ = writeln!(s, "\nUnallocated (not minted): {}.\n", units(*unallocated));
			},
			_ => {
				let _ = writeln!(
					s,
					"Epoch {}: not finalized yet (scoring window still open when the run ended).\n",
					e.epoch
				);
			},
		}
		for (a, b) in &e.slashes {
			let _ = writeln!(s, "Slashed in epoch {}: `{a}` lost {}.\n", e.epoch, units(*b));
		}
	}
	let _ = writeln!(s, "Total minted by pallet-iota: {}.\n", units(d.total_minted));
	let _ = writeln!(s, "## Reproduce\n\n```sh\n{}\n```", d.command);
	s
}

/// Writes `report.md`, `loss.csv` and `loss.png` into `dir`; returns the report's path.
///
/// # Errors
/// I/O errors; the plot is skipped (with a note in the report) when there is nothing to draw.
pub fn write(dir: &Path, d: &ReportData) -> std::io::Result<PathBuf> {
	std::fs::create_dir_all(dir)?;
	std::fs::write(dir.join("loss.csv"), loss_csv(&d.epochs))?;
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
	let mut lines = vec![("pipeline (tail mean training loss)", series)];
	if !held.is_empty() {
		lines.push(("merged model (held-out loss)", held));
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
				scores: None,
				split: None,
				slashes: vec![],
			}],
			total_minted: 2_000_000_000_000,
			command: "./scripts/devnet.sh --epochs 2".into(),
		}
	}

	#[test]
	fn numbers_and_files() {
		let e = vec![epoch(0, 8.0), epoch(1, 6.0)];
		assert!((loss_drop(&e).unwrap() - 0.25).abs() < 1e-9);
		// 1 200 ms of merge over 2 epochs × 1 s × 3 stages.
		assert!((overhead_share(&e, 3).unwrap() - 0.2).abs() < 1e-9);
		assert_eq!(loss_csv(&e), "epoch,tokens,loss,heldout_loss\n0,1024,8,\n1,2048,6,\n");
		let mut held = e.clone();
		held[1].heldout_loss = Some(6.5);
		assert_eq!(loss_csv(&held), "epoch,tokens,loss,heldout_loss\n0,1024,8,\n1,2048,6,6.5\n");
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
		assert!(md.contains("| 1 | 2 | 0.5 | 0.2 | 0.1 | 0.2 | 1.0 |"), "{md}");
		assert_eq!(quota_to_start_secs(&[epoch(0, 1.0)]), None);
		assert!(md.contains("not committed"));
		assert!(md.contains("not finalized yet"));
		assert!(md.contains("Total minted by pallet-iota: 2.000"));
		let dir = tempfile::tempdir().unwrap();
		let p = write(dir.path(), &data(e)).unwrap();
		assert!(p.exists() && dir.path().join("loss.png").exists());
		assert_eq!(loss_drop(&[]), None);
		let md = render_markdown(&data(vec![]));
		assert!(md.contains("No epoch completed"));
	}
}
